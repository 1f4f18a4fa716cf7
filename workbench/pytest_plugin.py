"""pytest plugin: `pytest --workbench projects/` collects every project's cases as test items.

Inert unless --workbench is given: the project's own test suite is collected as it always was.
With it, each kernel.py under the paths pytest is given becomes a collector that runs
`workbench verify` on its project (in worker processes: this process imports neither torch nor the
kernel) and yields one item per verdict, named as in the JUnit report ("case 2: n=4097", a forced
autotune config in brackets), with the same messages. Problems that stop a project (a syntax
error, get_inputs raising, a bad workbench.toml) are items of their own.

Exit status: pytest's own, never the workbench's codes, which mean other things to pytest (2 is
"interrupted", 3 "internal error"). Whatever `workbench verify` would not exit 0 for is a failed item,
so pytest exits 1: a case that fails, a project that cannot be used ("NOT USABLE: ... workbench
verify exits 2"), and a machine that cannot give the verdict (no torch/triton, GPU ONLY: "workbench
verify exits 3"), each item saying the workbench's reason and its exit code. A project whose
verdict is not VERIFIED though none of its items failed (every case skipped) gets a failed item
"project: not verified". pytest exits 0 exactly where `workbench verify` would.

    pytest --workbench projects/               every project under projects/
    pytest --workbench --workbench-interpret   force the Triton interpreter on a GPU machine
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest


class WorkbenchWarning(UserWarning):
    """A verified case that proves little (constant inputs, an all-zero reference)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("workbench", "kernel workbench")
    group.addoption("--workbench", action="store_true", default=False,
                    help="collect every kernel.py project under the given paths as test items (workbench verify)")
    group.addoption("--workbench-interpret", action="store_true", default=False,
                    help="with --workbench: run under the Triton interpreter even on a GPU")


def pytest_collect_file(file_path: Any, parent: pytest.Collector) -> pytest.Collector | None:
    if parent.config.getoption("workbench") and file_path.name == "kernel.py":
        return ProjectFile.from_parent(parent, path=file_path)
    return None


def _runner(config: pytest.Config) -> Any:
    runner = getattr(config, "_workbench_runner", None)
    if runner is None:
        from .core.run.factory import make_runner

        runner = make_runner(interpret=config.getoption("workbench_interpret"), keep_warm=True)
        config._workbench_runner = runner  # type: ignore[attr-defined]
    return runner


class ProjectFile(pytest.File):
    def collect(self):  # type: ignore[override]
        from .core.events import Problem
        from .core.project.folder import Project
        from .core.run.session import run_project
        from .reports import case_name

        project = Project.open(self.path.parent)
        outcome = run_project(project, _runner(self.config), ["verify"])
        verdict = outcome.verdict
        # The workbench's reason, said in every failed item: "NOT USABLE (workbench verify exits 2)".
        reason = f"{verdict.label} (workbench verify exits {verdict.exit_code})"
        failing = False
        for r in outcome.case_results():
            failing = failing or r.status in ("failed", "error")
            yield CaseItem.from_parent(self, name=case_name(r), result=r, reason=reason)
        for p in outcome.of_type(Problem):
            if p.case_index is None:
                failing = True
                yield ProblemItem.from_parent(self, name=f"project: {p.kind}", problem=p, reason=reason)
        if not outcome.case_results() and not outcome.of_type(Problem):
            failing = True
            yield ProblemItem.from_parent(self, name="project: nothing verified", reason=reason,
                                          problem=Problem(kind="inputs", message="no case was verified"))
        if verdict.exit_code != 0 and not failing:  # pytest exits 0 only where workbench verify does
            yield ProblemItem.from_parent(self, name="project: not verified", reason=reason,
                                          problem=Problem(kind="verdict", message=verdict.describe_counts()))


class WorkbenchFailure(Exception):
    pass


class CaseItem(pytest.Item):
    def __init__(self, *, result: Any, reason: str = "", **kwargs: Any):
        super().__init__(**kwargs)
        self.result = result
        self.reason = reason
        for check, outcome in result.checks.items():
            self.user_properties.append((f"check.{check}", outcome))
        self.user_properties += [("generated", result.generated), ("launches", result.launches)]

    def runtest(self) -> None:
        r = self.result
        for text in r.warnings:
            warnings.warn(WorkbenchWarning(f"case {r.case_index} ({r.label}): {text}"), stacklevel=1)
        if r.status == "skipped":
            pytest.skip("; ".join(r.notes) or "skipped")
        if r.status in ("failed", "error"):
            raise WorkbenchFailure(r)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, WorkbenchFailure):
            from .reports import failure_details

            return "\n".join([*failure_details(self.result), *([f"project: {self.reason}"] if self.reason else [])])
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


class ProblemItem(pytest.Item):
    def __init__(self, *, problem: Any, reason: str = "", **kwargs: Any):
        super().__init__(**kwargs)
        self.problem = problem
        self.reason = reason

    def runtest(self) -> None:
        raise WorkbenchFailure(self.problem)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        p = self.problem
        where = f"{p.location}: " if p.location else ""
        return f"{p.kind}: {where}{p.message}" + (f"\nproject: {self.reason}" if self.reason else "")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # The exit status stays pytest's (module docstring): every verdict that is not 0 is a failed item already.
    runner = getattr(session.config, "_workbench_runner", None)
    if runner is not None:
        runner.close()
