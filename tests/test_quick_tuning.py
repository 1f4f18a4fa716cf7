"""While verifying, autotuners pick with a few runs per config; the benchmark after them tunes with Triton's timer."""

import pytest
import torch
import triton
import triton.language as tl

from workbench.core.verify import quick_tuning
from workbench.core.verify.quick_tuning import VERIFY_TIMED_RUNS, verification_timer

RUNS: list[int] = []


def _count(nargs):
    RUNS.append(nargs["BLOCK"])


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, pre_hook=_count), triton.Config({"BLOCK": 128}, pre_hook=_count)],
                 key=["n"], cache_results=True)
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def _double(x):
    out = torch.empty_like(x)
    double_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out


def test_the_timer_is_put_back_with_the_tuners_disk_cache_setting_and_its_picks_dropped():
    tuner = double_kernel
    tuner.cache[("stale",)] = tuner.configs[0]
    disk_cache = tuner.cache_results  # True, unless the interpreter is on (Triton keeps no tunings there)
    marker = object()
    tuner.__dict__["do_bench"] = marker  # a timer of the user's own (autotune(do_bench=...)) stays theirs
    try:
        with verification_timer({"double_kernel": tuner}, interpret=False):
            assert tuner.__dict__["do_bench"] is quick_tuning._few_runs
            assert tuner.cache_results is False  # a quick pick is never written to (or read from) the disk cache
            tuner.cache[("picked while verifying",)] = tuner.configs[1]
        assert tuner.__dict__["do_bench"] is marker and tuner.cache_results is disk_cache
        assert tuner.cache == {}
    finally:
        tuner.__dict__.pop("do_bench", None)
    with verification_timer({"double_kernel": tuner}, interpret=True):
        assert tuner.__dict__["do_bench"] is quick_tuning._no_timer
        assert quick_tuning._no_timer(lambda: pytest.fail("the interpreter's tuner runs nothing"),
                                      quantiles=(0.5, 0.2, 0.8)) == [0.0, 0.0, 0.0]
    assert "do_bench" not in tuner.__dict__  # Triton's own timer again, for the benchmark


def test_a_timer_that_fails_puts_everything_back():
    tuner = double_kernel
    disk_cache = tuner.cache_results
    with pytest.raises(RuntimeError):
        with verification_timer({"double_kernel": tuner}, interpret=False):
            raise RuntimeError("a case crashed")
    assert "do_bench" not in tuner.__dict__ and tuner.cache_results is disk_cache


@pytest.mark.gpu
def test_on_a_gpu_each_config_runs_a_few_times_and_the_pick_is_one_of_them():
    x = torch.randn(10_000, device="cuda")
    RUNS.clear()
    with verification_timer({"double_kernel": double_kernel}, interpret=False):
        out = _double(x)
    torch.testing.assert_close(out, x * 2)
    # each config: one untimed run and VERIFY_TIMED_RUNS timed ones (a kernel that changes its inputs still
    # runs on its own output), then the pick's own launch
    assert RUNS.count(64) >= 1 + VERIFY_TIMED_RUNS and RUNS.count(128) >= 1 + VERIFY_TIMED_RUNS
    assert len(RUNS) == 2 * (1 + VERIFY_TIMED_RUNS) + 1
    timings = double_kernel.configs_timings
    assert all(0 < t[0] < float("inf") for t in timings.values())


def test_a_generated_case_takes_the_first_config_untimed_and_leaves_the_cases_tunings_alone():
    """A generated case forces no config: its tuners pick their first config after pruning without timing any,
    from a cache of their own; the tunings and the timer of the cases around it are put back after."""
    tuner = double_kernel
    with verification_timer({"double_kernel": tuner}, interpret=False):
        tuner.cache[(10_000, "torch.float32")] = tuner.configs[1]  # what an earlier case tuned for this key
        with quick_tuning.first_config_untimed({"double_kernel": tuner}):
            assert tuner.__dict__["do_bench"] is quick_tuning._no_timer and tuner.cache == {}
            timings = {config: tuner.do_bench(lambda: pytest.fail("nothing is timed"), quantiles=(0.5, 0.2, 0.8))
                       for config in tuner.configs}
            assert min(timings, key=timings.get) is tuner.configs[0]  # Triton's pick among equal times: the first
            tuner.cache[(5, "torch.float32")] = tuner.configs[0]
        assert tuner.__dict__["do_bench"] is quick_tuning._few_runs
        assert tuner.cache == {(10_000, "torch.float32"): tuner.configs[1]}
    assert "do_bench" not in tuner.__dict__


def test_recording_a_generated_case_compiles_only_the_first_config_its_pruning_keeps(monkeypatch):
    from triton.runtime.autotuner import Autotuner

    from workbench.core.timing import compiled

    compiled_configs = []

    def run(self, *args, **kwargs):
        compiled_configs.append(kwargs["BLOCK"])

    monkeypatch.setattr(double_kernel.fn, "run", run.__get__(double_kernel.fn))
    monkeypatch.setattr(Autotuner, "prune_configs", lambda self, kwargs: self.configs[::-1])
    x = torch.empty(100)
    for first_only in (False, True):
        compiled_configs.clear()
        with compiled.compile_only(first_config_only=first_only):
            double_kernel[(1,)](x, x, 100)
        assert compiled_configs == ([128] if first_only else [128, 64])
