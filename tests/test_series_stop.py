"""A timed series stops before rep_ms once its median is settled ([bench] median_within_pct; timers.SeriesStop),
and never leaves the GPU waiting on the host's look at it."""

import random
import statistics

import pytest

from workbench.core.project.config import BenchConfig, ConfigError, ProjectConfig
from workbench.core.timing.stats import median_half_width
from workbench.core.timing.timers import CHECK_EVERY_MS, STABLE_MIN_MS, SeriesStop


def fake_series(stop, draw):
    """SeriesStop.run over a fake stream: each chunk's samples drawn when enqueued; the log of what happened."""
    log = []

    def enqueue(k):
        chunk = [draw() for _ in range(k)]
        log.append(("enqueue", k))
        return chunk

    def read(chunk):
        log.append(("read", len(chunk)))
        return chunk

    return stop.run(enqueue, read), log


def test_a_steady_series_stops_soon_after_its_least_length():
    rng = random.Random(1)
    config = BenchConfig()  # rep_ms 1000, median_within_pct 0.25
    sample_ms = 0.05  # a 50 µs call: 20,000 samples in a full second
    most = 5000
    stop = SeriesStop(config, sample_ms, most)
    samples, log = fake_series(stop, lambda: 0.05 * (1 + rng.gauss(0, 0.004)))  # 0.4% noise
    assert stop.least == STABLE_MIN_MS / sample_ms == 2000
    assert stop.chunk == CHECK_EVERY_MS / sample_ms == 400
    # settled at the first look past `least`, plus the chunk that was already running
    assert stop.least <= len(samples) <= stop.least + 2 * stop.chunk < most
    assert median_half_width(sorted(samples)) <= 0.0025


def test_a_noisy_series_runs_its_whole_length():
    rng = random.Random(2)
    stop = SeriesStop(BenchConfig(), 0.05, 5000)
    samples, _ = fake_series(stop, lambda: 0.05 * (1 + rng.expovariate(1.0)))  # a spread of ~70%: never settled
    assert len(samples) == 5000


def test_off_brief_and_long_calls_keep_the_old_series():
    rng = random.Random(3)
    steady = lambda: 1.0 + rng.gauss(0, 1e-4)  # noqa: E731
    for stop, length in ((SeriesStop(BenchConfig(median_within_pct=0), 0.05, 5000), 5000),  # turned off
                         (SeriesStop(BenchConfig(), 0.05, 30, brief=True), 30)):  # a brief series: min_samples
        samples, log = fake_series(stop, steady)
        assert len(samples) == length and log == [("enqueue", length), ("read", length)]
    # a 10 ms call: 100 ms is 10 samples, below min_samples (30), so 30 at least
    stop = SeriesStop(BenchConfig(), 10.0, 100)
    assert stop.least == 30 and stop.chunk == 2
    samples, _ = fake_series(stop, steady)
    assert 30 <= len(samples) <= 34


def test_each_chunk_is_read_only_while_the_next_one_runs():
    rng = random.Random(4)
    stop = SeriesStop(BenchConfig(), 0.05, 5000)
    _, log = fake_series(stop, lambda: 0.05 * (1 + rng.expovariate(1.0)))
    last_enqueue = max(i for i, (what, _) in enumerate(log) if what == "enqueue")
    enqueued = read = 0
    for i, (what, _) in enumerate(log):
        if what == "enqueue":
            enqueued += 1
            continue
        if i < last_enqueue:  # before the series' end, a chunk is read only with the next one on the stream
            assert enqueued - read >= 2, log[:i + 1]
        read += 1
    assert enqueued == read == 13  # 5000 samples in chunks of 400


def test_the_medians_interval_is_as_wide_as_the_samples_say():
    rng = random.Random(5)
    for n, sigma in ((400, 0.01), (2000, 0.004)):
        halves = [median_half_width(sorted(1 + rng.gauss(0, sigma) for _ in range(n))) for _ in range(200)]
        expected = 1.96 * 1.2533 * sigma / n ** 0.5  # the median's standard error for normal samples
        assert statistics.median(halves) == pytest.approx(expected, rel=0.25)
    assert median_half_width([1.0, 1.0]) == float("inf") and median_half_width([0.0] * 10) == float("inf")


def test_the_setting_is_checked(tmp_path):
    assert ProjectConfig.from_dict({"bench": {"median_within_pct": 0}}).bench.median_within_pct == 0
    for bad in (-1, 100):
        with pytest.raises(ConfigError, match="median_within_pct"):
            ProjectConfig.from_dict({"bench": {"median_within_pct": bad}})
