"""Autotune introspection and the compile watch, on real Triton objects with a fake launch (no GPU).

The Autotuner is Triton's own; only the JIT function's launch and the tuner's
benchmarker are replaced, so the listener, the caches and the failure paths are
the installed Triton's.
"""

import pytest
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from workbench.core.timing import autotune
from workbench.core.timing.autotune import (
    FAILED_TO_COMPILE,
    OUT_OF_RESOURCES,
    PRUNED,
    UNTIMED,
    AutotuneRecorder,
    classify_failure,
    config_ms,
    config_timings,
    format_key,
)
from workbench.core.timing.compilewatch import CompileWatch, cached_variants

HAS_LISTENER = autotune._autotuning_knobs() is not None
needs_listener = pytest.mark.skipif(not HAS_LISTENER, reason="this Triton has no autotuning listener")

# Simulated times per BLOCK; 4096 runs out of shared memory, 2048 fails in ptxas.
TIMES_MS = {64: 0.30, 128: 0.12, 256: 0.20}


def make_tuner(prune=None):
    @triton.jit
    def copy_kernel(x_ptr, n, BLOCK: tl.constexpr):
        pass

    def fake_launch(*args, **kwargs):
        block = kwargs["BLOCK"]
        if block == 4096:
            raise OutOfResources(300000, 232448, "shared memory")
        if block == 2048:
            from triton.runtime.errors import PTXASError
            raise PTXASError("ptxas fatal: too many registers")
        fake_launch.last = block

    copy_kernel.run = fake_launch  # the launch is faked; everything else is Triton's

    def fake_do_bench(kernel_call, quantiles=None):
        kernel_call()
        ms = TIMES_MS[fake_launch.last]
        return [ms, ms * 0.9, ms * 1.1]

    configs = [triton.Config({"BLOCK": b}, num_warps=4) for b in (64, 128, 256, 4096, 2048, 8192)]
    return triton.autotune(configs=configs, key=["n"], do_bench=fake_do_bench,
                           prune_configs_by=prune or {"early_config_prune": lambda cs, nargs, **kw: cs[:5]})(
        copy_kernel)


def by_block(report):
    return {t.config.split(",")[0]: t for t in report.timings}


@needs_listener
def test_listener_reports_every_config_with_its_fate():
    tuner = make_tuner()
    with AutotuneRecorder({"copy_kernel": tuner}) as recorder:
        tuner.run(None, 1000)
    (report,) = recorder.reports(case_index=7)
    assert report.source.startswith("listener")
    assert report.kernel == "copy_kernel" and report.case_index == 7
    assert report.key == "n=1000"
    assert report.picked.startswith("BLOCK=128")
    rows = by_block(report)
    assert rows["BLOCK=64"].ms == pytest.approx(0.30) and rows["BLOCK=64"].status == "ok"
    assert rows["BLOCK=4096"].status == OUT_OF_RESOURCES and rows["BLOCK=4096"].ms is None
    assert rows["BLOCK=2048"].status == FAILED_TO_COMPILE
    assert rows["BLOCK=8192"].status == PRUNED
    assert report.tuning_s is not None and report.tuning_s >= 0


def test_object_fallback_without_listener(monkeypatch):
    monkeypatch.setattr(autotune, "_autotuning_knobs", lambda: None)
    tuner = make_tuner()
    with AutotuneRecorder({"copy_kernel": tuner}) as recorder:
        tuner.run(None, 1000)
    (report,) = recorder.reports(case_index=0)
    assert report.source == "autotuner object"
    assert report.picked.startswith("BLOCK=128")
    rows = by_block(report)
    assert rows["BLOCK=128"].ms == pytest.approx(0.12)
    assert rows["BLOCK=4096"].status == OUT_OF_RESOURCES
    assert rows["BLOCK=8192"].status == PRUNED
    assert "_bench" not in tuner.__dict__ and "do_bench" not in tuner.__dict__


def test_key_pruned_to_one_config_was_never_timed():
    tuner = make_tuner(prune={"early_config_prune": lambda cs, nargs, **kw: cs[1:2]})
    with AutotuneRecorder({"copy_kernel": tuner}) as recorder:
        tuner.run(None, 10)
    (report,) = recorder.reports(case_index=0)
    assert report.picked.startswith("BLOCK=128")
    statuses = {t.config.split(",")[0]: t.status for t in report.timings}
    # Some Tritons skip timing a lone config, others time it anyway.
    assert statuses["BLOCK=128"] in (UNTIMED, "ok") and statuses["BLOCK=64"] == PRUNED


@needs_listener
def test_recorder_restores_the_tuner_and_the_listener():
    from triton import knobs

    heard = []
    knobs.autotuning.listener = lambda **kw: heard.append(kw["key"])
    try:
        tuner = make_tuner()
        original_bench = tuner._bench
        with AutotuneRecorder({"copy_kernel": tuner}):
            tuner.run(None, 5)
        assert heard == [(5,)], "a listener installed before the recorder still hears tunings"
        assert "_bench" not in tuner.__dict__ and "do_bench" not in tuner.__dict__
        assert tuner._bench.__func__ is original_bench.__func__
        assert knobs.autotuning.listener is not None and knobs.autotuning.listener.__name__ == "<lambda>"
    finally:
        knobs.autotuning.listener = None


def test_each_case_tunes_afresh():
    tuner = make_tuner()
    tuner.run(None, 1000)  # tuned once already (the verify stage, say)
    with AutotuneRecorder({"copy_kernel": tuner}) as recorder:
        tuner.run(None, 1000)
    assert len(recorder.reports(case_index=1)) == 1


def test_helpers():
    assert config_ms([0.5, 0.4, 0.6]) == 0.5 and config_ms(0.25) == 0.25
    assert config_ms(float("inf")) is None and config_ms([float("inf")] * 3) is None and config_ms(None) is None
    assert format_key((4096, 512, "torch.float16"), ["M", "N"]) == "M=4096, N=512, torch.float16"
    assert classify_failure(OutOfResources(1, 0, "shared memory")) == OUT_OF_RESOURCES
    assert classify_failure(RuntimeError("x")) == FAILED_TO_COMPILE
    configs = [triton.Config({"B": 1}), triton.Config({"B": 2})]
    rows = config_timings(configs, {configs[0]: [1.0, 1.0, 1.0]}, {})
    assert [r.status for r in rows] == ["ok", PRUNED]


def test_compile_watch_hears_the_compilation_listener_and_chains():
    from triton import knobs

    earlier = []
    knobs.compilation.listener = lambda **kw: earlier.append(kw)
    try:
        with CompileWatch() as watch:
            knobs.compilation.listener(src=None, metadata={}, metadata_group={}, times=None, cache_hit=False)
        assert watch.compiled == 1 and len(earlier) == 1
        with watch:  # re-entered for the next series: counts from zero
            pass
        assert watch.compiled == 0
        assert knobs.compilation.listener.__name__ == "<lambda>"
    finally:
        knobs.compilation.listener = None


def test_compile_watch_counts_new_variants_in_jit_caches():
    class FakeJit:
        device_caches = {0: ({"a": 1}, {}, None, None, None)}

    fn = FakeJit()
    assert cached_variants(fn) == 1
    with CompileWatch([fn]) as watch:
        fn.device_caches[0][0]["b"] = 2
    assert watch.compiled == 1
