"""Is a change in time real? The ratio of two series' medians, its confidence interval, and a word for it.

Pure Python (the standard library's `math` and `statistics` only): the parent process compares runs (the
bench command's report, its regression gate, the app's Changes tab on every save), and it never imports
numpy. The samples compared are the ones a Timing keeps (stats.kept_samples: at most 200, sorted).

**The interval** is the percentile bootstrap's for the ratio of medians (after / before), at CONFIDENCE,
computed exactly rather than by drawing resamples: the median of a resample of a sorted series x[0..k-1]
is at most x[i] exactly when at least (k+1)/2 of its k draws are, and how many draws are is binomial
(k, (i+1)/k), so each median's bootstrap distribution is a few binomial tails (Efron's exact bootstrap of
the median). The two series are resampled independently, so the ratio's distribution is the product of
the two, and its 2.5% and 97.5% points are read off it. Exact, so the same samples always give the same
interval (no seed, no Monte Carlo error), and it costs 0.3-2 ms a case (30 to 200 kept samples on each
side; up to 5 ms where no two samples tie) where 2000 drawn resamples of 200 take a few hundred in pure
Python. For an even count the median is the mean of the two middle draws; its distribution is taken as
the even mixture of theirs, which has the same centre and is at least as wide: the interval errs wide,
never narrow.

**The word.** "slower" when the whole interval lies above 1 and the medians differ by more than
PRACTICAL_CHANGE; "faster" when it lies below 1 and they differ by more than PRACTICAL_CHANGE; else
"within noise". The floor is there because the interval knows only the noise inside each series: two runs
on one GPU also differ by its clocks and temperature between them, by about a percent, which no series'
samples show. "no interval" when either series kept too few samples (records written before samples were
kept keep none): such a change is reported with its reason and never called faster or slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Iterable, Sequence

CONFIDENCE = 0.95
PRACTICAL_CHANGE = 0.01  # a change under 1% is within noise whatever the interval says
MIN_SAMPLES = 10  # fewer kept samples give no interval: the median of a handful has no useful bootstrap
FASTER, SLOWER, WITHIN_NOISE, NO_INTERVAL = "faster", "slower", "within noise", "no interval"
_NEGLIGIBLE = 1e-12  # probabilities below this (per point of a median's distribution) are left out


@dataclass(frozen=True)
class TimeChange:
    """A change in time from `before_ms` to `after_ms`, with the interval of their ratio when there is one."""

    before_ms: float
    after_ms: float
    low: float | None = None  # the ratio's interval (after / before), None when there is none
    high: float | None = None
    label: str = NO_INTERVAL  # FASTER | SLOWER | WITHIN_NOISE | NO_INTERVAL
    why: str = ""  # why there is no interval

    @property
    def ratio(self) -> float:
        return self.after_ms / self.before_ms

    @property
    def percent(self) -> float:
        """The change in time, in percent: -3.1 is 3.1% less time."""
        return (self.ratio - 1.0) * 100.0

    @property
    def interval_percent(self) -> tuple[float, float] | None:
        if self.low is None or self.high is None:
            return None
        return (self.low - 1.0) * 100.0, (self.high - 1.0) * 100.0

    def describe(self) -> str:
        """"-3.1% [-4.0%, -2.2%] faster"; "-3.1% (no interval: the earlier run kept no samples)"."""
        interval = self.interval_percent
        if interval is None:
            return f"{self.percent:+.1f}% (no interval: {self.why})" if self.why else f"{self.percent:+.1f}%"
        return f"{self.percent:+.1f}% [{interval[0]:+.1f}%, {interval[1]:+.1f}%] {self.label}"

    def to_dict(self) -> dict[str, object]:
        interval = self.interval_percent
        return {"before_ms": self.before_ms, "after_ms": self.after_ms, "change_percent": round(self.percent, 3),
                "interval_percent": [round(interval[0], 3), round(interval[1], 3)] if interval else None,
                "finding": self.label, **({"why": self.why} if self.why else {})}


def compare(before_ms: float, after_ms: float, before_samples: Sequence[float] = (),
            after_samples: Sequence[float] = ()) -> TimeChange:
    """The change from one series to another: their medians (as posted) and, from their kept samples, the
    interval of the ratio and its word. Samples in milliseconds, in any order."""
    why = (_too_few(before_samples, "the earlier run") or _too_few(after_samples, "this run"))
    if why:
        return TimeChange(before_ms, after_ms, why=why)
    low, high = ratio_interval(median_distribution(sorted(before_samples)),
                               median_distribution(sorted(after_samples)))
    return TimeChange(before_ms, after_ms, low, high, label_of(after_ms / before_ms, low, high))


def _too_few(samples: Sequence[float], whose: str) -> str:
    if not samples:
        return f"{whose} kept no samples"
    if len(samples) < MIN_SAMPLES:
        return f"{whose} kept {len(samples)} samples; an interval needs at least {MIN_SAMPLES}"
    return ""


def label_of(ratio: float, low: float, high: float, practical: float = PRACTICAL_CHANGE) -> str:
    """The module's rule: beyond noise when the interval excludes 1 and the change exceeds `practical`."""
    if low > 1.0 and ratio > 1.0 + practical:
        return SLOWER
    if high < 1.0 and ratio < 1.0 - practical:
        return FASTER
    return WITHIN_NOISE


def slower_beyond(change: TimeChange | None, threshold: float) -> bool:
    """The regression gate's rule (`workbench bench --fail-slower`): slower beyond noise, and by more than
    `threshold` (0.05: 5%) at the medians. The interval says the slowdown is real; the threshold says how much
    of one is tolerated. A change with no interval never fails it (the report says why there is none)."""
    return change is not None and change.label == SLOWER and change.ratio - 1.0 > threshold


# -- the exact bootstrap ---------------------------------------------------------------------------

def median_distribution(sorted_ms: Sequence[float]) -> list[tuple[float, float]]:
    """The bootstrap distribution of the median of `sorted_ms` (ascending): (value, probability) pairs,
    values ascending and distinct, points of negligible probability left out."""
    k = len(sorted_ms)
    ranks = [(k + 1) // 2] if k % 2 else [k // 2, k // 2 + 1]  # the middle draw(s) of a resample, 1-based
    # Only indices within ~7 standard deviations of the middle carry any probability (the median's rank in a
    # resample spreads by about sqrt(k)/2): below them the distribution function is 0, above them 1.
    reach = int(3.5 * math.sqrt(k)) + 2
    first, last = max(0, (k - 1) // 2 - reach), min(k - 1, k // 2 + reach)
    points: list[tuple[float, float]] = []
    below = 0.0  # P(median <= x[i - 1])
    for i in range(first, last + 1):
        cdf = 1.0 if i == k - 1 else sum(_at_least(k, (i + 1) / k, r) for r in ranks) / len(ranks)
        if i == last:
            cdf = 1.0
        mass, below = cdf - below if i > first else cdf, cdf
        if mass <= _NEGLIGIBLE:
            continue
        value = float(sorted_ms[i])
        if points and points[-1][0] == value:  # ties: one point
            points[-1] = (value, points[-1][1] + mass)
        else:
            points.append((value, mass))
    return points


def ratio_interval(before: Sequence[tuple[float, float]], after: Sequence[tuple[float, float]],
                   confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central `confidence` interval of after / before, each drawn independently from its distribution."""
    pairs = sorted((a / b, pa * pb) for a, pa in after for b, pb in before)
    total = math.fsum(w for _, w in pairs)
    tail = (1.0 - confidence) / 2.0 * total
    low = high = pairs[-1][0]
    seen, found_low = 0.0, False
    for value, weight in pairs:
        seen += weight
        if not found_low and seen >= tail:
            low, found_low = value, True
        if seen >= total - tail:
            high = value
            break
    return low, high


def _at_least(n: int, p: float, m: int) -> float:
    """P(Binomial(n, p) >= m), summed from the end of the tail nearer the mode outwards (its terms only fall)."""
    if m <= 0 or p >= 1.0:
        return 1.0
    if m > n or p <= 0.0:
        return 0.0
    if m > int((n + 1) * p):  # the tail lies above the mode
        return _sum_away(n, p, m, up=True)
    return 1.0 - _sum_away(n, p, m - 1, up=False)


def _sum_away(n: int, p: float, j: int, up: bool) -> float:
    """The binomial terms from j away from the mode (upwards or downwards), summed until they no longer count."""
    log_term = (math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                + j * math.log(p) + (n - j) * math.log1p(-p))
    if log_term < -700.0:
        return 0.0
    term, total, odds = math.exp(log_term), 0.0, p / (1.0 - p)
    while term > total * 1e-17:
        total += term
        if up:
            term *= (n - j) / (j + 1) * odds
            j += 1
        else:
            term *= j / (n - j + 1) / odds
            j -= 1
    return total


# -- many cases at once ----------------------------------------------------------------------------

def geometric_mean_change(changes: Iterable[TimeChange]) -> TimeChange | None:
    """The change of the geometric mean over cases, with an interval when every case has one.

    Its interval is a normal approximation on the log scale: each case's log-ratio has the standard error
    its interval implies (width / 2z), the cases are independent series, so the mean's is the root of the
    sum of squares over the count. The same word rule as a case's."""
    changes = list(changes)
    if len(changes) < 2:
        return changes[0] if changes else None  # one case: its own interval, exact
    before = math.exp(math.fsum(math.log(c.before_ms) for c in changes) / len(changes))
    after = math.exp(math.fsum(math.log(c.after_ms) for c in changes) / len(changes))
    lacking = [c for c in changes if c.low is None or c.high is None]
    if lacking:
        reasons = {c.why for c in lacking}
        same = len(lacking) == len(changes) and len(reasons) == 1
        return TimeChange(before, after, why=reasons.pop() if same else
                          f"{len(lacking)} of {len(changes)} cases {'has' if len(lacking) == 1 else 'have'} none")
    z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2.0)
    errors = [(math.log(c.high) - math.log(c.low)) / (2.0 * z) for c in changes]  # type: ignore[arg-type]
    spread = z * math.sqrt(math.fsum(e * e for e in errors)) / len(changes)
    centre = math.log(after / before)
    low, high = math.exp(centre - spread), math.exp(centre + spread)
    return TimeChange(before, after, low, high, label_of(after / before, low, high))
