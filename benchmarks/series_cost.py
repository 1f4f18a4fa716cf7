"""Where a timed series' wall time goes, and whether a graph-timed call's second warm-up can be shortened.

    PYTHONPATH=. python3 benchmarks/series_cost.py --out $OUT        # on a GPU: about two minutes
    PYTHONPATH=. python3 benchmarks/series_cost.py --cases 2 --rounds 3

A cold `workbench bench` of the rmsnorm scaffold spends 13-14 s in 24 timed series, 0.5-0.75 s each (RESULTS.md
3w). Every one of them is timed by CUDA-graph replay (`timers.measure`), and such a call is warmed up twice: for
`warmup_ms` (200 ms) before its brief per-call events series, and again before the graph's replays, after the
capture. For each benchmark case of the rmsnorm scaffold, kernel_fn and reference_fn, this prints:

1. the wall time of each step `timers.measure` takes, one after another: the estimate, the brief per-call series
   (with its warm-up), the host-sync probe, the graph replay series (capture, warm-up and samples), then
   `measure` whole;
2. the graph replay's median with its warm-up at 200 ms (as now), 20 ms and 0 (one replay), each right after a
   brief per-call series, as `measure` runs it. The three settings are interleaved over --rounds rounds.

Shorten the second warm-up only where the shorter settings' medians stay within the spread that the 200 ms
setting shows between its own rounds ("within" in the table). The same numbers go to $OUT/series_cost.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WARMUPS_MS = (200.0, 20.0, 0.0)  # 0: the one replay time_with_graph always runs


def wall(fn):
    """(what fn returned, its wall seconds, the GPU synchronized on both sides)."""
    import torch

    torch.cuda.synchronize()
    started = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return result, time.perf_counter() - started


def steps(call, config, flusher, watch, footprint):
    """The wall seconds of each step of timers.measure on `call`, taken one after another, then measure whole."""
    from workbench.core.timing import timers

    per_iteration, estimate_s = wall(lambda: timers.estimate_ms(call, flusher))
    brief = bool(timers.writeback_reason(per_iteration, flusher, footprint))
    _, events_s = wall(lambda: timers.time_with_events(call, config, flusher, watch, brief, per_iteration))
    why_not, probe_s = wall(lambda: timers.host_sync(call))
    graph_s = None
    if not why_not:
        _, graph_s = wall(lambda: timers.time_with_graph(call, config, flusher, watch))
    measured, measure_s = wall(lambda: timers.measure(call, config, flusher, watch, "call", footprint))
    return {"estimate": estimate_s, f"per-call series ({'brief' if brief else 'full'})": events_s,
            "host-sync probe": probe_s, "graph replay series": graph_s, "measure, whole": measure_s,
            "method": measured.timing.method if measured.timing else "no time: " + "; ".join(measured.notes)}


def warmups(call, config, flusher, watch, rounds):
    """Per warm-up setting: the graph replay's medians (ms) and wall seconds over `rounds` interleaved rounds."""
    from workbench.core.timing import timers
    from workbench.core.timing.stats import summarize

    found = {w: {"median_ms": [], "wall_s": []} for w in WARMUPS_MS}
    for _ in range(rounds):
        for warmup in WARMUPS_MS:
            timers.time_with_events(call, config, flusher, watch, True)  # as measure runs it first
            (samples, _), seconds = wall(lambda: timers.time_with_graph(
                call, dataclasses.replace(config, warmup_ms=warmup), flusher, watch))
            found[warmup]["median_ms"].append(summarize(samples, "").median_ms)
            found[warmup]["wall_s"].append(seconds)
    return found


def judged(found):
    """Each setting's median of medians, its change against 200 ms (%), and whether that change is within the
    200 ms setting's own spread between rounds (max - min over the median, %)."""
    base = found[WARMUPS_MS[0]]["median_ms"]
    centre = statistics.median(base)
    spread = (max(base) - min(base)) / centre * 100
    rows = {}
    for warmup, values in found.items():
        median = statistics.median(values["median_ms"])
        change = (median - centre) / centre * 100
        rows[warmup] = {"median_us": median * 1e3, "change_pct": change, "spread_pct_at_200ms": spread,
                        "within": abs(change) <= spread, "wall_s": statistics.median(values["wall_s"])}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/series-cost")))
    parser.add_argument("--cases", type=int, default=None, help="the first N benchmark cases only")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("series_cost.py times CUDA graphs: it needs a CUDA GPU", file=sys.stderr)
        return 2
    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import load_kernel, select_cases
    from workbench.core.timing.compilewatch import CompileWatch
    from workbench.core.timing.device import l2_cache_bytes
    from workbench.core.timing.timers import L2Flusher

    km = load_kernel(ROOT / "scaffolds" / "rmsnorm" / "kernel.py")
    cases = select_cases(km.cases, None, "bench")[:args.cases]
    config, watch, flusher = BenchConfig(), CompileWatch(), L2Flusher(l2_cache_bytes())
    table = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {len(cases)} cases, {args.rounds} rounds; "
          f"warm-ups {', '.join(f'{w:g} ms' for w in WARMUPS_MS)}", flush=True)
    for case in cases:
        inputs = km.get_inputs(**case.params)
        footprint = km.module.bytes_moved(*inputs) if hasattr(km.module, "bytes_moved") else None
        for name, fn in (("kernel_fn", km.kernel_fn), ("reference_fn", km.reference_fn)):
            def call(fn=fn):
                return fn(*inputs)

            call()  # compiled and warm, as measure expects
            row = {"case": case.label, "call": name, "steps_s": steps(call, config, flusher, watch, footprint),
                   "warmups": judged(warmups(call, config, flusher, watch, args.rounds))}
            table.append(row)
            taken = ", ".join(f"{k} {v:.3f}" for k, v in row["steps_s"].items() if isinstance(v, float))
            print(f"{case.label} {name}: {taken} s; {row['steps_s']['method'][:60]}", flush=True)
            for warmup, result in row["warmups"].items():
                print(f"    graph warm-up {warmup:5g} ms: median {result['median_us']:9.2f} µs "
                      f"({result['change_pct']:+.2f}% against 200 ms, whose rounds spread "
                      f"{result['spread_pct_at_200ms']:.2f}%: {'within' if result['within'] else 'OUTSIDE'}), "
                      f"graph series {result['wall_s']:.3f} s", flush=True)
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "series_cost.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": table},
                                                          indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
