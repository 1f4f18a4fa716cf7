"""What changed between runs: source diffs, kernel time, and the series a sparkline draws.

Built on the run history (`history.py`). "Kernel time" of a run is the geometric
mean of the kernel's median times over its benchmark cases, compared only over
the cases both runs timed. UI-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..project.history import RunRecord, text_diff
from ..timing.stats import geometric_mean


def bench_times(data: dict[str, Any]) -> dict[int, float]:
    """case index -> the kernel's median ms, from a record's "bench" entries, when it has any."""
    times = {}
    for entry in data.get("bench") or []:
        kernel = entry.get("kernel")
        ms = entry.get("median_ms") or (kernel.get("median_ms") if isinstance(kernel, dict) else None)
        if ms and "case_index" in entry:
            times[int(entry["case_index"])] = float(ms)
    return times


@dataclass(frozen=True)
class SpeedChange:
    before_ms: float
    after_ms: float
    cases: int  # how many benchmark cases both runs timed

    @property
    def percent(self) -> float:
        return (self.after_ms / self.before_ms - 1.0) * 100.0


def speed_change(before: dict[int, float], after: dict[int, float]) -> SpeedChange | None:
    common = sorted(set(before) & set(after))
    a, b = geometric_mean([before[i] for i in common]), geometric_mean([after[i] for i in common])
    if a is None or b is None:
        return None
    return SpeedChange(before_ms=a, after_ms=b, cases=len(common))


@dataclass
class Comparison:
    """The current source against one earlier run."""

    title: str  # "previous run", "last passing run"
    record: RunRecord | None
    diff: list[str] = field(default_factory=list)
    speed: SpeedChange | None = None


def compare_with_history(records: list[RunRecord], source: str, read_source, times: dict[str, dict[int, float]],
                         current_times: dict[int, float] | None = None, exclude: str = "") -> list[Comparison]:
    """The current source and kernel time against the previous run and the last passing run.

    `read_source(hash)` returns a recorded source; `times` maps record id -> bench times for
    runs whose records hold none (timed in this session); `exclude` is the current run's own record.
    """
    earlier = [r for r in records if r.id != exclude]
    previous = earlier[-1] if earlier else None
    passing = next((r for r in reversed(earlier) if r.verdict == "passed"), None)
    comparisons = []
    for title, record in (("previous run", previous), ("last passing run", passing)):
        comparison = Comparison(title=title, record=record)
        if record is not None:
            old = read_source(record.source_hash) or ""
            comparison.diff = text_diff(old, source, f"kernel.py @ {record.id}", "kernel.py @ this save", context=2)
            if current_times:
                before = bench_times(record.data) or times.get(record.id, {})
                comparison.speed = speed_change(before, current_times)
        comparisons.append(comparison)
    return comparisons


def kernel_time_series(records: list[RunRecord], times: dict[str, dict[int, float]]) -> list[tuple[RunRecord, float]]:
    """(record, kernel time in ms) for every benchmarked run, oldest first: the sparkline's data."""
    series = []
    for record in records:
        ms = geometric_mean(list((bench_times(record.data) or times.get(record.id, {})).values()))
        if ms is not None:
            series.append((record, ms))
    return series
