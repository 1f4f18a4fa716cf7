"""What a benchmark number means: statistics of timed samples, rates, speed-ups, summaries.

Pure Python, no torch: the parent process (history, reports, the TUI) uses this
as well as the worker. The timers that produce the samples live in timers.py.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Iterable, Sequence

from ..events import BenchResult, Timing, finite_or_none
from ..text import fmt_ms, fmt_rate

BYTES_FROM_KERNEL = "bytes_moved() in kernel.py"
BYTES_LOWER_BOUND = "lower bound: inputs read once + outputs written once"
FLOPS_FROM_KERNEL = "flops() in kernel.py"


# A series has 30 to 5000 samples ([bench] min_samples, max_samples). A record keeps at most this many: enough
# for the interval of a change between runs (timing/noise.py) to be about as wide as the series' own noise
# says, at a few kilobytes a benchmark case rather than tens, in every record of every save.
MAX_KEPT_SAMPLES = 200
KEPT_DIGITS = 4  # significant digits kept: steps of 0.01-0.1%, ten times finer than noise.PRACTICAL_CHANGE


def summarize(samples_ms: Iterable[float], method: str) -> Timing:
    """Median, quartiles and minimum of one timed series (milliseconds), and the samples kept for comparisons.

    The median, not the mean: a GPU series has a long right tail (a clock dip,
    another process) that the mean would chase.
    """
    values = sorted(float(s) for s in samples_ms)
    if not values:
        raise ValueError("no samples to summarize")
    if any(not math.isfinite(v) for v in values):
        raise ValueError("a sample is NaN or infinite")
    # "inclusive": quartiles linearly interpolated between the samples, as numpy's default (one sample: itself)
    q25, _, q75 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return Timing(median_ms=statistics.median(values), q25_ms=q25, q75_ms=q75, min_ms=values[0],
                  samples=len(values), method=method, samples_ms=kept_samples(values))


MEDIAN_Z = 1.959964  # the normal quantile of a two-sided 95% interval


def median_half_width(sorted_ms: Sequence[float]) -> float:
    """The half-width of the median's distribution-free 95% interval, as a fraction of the median (inf when too
    few samples or a median of 0): the interval runs between the order statistics at ranks n/2 -+ z·sqrt(n)/2,
    the binomial's normal approximation, rounded outwards. It assumes independent samples, which consecutive
    GPU samples are not quite (clocks, temperature); timers.SeriesStop asks it for a quarter of noise.PRACTICAL_CHANGE
    and a minimum series length for that reason."""
    n = len(sorted_ms)
    if n < 3:
        return math.inf
    median = statistics.median(sorted_ms)
    if not median > 0:
        return math.inf
    spread = MEDIAN_Z * math.sqrt(n) / 2
    low, high = max(0, math.floor(n / 2 - spread) - 1), min(n - 1, math.ceil(n / 2 + spread))
    return (sorted_ms[high] - sorted_ms[low]) / 2 / median


def kept_samples(sorted_ms: Sequence[float], limit: int = MAX_KEPT_SAMPLES) -> list[float]:
    """The samples a record keeps: all of them up to `limit`, else the ones at `limit` evenly spaced ranks of the
    sorted series (the first and the last among them), each to KEPT_DIGITS significant digits.

    Evenly spaced ranks, not a random draw: the kept values are the series' quantiles, so their median and spread
    are the whole series' (a draw would add its own noise), and the same series always keeps the same values.
    Their order in time is not kept: the comparison needs the distribution, not the sequence. An interval from
    the kept samples treats them as the sample, so for a longer series it is wider than the whole count would
    make it; on purpose, since consecutive samples on a GPU are correlated (clocks, temperature) and the whole
    count overstates what they know.
    """
    n = len(sorted_ms)
    ranks = range(n) if n <= limit else (round(j * (n - 1) / (limit - 1)) for j in range(limit))
    return [float(f"{sorted_ms[i]:.{KEPT_DIGITS}g}") for i in ranks]


def without_samples(timing: Timing | None) -> Timing | None:
    """The timing without its kept samples: for the series no comparison reads (the reference's, torch.compile's),
    which would otherwise triple what a record holds."""
    return dataclasses.replace(timing, samples_ms=[]) if timing is not None and timing.samples_ms else timing


def relative_spread(timing: Timing) -> float:
    """IQR over the median: 0.01 means the middle half of the samples lie within 1%."""
    return (timing.q75_ms - timing.q25_ms) / timing.median_ms if timing.median_ms > 0 else float("inf")


def rate_per_s(amount: float | None, timing: Timing | None) -> float | None:
    """`amount` per second at the timing's median (bytes -> B/s, flops -> FLOP/s)."""
    if amount is None or timing is None or timing.median_ms <= 0:
        return None
    return finite_or_none(amount / (timing.median_ms * 1e-3))


def speedup(baseline: Timing | None, kernel: Timing | None) -> float | None:
    """How many times faster the kernel is than the baseline (2.0 = twice as fast)."""
    if baseline is None or kernel is None or kernel.median_ms <= 0:
        return None
    return finite_or_none(baseline.median_ms / kernel.median_ms)


def fraction(achieved: float | None, ceiling: float | None) -> float | None:
    if achieved is None or not ceiling:
        return None
    return finite_or_none(achieved / ceiling)


def tensor_bytes(values: Iterable[Any]) -> int:
    """Bytes held by the tensors among `values` (duck-typed: numel() and element_size())."""
    total = 0
    for value in values:
        if hasattr(value, "numel") and hasattr(value, "element_size"):
            total += int(value.numel()) * int(value.element_size())
    return total


def lower_bound_bytes(inputs: Iterable[Any], outputs: Iterable[Any]) -> int:
    """The fewest bytes any implementation must move: each input read once, each output written once."""
    return tensor_bytes(inputs) + tensor_bytes(outputs)


def geometric_mean(values: Iterable[float | None]) -> float | None:
    """The geometric mean of the positive values given (None for none)."""
    usable = [v for v in values if v is not None and v > 0]
    return statistics.geometric_mean(usable) if usable else None






def bench_summary(results: Sequence[BenchResult]) -> str:
    """One line for `workbench history`: how many cases, the best bandwidth, the speed-ups."""
    if not results:
        return ""
    failed = [r.case_index for r in results if r.recheck and r.recheck != "passed"]
    if failed:
        return f"bench: RE-CHECK FAILED on case {', '.join(map(str, failed))} (no time posted)"
    timed = [r for r in results if r.kernel is not None]
    withheld = [r for r in results if r.withheld and r.kernel is None]
    held = (f"TIME NOT POSTED on case {', '.join(str(r.case_index) for r in withheld)} ({withheld[0].withheld})"
            if withheld else "")
    if not timed:
        return f"bench: {held}" if held else f"bench: {len(results)} cases, none timed"
    parts = [f"bench {len(timed)} case{'s' if len(timed) != 1 else ''}"]
    if len(timed) == 1:
        parts.append(fmt_ms(timed[0].kernel.median_ms))
    best = max(timed, key=lambda r: r.gbps or 0.0)
    if best.gbps:
        share = f" ({best.bandwidth_fraction:.0%} of copy)" if best.bandwidth_fraction else ""
        parts.append(f"up to {fmt_rate(best.gbps, 'GB/s')}{share}")
    vs_ref = geometric_mean(r.speedup_vs_reference for r in timed)
    vs_compiled = geometric_mean(r.speedup_vs_compiled for r in timed)
    if vs_ref:
        parts.append(f"{vs_ref:.2f}x torch")
    if vs_compiled:
        parts.append(f"{vs_compiled:.2f}x compile")
    if held:
        parts.append(held)
    return ", ".join(parts)


def bench_rows(results: Sequence[BenchResult]) -> list[dict[str, Any]]:
    """Bench results as record rows: every field, plus the kernel's median on top for `workbench diff`."""
    rows = []
    for result in results:
        data = result.to_dict()
        data.pop("type", None)
        data["median_ms"] = result.kernel.median_ms if result.kernel else None
        rows.append(data)
    return rows
