"""A day in the app: hundreds of runs through the app's run model leave what it holds flat.

Canned runs (no worker) go through the real app, headless, as the live loop posts them: a passing run with its
benchmark, a failing one and one that does not compile, in turn, each recorded. After 20 runs and after 200, the
objects alive are counted: widgets, and what the app keeps per run (run states, the timeline, recorded ids,
timed cases, the log), with the stores' bounds made small so that 44 runs pass them. A store that keeps something per
run without bound fails this test; so did the key bar, which kept every key it had shown (footer.py).
"""

import gc
import time

from textual.dom import DOMNode
from tui_helpers import READY_GPU, app_for, bench_events, case_events, compile_problem, rmsnorm_project

from workbench.core.events import RunFinished
from workbench.core.live.loop import RunRequest
from workbench.core.project.history import RunRecord
from workbench.core.run.session import RunOutcome
from workbench.core.verdict import Tally
from workbench.tui import kept_runs
from workbench.tui.messages import RunDone, RunEvent
from workbench.tui.widgets.log import LogPanel

SIZE = (160, 45)
WARM, RUNS = 8, 44


def run_events(n: int, kernel_path: str) -> tuple[list, RunFinished]:
    kind = n % 3
    if kind == 0:
        return [READY_GPU, *case_events(failing=False), *bench_events()], RunFinished(verdict="passed", duration_s=2.4)
    if kind == 1:
        return [READY_GPU, *case_events(failing=True)], RunFinished(verdict="failed", duration_s=1.1)
    return [READY_GPU, compile_problem(kernel_path)], RunFinished(verdict="error", duration_s=0.4)


async def one_run(app, pilot, n: int) -> None:
    run_id = app.submit("save")
    events, finished = run_events(n, str(app.project.kernel_path))
    for event in [*events, finished]:
        app.post_message(RunEvent(run_id, event))
    record = RunRecord(id=f"20261127-0000{n:04d}", data={"verdict": finished.verdict, "created": time.time()})
    outcome = RunOutcome(project=app.project, source_hash=f"{n:016x}", tally=Tally(), finished=finished,
                         record=record)
    app.post_message(RunDone(run_id, RunRequest(stages=("verify", "bench")), outcome))
    await pilot.pause()


def held(app) -> dict[str, int]:
    """What the app holds, counted: every widget alive (in the DOM or not), and its per-run stores."""
    gc.collect()
    objects = gc.get_objects()
    log = app.query_one(LogPanel)  # its tab never shown: what it is given waits to be drawn
    return {"widgets alive": sum(issubclass(type(o), DOMNode) for o in objects),
            "widgets in the DOM": len(list(app.screen.walk_children(with_self=True))),
            "run states": len(app.kept.runs), "timeline entries": len(app.kept.timeline),
            "recorded run ids": len(app.kept.recorded), "timed runs": len(app.kept.bench_times),
            "log entries": len(log.lines) + len(getattr(log, "_deferred_renders", ())),
            "objects": len(objects)}


# Each store's bound, made small here (the app's are larger): 44 runs go well past every one of them.
BOUNDS = {"run states": ("RECENT_RUNS", 3), "timeline entries": ("TIMELINE_KEPT", 10),
          "recorded run ids": ("RECORDED_KEPT", 8), "timed runs": ("TIMED_RUNS_KEPT", 4)}
LOG_LINES = 30


async def test_hundreds_of_runs_leave_the_apps_state_flat(tmp_path, monkeypatch):
    for name, value in BOUNDS.values():
        monkeypatch.setattr(kept_runs, name, value)
    monkeypatch.setattr(LogPanel, "MAX_LINES", LOG_LINES, raising=False)
    app = app_for(rmsnorm_project(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        for n in range(WARM):
            await one_run(app, pilot, n)
        before = held(app)
        for n in range(WARM, RUNS):
            await one_run(app, pilot, n)
        after = held(app)
    assert after["widgets alive"] <= before["widgets alive"], (before, after)  # was +4 a run: the key bar's keys
    assert after["widgets in the DOM"] == before["widgets in the DOM"], (before, after)
    for key, (_, bound) in BOUNDS.items():
        assert after[key] <= bound, (key, before, after)
    assert after["log entries"] <= LOG_LINES, (before, after)
    assert after["objects"] < before["objects"] * 1.02, (before, after)


def test_the_history_tab_reads_each_record_once_and_keeps_it_small(tmp_path, monkeypatch):
    """The app's history tab reads the newest records on every save: a record is read from disk once, kept
    without its cases (hundreds of kB each on the CPU), and says the same verdict as the whole record."""
    from workbench.core.project import history
    from workbench.core.project.folder import Project

    (tmp_path / "kernel.py").write_text("# a kernel\n")
    project = Project.open(tmp_path)
    cases = [{"case_index": i, "messages": ["x" * 2000], "error_map": [[0.0] * 50] * 20} for i in range(20)]
    compile_error = {"kind": "compile", "message": "does not compile", "traceback": "t" * 5000}
    refused = {"kind": "no_gpu", "message": "nothing timed here"}
    kinds = [({"passed": 20, "failed": 0, "errors": 0}, [], None),
             ({"passed": 19, "failed": 1, "errors": 0}, [], None),
             ({"passed": 0, "failed": 0, "errors": 1}, [compile_error], None),
             ({"passed": 20, "failed": 0, "errors": 0}, [refused], [refused])]
    for n in range(12):
        counts, problems, later = kinds[n % 4]
        data = {"id": f"run-{n:04d}", "source_hash": f"{n:016x}", "stages": ["verify", "bench"], "counts": counts,
                "problems": problems, "cases": cases,
                "bench": [{"case_index": 20, "label": "n=1", "median_ms": 0.5 + n,
                           "kernel": {"median_ms": 0.5 + n, "samples_ms": [0.5] * 500}}]}
        if later is not None:
            data["after_verification"], data["after"] = later, "verify"
        history.append_record(project, data, f"# version {n}\n")
    reads = []
    real_read = history._read
    monkeypatch.setattr(history, "_read", lambda path, unreadable=None: reads.append(path) or real_read(path,
                                                                                                         unreadable))
    recent = history.RecentRecords(project, 8)
    small, total = recent.read()
    assert total == 12 and [r.id for r in small] == [f"run-{n:04d}" for n in range(4, 12)]
    whole = {r.id: r for r in history.read_records(project)}
    for record in small:
        assert (record.verdict, record.verdict_label) == (whole[record.id].verdict, whole[record.id].verdict_label)
        assert record.data["counts"] == whole[record.id].data["counts"] and "cases" not in record.data
        assert record.data["bench"][0]["kernel"] == {"median_ms": whole[record.id].data["bench"][0]["median_ms"]}
    assert {r.verdict for r in small} == {"passed", "failed", "error"}
    reads.clear()
    history.append_record(project, {"id": "run-0012", "source_hash": "c" * 16, "counts": kinds[0][0]}, "# 12\n")
    small, total = recent.read()
    assert total == 13 and small[-1].id == "run-0012" and [p.stem for p in reads] == ["run-0012"]  # only the new one
