"""A run's verdict and exit code, decided here and nowhere else (docs/ARCHITECTURE.md, "One verdict").

Every consumer reads the same `Verdict`: the CLI's summary line and exit code, the app's status
badge, the run history (`workbench list`, `history`, `diff`, the Changes tab), JUnit, `pytest
--workbench`, the profiler plugins and the Ray runner's matrix. It is computed from a run's events
(`Tally`, which counts them as they arrive) or read back from a history record (`Verdict.of_record`).

The verdict is the verification's: a stage after it that stops (a benchmark refused for want of a
GPU, a case that crashed while timed) changes the exit code, never the word a kernel that verified
gets. Exit codes are an API (README "Exit codes"):

    0 every case verified
    1 a verification failed (a wrong value, an unwritten element, a crash or a hang in a case)
    2 the project or its kernel.py could not be used (syntax, missing export, get_inputs raising,
      a compile error, a bad workbench.toml; also bad arguments and refused names)
    3 the environment cannot give the verdict: no torch/triton, no GPU where one is needed, a
      missing profiler; or GPU ONLY: the Triton interpreter cannot run what the kernel uses
    4 the regression gate (`workbench bench --fail-slower`): everything verified, and a benchmark case is
      slower than the baseline beyond noise by more than the threshold (timing/noise.py's rule). Given only
      when the run would otherwise exit 0: any other failure's code wins, since only a kernel that verified
      is timed at all (`with_gate`, applied after `worst_exit`)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from .events import (
    BenchResult,
    CaseResult,
    DeviceFacts,
    Event,
    Problem,
    RunFinished,
    StageChanged,
)

from .exit_codes import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_OK, EXIT_SLOWER, EXIT_UNUSABLE  # noqa: F401 - theirs

# Problems that mean "the project could not be used" (2), as opposed to a kernel that ran and was
# wrong (1) or a machine that cannot run it (3).
UNUSABLE_KINDS = frozenset({"syntax", "import", "contract", "inputs", "reference", "compile", "config"})
ENVIRONMENT_KINDS = frozenset({"environment"})
# The Triton interpreter cannot run what the kernel uses (a libdevice function it has no implementation
# of, inline PTX): no verdict on this machine, one on a GPU (exit 3, verdict "gpu_only").
GPU_ONLY_KIND = "gpu_only"

# StageChanged stages that say verification is over: a Problem after one belongs to the later stages.
PAST_VERIFICATION = frozenset({"verified", "benchmarking"})

LABELS = {"passed": "VERIFIED", "failed": "FAILED", "gpu_only": "GPU ONLY", "error": "NOT USABLE",
          "cancelled": "CANCELLED", "running": "RUNNING"}


def exit_code_of(kinds: Iterable[str]) -> int:
    """The exit code problems of these kinds give (EXIT_OK for none): environment > unusable > failed."""
    kinds = set(kinds)
    if kinds & ENVIRONMENT_KINDS or GPU_ONLY_KIND in kinds:
        return EXIT_ENVIRONMENT
    if kinds & UNUSABLE_KINDS:
        return EXIT_UNUSABLE
    return EXIT_FAILED if kinds else EXIT_OK


def worst_problem(problems: Iterable[Problem]) -> tuple[int, Problem | None]:
    """The exit code a list of problems gives, and the first problem of that severity (for a one-line reason)."""
    problems = list(problems)
    code = exit_code_of(p.kind for p in problems)
    return code, next((p for p in problems if exit_code_of([p.kind]) == code), None)


def with_gate(code: int, slower: bool) -> int:
    """A run's exit code with the regression gate's verdict: EXIT_SLOWER only in place of EXIT_OK. A failed
    verification (1), an unusable project (2) or an environment problem (3) is the worse news, and it stands."""
    return EXIT_SLOWER if slower and code == EXIT_OK else code


def worst_exit(codes: Iterable[int]) -> int:
    """Several runs' exit codes as one (a command over many projects): the most serious wins."""
    return max(codes, default=EXIT_OK)


@dataclass(frozen=True)
class Verdict:
    """status: passed | failed | gpu_only | error | cancelled, with the exit code it gives and the counts."""

    status: str
    exit_code: int
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    after: str = ""  # what stopped a stage after verification ("" when nothing did): it sets the exit code
    configs_run: int = 0  # forced autotune configs run, over every case (beside the case counts)
    configs_passed: int = 0

    @property
    def label(self) -> str:
        if self.status == "error" and self.exit_code == EXIT_ENVIRONMENT:
            return "CANNOT RUN HERE"  # the project may be fine: this machine cannot give the verdict
        return LABELS.get(self.status, self.status.upper())

    @property
    def verified(self) -> bool:
        return self.status == "passed"

    @property
    def counts(self) -> dict[str, Any]:
        """Cases by their verdict, and the forced autotune configs' runs beside them."""
        return {"passed": self.passed, "failed": self.failed, "errors": self.errors, "skipped": self.skipped,
                "configs": {"run": self.configs_run, "passed": self.configs_passed}}

    def describe_counts(self) -> str:
        """"18 passed, 0 failed, 2 skipped (90 forced-config runs, 90 passed)": the one way counts are said."""
        parts = [f"{self.passed} passed", f"{self.failed} failed"]
        if self.errors:
            parts.append(f"{self.errors} error{'s' if self.errors != 1 else ''}")
        if self.skipped:
            parts.append(f"{self.skipped} skipped")
        text = ", ".join(parts)
        if self.configs_run:
            text += f" ({self.configs_run} forced-config run{'s' if self.configs_run != 1 else ''}, " \
                    f"{self.configs_passed} passed)"
        return text

    @classmethod
    def decide(cls, passed: int, failed: int, errors: int, skipped: int, problem_kinds: Iterable[str],
               later_kinds: Iterable[str] = (), cancelled: bool = False, after: str = "") -> Verdict:
        """The rule. `problem_kinds`: problems of the verification; `later_kinds`: of the stages after it."""
        kinds, later = set(problem_kinds), set(later_kinds)
        counts = {"passed": passed, "failed": failed, "errors": errors, "skipped": skipped}
        verified = passed and not failed and not errors and not kinds
        if not verified and not (passed or failed or errors or kinds):
            kinds |= later  # nothing ran before it: the later stage's problem is the run's (bench on a CPU)
        if not verified:
            after = ""
        code = exit_code_of(kinds) if kinds else (EXIT_FAILED if failed or errors else EXIT_OK)
        if verified:
            status = "passed"
            code = exit_code_of(later)
        elif GPU_ONLY_KIND in kinds and not kinds & ENVIRONMENT_KINDS:
            status = "gpu_only"
        elif code == EXIT_FAILED:
            status = "failed"
        elif code == EXIT_OK:  # nothing ran: no case proved anything
            status, code = ("failed", EXIT_FAILED) if skipped else ("error", EXIT_UNUSABLE)
        else:
            status = "error"
        if cancelled:
            status = "cancelled"
        return cls(status=status, exit_code=code, after=after if verified else "", **counts)

    @classmethod
    def of_record(cls, data: dict[str, Any]) -> Verdict:
        """The verdict of a history record (RunRecord.data, `--json`'s project record). Records written before
        the verdict was the verification's said "error" for a verified run whose benchmark was refused: their
        counts and problems decide it again."""
        counts = data.get("counts") or {}
        configs = counts.get("configs") or {}
        return replace(cls._of_record(data, counts), configs_run=int(configs.get("run") or 0),
                       configs_passed=int(configs.get("passed") or 0))

    @classmethod
    def _of_record(cls, data: dict[str, Any], counts: dict[str, Any]) -> Verdict:
        problems = data.get("problems") or []
        if data.get("verdict") == "cancelled":
            return cls.decide(**_counts(counts), problem_kinds=[], cancelled=True)
        if "after_verification" in data:  # written by this rule: its own problems are split already
            later = [p.get("kind", "") for p in data.get("after_verification") or []]
            kinds = [p.get("kind", "") for p in problems if p not in (data.get("after_verification") or [])]
            return cls.decide(**_counts(counts), problem_kinds=kinds, later_kinds=later,
                              after=data.get("after", ""))
        kinds = [p.get("kind", "") for p in problems]
        if counts.get("passed") and all(k in ENVIRONMENT_KINDS for k in kinds):
            return cls.decide(**_counts(counts), problem_kinds=[], later_kinds=kinds)
        return cls.decide(**_counts(counts), problem_kinds=kinds)


def _counts(counts: dict[str, Any]) -> dict[str, int]:
    return {k: int(counts.get(k) or 0) for k in ("passed", "failed", "errors", "skipped")}


# A case's verdict is the worst of its results: the tuned call's, each forced autotune config's, the recheck
# after timing. In this order, from the least to the most serious.
CASE_RANK = {"skipped": 0, "passed": 1, "failed": 2, "error": 3}


@dataclass
class Tally:
    """Counts a run's events as they arrive; `verdict()` is the run's Verdict so far.

    The unit is the case (docs/VERIFIED.md): a case passed when every one of its results
    did; the runs of forced autotune configs are counted beside (`configs_passed` of `configs_run`)."""

    # (case index, GPU) -> its worst status so far: a case is one verdict per GPU kind it ran on (the Ray matrix
    # runs each case on every kind); elsewhere a case runs on one GPU, its results all stamped with it
    cases: dict[tuple[int, str], str] = field(default_factory=dict)
    configs_run: int = 0
    configs_passed: int = 0
    problems: list[Problem] = field(default_factory=list)  # of the verification (and before it)
    later_problems: list[Problem] = field(default_factory=list)  # of the stages after verification
    past_verification: bool = False
    cancelled: bool = False

    def add(self, event: Event) -> None:
        if isinstance(event, CaseResult):
            status = event.status if event.status in CASE_RANK else "skipped"
            key = (event.case_index, event.gpu)
            before = self.cases.get(key)
            if before is None or CASE_RANK[status] > CASE_RANK[before]:
                self.cases[key] = status
            if event.config and event.status != "skipped":  # a config this GPU cannot launch never ran
                self.configs_run += 1
                self.configs_passed += event.status == "passed"
        elif isinstance(event, Problem):
            (self.later_problems if self.past_verification else self.problems).append(event)
        elif isinstance(event, StageChanged) and event.stage in PAST_VERIFICATION \
                or isinstance(event, (DeviceFacts, BenchResult)):
            self.past_verification = True
        elif isinstance(event, RunFinished) and event.verdict == "cancelled":
            self.cancelled = True

    def _count(self, status: str) -> int:
        return sum(s == status for s in self.cases.values())

    def case_status(self, case_index: int) -> str | None:
        """The worst status of one case over every GPU it ran on (None before any result)."""
        statuses = [s for (index, _gpu), s in self.cases.items() if index == case_index]
        return max(statuses, key=CASE_RANK.__getitem__) if statuses else None

    @property
    def passed(self) -> int:
        return self._count("passed")

    @property
    def failed(self) -> int:
        return self._count("failed")

    @property
    def errors(self) -> int:
        return self._count("error")

    @property
    def skipped(self) -> int:
        return self._count("skipped")

    @property
    def all_problems(self) -> list[Problem]:
        return self.problems + self.later_problems

    def verdict(self) -> Verdict:
        after = self.later_problems[0].message if self.later_problems else ""
        verdict = Verdict.decide(self.passed, self.failed, self.errors, self.skipped, [p.kind for p in self.problems],
                                 [p.kind for p in self.later_problems], self.cancelled, after)
        return replace(verdict, configs_run=self.configs_run, configs_passed=self.configs_passed)

    @property
    def exit_code(self) -> int:
        return self.verdict().exit_code

    def finished(self, duration_s: float, cancelled: bool = False) -> RunFinished:
        verdict = self.verdict()
        return RunFinished(verdict="cancelled" if cancelled else verdict.status, passed=verdict.passed,
                           failed=verdict.failed, errors=verdict.errors, skipped=verdict.skipped,
                           duration_s=round(duration_s, 3))
