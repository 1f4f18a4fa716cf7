"""How long warm workers take to start when several start at once (the live loop starts one per
verification shard and one for the benchmark after every save), and where their warm-up goes.

    python benchmarks/worker_warmup.py                 # 1, 4 and 9 workers at once, twice each
    python benchmarks/worker_warmup.py --counts 9 --repeats 3

Workers are forked from the runner's warm template as the live loop forks them; each reports its
warm-up steps (WorkerReady.warmup_phases). Printed per count: the wall clock from the first fork to
the last worker ready, and the median of each step over the workers.

--beside-timing: does a warming worker disturb a kernel timed meanwhile? A copy of 2 x 64 MiB is
timed as the benchmark times it (L2 flushed, graph replay), on a quiet GPU and while 9 workers warm
up, three times each. --profile: where one worker's first Triton launch goes (cProfile, top entries).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.core.run import Runner, make_runner  # noqa: E402


def start_at_once(runner: Runner, count: int) -> tuple[float, list]:
    started = time.monotonic()
    workers = [runner.supply.new_worker() for _ in range(count)]
    readies = [w.wait_ready() for w in workers]
    wall = time.monotonic() - started
    for w in workers:
        w.kill()
    return wall, readies


def time_copy(flusher, watch, config) -> float:
    import torch

    from workbench.core.timing.timers import measure

    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return measure(lambda: y.copy_(x), config, flusher, watch, "copy", 2 * x.numel()).timing.median_ms


def beside_timing(runner: Runner) -> None:
    import torch

    from workbench.core.project.config import BenchConfig
    from workbench.core.timing.compilewatch import CompileWatch
    from workbench.core.timing.device import l2_cache_bytes
    from workbench.core.timing.timers import L2Flusher

    config = BenchConfig().for_live_loop()
    flusher, watch = L2Flusher(l2_cache_bytes(), config.l2_flush), CompileWatch()
    time_copy(flusher, watch, config)  # warm: clocks, graph pool, module loads
    for repeat in range(3):
        quiet = time_copy(flusher, watch, config)
        workers = [runner.supply.new_worker() for _ in range(9)]
        started = time.monotonic()
        busy = []
        while not all(w.started_up.is_set() for w in workers) and time.monotonic() - started < 10:
            busy.append(time_copy(flusher, watch, config))
        for w in workers:
            w.wait_ready()
            w.kill()
        torch.cuda.synchronize()
        print(f"copy of 2 x 64 MiB, median µs: quiet {quiet * 1e3:.2f}; while 9 workers warm up "
              + " ".join(f"{b * 1e3:.2f}" for b in busy) + f" ({len(busy)} series in {time.monotonic() - started:.1f} s)",
              flush=True)


def profile_first_launch() -> None:
    import cProfile
    import io
    import pstats

    import torch

    from workbench.core.run.child.compiler_warmup import warm_compiler

    torch.zeros(1, device="cuda")
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.runcall(warm_compiler, torch)
    print(f"first Triton launch and compile in a fresh process: {time.perf_counter() - started:.3f} s")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
    print(out.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 4, 9])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--beside-timing", action="store_true", help="a timed copy on a quiet GPU and beside warming workers")
    parser.add_argument("--profile", action="store_true", help="cProfile one process's first Triton launch")
    args = parser.parse_args()
    if args.profile:
        profile_first_launch()
        return 0
    runner = make_runner(parallel=1)
    try:
        start_at_once(runner, 1)  # the template's own start-up (imports) is not what is measured
        for count in args.counts:
            for repeat in range(args.repeats):
                wall, readies = start_at_once(runner, count)
                names = list(dict.fromkeys(k for r in readies for k in r.warmup_phases))
                steps = ", ".join(f"{k} {statistics.median(r.warmup_phases.get(k, 0.0) for r in readies):.3f}"
                                  for k in names)
                print(f"{count} at once (#{repeat + 1}): first fork to last ready {wall:.3f} s; warm-up median "
                      f"{statistics.median(r.warmup_s for r in readies):.3f} s [{min(r.warmup_s for r in readies):.3f}-"
                      f"{max(r.warmup_s for r in readies):.3f}]; steps (medians): {steps}", flush=True)
        if args.beside_timing:
            beside_timing(runner)
    finally:
        runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
