"""The autotuner's timer on bound primitives (timing/tuner_timer.py): Triton's plan and statistics, and a
kernel.py that fakes torch.cuda.Event's time cannot make it plan hundreds of millions of runs. The CUDA
primitives are faked with a clock that advances by the calls made; a real GPU: test_timing_hacks_gpu.py."""

import statistics
from types import SimpleNamespace

import pytest

from workbench.core.timing import tuner_timer


class FakeCuda:
    """Events whose time is the number of fn() calls made before their record, in ms."""

    def __init__(self):
        self.calls = 0

    def Event(self, enable_timing=True):  # noqa: N802 - as torch.cuda.Event
        return SimpleNamespace(at=None)

    def record(self, event, stream=None):
        event.at = self.calls

    def elapsed_time(self, start, end):
        return float(end.at - start.at)

    def synchronize(self):
        pass


@pytest.fixture
def clock(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(tuner_timer, "cuda", fake)
    monkeypatch.setattr(tuner_timer, "_flusher", lambda: lambda: None)
    return fake


def test_the_plan_is_tritons_and_the_runs_are_capped(clock, monkeypatch):
    def fn():
        clock.calls += 1

    assert tuner_timer.do_bench(fn, warmup=25, rep=100) == 1.0
    assert clock.calls == 1 + 5 + 25 + 100  # one untimed, 5 to estimate, warm-up and repeats of 1 ms each
    monkeypatch.setattr(tuner_timer, "MOST_RUNS", 50)
    clock.calls = 0
    tuner_timer.do_bench(fn, warmup=25, rep=100)
    assert clock.calls == 1 + 5 + 25 + 50


def test_quantiles_and_statistics_as_triton_returns_them():
    times = [4.0, 1.0, 3.0, 2.0, 5.0]
    assert tuner_timer.summarize(times, (0.5, 0.2, 0.8), "mean") == pytest.approx([3.0, 1.8, 4.2])
    assert tuner_timer.summarize(times, (0.5,), "mean") == 3.0
    assert tuner_timer.summarize(times, None, "mean") == statistics.mean(times)
    assert tuner_timer.summarize(times, None, "min") == 1.0 and tuner_timer.summarize(times, None, "all") == times


def test_the_recorder_swaps_in_the_bound_timer_only_for_tritons_default(monkeypatch):
    from workbench.core.timing.autotune import AutotuneRecorder

    calls = []
    monkeypatch.setattr(tuner_timer, "do_bench", lambda kernel_call, *a, **k: calls.append("bound") or 1.0)
    own = lambda kernel_call, quantiles=None: 7.0  # noqa: E731 - a do_bench kernel.py gives its tuner
    default = SimpleNamespace(_do_bench=None, do_bench=lambda *a, **k: "triton's", _bench=lambda *a, **k: None)
    chosen = SimpleNamespace(_do_bench=own, do_bench=own, _bench=lambda *a, **k: None)
    recorder = AutotuneRecorder({})
    recorder._wrap_bench("default", default)
    recorder._wrap_bench("chosen", chosen)
    assert default.__dict__["do_bench"](lambda: None, quantiles=(0.5,)) == 1.0 and calls == ["bound"]
    assert chosen.__dict__["do_bench"](lambda: None, quantiles=(0.5,)) == 7.0 and calls == ["bound"]
