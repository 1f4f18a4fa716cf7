"""pytest plugin: `pytest --workbench projects/` collects every project's cases as test items.

Inert unless --workbench is given: the project's own test suite is collected as it always was.
With it, each kernel.py under the paths pytest is given becomes a collector that runs
`workbench verify` on its project (in worker processes: this process imports neither torch nor the
kernel) and yields one item per verdict, named as in the JUnit report ("case 2: n=4097", a forced
autotune config in brackets), with the same messages. Problems that stop a project (a syntax
error, get_inputs raising, a bad workbench.toml) are items of their own.

The projects run as `workbench verify` of several runs them (run/project_lanes.py): when the first is
collected, every kernel.py under the paths pytest was given is found and started, several per GPU at once,
and each project's collector waits for its own verdict.

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

import fnmatch
import os
import warnings
from pathlib import Path
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


def kernel_files(config: pytest.Config) -> list[Path]:
    """Every kernel.py under the paths pytest was given (its working directory when none), skipping the folders
    pytest does not recurse into (norecursedirs): the projects pytest is about to collect."""
    skip = list(config.getini("norecursedirs")) + ["__pycache__"]
    found: list[Path] = []
    for arg in config.args or [str(config.invocation_params.dir)]:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path.is_file():
            if path.name == "kernel.py":
                found.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatch(d, pattern) for pattern in skip))
            if "kernel.py" in files:
                found.append(Path(root) / "kernel.py")
    return list(dict.fromkeys(found))


class Projects:
    """The projects' runs, started together on lanes of runners (several per GPU: verification times nothing)."""

    def __init__(self, config: pytest.Config):
        from .core.run.session import PluginHooks, RunSpec, Session
        from .plugins import PluginError, make_plugin_manager

        try:  # the installed plugins observe these runs as they do `workbench verify`'s
            hooks = PluginHooks(make_plugin_manager())
        except PluginError as exc:
            raise pytest.UsageError(f"--workbench: {exc}") from None
        interpret = config.getoption("workbench_interpret")
        files = kernel_files(config)
        self.session = Session.choose(max(1, len(files)), ["verify"], hooks=hooks, interpret=interpret, keep_warm=True)
        self.spec = RunSpec(("verify",))
        self.futures: dict[Path, Any] = {}
        for path in files:
            self.start(path)

    def start(self, kernel: Path) -> Any:
        from .core.project.folder import Project

        try:
            project = Project.open(kernel.parent)
        except Exception:  # noqa: BLE001 - said when the collector opens it itself
            return None
        future = self.futures[kernel] = self.session.submit(project, self.spec)
        return future

    def outcome(self, kernel: Path) -> Any:
        future = self.futures.get(kernel) or self.start(kernel)
        if future is None:
            raise pytest.UsageError(f"{kernel}: not a workbench project")
        return self.session.result(future)


def _projects(config: pytest.Config) -> Projects:
    projects = getattr(config, "_workbench_projects", None)
    if projects is None:
        projects = config._workbench_projects = Projects(config)  # type: ignore[attr-defined]
    return projects


class ProjectFile(pytest.File):
    def collect(self):  # type: ignore[override]
        from .core.events import Problem
        from .core.project.folder import Project
        from .reports import case_name, seed_line

        Project.open(self.path.parent)  # a project that cannot be opened is said here, as pytest collects it
        outcome = _projects(self.config).outcome(Path(self.path).resolve())
        verdict = outcome.verdict
        # The workbench's reason, said in every failed item: "NOT USABLE (workbench verify exits 2)".
        reason = f"{verdict.label} (workbench verify exits {verdict.exit_code})"
        if outcome.seed is not None:  # a failure is replayed with `workbench verify --seed N`
            reason += f"; {seed_line(outcome)}"
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
    projects = getattr(session.config, "_workbench_projects", None)
    if projects is not None:
        projects.session.close()
