"""Built-in command `verify`: the verification battery, headless (CI, scripts)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET
import threading
from pathlib import Path
from typing import Any, Sequence

from ..commands import (
    EXIT_UNUSABLE,
    Command,
    CommandError,
    Context,
    Heartbeat,
    Progress,
    hookimpl,
    seconds_argument,
    seed_argument,
)
from ..core.events import Event
from ..core.project.folder import Project, ProjectError, find_projects
from ..core.run.gpus import GpuSelectionError
from ..core.run.session import PluginHooks, RunOutcome, RunSpec, Session
from ..core.fsutil import atomic_write_text
from ..core.verdict import worst_exit
from ..reports import format_outcome, junit_tree, projects_summary


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
    parser.add_argument("--timeout", type=seconds_argument, metavar="S",
                        help="kill a case that runs longer than S seconds, S > 0 (default: workbench.toml's "
                             "[verify] timeout_s, 60, on a GPU, interpret_timeout_s, 300, in the interpreter; "
                             "0 there means no limit)")
    parser.add_argument("--gpus", metavar="LIST", default="all",
                        help="the GPUs to spread cases and projects over: 'all' (default: every GPU "
                             "CUDA_VISIBLE_DEVICES lets through) or their numbers among those, e.g. 0,1")
    parser.add_argument("--fresh-checks", action="store_true",
                        help="run the torch.compile and CUDA-graph checks again rather than keep an earlier run's "
                             "pass (kept while the project's files, the case, the GPU, torch, Triton and [verify] "
                             "are the same)")
    parser.add_argument("--seed", type=seed_argument, metavar="N",
                        help="draw every case's inputs from seed N (default: workbench.toml's [verify] seed, else a "
                             "new one, said in the report: a failure is replayed with its --seed)")
    parser.add_argument("-v", "--verbose", action="store_true", help="every row, tracebacks and worker output")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML report to FILE")


def open_session(args: argparse.Namespace, context: Context, n_projects: int, keep_warm: bool | None = None,
                 stages: Sequence[str] = (), hooks: PluginHooks | None = None) -> Session:
    """The session the projects' runs go through, its runners a plugin's (a cluster), else one per lane of local GPUs.

    With several GPUs and several projects, each lane takes its share of the GPUs and of the
    verification workers and runs one project at a time, so a project's benchmark has its GPU alone.
    Verification alone (`stages` == ["verify"]) times nothing: several lanes share each GPU then
    (factory.lanes_per_gpu). `keep_warm` (default: with several projects) keeps spare workers started
    for the next run.
    """
    keep_warm = n_projects > 1 if keep_warm is None else keep_warm
    try:
        return Session.choose(n_projects, stages, hooks=hooks, interpret=args.interpret, keep_warm=keep_warm,
                              gpus=getattr(args, "gpus", "all"),
                              plugin=lambda: context.pm.hook.workbench_make_runner(
                                  args=args, interpret=args.interpret, keep_warm=keep_warm, projects=n_projects,
                                  stages=list(stages)))
    except GpuSelectionError as exc:
        raise CommandError(str(exc)) from None


def make_runners(args: argparse.Namespace, context: Context, n_projects: int,
                 keep_warm: bool | None = None, stages: Sequence[str] = ()) -> list[Any]:
    """The runners `open_session` chooses, for a front end that hands them on (`workbench watch` to the app)."""
    return open_session(args, context, n_projects, keep_warm, stages).runners


def run_many(args: argparse.Namespace, context: Context, stages: list[str]) -> list[RunOutcome]:
    """Run every project, spread over the session's lanes (run/project_lanes.py); reports print in the projects'
    order, each as soon as it and those before it are done."""
    projects = resolve_projects(args.projects)
    session = open_session(args, context, len(projects), stages=stages, hooks=PluginHooks(context.pm))
    progress = Progress(enabled=sys.stderr.isatty() and not getattr(args, "json", False) and len(session.runners) == 1)
    heartbeat = Heartbeat(enabled=not progress.enabled)
    outcomes: list[RunOutcome | None] = [None] * len(projects)
    lock = threading.RLock()  # printing, one lane at a time
    printed = 0

    def finish(index: int, outcome: RunOutcome) -> None:
        nonlocal printed
        heartbeat.done(outcome.project.name)
        with lock:
            progress.clear()
            outcomes[index] = outcome
            while printed < len(projects) and outcomes[printed] is not None:
                if not args.json:
                    print(format_outcome(outcomes[printed], verbose=args.verbose), flush=True)
                    print()
                printed += 1

    def on_event(project: Project, event: Event) -> None:
        heartbeat(project.name, event)
        with lock:
            progress(event)

    spec = RunSpec(tuple(stages), case_indices=args.cases, timeout_s=args.timeout,
                   fresh_baselines=getattr(args, "fresh_baselines", False),
                   fresh_checks=getattr(args, "fresh_checks", False), bench_mode=getattr(args, "mode", None) or "",
                   seed=getattr(args, "seed", None))
    try:
        session.run_many(projects, spec, on_event, on_start=lambda project: heartbeat.begin(project.name),
                         on_done=finish)
    finally:
        session.close()
        heartbeat.close()
    return [o for o in outcomes if o is not None]


def overall_exit(outcomes: list[RunOutcome]) -> int:
    """The most serious exit code wins: environment (3) > unusable (2) > failed (1) > ok (0)."""
    return worst_exit(o.exit_code for o in outcomes)


def junit_writable(path: Path | None) -> None:
    """Refuse, before anything runs, a --junit FILE that cannot be written (a folder, a folder that cannot be
    made or written to): the verdict printed must be the exit code given."""
    if path is None:
        return
    if path.is_dir():
        raise CommandError(f"cannot write the JUnit report {path}: it is a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot write the JUnit report {path}: {exc}") from None
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CommandError(f"cannot write the JUnit report {path}: permission denied")


def write_junit(path: Path, outcomes: list[RunOutcome]) -> str:
    """The JUnit report, written whole or not at all; the reason when it could not be (a full disk)."""
    try:
        xml = ET.tostring(junit_tree(outcomes).getroot(), encoding="utf-8", xml_declaration=True)
        atomic_write_text(path, xml.decode("utf-8"))
    except OSError as exc:
        return f"cannot write the JUnit report {path}: {exc}"
    return ""


def _run(args: argparse.Namespace, context: Context) -> int:
    junit_writable(args.junit)
    outcomes = run_many(args, context, ["verify"])
    code = overall_exit(outcomes)
    failed_junit = write_junit(args.junit, outcomes) if args.junit else ""
    if failed_junit:
        code = worst_exit([code, EXIT_UNUSABLE])  # said in the JSON and the summary below as given
    if args.json:
        print(json.dumps({"exit_code": code, "projects": [o.to_record() for o in outcomes]}, indent=2))
    elif len(outcomes) > 1:
        print(projects_summary(outcomes, code))
    if failed_junit:
        print(f"workbench verify: {failed_junit} (exit {code})", file=sys.stderr)
    return code


@hookimpl
def workbench_register_commands(register):
    register(Command(name="verify", help="verify kernels against their references (headless; CI)",
                     add_arguments=_add_arguments, run=_run))
