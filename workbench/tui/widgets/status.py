"""The status bar: project, device, the run's pipeline, the verdict, staleness and the time trend."""

from __future__ import annotations

import time

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ...core.text import fmt_count, fmt_ms
from ..model import PHASE_LABELS, PHASES, STOPPED_BY, LiveSession, RunState
from ..render import MARK, MARK_COLOR, spark


class StatusBar(Static):
    """Two dense lines: who and where; then what the run is doing and what it concluded."""

    def show(self, session: LiveSession) -> None:
        # A grid per line: a long verdict takes its room from the stage bar, never from the line above.
        self.update(Group(line_grid(identity_line(session), trend_line(session)),
                          line_grid(*fitted_progress(session, self.size.width))))
        self.set_class(session.stale, "-stale")


def line_grid(left: Text, right: Text) -> Table:
    grid = Table.grid(expand=True, padding=(0, 1))
    grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    grid.add_column(justify="right", no_wrap=True)
    grid.add_row(left, right)
    return grid


def fitted_progress(session: LiveSession, width: int) -> tuple[Text, Text]:
    """The stage bar and the verdict, both whole in `width` cells where they can be: the verdict keeps its
    words and gives up "after save" first; the stage bar then gives up the words of the stages it passed."""
    if not width:
        return pipeline_line(session.latest), verdict_line(session)
    for level, brief in ((0, False), (0, True), (1, True), (2, True), (3, True)):
        pipeline, verdict = pipeline_line(session.latest, level), verdict_line(session, brief=brief)
        if pipeline.cell_len + verdict.cell_len + 2 <= width:
            break
    return pipeline, verdict


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
    seed = run.started.seed if run is not None and run.started is not None else None
    if seed is not None:  # the inputs' draw: `workbench verify --seed N` draws the same; n draws others
        text.append(f"  │  seed {seed} (n: new)", style="grey50")
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


SHORT_LABELS = {"cache": "cache", "compile": "compile", "verify": "verify", "bench": "bench", "done": "done"}


def pipeline_line(run: RunState | None, level: int = 0) -> Text:
    """The stages: level 0 says everything; 1 shorter words, no case label; 2 the first stages passed are their
    mark alone; 3 every stage passed is."""
    text = Text(" ")
    if run is None:
        return Text(" waiting for the first run", style="grey50")
    phase = run.phase
    reached = PHASES.index(phase)
    stopped = run.stopped
    for n, name in enumerate(PHASES):
        if name == "bench" and "bench" not in run.request.stages:
            continue
        if n:
            text.append(" ─ ", style="grey35")
        label = PHASE_LABELS[name] if level == 0 else SHORT_LABELS[name]
        if name == "verify" and run.stage is not None and run.stage.stage == "verifying" and run.stage.total:
            step = "forward " if run.stage.phase == "forward" and level < 2 else ""
            label = f"verify {step}{run.stage.current}/{run.stage.total}"
            if phase == "verify" and run.stage.detail and level == 0:
                label += f" {run.stage.detail}"
        if name == "bench" and run.stage is not None and run.stage.stage == "benchmarking" and run.stage.total:
            label = f"bench {run.stage.current}/{run.stage.total}"
        if stopped is not None:  # the stage it stopped at failed; those after it were never reached
            at, where, problem = stopped
            if name == at:
                case = f" (case {problem.case_index})" if problem.case_index is not None else ""
                style = f"bold {MARK_COLOR['gpu only' if run.verdict == 'gpu_only' else 'failed']}"
                text.append(f"✘ {where}: {STOPPED_BY.get(problem.kind, problem.kind)}{case}", style=style)
            elif name == "done":
                text.append("■ stopped", style="bold red1" if run.verdict != "gpu_only" else "bold yellow3")
            elif n > PHASES.index(at):
                text.append(f"– {label}", style="grey42")
            else:
                text.append(passed_mark(name, label, level), style="green3")
        elif name == "bench" and (run.bench_refused or (run.finished is not None and not run.bench)):
            why = "bench unavailable" if run.bench_refused else "not benchmarked"
            text.append(f"⊘ {why if level == 0 else 'bench'}", style="grey50")
        elif n < reached or phase == "done":
            text.append(passed_mark(name, label, level), style="green3")
        elif n == reached and run.finished is None:
            text.append(f"● {label}", style="bold yellow")
        else:
            text.append(f"○ {label}", style="grey42")
    return text


def passed_mark(name: str, label: str, level: int) -> str:
    mark_only = level >= 3 or (level == 2 and name in ("cache", "compile"))
    return "✔" if mark_only else f"✔ {label}"


def counts_text(run: RunState) -> str:
    """The cases behind the verdict, from the run's Tally (core/verdict.py): " 23 cases", " 17 of 23 cases
    (17 errors)", " 5 of 23 cases (3 wrong, 2 errors)". An error is a case that crashed or raised; a wrong one
    ran and failed a check (the Tally's "failed")."""
    verdict = run.tally.verdict()
    total = max(len([r for r in run.rows.values() if r.status != "skipped"]),
                verdict.passed + verdict.failed + verdict.errors)
    if verdict.status == "passed":
        return f" {fmt_count(verdict.passed)} case{'s' if verdict.passed != 1 else ''}"
    if verdict.status != "failed":
        return ""
    bad = verdict.failed + verdict.errors
    parts = []
    if verdict.failed:
        parts.append(f"{fmt_count(verdict.failed)} wrong")
    if verdict.errors:
        parts.append(f"{fmt_count(verdict.errors)} error{'s' if verdict.errors != 1 else ''}")
    what = f" ({', '.join(parts)})" if parts else ""
    return f" {fmt_count(bad)} of {fmt_count(total)} case{'s' if total != 1 else ''}{what}"


def verdict_line(session: LiveSession, brief: bool = False) -> Text:
    """STALE, the verdict and its counts (or the progress so far), and how long after the save it came
    (`brief`: without "after save")."""
    run = session.current
    text = Text()
    forward = run.forward_verdict() if run is not None else None
    if session.missing:  # no verdict beside it: the one on screen was of a file that is not there now
        text.append(f" {', '.join(session.missing)} is gone: waiting for it; the verdict shown was of the file before ",
                    style="bold black on yellow")
        return text
    if session.stale:
        text.append(" STALE ", style="bold black on yellow")
        text.append(" ")
    if run is None:
        latest = session.latest
        if latest is not None:  # nothing has reported yet: the first run is on its way
            text.append(f" {MARK['running']} starting: no verdict yet ", style=f"bold {MARK_COLOR['running']}")
            saved = latest.request.save.saved_at if latest.request.save else latest.request.requested_at
            text.append(f"  {time.time() - saved:.1f} s ", style="grey50")
        return text
    verdict = run.verdict
    if verdict != "running":
        style = {"passed": "bold black on green3", "failed": "bold white on red3",
                 "error": "bold white on red3", "gpu_only": "bold black on yellow"}.get(verdict, "bold black on grey50")
        text.append(f" {MARK.get(verdict, '')} {run.verdict_label}{counts_text(run)} ", style=style)
    else:
        judged, total, failing = run.so_far()
        if failing:  # a failure is the verdict already: say so the moment it lands
            text.append(f" {MARK['failed']} FAILING {fmt_count(failing)} of {fmt_count(judged)} so far "
                        f"({fmt_count(total)} cases) ", style="bold white on red3")
        elif forward is not None:  # a training kernel: the forward's verdict, while its gradients are checked
            passed, wrong = forward
            if wrong:
                text.append(f" {MARK['failed']} FORWARD FAILED {fmt_count(wrong)} of {fmt_count(passed + wrong)} ",
                            style="bold white on red3")
            else:
                text.append(f" {MARK['forward ok']} FORWARD VERIFIED {fmt_count(passed)} ", style="bold black on green4")
            text.append(f" gradients {fmt_count(judged)} of {fmt_count(total)} ", style=f"bold {MARK_COLOR['running']}")
        elif judged:
            text.append(f" {MARK['running']} {fmt_count(judged)} of {fmt_count(total)} passed so far ",
                        style=f"bold {MARK_COLOR['running']}")
        else:
            text.append(f" {MARK['running']} running ", style=f"bold {MARK_COLOR['running']}")
    saved = run.request.save.saved_at if run.request.save else run.request.requested_at
    if forward is not None and run.forward_at is not None:  # a training kernel's forward: right or not, and when
        mark = MARK["failed"] if forward[1] else MARK["passed"]
        text.append(f"  forward {mark}" + ("" if brief else f" {run.forward_at - saved:.2f} s"),
                    style=MARK_COLOR["failed"] if forward[1] else "grey70")
    if run.verdict_at is not None:
        text.append(f"  verdict {run.verdict_at - saved:.2f} s", style="grey70")
        if run.bench_at is not None:
            text.append(f" · bench {run.bench_at - saved:.2f} s", style="grey70")
        if brief:
            text.append(" ")
        else:
            text.append(f" after {'save' if run.request.save else run.request.reason} ", style="grey50")
    else:
        text.append(f"  {time.time() - saved:.1f} s ", style="grey50")
    return text
