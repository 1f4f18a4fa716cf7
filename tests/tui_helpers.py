"""Helpers for driving the TUI in tests: the rendered text of widgets, waiting, canned runs."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from rich.console import Console
from textual.widget import Widget
from textual.widgets import DataTable, RichLog, Static

from workbench.core.events import (
    AutotuneReport,
    BenchResult,
    CaseResult,
    ConfigTiming,
    DeviceFacts,
    Problem,
    RunFinished,
    RunStarted,
    StageChanged,
    Timing,
    WorkerReady,
    Worst,
)
from workbench.core.live.watch import Save
from workbench.tui.messages import RunEvent

try:
    import pytest_textual_snapshot  # noqa: F401
    HAVE_SNAPSHOTS = True
except ImportError:
    HAVE_SNAPSHOTS = False
# the SVG snapshot tests need the pytest plugin (a test extra); the rest of the UI tests do not
needs_snapshots = pytest.mark.skipif(not HAVE_SNAPSHOTS, reason="pytest-textual-snapshot is not installed")


def render_text(renderable, width: int = 150) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def text_of(widget: Widget) -> str:
    """What a widget shows, as plain text (tables row by row, logs line by line)."""
    if isinstance(widget, DataTable):
        rows = [" | ".join(str(cell) for cell in widget.get_row_at(i)) for i in range(widget.row_count)]
        return "\n".join(rows)
    if isinstance(widget, RichLog):
        return "\n".join(strip.text for strip in widget.lines)
    if isinstance(widget, Static):
        return render_text(widget.content, max(widget.size.width, 150))
    return "\n".join(text_of(child) for child in widget.query("Static, DataTable, RichLog") if child.display)


def screen_text(app) -> str:
    """The whole screen as the terminal shows it, line by line (what tmux capture-pane gives)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def wait_for(pilot, predicate, timeout: float = 60.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.05)


def editor_save(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    os.replace(tmp, path)


# -- canned runs (no worker): what a GPU run of an rmsnorm project reports -------------------------------

READY_GPU = WorkerReady(pid=1, mode="gpu", device_name="NVIDIA H100 80GB HBM3", torch_version="2.11.0",
                        triton_version="3.6.0", python_version="3.12.3", warmup_s=2.1)
CONFIGS = ["BLOCK=1024, num_warps=4", "BLOCK=2048, num_warps=8", "BLOCK=4096, num_warps=16"]
LABELS = ["rows=1 cols=1", "rows=3 cols=127", "rows=37 cols=1000", "rows=5 cols=4097", "rows=2 cols=16385"]


def case_events(failing: bool) -> list:
    events: list = [RunStarted(kernel_path="kernel.py", source_hash="3f2a91c04b1e7d22", mode="gpu",
                               device_name=READY_GPU.device_name, n_cases=5, autotuned=["rmsnorm_kernel"],
                               planned=list(range(5)))]
    for index, label in enumerate(LABELS):
        events.append(StageChanged(stage="verifying", detail=label, current=index + 1, total=5, case_index=index))
        bad = failing and index == 3
        main = CaseResult(case_index=index, label=label, status="failed" if bad else "passed", dtype="float16",
                          numel=int(label.split("rows=")[1].split()[0]) * int(label.split("cols=")[1]),
                          bad_count=155 if bad else 0, max_abs_err=2.31 if bad else 0.00049,
                          max_rel_err=1.0 if bad else 0.00061, rel_norm_err=0.09 if bad else 0.0002, rtol=1e-3,
                          atol=1e-3, duration_s=0.21)
        if bad:
            main.messages = ["155 of 20485 elements differ beyond rtol 0.001, atol 0.001"]
            main.worst = Worst(index=[4, 4096], kernel=None, reference=-0.7314)
            main.pattern = "all in the last 1 columns: a boundary mask?"
            main.error_map = [[0.0] * 15 + [1.0] for _ in range(5)]
        events.append(main)
        for n, config in enumerate(CONFIGS):
            wrong = bad and n == 2
            events.append(CaseResult(case_index=index, label=label, status="failed" if wrong else "passed",
                                     config=f"rmsnorm_kernel: {config}", dtype="float16",
                                     messages=["31 elements never written"] if wrong else []))
    return events


def bench_events() -> list:
    events: list = [DeviceFacts(name=READY_GPU.device_name, sm_clock_mhz=1980, mem_clock_mhz=2619, temperature_c=41,
                                copy_gbps=3010.0, matmul_tflops=781.0, triton_version="3.6.0")]
    for n, (label, ms, ref_ms, frac) in enumerate([("rows=8192 cols=4096", 0.0481, 0.171, 0.93),
                                                   ("rows=8192 cols=8192", 0.0937, 0.339, 0.95),
                                                   ("rows=1024 cols=65536", 0.1012, 0.351, 0.88)]):
        case = 20 + n
        events.append(StageChanged(stage="benchmarking", detail=label, current=n + 1, total=3, case_index=case))
        events.append(AutotuneReport(kernel="rmsnorm_kernel", key=f"n_cols={label.split('cols=')[1]}",
                                     picked=CONFIGS[1], case_index=case,
                                     timings=[ConfigTiming(CONFIGS[0], ms * 1.31), ConfigTiming(CONFIGS[1], ms),
                                              ConfigTiming(CONFIGS[2], None, "out of resources")]))
        events.append(BenchResult(case_index=case, label=label, dtype="bfloat16",
                                  kernel=Timing(ms, ms * 0.98, ms * 1.02, ms * 0.97, 200, "cuda graph, L2 flushed"),
                                  reference=Timing(ref_ms, ref_ms, ref_ms, ref_ms, 100, "cuda events"),
                                  compiled=Timing(ref_ms / 2.2, ref_ms / 2.2, ref_ms / 2.2, ref_ms / 2.2, 100, "x"),
                                  bytes_moved=1, bytes_source="bytes_moved()", gbps=frac * 3010.0,
                                  bandwidth_fraction=frac, tflops=0.7, compute_fraction=0.001,
                                  speedup_vs_reference=ref_ms / ms, speedup_vs_compiled=ref_ms / 2.2 / ms,
                                  recheck="passed"))
    return events


def compile_problem(kernel_path: str) -> Problem:
    return Problem(kind="compile", message="the kernel does not compile in rmsnorm_kernel(): incompatible shapes",
                   file=kernel_path, line=8, case_index=None)


def canned_save(source: str = "", saved_at: float = 1000.0) -> Save:
    """A save of kernel.py, as the watcher reports it, with a fixed hash and clock."""
    return Save(fingerprint="f", kernel_hash="3f2a91c04b1e7d22", changed=("kernel.py",), source=source,
                saved_at=saved_at)


async def replay(app, pilot, events: list, save_source: str = "", saved_at: float = 1000.0, ready: bool = True,
                 finished: RunFinished | None = None) -> int:
    """Feed a canned run to an app started with live=False; fix its clocks so the screen is the same every time.
    `ready=False`: no worker reported (a run stopped before it took one); `finished`: the run's last event."""
    save = canned_save(save_source, saved_at)
    app.session.last_save = save
    run_id = app.submit("save", save=save)
    finished = finished or RunFinished(verdict="passed", duration_s=2.4)
    for event in [*([READY_GPU] if ready else []), *events, finished]:
        app.post_message(RunEvent(run_id, event))
    await pilot.pause()
    run = app.kept.runs[run_id]
    run.verdict_at = saved_at + 0.82
    run.bench_at = saved_at + 2.91 if run.bench_shown else None
    app.session.kernel_times = [0.1011, 0.0987, 0.0921, 0.0934, 0.0815, 0.0790]
    app.render_all()
    await pilot.pause()
    return run_id


def rmsnorm_like_source() -> str:
    return "\n".join(f"# line {n}" for n in range(1, 8)) + "\n    y = x * inv_rms * w  # bad broadcast\n" + \
        "\n".join(f"# line {n}" for n in range(9, 14)) + "\n"


def rmsnorm_project(tmp_path: Path):
    """A project folder holding an rmsnorm-like kernel.py, opened."""
    from workbench.core.project.folder import Project

    folder = tmp_path / "rmsnorm"
    folder.mkdir()
    (folder / "kernel.py").write_text(rmsnorm_like_source())
    return Project.open(folder)


def app_for(project):
    """The app on `project`, not watching (the tests feed it events)."""
    from workbench.tui.app import WorkbenchApp

    return WorkbenchApp(project, live=False)
