"""Built-in command `verify`: the verification battery, headless (CI, scripts)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..commands import EXIT_OK, Command, CommandError, Context, hookimpl
from ..core.events import Event, StageChanged
from ..core.project.folder import Project, ProjectError, find_projects
from ..core.run.runner import Runner, default_parallel
from ..core.run.session import RunOutcome, run_project
from ..reports import format_outcome, junit_tree


def resolve_projects(paths: list[str]) -> list[Project]:
    """The projects named on the command line; none named: this folder, else ./projects/*."""
    if paths:
        try:
            return [Project.open(p) for p in paths]
        except ProjectError as exc:
            raise CommandError(str(exc)) from None
    here = Path.cwd()
    if (here / "kernel.py").is_file():
        return [Project.open(here)]
    found = find_projects(here / "projects")
    if not found:
        raise CommandError("no project given, none here (no kernel.py) and none under ./projects; "
                           "try `workbench new rmsnorm`")
    return found


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("projects", nargs="*", metavar="PROJECT",
                        help="project folders or kernel .py files (default: this folder, else ./projects/*)")
    parser.add_argument("--interpret", action="store_true",
                        help="run under the Triton interpreter on the CPU even when a GPU is present")
    parser.add_argument("--case", type=int, action="append", metavar="K", dest="cases",
                        help="only case K (its index in CASES); repeatable")
    parser.add_argument("--json", action="store_true", help="print one JSON record instead of the table")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="kill a case that runs longer than S seconds (default: [verify] timeout_s, 60 on a "
                             "GPU, 300 in the interpreter)")
    parser.add_argument("-v", "--verbose", action="store_true", help="every row, tracebacks and worker output")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML report to FILE")


class Progress:
    """A one-line live status on stderr, when stderr is a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, event: Event) -> None:
        if self.enabled and isinstance(event, StageChanged):
            counter = f" {event.current}/{event.total}" if event.total else ""
            sys.stderr.write(f"\r\033[K  {event.stage}{counter} {event.detail}"[:120])
            sys.stderr.flush()

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def run_many(args: argparse.Namespace, context: Context, stages: list[str]) -> list[RunOutcome]:
    projects = resolve_projects(args.projects)
    runner = Runner(interpret=args.interpret, keep_warm=len(projects) > 1, parallel=default_parallel())
    progress = Progress(enabled=sys.stderr.isatty() and not getattr(args, "json", False))
    outcomes = []
    try:
        for project in projects:
            def on_event(event: Event, project: Project = project) -> None:
                progress(event)
                context.pm.hook.workbench_observe_event(event=event, project=project)

            options = {"timeout_s": args.timeout} if args.timeout else None
            outcome = run_project(project, runner, stages, on_event, case_indices=args.cases, options=options)
            progress.clear()
            context.pm.hook.workbench_finish_run(project=project, finished=outcome.finished, events=outcome.events)
            outcomes.append(outcome)
            if not args.json:
                print(format_outcome(outcome, verbose=args.verbose), flush=True)
                print()
    finally:
        runner.close()
    return outcomes


def overall_exit(outcomes: list[RunOutcome]) -> int:
    """The most serious exit code wins: environment (3) > unusable (2) > failed (1) > ok (0)."""
    codes = [o.exit_code for o in outcomes] or [EXIT_OK]
    return max(codes)


def _run(args: argparse.Namespace, context: Context) -> int:
    outcomes = run_many(args, context, ["verify"])
    code = overall_exit(outcomes)
    if args.json:
        print(json.dumps({"exit_code": code, "projects": [o.to_record() for o in outcomes]}, indent=2))
    if args.junit:
        try:
            args.junit.parent.mkdir(parents=True, exist_ok=True)
            junit_tree(outcomes).write(args.junit, encoding="utf-8", xml_declaration=True)
        except OSError as exc:
            raise CommandError(f"cannot write the JUnit report {args.junit}: {exc}") from None
    return code


@hookimpl
def workbench_register_commands(register):
    register(Command(name="verify", help="verify kernels against their references (headless; CI)",
                     add_arguments=_add_arguments, run=_run))
