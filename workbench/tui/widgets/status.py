"""The status bar: project, device, the run's pipeline, the verdict, staleness and the time trend."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ...core.text import fmt_ms
from ..model import PHASE_LABELS, PHASES, LiveSession, RunState
from ..render import MARK, MARK_COLOR, spark


class StatusBar(Static):
    """Two dense lines: who and where; then what the run is doing and what it concluded."""

    def show(self, session: LiveSession) -> None:
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(justify="right", no_wrap=True)
        grid.add_row(identity_line(session), trend_line(session))
        grid.add_row(pipeline_line(session.latest), verdict_line(session))
        self.update(grid)
        self.set_class(session.stale, "-stale")


def identity_line(session: LiveSession) -> Text:
    text = Text()
    text.append(" ◆ ", style="bold magenta")
    text.append(session.project_name, style="bold")
    run = session.current
    source = run.source_hash if run and run.source_hash else session.disk_hash
    text.append(f"  {session.kernel_name}", style="grey70")
    if source:
        text.append(f"@{source[:8]}", style="grey50")
    ready = session.ready
    text.append("  │  ", style="grey35")
    if ready is None:
        text.append("starting a worker…", style="yellow")
    elif ready.mode == "gpu":
        text.append("GPU ", style="bold green3")
        text.append(ready.device_name)
    else:
        text.append("CPU ", style="bold yellow")
        text.append(f"Triton interpreter ({ready.reason})" if ready.reason else "Triton interpreter")
    text.append("  │  ", style="grey35")
    if session.bench_unavailable:
        text.append("bench unavailable", style="grey50")
    else:
        text.append("bench ", style="grey70")
        text.append("on" if session.bench_on else "off", style="bold green3" if session.bench_on else "grey50")
    for kernel, index in sorted(session.pins.items()):
        text.append(f"  📌 {kernel}#{index}", style="bold cyan")
    if ready is not None:  # last: the first thing to go when the line is too long
        text.append(f"  │  torch {ready.torch_version} · triton {ready.triton_version}", style="grey50")
    return text


def trend_line(session: LiveSession) -> Text:
    if not session.kernel_times:
        return Text("kernel time: none yet ", style="grey50")
    text = Text("kernel time ", style="grey70")
    text.append_text(spark(session.kernel_times, width=20))
    text.append(f" {fmt_ms(session.kernel_times[-1])} ", style="bold")
    return text


def pipeline_line(run: RunState | None) -> Text:
    text = Text(" ")
    if run is None:
        return Text(" waiting for the first run", style="grey50")
    phase = run.phase
    reached = PHASES.index(phase)
    for n, name in enumerate(PHASES):
        if name == "bench" and "bench" not in run.request.stages:
            continue
        if n:
            text.append(" ─ ", style="grey35")
        label = PHASE_LABELS[name]
        if name == "verify" and run.stage is not None and run.stage.stage == "verifying" and run.stage.total:
            label = f"verify {run.stage.current}/{run.stage.total}"
            if phase == "verify" and run.stage.detail:
                label += f" {run.stage.detail}"
        if name == "bench" and run.stage is not None and run.stage.stage == "benchmarking" and run.stage.total:
            label = f"bench {run.stage.current}/{run.stage.total}"
        if name == "bench" and (run.bench_refused or (run.finished is not None and not run.bench)):
            text.append(f"⊘ {'bench unavailable' if run.bench_refused else 'not benchmarked'}", style="grey50")
        elif n < reached or phase == "done":
            text.append(f"✔ {label}", style="green3")
        elif n == reached and run.finished is None:
            text.append(f"● {label}", style="bold yellow")
        else:
            text.append(f"○ {label}", style="grey42")
    return text


def verdict_line(session: LiveSession) -> Text:
    run = session.current
    text = Text()
    if session.missing:
        text.append(f" {', '.join(session.missing)} is gone: waiting for it ", style="bold black on yellow")
        text.append(" ")
    elif session.stale:
        text.append(" STALE ", style="bold black on yellow")
        text.append(" ")
    if run is None:
        return text
    verdict = run.verdict
    if verdict != "running":
        rows = [r for r in run.rows.values() if r.status != "skipped"]
        bad = sum(r.status in ("failed", "error") for r in rows)
        counts = {"passed": f" {len(rows)} cases", "failed": f" {bad} of {len(rows)} cases"}.get(verdict, "")
        style = {"passed": "bold black on green3", "failed": "bold white on red3",
                 "error": "bold white on red3", "gpu_only": "bold black on yellow"}.get(verdict, "bold black on grey50")
        text.append(f" {MARK.get(verdict, '')} {run.verdict_label}{counts} ", style=style)
    else:
        judged, total, failing = run.so_far()
        if failing:  # a failure is the verdict already: say so the moment it lands
            text.append(f" {MARK['failed']} FAILING {failing} of {judged} so far ({total} cases) ",
                        style="bold white on red3")
        elif judged:
            text.append(f" {MARK['running']} {judged} of {total} passed so far ", style=f"bold {MARK_COLOR['running']}")
        else:
            text.append(f" {MARK['running']} running ", style=f"bold {MARK_COLOR['running']}")
    saved = run.request.save.saved_at if run.request.save else run.request.requested_at
    if run.verdict_at is not None:
        text.append(f"  verdict {run.verdict_at - saved:.2f} s", style="grey70")
        if run.bench_at is not None:
            text.append(f" · bench {run.bench_at - saved:.2f} s", style="grey70")
        text.append(f" after {'save' if run.request.save else run.request.reason} ", style="grey50")
    else:
        text.append(f"  {time.time() - saved:.1f} s ", style="grey50")
    return text
