"""The benchmark table with roofline bars, and the autotuner's picks with every config's time."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...core.events import BenchResult, DeviceFacts
from ...core.text import MISSING, fmt_memory, fmt_ms, fmt_rate, fmt_speedup
from ...core.project.config import MODE_WORDS
from ...core.timing.compiler_facts import describe_facts, facts_by_config, facts_cells, facts_changes, picked_facts
from ...reports.bench import kernel_compiled_lines
from ..model import LiveSession, RunState
from ..render import bar

BENCH_COLUMNS = ("#", "inputs", "dtype", "kernel", "IQR", "torch", "compiled", "×torch", "×compiled", "GB/s",
                 "of copy roof", "TFLOP/s", "of matmul roof", "peak mem", "re-check")


class BenchPanel(Vertical):
    def compose(self):
        yield Static(id="bench-head", classes="panel-head")
        yield DataTable(id="bench-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="bench-notes", classes="panel-notes")

    def on_mount(self) -> None:
        self.query_one("#bench-table", DataTable).add_columns(*BENCH_COLUMNS)

    def show(self, session: LiveSession) -> None:
        head = self.query_one("#bench-head", Static)
        table = self.query_one("#bench-table", DataTable)
        notes = self.query_one("#bench-notes", Static)
        current, shown = session.current, session.benched
        head.update(bench_headline(session))
        table.clear()
        for result in shown.bench if shown else []:
            table.add_row(*bench_cells(result), key=str(result.case_index))
        table.display = bool(shown and shown.bench)
        lines = []
        if shown is not None:
            for result in shown.bench:
                lines += [f"case {result.case_index}: {note}" for note in result.notes]
                if result.compiled is None and result.compiled_note:
                    lines.append(f"case {result.case_index}: torch.compile: {result.compiled_note}")
            lines += [line.strip() for line in kernel_compiled_lines(shown.bench)]
            lines += [f"case {case}: compiled {facts.kernel} ({facts.config}): {describe_facts(facts)}"
                      for case, facts in picked_facts(shown.compiled, shown.autotune)]
            if shown.bench and shown.bench[0].mode:  # a training kernel: what was timed
                lines.append(f"mode: {shown.bench[0].mode} ({MODE_WORDS.get(shown.bench[0].mode, '')}); the "
                             "reference and torch.compile timed alike · peak mem: beyond the inputs, per call")
            if shown.bench:
                lines.append(f"bytes: {shown.bench[0].bytes_source or 'lower bound'}"
                             + (f" · method: {shown.bench[0].kernel.method}" if shown.bench[0].kernel else ""))
        if current is not None and current is not shown:
            lines += [f"■ {p.message}" for p in current.bench_problems if p.kind != "environment"]
        notes.update(Text("\n".join(lines), style="grey62"))
        self.set_class(session.bench_stale, "-stale")


def bench_headline(session: LiveSession) -> Text:
    current, shown = session.current, session.benched
    text = Text()
    unavailable = session.bench_unavailable or next(
        (p.message for p in (current.bench_problems if current else []) if p.kind == "environment"), "")
    if unavailable:
        text.append("benchmarking unavailable: ", style="bold yellow")
        text.append(unavailable)
        return text
    if not session.bench_on:
        text.append("benchmarking is off ", style="bold")
        text.append("(press b to turn it on)", style="grey50")
        return text
    if current is not None and current.verdict in ("failed", "error"):
        text.append("not benchmarked: verification failed", style="bold red1")
        if shown is not None:
            text.append(f" · below: the last timed source @{shown.source_hash[:8]}", style="grey62")
        return text
    if current is not None and current is not shown and current.verdict in ("running", "passed"):
        text.append("benchmarking after verification…" if not current.benchmarking else "benchmarking…",
                    style="bold yellow")
        if shown is not None:
            text.append(f" · below: the previous timing @{shown.source_hash[:8]}", style="grey62")
        return text
    if shown is None:
        return Text("no benchmark yet", style="grey50")
    text.append_text(device_line(shown.device))
    return text


def device_line(device: DeviceFacts | None) -> Text:
    if device is None:
        return Text("device facts not reported", style="grey50")
    text = Text(device.name, style="bold")
    facts = []
    if device.sm_clock_mhz:
        facts.append(f"SM {device.sm_clock_mhz} MHz")
    if device.mem_clock_mhz:
        facts.append(f"mem {device.mem_clock_mhz} MHz")
    if device.temperature_c is not None:
        facts.append(f"{device.temperature_c} °C")
    if device.copy_gbps:
        facts.append(f"copy ceiling {device.copy_gbps:,.0f} GB/s")
    if device.matmul_tflops:
        facts.append(f"matmul ceiling {device.matmul_tflops:,.0f} TFLOP/s")
    if device.triton_version:
        facts.append(f"triton {device.triton_version}")
    text.append("  " + " · ".join(facts), style="grey62")
    return text


def bench_cells(r: BenchResult) -> tuple:
    kernel = r.kernel
    iqr = f"±{(kernel.q75_ms - kernel.q25_ms) / 2 / kernel.median_ms:.1%}" if kernel and kernel.median_ms else MISSING
    recheck = Text(r.recheck or MISSING, style="green3" if r.recheck == "passed" else "bold red1" if r.recheck else "")
    speed = Text(fmt_speedup(r.speedup_vs_reference),
                 style="bold green3" if (r.speedup_vs_reference or 0) >= 1 else "bold red1")
    label = r.label.replace(f" dtype={r.dtype}", "") if r.dtype else r.label
    kernel_cell = Text("not posted", style="bold red1") if r.withheld else \
        Text(fmt_ms(kernel.median_ms if kernel else None), style="bold")
    return (str(r.case_index), label, r.dtype or MISSING, kernel_cell,
            iqr, fmt_ms(r.reference.median_ms if r.reference else None),
            fmt_ms(r.compiled.median_ms if r.compiled else None), speed, fmt_speedup(r.speedup_vs_compiled),
            fmt_rate(r.gbps, "GB/s").replace(" GB/s", ""), bar(r.bandwidth_fraction, width=8),
            fmt_rate(r.tflops, "").strip(), bar(r.compute_fraction, width=8), fmt_memory(kernel), recheck)


AUTOTUNE_COLUMNS = ("kernel", "key", "#", "config", "time", "vs best", "status", "regs", "spills", "smem", "occupancy",
                    "")


class AutotunePanel(Vertical):
    """Every config each autotuned kernel tried, its time, what the compiler made of it, and the pick; `t` pins
    one while iterating; the highlighted row's config is the one the IR tab shows."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.row_configs: dict[str, tuple[str, str, int | None]] = {}  # row key -> (kernel, config, case)

    def compose(self):
        yield Static(id="autotune-head", classes="panel-head")
        yield DataTable(id="autotune-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#autotune-table", DataTable).add_columns(*AUTOTUNE_COLUMNS)

    def show(self, session: LiveSession) -> None:
        head = self.query_one("#autotune-head", Static)
        table = self.query_one("#autotune-table", DataTable)
        run = session.current
        reports = autotune_source(session)
        table.clear()
        self.row_configs = {}
        headline = autotune_headline(session, run, bool(reports))
        compiled_run = session.compiled_run
        if compiled_run is not None and session.compiled_before:
            changes = facts_changes([k for e in session.compiled_before for k in e.kernels],
                                    [k for e in compiled_run.compiled for k in e.kernels])
            headline.append("\nsince the previous run: " + ("; ".join(changes[:4]) if changes else
                                                              "registers, spills, shared memory and occupancy the same"),
                            style="yellow" if changes else "grey50")
        head.update(headline)
        for report in reports.autotune if reports else []:
            times = [t.ms for t in report.timings if t.ms]
            best = min(times) if times else None
            facts = facts_by_config(reports.compiled, report.case_index)
            for n, timing in enumerate(report.timings):
                picked = timing.config == report.picked
                pinned = session.pin_labels.get(report.kernel) == timing.config
                marks = ("★ picked " if picked else "") + ("📌 pinned" if pinned else "")
                relative = bar(best / timing.ms, width=10) if best and timing.ms else Text(MISSING, style="grey50")
                status = Text(timing.status, style="green3" if timing.status == "ok" else "yellow")
                key = f"{len(self.row_configs)}"
                self.row_configs[key] = (report.kernel, timing.config, report.case_index)
                table.add_row(report.kernel, report.key, str(n), Text(timing.config, style="bold" if picked else ""),
                              Text(timing.ms and f"{timing.ms:.4f} ms" or MISSING, style="bold" if picked else ""),
                              relative, status, *facts_cells(facts.get((report.kernel, timing.config))),
                              Text(marks, style="bold cyan"), key=key)
        if reports is None or not reports.autotune:  # kernels without an autotuner: what the compiler made of them
            run = session.compiled_run
            for event in run.compiled if run is not None else []:
                for n, facts in enumerate(event.kernels):
                    key = f"{len(self.row_configs)}"
                    self.row_configs[key] = (facts.kernel, facts.config, event.case_index)
                    table.add_row(facts.kernel, f"case {event.case_index}", str(n), facts.config, MISSING, MISSING,
                                  "compiled", *facts_cells(facts), "", key=key)
        table.display = bool(table.row_count)
        self.set_class(session.bench_stale if reports is session.benched else session.stale, "-stale")


def autotune_source(session: LiveSession) -> RunState | None:
    """The run whose autotune reports are shown: the current one when it has them, else the last timed one."""
    if session.current is not None and session.current.autotune:
        return session.current
    return session.benched if session.benched is not None and session.benched.autotune else None


def autotune_headline(session: LiveSession, run: RunState | None, have_reports: bool) -> Text:
    tuned = run.started.autotuned if run is not None and run.started is not None else []
    text = Text()
    if not tuned and not have_reports:
        return Text("no autotuned kernels in this source", style="grey50")
    if tuned:
        text.append("autotuned: ", style="bold")
        text.append(", ".join(tuned))
    if session.pins:
        pins = ", ".join(f"{k} → {session.pin_labels.get(k, f'config #{v}')}" for k, v in sorted(session.pins.items()))
        text.append(f"   📌 pinned {pins}", style="bold cyan")
        text.append("  (t to change, every config is verified again once unpinned)", style="grey50")
    else:
        text.append("   t: pin one config while iterating", style="grey50")
    if not have_reports:
        text.append("\nno tuning reports yet: the autotuner reports when the kernel is benchmarked", style="grey50")
    return text
