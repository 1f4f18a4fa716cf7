"""Save -> verdict and save -> benchmark latency of the live loop, against the plain loop a user would script.

    python benchmarks/loop_latency.py                       # the shipped rmsnorm project, 8 saves
    python benchmarks/loop_latency.py --saves 12 --json out.json
    python benchmarks/loop_latency.py --project path/to/project

A copy of the project is edited the way an editor saves (temp file, rename over kernel.py); each
save changes the source, so Triton recompiles from the project's cleared cache every time.

- workbench: the real app (`workbench watch`), headless, with its real watcher and warm workers.
  Times run from the save to the moment the verdict, the first benchmark row and the whole
  benchmark table are on screen (recorded after the screen refresh that shows them).
- plain loop: what a user scripts without the workbench. On each save, a fresh `python` runs a
  verify script (import torch, triton and kernel.py, compare kernel_fn with reference_fn on the
  verification cases), then a fresh `python` runs a benchmark script (triton.testing.do_bench on
  the benchmark cases). Each save gets a fresh TRITON_CACHE_DIR, as the workbench's cleared cache.
  The plain loop is started the instant the file is saved (no watcher), which favours it.
- the share of the workbench's save -> verdict that is Triton compilation and kernel execution: a
  warm probe process (torch, triton, CUDA up, cold cache) calls kernel_fn twice per verification
  case; the first call costs compilation + execution, the second execution alone.

- a broken save (--broken-saves): kernel_fn's output made wrong in its last element (a wrapper
  appended to kernel.py, so the kernel still compiles afresh): the first failing case on screen.
- a save while the benchmark runs (--mid-bench-saves): saved the moment the first benchmark row
  shows; that save's verdict and benchmark, as for the others.

Targets (H100): verdict <= 1.0 s median and <= 1.5 s worst, benchmark complete <= 3 s, >= 5x the
plain loop for both, the first failing case on screen <= 0.8 s after a breaking save.
Without a GPU the loop runs under the Triton interpreter and benchmarking is reported unavailable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from plain_scripts import PLAIN_BENCH, PLAIN_VERIFY  # noqa: E402

from workbench.core.events import (
    BenchResult,
    CaseResult,
    DeviceFacts,
    LogLine,
    RunStarted,
    StageChanged,
    WorkerReady,  # noqa: E402
)
from workbench.core.project.folder import Project, source_hash  # noqa: E402
from workbench.core.timing.baselines import REUSED_REFERENCE_NOTE  # noqa: E402
from workbench.tui.app import WorkbenchApp  # noqa: E402
from workbench.tui.messages import RunEvent, SaveAccepted  # noqa: E402

TARGET_VERDICT_S, TARGET_VERDICT_WORST_S, TARGET_BENCH_S, TARGET_SPEEDUP, TARGET_FAILURE_S = 1.0, 1.5, 3.0, 5.0, 0.8

# Warm probe: times compilation + execution (first call) and execution (second call) per verify case.
PROBE = '''
import importlib.util, json, os, sys, time, torch, triton
gpu = torch.cuda.is_available()
sync = torch.cuda.synchronize if gpu else (lambda: None)
if gpu:
    torch.zeros(1, device="cuda")
print("READY", flush=True)
path = sys.stdin.readline().strip()
os.environ["TRITON_CACHE_DIR"] = sys.stdin.readline().strip()
spec = importlib.util.spec_from_file_location("user_kernel", path)
km = importlib.util.module_from_spec(spec); spec.loader.exec_module(km)
first = second = 0.0
for case in [dict(c) for c in getattr(km, "CASES", [{}])]:
    if case.pop("purpose", "verify") != "verify":
        continue
    inputs = km.get_inputs(**case)
    sync(); t = time.perf_counter(); km.kernel_fn(*inputs); sync(); first += time.perf_counter() - t
    sync(); t = time.perf_counter(); km.kernel_fn(*inputs); sync(); second += time.perf_counter() - t
print(json.dumps({"compile_s": first - second, "execute_s": second}), flush=True)
'''


def editor_save(path: Path, text: str) -> float:
    """Save as an editor does; returns the wall-clock time of the save."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    saved = time.time()
    os.replace(tmp, path)
    return saved


def edited(source: str, n: int) -> str:
    return source + f"\n# save {n}: {time.time()}\n"


BREAK = """
_correct_kernel_fn = kernel_fn


def kernel_fn(*inputs):  # save {n}: the last element made wrong
    out = _correct_kernel_fn(*inputs)
    out.view(-1)[-1:] += 1.0
    return out
"""


def broken(source: str, n: int) -> str:
    return source + BREAK.replace("{n}", f"{n} {time.time()}")


# -- the runner's timeline (--trace) -------------------------------------------------------------------


class RunnerTrace:
    """Wall-clock moments of the runner's worker supply, recorded from this process (the app runs here):
    workers forked, ready, taken, killed; cancels, prewarms, waits for exits and the GPU gate opening.
    The runner's marks come through its trace hook; the live loop's and the app's own steps are
    bracketed for the benchmark's lifetime."""

    def __init__(self):
        self.marks: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def mark(self, what: str) -> None:
        with self._lock:
            self.marks.append((time.time(), what))

    def install(self) -> None:
        """The runner's own marks (workbench.core.run.trace: workers forked, ready, taken, sent their job;
        cancels, prewarms, exits awaited, compile processes forked, the gate opened), plus brackets around
        the live loop's and the app's steps outside the runner."""
        from workbench.core.live import loop
        from workbench.core.project import folder
        from workbench.core.run import trace as run_trace
        from workbench.tui import history_tabs

        run_trace.set_hook(self.mark)
        trace = self

        def bracket(cls, name, label):
            original = getattr(cls, name)

            def wrapper(self, *args, **kwargs):
                trace.mark(f"{label} start")
                try:
                    return original(self, *args, **kwargs)
                finally:
                    trace.mark(f"{label} end")

            setattr(cls, name, wrapper)

        bracket(loop.LiveLoop, "_run", "live loop run")
        bracket(folder.Project, "clear_triton_cache", "clear cache")
        for name in ("read_record", "compare_with_history"):  # the Changes tab's work at each save
            setattr(history_tabs, name, self.timed(getattr(history_tabs, name), name))

    def timed(self, function, label):
        def wrapper(*args, **kwargs):
            self.mark(f"{label} start")
            try:
                return function(*args, **kwargs)
            finally:
                self.mark(f"{label} end")

        return wrapper

    def between(self, start: float, end: float) -> list[tuple[float, str]]:
        with self._lock:
            return [(round(t - start, 3), what) for t, what in self.marks if start - 1.0 <= t <= end]


TRACE: RunnerTrace | None = None


def print_trace(title: str, marks: list[tuple[float, str]]) -> None:
    """Runs of the same mark (forks, takes) are folded into one line: first time, last time, count."""
    print(f"    timeline, {title} (s after the save):")
    folded: list[list] = []
    for t, what in marks:
        key = what.split(" ")[0] if what.split(" ")[0] in ("fork", "take") else what
        if folded and folded[-1][0] == key and t - folded[-1][2] < 0.05:
            folded[-1][2], folded[-1][3] = t, folded[-1][3] + 1
        else:
            folded.append([key, t, t, 1, what])
    for key, first, last, count, what in folded:
        span = f"{first:6.3f}" + (f" .. {last:6.3f}" if count > 1 else "")
        print(f"      {span:18} {what if count == 1 else f'{key} x{count}'}")


# -- the workbench -------------------------------------------------------------------------------------


@dataclass
class SaveTimes:
    saved: float
    source_hash: str
    accepted: float | None = None
    arrivals: dict[str, float] = field(default_factory=dict)  # first arrival of each milestone
    verify_work_s: float = 0.0  # the worker's own time on the verification cases
    bench_results: list[float] = field(default_factory=list)  # arrival of each benchmark row
    bench_phases: list[dict] = field(default_factory=list)  # each row's BenchResult.phases
    compile_note: str = ""  # the compile processes' account (run/compile_pool.py), when the run had them

    def mark(self, name: str, when: float) -> None:
        self.arrivals.setdefault(name, when)


class TimedApp(WorkbenchApp):
    """The real app; it also notes when each milestone of the watched save reaches the UI.

    Textual calls the base class's handler after these (handlers run along the MRO): no super().
    """

    watched: SaveTimes | None = None

    def on_save_accepted(self, message: SaveAccepted) -> None:
        if self.watched is not None and message.save.kernel_hash == self.watched.source_hash:
            self.watched.accepted = time.time()

    def on_run_event(self, message: RunEvent) -> None:
        watched, event = self.watched, message.event
        if watched is not None and message.run_id == self.loop.latest:
            now = time.time()
            watched.mark(type(event).__name__, now)
            verifying = not self.kept.runs[message.run_id].benchmarking if message.run_id in self.kept.runs else False
            if isinstance(event, CaseResult) and not event.config and verifying:
                watched.verify_work_s += event.duration_s
                watched.mark("first case result", now)
                watched.arrivals["last case result"] = now
            if isinstance(event, StageChanged) and event.stage == "verified":
                watched.mark("verified", now)
            elif "verified" in watched.arrivals and isinstance(event, (WorkerReady, RunStarted)):
                watched.mark(f"bench {type(event).__name__}", now)  # the benchmark's own worker
            elif isinstance(event, LogLine) and "specialisations compiled" in event.text:
                watched.compile_note = event.text
            elif isinstance(event, BenchResult):
                watched.bench_results.append(now)
                watched.bench_phases.append(dict(event.phases))


def shown(app: WorkbenchApp, what: str, source_hash: str) -> float | None:
    return next((t for w, _, h, t in app.kept.timeline if w == what and h == source_hash), None)


async def workbench_loop(project: Project, saves: int, timeout: float, screenshot: Path | None = None,
                         broken_saves: int = 0, mid_bench_saves: int = 0) -> tuple[list[SaveTimes], list[dict]]:
    app = TimedApp(project)
    base = project.kernel_path.read_text()
    results: list[SaveTimes] = []
    rows: list[dict] = []
    async with app.run_test(size=(160, 45)) as pilot:
        async def until(predicate, what: str) -> None:
            deadline = time.monotonic() + timeout
            while not predicate():
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out waiting for {what}")
                await pilot.pause(0.005)

        def run_over() -> bool:
            run = app.session.current
            return run is not None and run.finished is not None and app.session.latest is run

        async def watched_save(text: str, milestone: str, what: str) -> SaveTimes:
            """Save `text` as an editor does, wait for `milestone` of it on screen, then for the run's end."""
            times = SaveTimes(saved=0.0, source_hash=source_hash(text.encode()))
            app.watched = times
            times.saved = editor_save(project.kernel_path, text)
            await until(lambda: shown(app, milestone, times.source_hash) is not None, what)
            await until(run_over, "the end of the run")
            await pilot.pause(0.05)
            return times

        def bench_done_s(times: SaveTimes) -> float | None:
            return (times.arrivals.get("RunFinished", times.saved) - times.saved) if app.session.current.bench else None

        await until(run_over, "the first run (cold start, ceilings measured once per GPU)")
        for n in range(saves):
            await pilot.pause(1.0)  # a person's pause between saves; the next worker warms meanwhile
            times = await watched_save(edited(base, n), "verdict", "the verdict")
            run = app.session.current

            def since(milestone: str) -> float | None:
                return times.arrivals[milestone] - times.saved if milestone in times.arrivals else None

            row = {
                "kind": "save",
                "verdict": run.verdict,
                "verdict_s": shown(app, "verdict", times.source_hash) - times.saved,
                "first_bench_s": (shown(app, "bench", times.source_hash) or times.saved - 1) - times.saved,
                "bench_done_s": bench_done_s(times),
                "accepted_s": (times.accepted or times.saved) - times.saved,
                "worker_ready_s": times.arrivals.get("WorkerReady", times.saved) - times.saved,
                "run_started_s": times.arrivals.get("RunStarted", times.saved) - times.saved,
                "last_case_s": times.arrivals.get("last case result", times.saved) - times.saved,
                "verify_work_s": times.verify_work_s,
                "bench_worker_ready_s": since("bench WorkerReady"),
                "bench_kernel_imported_s": since("bench RunStarted"),
                "device_facts_s": since(DeviceFacts.__name__),
                "bench_rows_s": [t - times.saved for t in times.bench_results],
                "bench_phases": times.bench_phases,
                "bench_cases": len(run.bench),
                "references_reused": sum(REUSED_REFERENCE_NOTE in b.notes for b in run.bench),
                "bench_note": next((p.message for p in run.bench_problems), ""),
                "compile_note": times.compile_note,
            }
            if TRACE is not None:
                row["trace"] = TRACE.between(times.saved, times.arrivals.get("RunFinished", time.time()))
            if not run.bench:
                row["first_bench_s"] = None
            results.append(times)
            rows.append(row)
            print(f"  save {n + 1}: verdict {row['verdict']} in {row['verdict_s']:.2f} s"
                  + (f", first bench row {row['first_bench_s']:.2f} s, bench complete {row['bench_done_s']:.2f} s"
                     if row["first_bench_s"] is not None else ", no benchmark")
                  + (f"\n    {times.compile_note}" if times.compile_note else ""), flush=True)
        for n in range(broken_saves):
            await pilot.pause(1.0)
            times = await watched_save(broken(base, n), "failure", "the first failing case")
            failure_s = shown(app, "failure", times.source_hash) - times.saved
            verdict_s = (shown(app, "verdict", times.source_hash) or times.saved) - times.saved
            rows.append({"kind": "broken", "verdict": app.session.current.verdict, "failure_s": failure_s,
                         "verdict_s": verdict_s, "accepted_s": (times.accepted or times.saved) - times.saved,
                         **{f"{name}_s": when - times.saved for name, when in times.arrivals.items()}})
            print(f"  broken save {n + 1}: first failing case on screen {failure_s:.2f} s, verdict "
                  f"{app.session.current.verdict} in {verdict_s:.2f} s", flush=True)
        for n in range(mid_bench_saves):
            await pilot.pause(1.0)
            first = edited(base, 500 + n)
            first_hash = source_hash(first.encode())
            editor_save(project.kernel_path, first)
            await until(lambda: shown(app, "bench", first_hash) is not None, "the first benchmark row")
            times = await watched_save(edited(base, 600 + n), "verdict", "the verdict")  # while `first` benchmarks
            row = {"kind": "mid-bench", "verdict": app.session.current.verdict,
                   "verdict_s": shown(app, "verdict", times.source_hash) - times.saved,
                   "bench_done_s": bench_done_s(times),
                   "accepted_s": (times.accepted or times.saved) - times.saved,
                   **{f"{name}_s": when - times.saved for name, when in times.arrivals.items()},
                   "bench_rows_s": [t - times.saved for t in times.bench_results],
                   "bench_phases": times.bench_phases}
            if TRACE is not None:
                row["trace"] = TRACE.between(times.saved, times.arrivals.get("RunFinished", time.time()))
            rows.append(row)
            print(f"  save during a benchmark {n + 1}: verdict {row['verdict']} in {row['verdict_s']:.2f} s"
                  + (f", bench complete {row['bench_done_s']:.2f} s" if row["bench_done_s"] else ""), flush=True)
        if screenshot is not None:
            app.save_screenshot(str(screenshot.name), str(screenshot.parent))
        mode = app.session.ready.mode if app.session.ready else "?"
        device = app.session.ready.device_name if app.session.ready else "?"
    rows.append({"mode": mode, "device": device})
    return results, rows


# -- the plain loop ------------------------------------------------------------------------------------


def plain_loop(project: Project, saves: int, gpu: bool, scripts: Path) -> list[dict]:
    (scripts / "verify_plain.py").write_text(PLAIN_VERIFY)
    (scripts / "bench_plain.py").write_text(PLAIN_BENCH)
    base = project.kernel_path.read_text()
    rows = []
    for n in range(saves):
        cache = tempfile.mkdtemp(prefix="plain-triton-cache-")
        env = {**os.environ, "TRITON_CACHE_DIR": cache}
        if not gpu:
            env["TRITON_INTERPRET"] = "1"
        saved = editor_save(project.kernel_path, edited(base, 1000 + n))
        verify = subprocess.run([sys.executable, str(scripts / "verify_plain.py"), str(project.kernel_path)],
                                env=env, capture_output=True, text=True)
        verdict_s = time.time() - saved
        row = {"verdict_s": verdict_s, "verify_ok": verify.returncode == 0, "first_bench_s": None,
               "bench_done_s": None}
        if verify.returncode != 0:
            row["error"] = verify.stderr.strip().splitlines()[-1:]
        if gpu:
            proc = subprocess.Popen([sys.executable, str(scripts / "bench_plain.py"), str(project.kernel_path)],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("BENCH") and row["first_bench_s"] is None:
                    row["first_bench_s"] = time.time() - saved
            proc.wait()
            row["bench_done_s"] = time.time() - saved
        shutil.rmtree(cache, ignore_errors=True)
        rows.append(row)
        if verify.returncode != 0:
            print(f"  plain save {n + 1}: the verify script failed: {row['error']}", flush=True)
        print(f"  plain save {n + 1}: verdict in {verdict_s:.2f} s"
              + (f", bench complete {row['bench_done_s']:.2f} s" if row["bench_done_s"] else ""), flush=True)
    return rows


def compile_share(project: Project, gpu: bool, repeats: int) -> dict:
    """Triton compilation and kernel execution on the verification cases, in a warm process, cold cache."""
    env = {**os.environ}
    if not gpu:
        env["TRITON_INTERPRET"] = "1"
    samples = []
    for _ in range(repeats):
        proc = subprocess.Popen([sys.executable, "-c", PROBE], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.readline()  # READY: torch, triton imported, CUDA up
        cache = tempfile.mkdtemp(prefix="probe-triton-cache-")
        proc.stdin.write(f"{project.kernel_path}\n{cache}\n")
        proc.stdin.flush()
        samples.append(json.loads(proc.stdout.readline()))
        proc.wait()
        shutil.rmtree(cache, ignore_errors=True)
    return {k: statistics.median(s[k] for s in samples) for k in ("compile_s", "execute_s")}


# -- report --------------------------------------------------------------------------------------------


def med(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value: float | None) -> str:
    return "   n/a" if value is None else f"{value:6.2f} s"


def spread(values) -> str:
    values = [v for v in values if v is not None]
    return f"[{min(values):.2f}-{max(values):.2f}]" if values else ""


def shipped_project() -> Path:
    for candidate in (ROOT / "projects" / "rmsnorm", ROOT / "scaffolds" / "rmsnorm"):
        if (candidate / "kernel.py").is_file():
            return candidate
    raise SystemExit("no rmsnorm project: run `workbench new rmsnorm` first")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=None, help="default: projects/rmsnorm (or its scaffold)")
    parser.add_argument("--saves", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for any one milestone")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    parser.add_argument("--screenshot", type=Path, help="save the app's last screen here (SVG)")
    parser.add_argument("--broken-saves", type=int, default=3, help="saves that break the kernel (first failure)")
    parser.add_argument("--mid-bench-saves", type=int, default=3, help="saves made while a benchmark runs")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain loop (and the speed-up)")
    parser.add_argument("--plain-saves", type=int, help="saves of the plain loop (default: --saves)")
    parser.add_argument("--trace", action="store_true", help="print the runner's timeline (workers forked, ready, "
                        "taken; cancels, the GPU gate) for the first save and each mid-benchmark save")
    parser.add_argument("--profile", type=Path, help="profile every worker job into this folder (cProfile slows "
                        "the loop: read the shares with benchmarks/profile_summary.py, not the seconds)")
    parser.add_argument("--gil-switch-interval", type=float, help="the app's GIL switch interval instead of its "
                        "own (Python's default: 0.005)")
    args = parser.parse_args()
    if args.gil_switch_interval:
        from workbench.tui import app as app_module

        app_module.GIL_SWITCH_INTERVAL_S = args.gil_switch_interval
    if args.profile:
        os.environ["WORKBENCH_PROFILE_DIR"] = str(args.profile.resolve())
    if args.trace:
        global TRACE
        TRACE = RunnerTrace()
        TRACE.install()

    source = args.project or shipped_project()
    work = Path(tempfile.mkdtemp(prefix="loop-latency-"))
    copy = work / "rmsnorm"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".workbench", "__pycache__"))
    project = Project.open(copy)
    print(f"project: {source} (copied to {copy})", flush=True)

    print("workbench loop (the app, headless):", flush=True)
    _, all_rows = asyncio.run(workbench_loop(project, args.saves, args.timeout, args.screenshot,
                                             args.broken_saves, args.mid_bench_saves))
    info = all_rows.pop()
    wb_rows = [r for r in all_rows if r["kind"] == "save"]
    broken_rows = [r for r in all_rows if r["kind"] == "broken"]
    mid_rows = [r for r in all_rows if r["kind"] == "mid-bench"]
    gpu = info["mode"] == "gpu"
    if gpu and not args.no_plain:
        print(f"plain loop (fresh python per script, on {info['device']}):", flush=True)
        plain_rows = plain_loop(project, args.plain_saves or args.saves, gpu, work)
        print("compilation/execution probe:", flush=True)
        probe = compile_share(project, gpu, repeats=3)
    else:  # the plain scripts ask for device="cuda": only the workbench maps that to the CPU
        print("the plain loop and the compilation probe were skipped (--no-plain, or no GPU: they need one)",
              flush=True)
        plain_rows = [{"verdict_s": None, "first_bench_s": None, "bench_done_s": None}]
        probe = {"compile_s": 0.0, "execute_s": 0.0, "skipped": True}

    wb_verdict, plain_verdict = med(r["verdict_s"] for r in wb_rows), med(r["verdict_s"] for r in plain_rows)
    wb_first, plain_first = med(r["first_bench_s"] for r in wb_rows), med(r["first_bench_s"] for r in plain_rows)
    wb_done, plain_done = med(r["bench_done_s"] for r in wb_rows), med(r["bench_done_s"] for r in plain_rows)

    def ratio(plain, wb):
        return f"{plain / wb:5.1f}x" if plain and wb else "   n/a"

    print()
    print(f"loop latency · {source.name} · {info['device']} ({info['mode']}) · {args.saves} saves · "
          "median [min-max] after the save")
    print(f"  {'':30} {'workbench':>22} {'plain loop':>22} {'speed-up':>9}")
    for label, wb_key, plain_key, wb_v, plain_v in (
            ("verdict on screen", "verdict_s", "verdict_s", wb_verdict, plain_verdict),
            ("first benchmark row", "first_bench_s", "first_bench_s", wb_first, plain_first),
            ("benchmark complete", "bench_done_s", "bench_done_s", wb_done, plain_done)):
        print(f"  {label:30} {fmt(wb_v)} {spread(r[wb_key] for r in wb_rows):>13} "
              f"{fmt(plain_v)} {spread(r[plain_key] for r in plain_rows):>13} {ratio(plain_v, wb_v):>9}")
    if broken_rows:
        print(f"  {'first failing case (broken save)':30} {fmt(med(r['failure_s'] for r in broken_rows))} "
              f"{spread(r['failure_s'] for r in broken_rows):>13}")
    if mid_rows:
        for label, key in (("verdict, saved mid-benchmark", "verdict_s"), ("bench done, saved mid-bench", "bench_done_s")):
            print(f"  {label:30} {fmt(med(r[key] for r in mid_rows))} {spread(r[key] for r in mid_rows):>13}")
    if args.trace:
        for title, row in [("save 2", wb_rows[1] if len(wb_rows) > 1 else None)] + \
                [(f"mid-benchmark save {n + 1}", r) for n, r in enumerate(mid_rows)]:
            if row is not None and row.get("trace"):
                print_trace(title, row["trace"])
        for row in mid_rows:
            keys = ("accepted_s", "WorkerReady_s", "RunStarted_s", "verified_s", "bench RunStarted_s", "DeviceFacts_s")
            print("    mid-benchmark save: " + ", ".join(f"{k[:-2]} {row[k]:.3f}" for k in keys if k in row)
                  + "; rows " + " ".join(f"{t:.2f}" for t in row["bench_rows_s"]))
            for phases in row["bench_phases"][:1]:
                print("      first case: " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
    reused = [r["references_reused"] for r in wb_rows if r["bench_cases"]]
    if reused:
        print(f"  reference times reused from earlier runs (live loop): {reused} of {wb_rows[0]['bench_cases']} "
              "cases per save")
    notes = {r["bench_note"] for r in wb_rows if r["bench_note"]}
    for note in notes:
        print(f"  benchmarking: {note[:150]}")

    accepted = med(r["accepted_s"] for r in wb_rows)
    ready = med(r["worker_ready_s"] for r in wb_rows)
    started = med(r["run_started_s"] for r in wb_rows)
    last_case = med(r["last_case_s"] for r in wb_rows)
    work_s = med(r["verify_work_s"] for r in wb_rows)
    print()
    if not gpu:
        return 0
    own = accepted + (ready - accepted) + (started - ready) + (wb_verdict - last_case)
    print("where save -> verdict goes (workbench, medians):")
    print(f"  watcher: save seen, debounced, hashed          {accepted:6.3f} s")
    print(f"  cancel old run, clear cache, warm worker ready {ready - accepted:6.3f} s")
    print(f"  worker imports kernel.py                       {started - ready:6.3f} s")
    pooled = any(r["compile_note"] for r in wb_rows)  # one GPU worker, its compiling spread over compile processes
    where = "one GPU worker, compile processes beside it" if pooled else "sharded over workers"
    label = f"verification cases ({where})"
    print(f"  {label:<47}{last_case - started:6.3f} s "
          f"(the cases' own time{'' if pooled else ', summed over the shards'}: {work_s:.3f} s)")
    print(f"  verdict to screen                              {wb_verdict - last_case:6.3f} s")
    print(f"  => the workbench's own path {own:.3f} s ({own / wb_verdict:.0%} of save -> verdict); the rest is "
          f"{'Triton compiling' if pooled else 'the shards compiling'} and running the verification battery")
    if probe.get("skipped"):
        print("  (the compilation probe was skipped with the plain loop)")
    else:
        print(f"  for scale, in one warm process with a cold cache: Triton compiling the verification cases "
              f"{probe['compile_s']:.3f} s, executing them {probe['execute_s']:.3f} s")
    bench_ready = med(r["bench_worker_ready_s"] for r in wb_rows)
    imported = med(r["bench_kernel_imported_s"] for r in wb_rows)
    facts = med(r["device_facts_s"] for r in wb_rows)
    rows_s = [r["bench_rows_s"] for r in wb_rows if r["bench_rows_s"]]
    if bench_ready is not None and facts is not None and rows_s:
        per_case = med((b[-1] - b[0]) / (len(b) - 1) for b in rows_s if len(b) > 1)
        print("where verdict -> benchmark complete goes (medians):")
        print(f"  the benchmark's worker ready                   {bench_ready - wb_verdict:6.3f} s after the verdict")
        print(f"  it imports kernel.py                           {imported - bench_ready:6.3f} s")
        print(f"  GPU facts and ceilings                         {facts - imported:6.3f} s")
        print(f"  first benchmark case                           {med(b[0] for b in rows_s) - facts:6.3f} s")
        if per_case is not None:
            print(f"  each later case                                {per_case:6.3f} s")
        print(f"  row to screen, run end                         {wb_done - med(b[-1] for b in rows_s):6.3f} s")
        phase_rows = [r["bench_phases"] for r in wb_rows if r["bench_phases"]]
        if phase_rows:
            names = list(dict.fromkeys(name for rows in phase_rows for phases in rows for name in phases))
            print("  inside the benchmark's worker, each case's steps (medians, s):   first case   later cases")
            for name in names:
                first = med(rows[0].get(name) for rows in phase_rows if name in rows[0])
                later = med(phases[name] for rows in phase_rows for phases in rows[1:] if name in phases)
                print(f"    {name:58} {'-' if first is None else f'{first:.3f}':>10} "
                      f"{'-' if later is None else f'{later:.3f}':>13}")

    if gpu:
        print()
        print("targets:")
        worst = max((r["verdict_s"] for r in wb_rows + mid_rows), default=None)
        mid_verdict, mid_done = med(r["verdict_s"] for r in mid_rows), med(r["bench_done_s"] for r in mid_rows)
        failure = med(r["failure_s"] for r in broken_rows)
        checks = [(f"verdict <= {TARGET_VERDICT_S} s median", wb_verdict is not None and wb_verdict <= TARGET_VERDICT_S),
                  (f"verdict <= {TARGET_VERDICT_WORST_S} s worst (saves and mid-benchmark saves)",
                   worst is not None and worst <= TARGET_VERDICT_WORST_S),
                  (f"benchmark complete <= {TARGET_BENCH_S} s median", wb_done is not None and wb_done <= TARGET_BENCH_S),
                  (f"saved mid-benchmark: verdict <= {TARGET_VERDICT_S} s, benchmark <= {TARGET_BENCH_S} s",
                   mid_verdict is not None and mid_verdict <= TARGET_VERDICT_S and mid_done is not None
                   and mid_done <= TARGET_BENCH_S),
                  (f"first failing case <= {TARGET_FAILURE_S} s", failure is not None and failure <= TARGET_FAILURE_S),
                  (f">= {TARGET_SPEEDUP:.0f}x the plain loop (verdict)", bool(plain_verdict and wb_verdict and
                                                          plain_verdict / wb_verdict >= TARGET_SPEEDUP)),
                  (f">= {TARGET_SPEEDUP:.0f}x the plain loop (benchmark)", bool(plain_done and wb_done and
                                                            plain_done / wb_done >= TARGET_SPEEDUP))]
        for label, ok in checks:
            print(f"  {'PASS' if ok else 'MISS'}  {label}")
    if args.json:
        args.json.write_text(json.dumps({"project": str(source), **info, "workbench": wb_rows, "broken": broken_rows,
                                         "mid_bench": mid_rows, "plain": plain_rows,
                                         "probe": probe}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
