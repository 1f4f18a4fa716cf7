"""The timer an autotuner's configs are measured with while a benchmark runs: Triton's `do_bench`, on the CUDA
primitives bound before kernel.py is imported (primitives.py).

Triton's own `do_bench` times with `torch.cuda.Event` as kernel.py finds it: a kernel.py that rebinds
`Event.elapsed_time` (at the Python class or in the C extension's method table) makes every config "take"
what the fake says. Returning 1e-6 ms, it also makes Triton plan 100 ms / 2e-7 ms of runs: hundreds of
millions of launches, a benchmark that never ends. Same arguments, same plan (5 runs to estimate, warm-up
and repeats sized by it, the L2 cleared before each timed run), same statistics; the runs are capped at
MOST_RUNS. Used for the tuners that keep Triton's default timer (timing/autotune.AutotuneRecorder); a
`do_bench` kernel.py gives its autotuner is its own.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

from . import primitives as cuda

MOST_RUNS = 100_000  # warm-up or timed runs of one config, whatever the estimate says
_flush: Callable[[], None] | None = None


def _flusher() -> Callable[[], None]:
    """The L2 cleared before each timed run as Triton clears it (a 256 MiB buffer overwritten: timers.L2Flusher in
    "write" mode), one buffer for every config the process tunes, not one allocated per config."""
    global _flush
    if _flush is None:
        from .timers import L2Flusher

        _flush = L2Flusher(None, "write")
    return _flush


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, grad_to_none: Sequence[Any] | None = None,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
    """triton.testing.do_bench, timed with the bound primitives."""
    fn()
    cuda.synchronize()
    flush = _flusher()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    cuda.record(start)
    for _ in range(5):
        flush()
        fn()
    cuda.record(end)
    cuda.synchronize()
    estimate_ms = max(cuda.elapsed_time(start, end) / 5, 1e-6)
    n_warmup = min(MOST_RUNS, max(1, int(warmup / estimate_ms)))
    n_repeat = min(MOST_RUNS, max(1, int(rep / estimate_ms)))
    starts = [cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        for x in grad_to_none or ():
            x.grad = None
        flush()
        cuda.record(starts[i])
        fn()
        cuda.record(ends[i])
    cuda.synchronize()
    return summarize([cuda.elapsed_time(s, e) for s, e in zip(starts, ends)], quantiles, return_mode)


def summarize(times: list[float], quantiles: Sequence[float] | None, return_mode: str) -> Any:
    """What do_bench returns for `times`: the quantiles (linear interpolation; one is a float), else the statistic."""
    if quantiles is not None:
        ordered = sorted(times)
        last = len(ordered) - 1
        found = []
        for q in quantiles:
            position = q * last
            low = int(position)
            high = min(low + 1, last)
            found.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
        return found[0] if len(found) == 1 else found
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.mean, "median": statistics.median}[return_mode](times)
