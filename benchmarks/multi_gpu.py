"""Verification wall time of every scaffold on one GPU against all the machine's GPUs.

    python3 benchmarks/multi_gpu.py                          # every known op, 3 rounds, a table
    python3 benchmarks/multi_gpu.py --rounds 5 --json out.json
    python3 benchmarks/multi_gpu.py --ops rmsnorm,softmax --smoke   # no GPU: the plumbing, in the interpreter

`workbench new <op>` writes each known op (and template) of `workbench new --list` into a temporary
folder; then `workbench verify` of them all runs with `--gpus 0` (one GPU: its lanes of projects, one per
4 cores up to 4, every verification worker on it) and with `--gpus all` (as many lanes on each GPU, the
machine's workers shared out among them), the two alternating round by round so neither gets the warmer
machine. Each run starts from cleared Triton caches (`workbench verify` clears each project's), so every run
compiles everything: the cold-start time a CI job pays. One untimed run first warms the page cache and Python's bytecode
(`--no-warmup` leaves it out: the first timed run is then the colder).

Beside each run, the machine's load is sampled twice a second: the share of all cores busy (/proc/stat),
each GPU's utilisation (nvidia-smi) and the `workbench verify` process's own CPU: a run whose cores are busy
throughout is bound by compiling, which a second GPU does not speed up; one whose parent sits near one core is
bound by the parent.

The table: wall seconds of the whole `workbench verify` (median, min and max over the rounds), the
cases that passed, and the speed-up of all GPUs over one. Needs no Ray: the local runner places
the workers. The GPUs come from nvidia-smi (CUDA_VISIBLE_DEVICES respected).

The setting `cluster` verifies through workbench-ray instead (`--cluster ray://...`): a Ray head started on this
machine with its GPUs before the first round (untimed, as a cluster that is already up) and stopped after the
last; its workers are Ray actors of one GPU each. It needs ray and the workbench-ray plugin installed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import shutil
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.core.fsutil import atomic_write_text, process_stat  # noqa: E402
from workbench.core.project.scaffold import Catalog, builtin_scaffolds, create_project  # noqa: E402
from workbench.core.run.gpus import discover_gpus  # noqa: E402 - the repository's own copy
from child_env import repo_env  # noqa: E402 - beside this script


def workbench(*args: str, check: bool = True, env_extra: dict[str, str] | None = None,
              started: "LoadSampler | None" = None, plugins: bool = False) -> subprocess.CompletedProcess:
    """`workbench ARGS` in a fresh Python; `started`: a sampler told the command's pid (its own CPU is sampled);
    `plugins`: installed plugins load (workbench-ray for `--cluster`), else the built-ins alone."""
    env = repo_env({**({} if plugins else {"WORKBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"}), **(env_extra or {})})
    command = [sys.executable, "-m", "workbench.cli", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=ROOT) as proc:
        if started is not None:
            started.watch(proc.pid)
        out, err = proc.communicate()
    done = subprocess.CompletedProcess(command, proc.returncode, out, err)
    if check and done.returncode not in (0, 1):
        raise SystemExit(f"workbench {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def process_ticks(pid: int) -> int:
    """CPU clock ticks a process has used, its threads together (utime + stime of /proc/PID/stat)."""
    fields = process_stat(pid)
    return int(fields[11]) + int(fields[12])


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all cores since boot (/proc/stat's first line)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


class LoadSampler:
    """The machine's load while a run goes on: the share of all cores busy, every half second, and each GPU's
    utilisation (nvidia-smi, streamed every 500 ms), and the `workbench` process's own CPU (`watch`: the cores
    of the parent that pumps every worker's events; near one core throughout, it is the run's bottleneck). No-op
    where /proc/stat or nvidia-smi is missing."""

    def __init__(self, period: float = 0.5):
        self.period = period
        self.cpu: list[float] = []
        self.gpu: dict[str, list[float]] = {}
        self.parent: list[float] = []  # the watched process's CPU, in cores, per sample
        self._pid: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_cpu, daemon=True)
        self._smi: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def watch(self, pid: int) -> None:
        self._pid = pid

    def _sample_cpu(self) -> None:
        try:
            before = cpu_times()
        except OSError:
            return
        ticks, tick_s, last = None, 1.0 / os.sysconf("SC_CLK_TCK"), time.monotonic()
        while not self._stop.wait(self.period):
            now, moment = cpu_times(), time.monotonic()
            if now[1] > before[1]:
                self.cpu.append((now[0] - before[0]) / (now[1] - before[1]))
            before = now
            if self._pid is not None:
                try:
                    used = process_ticks(self._pid)
                except (OSError, ValueError, IndexError):
                    continue
                if ticks is not None and moment > last:
                    self.parent.append((used - ticks) * tick_s / (moment - last))
                ticks = used
            last = moment

    def _read_gpu(self) -> None:
        assert self._smi is not None and self._smi.stdout is not None
        for line in self._smi.stdout:
            index, _, util = line.partition(",")
            try:
                self.gpu.setdefault(index.strip(), []).append(float(util))
            except ValueError:
                continue

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        try:
            query = ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits",
                     f"-lms={int(self.period * 1000)}"]
            self._smi = subprocess.Popen(query, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._reader = threading.Thread(target=self._read_gpu, daemon=True)
            self._reader.start()
        except OSError:
            self._smi = None
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self._smi is not None:
            self._smi.terminate()
            self._smi.wait()
            if self._reader is not None:
                self._reader.join(timeout=2)

    def summary(self) -> dict:
        """Mean share of the cores busy, the share of samples with 90% of them busy or more, each GPU's mean
        utilisation (%)."""
        return {"cpu_busy": round(statistics.fmean(self.cpu), 3) if self.cpu else None,
                "cpu_saturated": round(sum(c >= 0.9 for c in self.cpu) / len(self.cpu), 3) if self.cpu else None,
                "gpu_util": {k: round(statistics.fmean(v), 1) for k, v in sorted(self.gpu.items()) if v},
                "parent_cores": round(statistics.fmean(self.parent), 2) if self.parent else None,
                "parent_cores_max": round(max(self.parent), 2) if self.parent else None}


def split_setting(setting: str) -> tuple[str, dict[str, str]]:
    """`all:2` -> ("all", WORKBENCH_PROJECTS_PER_GPU=2): the GPUs to verify on and the projects each takes at once."""
    gpus, _, per_gpu = setting.partition(":")
    return gpus, ({"WORKBENCH_PROJECTS_PER_GPU": per_gpu} if per_gpu else {})


def label(setting: str) -> str:
    return "--cluster" if setting == "cluster" else f"--gpus {setting}"


class LocalRayCluster:
    """A Ray head on this machine offering its `gpus` GPUs and every core (workbench_ray.local_node), stopped on
    exit. `address` is its Ray Client address, which `workbench verify --cluster` takes."""

    def __init__(self, gpus: int, start_timeout_s: float = 120.0):
        try:
            importlib.import_module("ray")
        except ImportError:
            raise SystemExit("the `cluster` setting needs ray (pip install 'ray[client]')") from None
        if not any(e.name == "ray" for e in importlib.metadata.entry_points(group="workbench")):
            raise SystemExit("the `cluster` setting needs the workbench-ray plugin installed (pip install plugins/ray)")
        from workbench_ray.local_node import free_port

        self.gpus, self.start_timeout_s = gpus, start_timeout_s
        self.client_port, self.gcs_port = free_port(), free_port()
        self.address = f"ray://127.0.0.1:{self.client_port}"
        self.temp = Path(f"/tmp/wbray-{os.getpid()}")  # short: Ray's socket paths have a length limit
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "LocalRayCluster":
        from workbench_ray.local_node import NodeDidNotStart, answers, start_node

        args = ["--head", "--num-gpus", str(self.gpus), "--num-cpus", str(os.cpu_count() or 1), "--port",
                str(self.gcs_port), "--ray-client-server-port", str(self.client_port), "--include-dashboard", "false",
                "--temp-dir", str(self.temp)]
        try:
            self.process = start_node(args, lambda: answers(self.client_port), self.start_timeout_s)
        except NodeDidNotStart as exc:
            raise SystemExit(str(exc)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        from workbench_ray.local_node import stop_node

        if self.process is not None:
            stop_node(self.process)
        shutil.rmtree(self.temp, ignore_errors=True)


def verify_all(projects: list[Path], setting: str, extra: list[str], cluster: LocalRayCluster | None = None) -> dict:
    gpus, env_extra = split_setting(setting)
    where = ["--cluster", cluster.address] if setting == "cluster" and cluster else ["--gpus", gpus]
    with LoadSampler() as load:
        started = time.perf_counter()
        done = workbench("verify", *map(str, projects), *where, "--json", *extra, check=False,
                         env_extra=env_extra, started=load, plugins=setting == "cluster")
        wall = time.perf_counter() - started
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"verify {' '.join(where)} printed no JSON (exit {done.returncode}):\n{done.stderr[-3000:]}")
    cases = [c for p in report["projects"] for c in p["cases"] if not c["config"]]
    return {"gpus": setting, "wall_s": round(wall, 2), "exit_code": report["exit_code"],
            "project_s": {p["project"]: p.get("duration_s") for p in report["projects"]},
            "passed": sum(c["status"] == "passed" for c in cases), "cases": len(cases),
            "gpus_used": sorted({c["gpu"] for c in cases if c.get("gpu")}),
            "verdicts": {p["project"]: p["verdict"] for p in report["projects"]}, "load": load.summary()}


def describe_load(load: dict) -> str:
    if load.get("cpu_busy") is None:
        return "load not sampled"
    gpus = ", ".join(f"GPU {k} {v:.0f}%" for k, v in load["gpu_util"].items())
    parent = (f"; the workbench process itself {load['parent_cores']:.2f} cores on average, "
              f"{load['parent_cores_max']:.2f} at most") if load.get("parent_cores") is not None else ""
    return (f"cores {100 * load['cpu_busy']:.0f}% busy on average, 90%+ busy in {100 * load['cpu_saturated']:.0f}% of "
            f"samples; " + (f"utilisation {gpus}" if gpus else "GPUs not sampled") + parent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each setting (default 3)")
    parser.add_argument("--ops", help="comma-separated ops (default: every one `workbench new --list` names)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every run as JSON")
    parser.add_argument("--settings", default="0,all",
                        help="comma-separated --gpus values to compare, the first the baseline; `all:2` also sets "
                             "WORKBENCH_PROJECTS_PER_GPU=2; `cluster`: --cluster over a local Ray head with every "
                             "GPU (default: 0,all)")
    parser.add_argument("--no-warmup", action="store_true", help="leave out the untimed first run")
    parser.add_argument("--smoke", action="store_true",
                        help="no GPU needed: one round under the interpreter, to check the script itself")
    args = parser.parse_args()

    gpus = discover_gpus()
    if not args.smoke and len(gpus) < 2:
        raise SystemExit(f"needs two GPUs or more; nvidia-smi shows {len(gpus)} (use --smoke to try the script)")
    settings = ["all"] if args.smoke else args.settings.split(",")
    if args.smoke and "cluster" in args.settings.split(","):
        settings.append("cluster")
    extra = ["--interpret"] if args.smoke else []
    rounds = 1 if args.smoke else args.rounds
    catalog = Catalog(builtin_scaffolds())
    ops = args.ops.split(",") if args.ops else [s.name for s in catalog.scaffolds]

    with contextlib.ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="workbench-multi-gpu-"))
        folder = Path(work)
        for op in ops:  # as `workbench new OP` writes it
            create_project(op, folder, catalog.choose(op, None))
        projects = sorted(p for p in folder.iterdir() if (p / "kernel.py").is_file())
        print(f"{len(projects)} projects: {', '.join(p.name for p in projects)}")
        for gpu in gpus:
            print(f"GPU {gpu.describe}")
        print(f"verification workers: WORKBENCH_WORKERS={os.environ.get('WORKBENCH_WORKERS', 'default')}, "
              f"{os.cpu_count()} cores")
        # untimed, as a cluster already up: a head offering every GPU
        cluster = stack.enter_context(LocalRayCluster(len(gpus) or 1)) if "cluster" in settings else None
        if not args.smoke and not args.no_warmup:
            verify_all(projects, "all", extra)  # untimed: page cache, bytecode
        runs: dict[str, list[dict]] = {s: [] for s in settings}
        for round_ in range(rounds):
            for setting in settings if round_ % 2 == 0 else reversed(settings):
                run = verify_all(projects, setting, extra, cluster)
                runs[setting].append(run)
                print(f"  round {round_ + 1}: {label(setting):<12} {run['wall_s']:7.2f} s, "
                      f"{run['passed']}/{run['cases']} cases passed on GPUs {', '.join(run['gpus_used']) or '-'}, "
                      f"exit {run['exit_code']}", flush=True)
                slowest = sorted(run["project_s"].items(), key=lambda kv: -(kv[1] or 0))[:4]
                print("    slowest projects: " + ", ".join(f"{name} {s or 0:.1f} s" for name, s in slowest), flush=True)
                print(f"    {describe_load(run['load'])}", flush=True)
                if args.json:  # as it goes: a run cut short by a time limit keeps the rounds it finished
                    write_json(args.json, gpus, projects, runs)

    rows = [("setting", "GPUs used", "wall s (median)", "min", "max", "cases passed", "exit", "speed-up")]
    base = statistics.median(r["wall_s"] for r in runs[settings[0]])
    for setting in settings:
        walls = [r["wall_s"] for r in runs[setting]]
        median = statistics.median(walls)
        used = sorted({g for r in runs[setting] for g in r["gpus_used"]})
        rows.append((label(setting), str(len(used)), f"{median:.2f}", f"{min(walls):.2f}", f"{max(walls):.2f}",
                     f"{runs[setting][-1]['passed']}/{runs[setting][-1]['cases']}",
                     ",".join(sorted({str(r['exit_code']) for r in runs[setting]})), f"{base / median:.2f}x"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print()
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if args.json:
        write_json(args.json, gpus, projects, runs)
    return 0


def write_json(path: Path, gpus: list, projects: list[Path], runs: dict) -> None:
    atomic_write_text(path, json.dumps({"gpus": [g.describe for g in gpus], "projects": [p.name for p in projects],
                                        "runs": runs}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
