"""Failures said once for all the results that fail alike: the text report without -v.

A one-constant bug (an output off by 1%) fails every case, and every forced autotune config of each case, the
same way. Said result by result that is hundreds of lines of one message. Without -v the report folds it:

- a forced config (or a recheck) that fails as its case's own result does is said on that result's title
  ("and its 5 forced configs the same way"), not in a block of its own;
- cases that fail alike (the same status and the same checks failed) form a group: the worst few are shown in
  full, the rest in one line naming them, with the spread of their errors;
- the case table keeps the rows that fail, up to SHOWN_ROWS, and counts the rest.

-v, --json and JUnit keep every result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core.events import CaseResult
from ..core.text import fmt_case_err, plural

SHOWN_ROWS = 8  # rows of the case table without -v, when a case failed
WORST_SHOWN = 2  # results of a group shown in full


def signature(r: CaseResult) -> tuple[str, tuple[str, ...]]:
    """What makes two failures alike: their status and the checks they failed (for an error, the first words
    of its message: the exception's type)."""
    failed = tuple(sorted(k for k, v in r.checks.items() if v == "failed"))
    if not failed and r.messages:
        failed = (r.messages[0].split(":")[0][:60],)
    return r.status, failed


@dataclass
class Failure:
    """One failing result, with the results of its case that failed the same way (forced configs, rechecks)."""

    result: CaseResult
    alike: list[CaseResult] = field(default_factory=list)

    def title_suffix(self) -> str:
        if not self.alike:
            return ""
        configs = sum(1 for r in self.alike if r.config)
        others = len(self.alike) - configs
        parts = ([plural(configs, "forced config")] if configs else []) + ([plural(others, "recheck")] if others else [])
        return f"; its {' and '.join(parts)} the same way"


@dataclass
class Group:
    """Failures alike: shown in full for the worst, in one line for the rest."""

    key: tuple[str, tuple[str, ...]]
    failures: list[Failure] = field(default_factory=list)

    def split(self, verbose: bool) -> tuple[list[Failure], list[Failure]]:
        """(shown in full, said in one line): all in full with -v or when there are few, else the worst."""
        if verbose or len(self.failures) <= WORST_SHOWN + 1:
            return self.failures, []
        worst = sorted(self.failures, key=_badness, reverse=True)[:WORST_SHOWN]
        chosen = {id(f) for f in worst}
        return worst, [f for f in self.failures if id(f) not in chosen]

    def rest_line(self, rest: list[Failure]) -> str:
        """One line for the failures not shown in full ("" when there are none)."""
        if not rest:
            return ""
        what = ", ".join(self.key[1]) or self.key[0]
        spread = _spread([f.result for f in rest])
        alike = Failure(rest[0].result, [r for f in rest for r in f.alike]).title_suffix()
        cases = spans(sorted({f.result.case_index for f in rest}))
        return (f"  {'FAIL' if self.key[0] == 'failed' else 'ERROR'} the same way ({what}{spread}): "
                f"{plural(len(rest), 'more case')} {cases}{alike.replace('; its', ', and their')} (-v shows each)")


def fold(rows: list[CaseResult], verbose: bool) -> list[Group]:
    """The failing results grouped; without -v, each case's results that fail as its own result does folded
    into it."""
    by_case: dict[tuple[int, str], list[CaseResult]] = {}
    for r in rows:
        by_case.setdefault((r.case_index, r.gpu), []).append(r)
    groups: dict[tuple[str, tuple[str, ...]], Group] = {}
    for results in by_case.values():
        failing = [(r, signature(r)) for r in results if r.status in ("failed", "error")]
        own = next(((r, key) for r, key in failing if not r.config and not r.phase), None)
        for r, key in failing:
            failure = Failure(r)
            if not verbose and own is not None:
                if r is not own[0] and key == own[1]:
                    continue  # said on its case's own result
                if r is own[0]:
                    failure.alike = [o for o, k in failing if o is not r and k == key]
            groups.setdefault(key, Group(key)).failures.append(failure)
    return list(groups.values())


def table_rows(rows: list[CaseResult], verbose: bool) -> tuple[list[CaseResult], str]:
    """The results the case table lists and a line for those it leaves out ("" when none are). -v: every one;
    else forced configs that passed or failed as their case's own result are left out, and when something
    failed, only failing rows, up to SHOWN_ROWS."""
    if verbose:
        return rows, ""
    own = {(r.case_index, r.gpu): r for r in rows if not r.config and not r.phase}
    listed = []
    for r in rows:
        case_own = own.get((r.case_index, r.gpu))
        if r.config and (r.status == "passed" or (case_own is not None and signature(r) == signature(case_own))):
            continue  # passed, or failed as its case's own result did (the signature holds the status)
        listed.append(r)
    failing = [r for r in listed if r.status in ("failed", "error")]
    if not failing or len(listed) <= SHOWN_ROWS:
        return listed, ""
    shown = failing[:SHOWN_ROWS]
    chosen = {id(r) for r in shown}  # by identity: results compare field by field
    left = [r for r in listed if id(r) not in chosen]
    failed_left = sum(r.status in ("failed", "error") for r in left)
    counts = ", ".join(part for part in (f"{failed_left} failing" if failed_left else "",
                                         f"{len(left) - failed_left} passing or skipped" if len(left) > failed_left
                                         else "") if part)
    return shown, f"  ... {plural(len(left), 'more row')} ({counts}): -v lists every case and config"


def spans(indices: list[int]) -> str:
    """0, 2, 3, 4, 7 -> "0, 2-4, 7"."""
    parts: list[str] = []
    start = prev = None
    for i in indices + [None]:  # type: ignore[list-item]
        if start is not None and (i is None or i != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ", ".join(parts)


def _badness(f: Failure) -> tuple[float, float]:
    r = f.result
    return (r.max_rel_err if r.max_rel_err is not None else -1.0, r.max_abs_err if r.max_abs_err is not None else -1.0)


def _rel(r: CaseResult) -> float | None:
    """A result's max rel for a group's span: infinite where it wrote NaN or Inf (its finite max says nothing)."""
    return math.inf if r.non_finite else r.max_rel_err


def _spread(results: list[CaseResult]) -> str:
    rel = [v for v in map(_rel, results) if v is not None]
    if not rel:
        return ""
    low, high = (fmt_case_err(v, v == math.inf) for v in (min(rel), max(rel)))
    return f"; max rel {low}" if low == high else f"; max rel {low} to {high}"
