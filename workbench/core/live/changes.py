"""What changed between runs: source diffs, kernel time with its noise, baselines, and the sparkline's series.

Built on the run history (`history.py`) and on timing/noise.py, which says whether a change in time is beyond
the noise. A benchmark case of one run is the same case in another when its index, its label (the parameters
it was given) and, where a run timed its cases on several kinds of GPU, the kind all match; a case only one
of the two runs timed is reported as such, never compared. "Kernel time" of a run is the geometric mean of the
kernel's median times over the cases both runs timed. UI-free: the bench command, `workbench diff` and the
app's Changes tab all read what this module computes.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..events import BenchResult, DeviceFacts
from ..project.folder import Project
from ..project.history import RunRecord, find_record, text_diff
from ..timing.noise import FASTER, NO_INTERVAL, SLOWER, WITHIN_NOISE, TimeChange, compare, geometric_mean_change, \
    slower_beyond
from ..timing.stats import geometric_mean

CaseKey = tuple[int, str, str]  # (case index, label, GPU kind or "")


@dataclass(frozen=True)
class CaseTiming:
    """One benchmark case's kernel time in one run: what a comparison between runs reads."""

    case_index: int
    label: str  # the case's parameters, as the benchmark names it ("rows=4096, cols=8192")
    median_ms: float
    samples_ms: tuple[float, ...] = ()  # the kept samples (stats.kept_samples); () in older records
    kind: str = ""  # the GPU kind, where the run timed its cases on several kinds (else "")

    @property
    def key(self) -> CaseKey:
        return self.case_index, self.label, self.kind

    @property
    def name(self) -> str:
        return f"case {self.case_index}" + (f" {self.label}" if self.label else "") + \
            (f" on {self.kind}" if self.kind else "")


def _kind_of(gpus: Iterable[tuple[str, str]]) -> dict[str, str]:
    """GPU id -> its kind's name, when a run timed cases on more than one kind of GPU; else {} (the cases of a run
    on one kind need no kind in their key, so two runs on one GPU each match whichever GPU it was)."""
    names = {gpu: name for gpu, name in gpus if gpu}
    return names if len(set(names.values())) > 1 else {}


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0 else None


def _samples(value: Any) -> tuple[float, ...]:
    """Kept samples read from a record: all usable (positive, finite numbers) or none (a file edited by hand)."""
    if not isinstance(value, list):
        return ()
    kept = tuple(_positive(v) for v in value)
    return () if None in kept else kept  # type: ignore[return-value]


def case_timings(data: dict[str, Any]) -> dict[CaseKey, CaseTiming]:
    """The timed benchmark cases of a run record (or of one project's `workbench bench --json` record)."""
    devices = data.get("devices") or []
    kind_of = _kind_of((str(d.get("gpu") or ""), str(d.get("name") or "")) for d in devices if isinstance(d, dict))
    found: dict[CaseKey, CaseTiming] = {}
    for entry in data.get("bench") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("case_index"), int):
            continue
        kernel = entry.get("kernel") if isinstance(entry.get("kernel"), dict) else {}
        ms = _positive(entry.get("median_ms")) or _positive(kernel.get("median_ms"))
        if ms is None:
            continue  # not timed, or its time not posted
        timing = CaseTiming(case_index=entry["case_index"], label=str(entry.get("label") or ""), median_ms=ms,
                            samples_ms=_samples(kernel.get("samples_ms")),
                            kind=kind_of.get(str(entry.get("gpu") or ""), ""))
        found[timing.key] = timing
    return found


def timings_of(results: Iterable[BenchResult], facts: Iterable[DeviceFacts] = ()) -> dict[CaseKey, CaseTiming]:
    """The timed benchmark cases of a run's events (a run in progress in the app, a run the bench command made)."""
    kind_of = _kind_of((f.gpu, f.name) for f in facts)
    found: dict[CaseKey, CaseTiming] = {}
    for result in results:
        if result.kernel is None or not result.kernel.median_ms > 0:
            continue
        timing = CaseTiming(case_index=result.case_index, label=result.label, median_ms=result.kernel.median_ms,
                            samples_ms=tuple(result.kernel.samples_ms), kind=kind_of.get(result.gpu, ""))
        found[timing.key] = timing
    return found


@dataclass(frozen=True)
class CaseChange:
    """One benchmark case in an earlier run and in this one; `change` when both timed it."""

    before: CaseTiming | None  # None: only this run timed the case
    after: CaseTiming | None  # None: only the earlier run did
    change: TimeChange | None = None

    @property
    def name(self) -> str:
        return (self.after or self.before).name  # type: ignore[union-attr]

    @property
    def only_in(self) -> str:
        """"" for a case both runs timed; else which one did."""
        return "" if self.change is not None else "this run" if self.before is None else "the earlier run"

    def to_dict(self) -> dict[str, Any]:
        timing = self.after or self.before
        assert timing is not None
        where = {"case_index": timing.case_index, "label": timing.label, **({"kind": timing.kind} if timing.kind
                                                                               else {})}
        if self.change is None:
            return {**where, "only_in": self.only_in}
        return {**where, **self.change.to_dict()}


@dataclass(frozen=True)
class SpeedChange:
    """Kernel time against an earlier run: every case, and the geometric mean over the cases both timed."""

    per_case: tuple[CaseChange, ...]
    overall: TimeChange  # the geometric mean's change, over the matched cases

    @property
    def matched(self) -> list[CaseChange]:
        return [c for c in self.per_case if c.change is not None]

    @property
    def unmatched(self) -> list[CaseChange]:
        return [c for c in self.per_case if c.change is None]

    @property
    def cases(self) -> int:
        """How many benchmark cases both runs timed."""
        return len(self.matched)

    @property
    def before_ms(self) -> float:
        return self.overall.before_ms

    @property
    def after_ms(self) -> float:
        return self.overall.after_ms

    @property
    def percent(self) -> float:
        return self.overall.percent

    @property
    def counts(self) -> dict[str, int]:
        """Matched cases by word (faster, slower, within noise, no interval), the words that occur only."""
        counts = {label: 0 for label in (FASTER, SLOWER, WITHIN_NOISE, NO_INTERVAL)}
        for case in self.matched:
            counts[case.change.label] += 1  # type: ignore[union-attr]
        return {label: n for label, n in counts.items() if n}

    def describe_counts(self) -> str:
        """"4 cases: 3 faster, 1 within noise"."""
        parts = ", ".join(f"{n} {label}" for label, n in self.counts.items())
        return f"{self.cases} case{'s' if self.cases != 1 else ''}: {parts}"

    def slower_than(self, threshold: float) -> list[CaseChange]:
        """The cases slower beyond noise by more than `threshold` (0.05: 5%): noise.slower_beyond's rule."""
        return [c for c in self.matched if slower_beyond(c.change, threshold)]

    def to_dict(self) -> dict[str, Any]:
        return {"overall": self.overall.to_dict(), "counts": self.counts,
                "cases": [c.to_dict() for c in self.per_case]}


def speed_change(before: dict[CaseKey, CaseTiming], after: dict[CaseKey, CaseTiming]) -> SpeedChange | None:
    """Every case of two runs, matched by key and compared; None when they timed no case in common."""
    per_case = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        change = compare(old.median_ms, new.median_ms, old.samples_ms, new.samples_ms) if old and new else None
        per_case.append(CaseChange(before=old, after=new, change=change))
    overall = geometric_mean_change(c.change for c in per_case if c.change is not None)
    return SpeedChange(per_case=tuple(per_case), overall=overall) if overall is not None else None


@dataclass
class Comparison:
    """The current run (or source) against one earlier run."""

    title: str  # "previous run", "last passing run", "baseline"
    record: RunRecord | None
    diff: list[str] = field(default_factory=list)
    speed: SpeedChange | None = None
    notes: list[str] = field(default_factory=list)  # why there is no speed change; a different GPU
    where: str = ""  # where the earlier run came from: a run id, or a file (and the run id it holds)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as `workbench bench --json` prints it."""
        return {"title": self.title, "against": self.where or (self.record.id if self.record else None),
                "device": self.record.data.get("device") if self.record else None,
                "speed": self.speed.to_dict() if self.speed else None, "notes": list(self.notes)}


def compare_timings(title: str, record: RunRecord | None, after: dict[CaseKey, CaseTiming], device: str = "",
                    times: dict[str, dict[CaseKey, CaseTiming]] | None = None, where: str = "") -> Comparison:
    """This run's timed cases (`after`, on GPU `device`) against an earlier run's record.

    `times`: record id -> timed cases, for runs timed in this session whose records hold none."""
    comparison = Comparison(title=title, record=record, where=where)
    if record is None:
        comparison.notes.append(f"no {title} to compare with")
        return comparison
    before = case_timings(record.data) or (times or {}).get(record.id, {})
    if not before or not after:
        comparison.notes.append(f"{'this run' if before else 'the earlier run'} timed no benchmark case")
        return comparison
    comparison.speed = speed_change(before, after)
    if comparison.speed is None:
        comparison.notes.append("no benchmark case in common with the earlier run (cases are matched by index and "
                                "parameters): " + "; ".join(f"{t.name} in this run only" for t in after.values())
                                + "; " + "; ".join(f"{t.name} in the earlier run only" for t in before.values()))
    earlier = record.data.get("device")
    if device and earlier and earlier != device:
        comparison.notes.append(f"the earlier run ran on {earlier}, this run on {device}: the change is partly the "
                                "GPU's")
    return comparison


def compare_with_history(records: list[RunRecord], source: str, read_source,
                         times: dict[str, dict[CaseKey, CaseTiming]],
                         current_times: dict[CaseKey, CaseTiming] | None = None,
                         exclude: str = "") -> list[Comparison]:
    """The current source and kernel time against the previous run and the last passing run.

    `read_source(hash)` returns a recorded source; `times` maps record id -> timed cases for runs whose
    records hold none (timed in this session); `exclude` is the current run's own record.
    """
    earlier = [r for r in records if r.id != exclude]
    previous = earlier[-1] if earlier else None
    passing = next((r for r in reversed(earlier) if r.verdict == "passed"), None)
    comparisons: list[Comparison] = []
    for title, record in (("previous run", previous), ("last passing run", passing)):
        comparison = Comparison(title=title, record=record)
        if record is not None:
            old = read_source(record.source_hash) or ""
            comparison.diff = text_diff(old, source, f"kernel.py @ {record.id}", "kernel.py @ this save", context=2)
            same = next((c for c in comparisons if c.record is record), None)  # the previous run passed: once
            if same is not None:
                comparison.speed, comparison.notes = same.speed, list(same.notes)
            elif current_times:
                timed = compare_timings(title, record, current_times, times=times)
                comparison.speed, comparison.notes = timed.speed, timed.notes
        comparisons.append(comparison)
    return comparisons


def kernel_time_series(records: list[RunRecord],
                       times: dict[str, dict[CaseKey, CaseTiming]]) -> list[tuple[RunRecord, float]]:
    """(record, kernel time in ms) for every benchmarked run, oldest first: the sparkline's data."""
    series = []
    for record in records:
        timed = case_timings(record.data) or times.get(record.id, {})
        ms = geometric_mean(t.median_ms for t in timed.values())
        if ms is not None:
            series.append((record, ms))
    return series


# -- baselines: the earlier run a benchmark is held against ---------------------------------------

class BaselineError(ValueError):
    """A baseline that cannot be used; the message says which and why."""


def previous_timed(records: list[RunRecord], exclude: str = "") -> RunRecord | None:
    """The newest run record with a timed benchmark case, other than `exclude` (this run's own): a verify-only
    run, or one whose kernel failed, in between changes nothing the benchmark compares."""
    return next((r for r in reversed(records) if r.id != exclude and case_timings(r.data)), None)


def load_baseline(project: Project, ref: str, records: list[RunRecord]) -> tuple[RunRecord, str]:
    """`--baseline RUN|FILE` for one project: (the run's record, where it came from).

    RUN is what `workbench history` lists (an id, a unique id prefix, or an index: -1 the newest); FILE is a
    `workbench bench --json` output (the project's own record in it, or its only one) or a history record
    file. Read before the run starts, so a baseline that cannot be used stops the command before anything is
    run or written. Raises BaselineError."""
    path = Path(ref).expanduser()
    if path.is_dir():
        raise BaselineError(f"--baseline {ref}: a folder, not a run record or a `workbench bench --json` file")
    if path.is_file():
        record = _record_in_file(project, path)
        where = f"{path}" + (f" (run {record.data['id']})" if record.data.get("id") else "")
    elif path.suffix.lower() == ".json" or os.sep in ref:
        raise BaselineError(f"--baseline {ref}: no such file")
    else:
        try:
            record = find_record(records, ref)
        except KeyError as exc:
            raise BaselineError(f"--baseline {ref}: {exc.args[0]} of {project.name}, and no file of that name") \
                from None
        where = f"run {record.id}"
    if not case_timings(record.data):
        raise BaselineError(f"--baseline {ref}: {where} of {project.name} timed no benchmark case (a `workbench "
                            "verify` run, or one whose kernel failed): there is nothing to compare with")
    return record, where


def _record_in_file(project: Project, path: Path) -> RunRecord:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"--baseline {path}: cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"--baseline {path}: not a JSON file ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("projects"), list):  # `workbench bench --json`
        found = [p for p in data["projects"] if isinstance(p, dict)]
        mine = [p for p in found if p.get("project") == project.name]
        if len(mine) != 1 and len(found) != 1:
            names = ", ".join(sorted(str(p.get("project")) for p in found)) or "none"
            raise BaselineError(f"--baseline {path}: holds {len(mine)} records of project {project.name} "
                                f"(its projects: {names})")
        data = mine[0] if len(mine) == 1 else found[0]
    elif not (isinstance(data, dict) and ("bench" in data or "verdict" in data)):
        raise BaselineError(f"--baseline {path}: neither a `workbench bench --json` output nor a run record")
    return RunRecord(id=str(data.get("id") or path.name), data=data)
