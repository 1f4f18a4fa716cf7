"""Is a change in time real (core/timing/noise.py), and the samples a timing keeps for it (stats.kept_samples).

Synthetic series only: no GPU, no worker."""

import json
import random
import statistics
import time

import pytest

from workbench.core.events import BenchResult, Timing, event_from_json
from workbench.core.timing.noise import (
    FASTER,
    NO_INTERVAL,
    SLOWER,
    WITHIN_NOISE,
    TimeChange,
    compare,
    geometric_mean_change,
    median_distribution,
    slower_beyond,
)
from workbench.core.timing.stats import MAX_KEPT_SAMPLES, kept_samples, summarize, without_samples


def series(median_ms: float, spread: float, n: int = 200, seed: int = 0) -> list[float]:
    """n samples around `median_ms`, log-normal with relative spread `spread`, as a GPU series roughly is."""
    rng = random.Random(seed)
    return [median_ms * rng.lognormvariate(0.0, spread) for _ in range(n)]


def change_of(before: list[float], after: list[float]) -> TimeChange:
    return compare(statistics.median(before), statistics.median(after), before, after)


def test_identical_distributions_are_within_noise():
    change = change_of(series(0.1, 0.03, seed=1), series(0.1, 0.03, seed=2))
    assert change.label == WITHIN_NOISE
    assert change.low < 1.0 < change.high and change.high - change.low < 0.03
    same = series(0.1, 0.03, seed=3)
    assert change_of(same, same).label == WITHIN_NOISE and change_of(same, same).ratio == 1.0


def test_ten_percent_slower_with_little_noise_is_slower():
    change = change_of(series(0.1, 0.005, seed=1), series(0.11, 0.005, seed=2))
    assert change.label == SLOWER
    assert 1.08 < change.low < change.ratio < change.high < 1.12
    low, high = change.interval_percent
    assert change.describe() == f"{change.percent:+.1f}% [{low:+.1f}%, {high:+.1f}%] slower"
    assert slower_beyond(change, 0.05) and not slower_beyond(change, 0.15)


def test_faster_is_the_mirror_image():
    change = change_of(series(0.11, 0.005, seed=1), series(0.1, 0.005, seed=2))
    assert change.label == FASTER and change.high < 1.0
    assert not slower_beyond(change, 0.0), "a faster kernel never fails the gate"


def test_a_small_shift_under_huge_noise_is_within_noise():
    change = change_of(series(0.1, 0.3, seed=1), series(0.102, 0.3, seed=2))
    assert change.label == WITHIN_NOISE and change.low < 1.0 < change.high
    assert not slower_beyond(change, 0.0)


def test_a_change_under_the_practical_floor_is_within_noise_however_sure():
    change = change_of(series(0.1, 0.0002, seed=1), series(0.1005, 0.0002, seed=2))
    assert change.low > 1.0, "the interval alone excludes no change ..."
    assert change.label == WITHIN_NOISE, "... but half a percent is under PRACTICAL_CHANGE"


@pytest.mark.parametrize("sizes", [(25, 25), (24, 31), (30, 40)])
def test_the_exact_bootstrap_matches_resampling(sizes):
    """The interval computed from binomial tails is the one drawing resamples converges to (odd and even counts)."""
    before, after = series(1.0, 0.05, sizes[0], seed=4), series(1.04, 0.05, sizes[1], seed=5)
    change = change_of(before, after)
    rng = random.Random(6)
    ratios = sorted(statistics.median(rng.choices(after, k=len(after))) /
                    statistics.median(rng.choices(before, k=len(before))) for _ in range(6000))
    drawn_low, drawn_high = ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios))]
    assert change.low == pytest.approx(drawn_low, rel=0.006)
    assert change.high == pytest.approx(drawn_high, rel=0.006)


def test_the_median_distribution_is_a_distribution():
    values = sorted(series(1.0, 0.1, 51, seed=7))
    points = median_distribution(values)
    assert sum(p for _, p in points) == pytest.approx(1.0, abs=1e-9)
    assert [v for v, _ in points] == sorted({v for v, _ in points})
    assert max(points, key=lambda vp: vp[1])[0] == statistics.median(values)
    tied = median_distribution([1.0] * 30)
    assert tied == [(1.0, pytest.approx(1.0))]


def test_no_samples_no_interval_and_never_a_verdict_of_slower():
    change = compare(0.1, 0.2, [], series(0.2, 0.01))
    assert change.label == NO_INTERVAL and change.low is None and change.interval_percent is None
    assert change.why == "the earlier run kept no samples"
    assert change.describe() == "+100.0% (no interval: the earlier run kept no samples)"
    assert not slower_beyond(change, 0.05)
    few = compare(0.1, 0.2, series(0.1, 0.01, n=4), series(0.2, 0.01))
    assert few.label == NO_INTERVAL and "kept 4 samples" in few.why
    assert compare(0.1, 0.2, series(0.1, 0.01), []).why == "this run kept no samples"


def test_the_geometric_mean_of_several_cases():
    cases = [change_of(series(ms, 0.005, seed=i), series(ms * 1.1, 0.005, seed=10 + i))
             for i, ms in enumerate((0.01, 0.1, 1.0))]
    overall = geometric_mean_change(cases)
    assert overall.before_ms == pytest.approx(0.1, rel=0.01) and overall.ratio == pytest.approx(1.1, rel=0.01)
    assert overall.label == SLOWER and overall.low > 1.05
    assert overall.high - overall.low < max(c.high - c.low for c in cases), "three cases know more than one"
    assert geometric_mean_change(cases[:1]) == cases[0]
    lacking = geometric_mean_change(cases[:2] + [TimeChange(1.0, 1.1, why="the earlier run kept no samples")])
    assert lacking.label == NO_INTERVAL and lacking.why == "1 of 3 cases has none"
    alike = geometric_mean_change([TimeChange(1.0, 1.1, why="the earlier run kept no samples")] * 2)
    assert alike.why == "the earlier run kept no samples"
    assert geometric_mean_change([]) is None


def test_one_comparison_costs_a_few_milliseconds():
    """The app compares every case on every save: 200 samples against 200 must stay well under 20 ms."""
    before, after = series(0.1, 0.02, seed=1), series(0.103, 0.02, seed=2)
    before, after = kept_samples(sorted(before)), kept_samples(sorted(after))
    costs = []
    for _ in range(5):
        started = time.perf_counter()
        compare(statistics.median(before), statistics.median(after), before, after)
        costs.append(time.perf_counter() - started)
    assert min(costs) < 0.020, f"{min(costs) * 1e3:.1f} ms"


def test_a_timing_keeps_at_most_200_samples_at_evenly_spaced_ranks():
    long = series(0.1, 0.05, n=5000, seed=8)
    timing = summarize(long, "cuda events")
    kept = timing.samples_ms
    assert timing.samples == 5000 and len(kept) == MAX_KEPT_SAMPLES == 200
    assert kept == sorted(kept) and kept[0] == float(f"{min(long):.4g}") and kept[-1] == float(f"{max(long):.4g}")
    assert statistics.median(kept) == pytest.approx(timing.median_ms, rel=0.002)
    assert all(float(f"{v:.4g}") == v for v in kept) and any(v != x for v, x in zip(kept, sorted(long))), \
        "4 significant digits"
    short = summarize([0.3, 0.1, 0.2], "cuda events")
    assert short.samples_ms == [0.1, 0.2, 0.3]


def test_kept_samples_travel_in_events_and_old_timings_still_load():
    timing = summarize(series(0.1, 0.05, n=500), "cuda events")
    result = BenchResult(case_index=0, label="n=1", kernel=timing)
    again = event_from_json(result.to_json())
    assert again.kernel.samples_ms == timing.samples_ms and len(again.kernel.samples_ms) == 200
    old = json.loads(result.to_json())
    del old["kernel"]["samples_ms"]  # a record written before samples were kept
    assert event_from_json(json.dumps(old)).kernel == Timing(**{**timing.__dict__, "samples_ms": []})


def test_only_the_kernels_series_keeps_its_samples():
    """The reference's and torch.compile's timings drop theirs (bench.py): no comparison reads them."""
    timing = summarize(series(0.1, 0.05), "cuda events")
    bare = without_samples(timing)
    assert bare.samples_ms == [] and bare.median_ms == timing.median_ms and len(timing.samples_ms) == 200
    assert without_samples(None) is None
