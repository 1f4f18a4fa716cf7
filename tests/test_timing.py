"""Statistics of timed samples, rates, speed-ups, byte counts and the summary line (pure: no GPU)."""

import math
import statistics

import pytest
import torch

from workbench.core.events import BenchResult, Timing
from workbench.core.text import fmt_ms as format_ms
from workbench.core.timing.stats import (
    BYTES_LOWER_BOUND,
    bench_rows,
    bench_summary,
    fraction,
    geometric_mean,
    lower_bound_bytes,
    rate_per_s,
    relative_spread,
    speedup,
    summarize,
)


def timing(median_ms, q25=None, q75=None, samples=100, method="cuda events per call"):
    return Timing(median_ms=median_ms, q25_ms=q25 if q25 is not None else median_ms,
                  q75_ms=q75 if q75 is not None else median_ms, min_ms=median_ms, samples=samples, method=method)


def test_quantiles_match_statistics_module():
    samples = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 7.5]
    t = summarize(samples, "events")
    q25, q50, q75 = statistics.quantiles(samples, n=4, method="inclusive")
    assert t.median_ms == pytest.approx(q50)
    assert t.q25_ms == pytest.approx(q25)
    assert t.q75_ms == pytest.approx(q75)
    assert t.min_ms == 1.0 and t.samples == 7 and t.method == "events"


def test_median_ignores_the_right_tail():
    # A clock dip or another process gives a few slow samples: the median must not move.
    steady = [1.0] * 95
    t = summarize(steady + [50.0] * 5, "events")
    assert t.median_ms == 1.0
    assert relative_spread(t) == 0.0


def test_summarize_refuses_empty_and_non_finite():
    with pytest.raises(ValueError):
        summarize([], "events")
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")], "events")


def test_single_sample():
    t = summarize([2.5], "events")
    assert (t.median_ms, t.q25_ms, t.q75_ms, t.min_ms) == (2.5, 2.5, 2.5, 2.5)


def test_rates_and_fractions():
    t = timing(2.0)  # 2 ms
    assert rate_per_s(4e9, t) == pytest.approx(2e12)  # 4 GB in 2 ms = 2 TB/s
    assert rate_per_s(None, t) is None and rate_per_s(1.0, None) is None
    assert rate_per_s(1.0, timing(0.0)) is None
    assert fraction(1500.0, 3000.0) == 0.5
    assert fraction(1500.0, None) is None and fraction(None, 3000.0) is None


def test_speedup_is_baseline_over_kernel():
    assert speedup(timing(3.0), timing(1.5)) == 2.0
    assert speedup(None, timing(1.0)) is None
    assert speedup(timing(1.0), None) is None


def test_lower_bound_bytes_counts_inputs_once_and_outputs_once():
    x = torch.empty(8, 16, dtype=torch.bfloat16)
    w = torch.empty(16, dtype=torch.bfloat16)
    out = torch.empty(8, 16, dtype=torch.bfloat16)
    # Scalars (eps) move no bytes.
    assert lower_bound_bytes([x, w, 1e-6], [out]) == (128 + 16 + 128) * 2
    assert lower_bound_bytes([torch.empty(3, dtype=torch.float64)], []) == 24


def test_geometric_mean_skips_missing():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([None, 4.0]) == pytest.approx(4.0)
    assert geometric_mean([None]) is None


def test_format_ms_scales():
    assert format_ms(0.0123) == "12.3 µs"
    assert format_ms(0.412) == "412 µs"
    assert format_ms(12.5) == "12.500 ms"
    assert format_ms(2500.0) == "2.50 s"
    assert format_ms(None) == "-"


def result(case_index, median_ms=None, gbps=None, recheck="passed", vs_ref=None, vs_compiled=None):
    return BenchResult(case_index=case_index, label=f"n={case_index}", kernel=timing(median_ms) if median_ms else None,
                       gbps=gbps, bandwidth_fraction=gbps / 3000 if gbps else None, recheck=recheck,
                       speedup_vs_reference=vs_ref, speedup_vs_compiled=vs_compiled, bytes_source=BYTES_LOWER_BOUND)


def test_bench_summary_names_best_bandwidth_and_geomean_speedups():
    line = bench_summary([result(0, 0.1, 1500.0, vs_ref=2.0, vs_compiled=1.0),
                          result(1, 0.2, 2700.0, vs_ref=8.0, vs_compiled=1.0)])
    assert line.startswith("bench 2 cases")
    assert "2700 GB/s (90% of copy)" in line
    assert "4.00x torch" in line and "1.00x compile" in line


def test_bench_summary_says_when_a_recheck_failed():
    line = bench_summary([result(0, 0.1, 1500.0), result(3, None, recheck="failed: 7 elements outside")])
    assert "RE-CHECK FAILED" in line and "3" in line


def test_bench_summary_empty():
    assert bench_summary([]) == ""
    assert "none timed" in bench_summary([result(0)])


def test_bench_rows_put_the_median_on_top_for_diff():
    rows = bench_rows([result(4, 0.25, 100.0)])
    assert rows[0]["case_index"] == 4 and rows[0]["median_ms"] == 0.25
    assert rows[0]["kernel"]["median_ms"] == 0.25 and "type" not in rows[0]
    assert bench_rows([result(5)])[0]["median_ms"] is None
    assert not math.isnan(rows[0]["gbps"])


def test_graph_replay_for_short_calls_and_small_footprints():
    """Per-call events miss the write-back of what a call leaves in L2: calls moving under WRITEBACK_L2S
    L2s are timed by graph replay, which counts it; larger, longer or unmeasured calls keep per-call events."""
    from types import SimpleNamespace

    from workbench.core.project.config import BenchConfig
    from workbench.core.timing.timers import (
        WRITEBACK_BELOW_MS,
        WRITEBACK_L2S,
        graph_reason,
    )

    config = BenchConfig()
    h100 = SimpleNamespace(l2_bytes=50 << 20)
    assert "under 20 µs" in graph_reason(timing(0.015), config, h100, None)
    small = 64 << 20  # 8192 x 2048 bf16 in and out
    assert "under 16 L2s" in graph_reason(timing(0.027), config, h100, small)
    assert graph_reason(timing(0.7), config, h100, WRITEBACK_L2S * h100.l2_bytes) == ""  # a 2 GiB copy
    assert graph_reason(timing(2 * WRITEBACK_BELOW_MS), config, h100, small) == ""  # write-back is noise
    assert graph_reason(timing(0.027), config, h100, None) == ""  # bytes unknown
    assert graph_reason(timing(0.027), config, SimpleNamespace(l2_bytes=None), small) == ""  # L2 unknown


class FakeTimers:
    """timers.measure's GPU steps replaced by recorders: which series it asks for, and what it posts."""

    def __init__(self, monkeypatch, call_ms, syncs="", graph_fails=False):
        from workbench.core.timing import timers

        self.series = []  # "brief" or "full", in order
        self.graph_warm = []  # time_with_graph's `warm`, per call
        monkeypatch.setattr(timers, "estimate_ms", lambda fn, flush: call_ms + 0.03)  # flush + call
        monkeypatch.setattr(timers, "host_sync", lambda fn: syncs)

        def events(fn, config, flush=None, watch=None, brief=False, per_iteration=None):
            self.series.append("brief" if brief else "full")
            return [call_ms] * (config.min_samples if brief else 500)

        def graph(fn, config, flush, watch=None, warm=False):
            self.graph_warm.append(warm)
            if graph_fails:
                raise RuntimeError("operation not permitted when stream is capturing")
            return [call_ms * 1.1] * config.min_samples, 40

        monkeypatch.setattr(timers, "time_with_events", events)
        monkeypatch.setattr(timers, "time_with_graph", graph)
        monkeypatch.setattr(timers, "recover_from_failed_capture", lambda: None)

    def measure(self, footprint):
        from types import SimpleNamespace

        from workbench.core.project.config import BenchConfig
        from workbench.core.timing.timers import measure

        watch = SimpleNamespace(compiled=0, witness="", proof="no compile seen")
        flusher = SimpleNamespace(l2_bytes=50 << 20, label="L2 flushed")
        return measure(lambda: None, BenchConfig(), flusher, watch, "kernel", footprint)


def test_a_call_bound_for_graph_replay_by_its_footprint_gets_a_brief_per_call_series(monkeypatch):
    timers = FakeTimers(monkeypatch, call_ms=0.027)
    measured = timers.measure(footprint=64 << 20)
    assert timers.series == ["brief"]
    assert measured.timing.method.startswith("cuda graph") and measured.timing.median_ms == pytest.approx(0.0297)
    assert measured.per_call.samples == 30
    assert any("per-call events gave 27.0 µs (30 calls)" in n for n in measured.notes), measured.notes
    assert timers.graph_warm == [True]  # the per-call series just warmed the GPU up


class FakeGraphCuda:
    """timers.cuda for time_with_graph on the CPU: counts replays and gives every event pair `ms` apart."""

    def __init__(self):
        self.replays = 0

    class CUDAGraph:
        pass

    @staticmethod
    def graph(_graph):
        import contextlib

        return contextlib.nullcontext()

    def replay(self, _graph):
        self.replays += 1

    Event = staticmethod(lambda enable_timing=True: object())
    current_stream = staticmethod(lambda: None)
    record = staticmethod(lambda event, stream=None: None)
    wait_for = staticmethod(lambda event: None)
    synchronize = staticmethod(lambda: None)
    elapsed_time = staticmethod(lambda start, end: 1.0)


def test_a_graph_replayed_after_its_per_call_series_is_warmed_up_briefly(monkeypatch):
    """warm=True (measure's graph, right after the call's own series): REWARM_MS of replays, not warmup_ms again."""
    from workbench.core.project.config import BenchConfig
    from workbench.core.timing import timers

    monkeypatch.setattr(timers, "estimate_ms", lambda fn, flush: 0.01)  # 200 calls per replay: 2 ms a replay
    config = BenchConfig(warmup_ms=200.0, rep_ms=40.0, median_within_pct=0)
    replays = {}
    for warm in (False, True):
        fake = FakeGraphCuda()
        monkeypatch.setattr(timers, "cuda", fake)
        samples, calls = timers.time_with_graph(lambda: None, config, lambda: None, warm=warm)
        assert calls == timers.GRAPH_MAX_CALLS and samples
        replays[warm] = fake.replays - 2 * len(samples)  # the warm-up's replays, work and flush-only each
    assert replays[False] == 2 * 100  # 200 ms of 2 ms replays
    assert replays[True] == 2 * 10  # REWARM_MS = 20 ms
    assert timers.REWARM_MS < config.warmup_ms


def test_per_call_events_posted_after_a_brief_series_come_from_a_full_one(monkeypatch):
    """A brief series is never posted: when graph replay is impossible the call is timed again in full."""
    for kwargs, why in (({"syncs": "torch.Tensor.item"}, "synchronizes with the host"),
                        ({"graph_fails": True}, "CUDA-graph capture failed")):
        timers = FakeTimers(monkeypatch, call_ms=0.027, **kwargs)
        measured = timers.measure(footprint=64 << 20)
        assert timers.series == ["brief", "full"]
        assert measured.timing.method.startswith("cuda events") and measured.timing.samples == 500
        assert any(why in n and "per-call events kept" in n for n in measured.notes), measured.notes


def test_calls_not_bound_for_graph_replay_by_footprint_get_the_full_series(monkeypatch):
    for footprint, call_ms, method in ((None, 0.027, "cuda events"),  # bytes unknown
                                       (4 << 30, 1.5, "cuda events"),  # 4 GiB: over 16 L2s
                                       (64 << 20, 3.0, "cuda events"),  # too long for the write-back to matter
                                       (None, 0.010, "cuda graph")):  # under 20 µs: decided by the series
        timers = FakeTimers(monkeypatch, call_ms=call_ms)
        measured = timers.measure(footprint)
        assert timers.series == ["full"], (footprint, call_ms)
        assert measured.timing.method.startswith(method)
