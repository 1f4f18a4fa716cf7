"""Where a cold verification's time goes, in one warm process: Triton's compile stages, the launcher
build (a C module gcc compiles per kernel signature), execution; then the same kernels compiled
concurrently under Triton's AsyncCompileMode on a thread pool; then what a worker costs to start.

    python benchmarks/compile_breakdown.py [--project projects/rmsnorm] [--threads 8] [--json out.json]

Prints one table per part. GPU only (exit 3 without one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from child_env import repo_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGE_METHODS = ("make_ttir", "make_ttgir", "make_llir", "make_ptx", "make_cubin")


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def instrument(totals: dict) -> None:
    """Accumulate wall time per compile stage and for gcc-built launcher modules."""
    import triton.runtime.build as build
    from triton.backends.nvidia import compiler as nv

    def timed(owner, name, key):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                totals[key] += time.perf_counter() - start
                totals[key + " (calls)"] += 1
        setattr(owner, name, staticmethod(wrapper) if isinstance(owner.__dict__.get(name), staticmethod) else wrapper)

    for stage in STAGE_METHODS:
        timed(nv.CUDABackend, stage, stage)
    timed(build, "_build", "launcher gcc")


def fresh_cache() -> str:
    cache = tempfile.mkdtemp(prefix="breakdown-cache-")
    os.environ["TRITON_CACHE_DIR"] = cache
    return cache


def load(path: Path):
    from workbench.core.project.contract import load_kernel
    return load_kernel(path)


def serial(path: Path) -> dict:
    import torch

    from workbench.core.project.contract import select_cases

    fresh_cache()
    km = load(path)
    totals: dict = defaultdict(float)
    instrument(totals)
    rows = []
    wall0, cpu0 = time.perf_counter(), cpu_s()
    for case in select_cases(km.cases, None, "verify"):
        inputs = km.get_inputs(**case.params)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        km.kernel_fn(*inputs)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        km.kernel_fn(*inputs)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        rows.append({"case": case.label, "first_s": t1 - t0, "second_s": t2 - t1})
    return {"rows": rows, "stages": dict(totals), "wall_s": time.perf_counter() - wall0, "cpu_s": cpu_s() - cpu0}


def concurrent(path: Path, threads: int) -> dict:
    """Compile every verification case's kernels at once (no launch), then run each case once."""
    import torch
    from triton.runtime._async_compile import AsyncCompileMode

    from workbench.core.project.contract import select_cases
    from workbench.core.timing.compiled import compile_only

    fresh_cache()
    km = load(path)
    totals: dict = defaultdict(float)
    instrument(totals)
    cases = select_cases(km.cases, None, "verify")
    inputs = [km.get_inputs(**c.params) for c in cases]
    torch.cuda.synchronize()
    wall0, cpu0 = time.perf_counter(), cpu_s()
    with ThreadPoolExecutor(threads) as pool, AsyncCompileMode(pool), compile_only():
        for args in inputs:
            km.kernel_fn(*args)
    compiled = time.perf_counter()
    for args in inputs:
        km.kernel_fn(*args)
    torch.cuda.synchronize()
    done = time.perf_counter()
    return {"compile_wall_s": compiled - wall0, "first_runs_s": done - compiled, "cpu_s": cpu_s() - cpu0,
            "stages": dict(totals), "threads": threads}


def worker_start(samples: int) -> dict:
    """`python -m workbench.core.run.child.worker` until its worker_ready line: wall and CPU seconds."""
    walls, cpus = [], []
    env = repo_env()
    for _ in range(samples):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "workbench.core.run.child.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        proc.stdout.readline()
        walls.append(time.perf_counter() - start)
        proc.stdin.close()
        proc.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}


def forked_start(samples: int) -> dict:
    """A child forked from a process with torch and triton imported (no CUDA yet): CUDA up and the
    compiler warmed, as a worker's start-up does. Wall and CPU seconds in the child."""
    code = ("import os, sys, time, json, resource; sys.path.insert(0, %r); import torch, triton, triton.language;"
            "import workbench.core.run.child.compiler_warmup as cw\n"
            "out = []\n"
            "for _ in range(%d):\n"
            "    r, w = os.pipe(); t0 = time.perf_counter(); pid = os.fork()\n"
            "    if pid == 0:\n"
            "        torch.zeros(1, device='cuda'); cw.warm_compiler(torch); ru = resource.getrusage(resource.RUSAGE_SELF)\n"
            "        os.write(w, json.dumps([time.perf_counter() - t0, ru.ru_utime + ru.ru_stime]).encode()); os._exit(0)\n"
            "    os.close(w); data = os.read(r, 1000); os.waitpid(pid, 0); out.append(json.loads(data))\n"
            "print(json.dumps(out))" % (str(ROOT), samples))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    try:
        samples_out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": proc.stderr[-1500:]}
    return {"wall_s": statistics.median(s[0] for s in samples_out), "cpu_s": statistics.median(s[1] for s in samples_out)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--project", type=Path, default=ROOT / "projects" / "rmsnorm")
    parser.add_argument("--threads", type=int, nargs="*", default=[4, 8, 16])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--part", choices=["all", "serial", "concurrent", "worker"], default="all")
    args = parser.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("no CUDA GPU", file=sys.stderr)
        return 3
    from workbench.core.run.child.compiler_warmup import warm_compiler
    warm_compiler(torch)
    path = args.project / "kernel.py"
    out: dict = {"gpu": torch.cuda.get_device_name(), "cores": os.cpu_count()}
    if args.part in ("all", "serial"):
        out["serial"] = s = serial(path)
        print(f"serial, one warm process, cold cache: {len(s['rows'])} cases in {s['wall_s']:.2f} s wall, "
              f"{s['cpu_s']:.2f} s CPU")
        for row in s["rows"]:
            print(f"  {row['case']:<44} first call {row['first_s'] * 1e3:7.1f} ms   second {row['second_s'] * 1e3:6.2f} ms")
        for key, value in sorted(s["stages"].items()):
            print(f"  {key:<24} {value:8.3f}" + ("" if "calls" in key else " s"))
    if args.part in ("all", "concurrent"):
        out["concurrent"] = []
        for threads in args.threads:
            # each in its own process: Triton's in-memory caches would otherwise carry over
            code = ("import sys, json; sys.path.insert(0, %r); import torch;"
                    "from workbench.core.run.child.compiler_warmup import warm_compiler; warm_compiler(torch);"
                    "import benchmarks.compile_breakdown as b;"
                    "print(json.dumps(b.concurrent(b.Path(%r), %d)))" % (str(ROOT), str(path), threads))
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
            try:
                c = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                print(f"  threads={threads}: failed\n{proc.stderr[-2000:]}")
                continue
            out["concurrent"].append(c)
            print(f"concurrent compile, {threads} threads: compile {c['compile_wall_s']:.2f} s wall, then first runs "
                  f"{c['first_runs_s']:.2f} s; {c['cpu_s']:.2f} s CPU; launcher gcc "
                  f"{c['stages'].get('launcher gcc', 0):.2f} s in {int(c['stages'].get('launcher gcc (calls)', 0))} builds")
    if args.part in ("all", "worker"):
        out["worker_start"] = w = worker_start(3)
        print(f"worker start (python -m workbench.core.run.child.worker to ready): {w['wall_s']:.2f} s wall, "
              f"{w['cpu_s']:.2f} s CPU")
        out["forked_start"] = f = forked_start(3)
        print("forked child (torch, triton imported before the fork): CUDA up + compiler warmed: "
              + (f"{f['wall_s']:.2f} s wall, {f['cpu_s']:.2f} s CPU (the child's own)"
                 if "error" not in f else f["error"]))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
