"""The autotuners' timer while verifying: a few runs per config, not Triton's ~0.1 s of them.

Verification judges every config of an autotuned kernel forced in turn (battery.Verifier._verify_each_config),
so the tuner's own pick there only has to be one of its configs, chosen by a short measurement. Triton's own
timer (do_bench: 25 ms of warm-up and 100 ms of runs per config) spent ~0.6 s per case and key on a 5-config
elementwise kernel: most of a `workbench verify` of one. The benchmark tunes with Triton's timer
(timing/autotune.py records it); nothing tuned here is kept for it.

A generated case (an edge shape, a value stress, a large index: verify/edge_cases.py) forces no config, so its
tuners take their first config after pruning without timing any (`first_config_untimed`), and the compile
processes compile that one alone for it (run/child/compile_pool.py): each new shape would otherwise compile every
config the pruning keeps for it just to pick one (a LayerNorm whose four kernels list 488 configs: over a
thousand compiles for its eight edge shapes, most of a three-minute cold verify on an H200). Each config is still verified,
forced on the cases it is declared for.

These few runs time with torch.cuda.Event as kernel.py finds it: a kernel.py that fakes its time makes the
configs tie and the tuner keep its first, which verification then judges like every other (three runs each,
whatever the fake says: nothing here is sized by a measurement). The benchmark's tuning cannot be faked so
(timing/tuner_timer.py).
"""

from __future__ import annotations

import contextlib
import statistics
from typing import Any, Callable, Iterator

# Runs of each config per tuning while verifying, after one untimed run: enough that a kernel that changes its
# inputs is run on its own output again (the failure restore_value prevents), few enough to cost microseconds.
VERIFY_TIMED_RUNS = 3


def _few_runs(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
    import torch

    kernel_call()  # untimed: the first run may compile or load the config
    times = []
    for _ in range(VERIFY_TIMED_RUNS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel_call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    median = statistics.median(times)
    return median if quantiles is None else [median, min(times), max(times)][:len(quantiles)]


def _no_timer(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
    # The interpreter has no timer: every config "takes" the same time, so the tuner keeps its first config
    # without running any (each is verified on its own after the tuner's pick).
    return 0.0 if quantiles is None else [0.0] * len(quantiles)


def _timed_by(tuner: Any, timer: Callable[..., Any]) -> Callable[[], None]:
    """Give `tuner` `timer` as its do_bench; returns what puts its own back (a timer of the user's, or Triton's)."""
    had, own = "do_bench" in tuner.__dict__, tuner.__dict__.get("do_bench")
    tuner.__dict__["do_bench"] = timer

    def put_back() -> None:
        if had:
            tuner.__dict__["do_bench"] = own
        else:
            tuner.__dict__.pop("do_bench", None)
    return put_back


@contextlib.contextmanager
def verification_timer(autotuners: dict[str, Any], interpret: bool) -> Iterator[None]:
    """While verifying: each tuner times its configs with a few runs (none timed under the interpreter), and
    reads and writes no tunings on disk (a quick pick must not become the benchmark's). Put back on exit: the
    benchmark in the same worker tunes with Triton's own timer."""
    saved = []
    for tuner in autotuners.values():
        saved.append((tuner, _timed_by(tuner, _no_timer if interpret else _few_runs),
                      getattr(tuner, "cache_results", None)))
        if hasattr(tuner, "cache_results"):
            tuner.cache_results = False
    try:
        yield
    finally:
        for tuner, put_back, cache_results in saved:
            put_back()
            if cache_results is not None:
                tuner.cache_results = cache_results
            tuner.cache.clear()  # the picks made on a quick measurement go with it


@contextlib.contextmanager
def first_config_untimed(autotuners: dict[str, Any]) -> Iterator[None]:
    """Within (a generated case): each tuner picks its first config after pruning, timing none, from a tuning
    cache of its own (a key an earlier case tuned must not hand it another config, which nothing compiled for
    this case). Put back on exit: the cases' own tunings and timer."""
    saved = []
    for tuner in autotuners.values():
        saved.append((tuner, _timed_by(tuner, _no_timer), tuner.cache))
        tuner.cache = {}
    try:
        yield
    finally:
        for tuner, put_back, cache in saved:
            put_back()
            tuner.cache = cache
