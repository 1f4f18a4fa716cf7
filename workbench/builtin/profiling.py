"""Built-in command `profile`: run a profiler plugin on a project and print its summary.

    workbench profile projects/rmsnorm                  the default (first registered) profiler
    workbench profile projects/rmsnorm --profiler ncu   a named one
    workbench profile --list                            the profilers installed

The profilers themselves come from plugins (`workbench-ncu` adds Nsight Compute) through the
``workbench_register_profilers`` hook; with none installed the command says so and exits 3.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..commands import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_UNUSABLE,
    Command,
    CommandError,
    Context,
    Progress,
    hookimpl,
    seconds_argument,
)
from ..profiling import Profiler, collect_profilers
from .verifying import resolve_projects

NO_PROFILER = ("no profiler is installed; Nsight Compute comes as a plugin: pip install -e plugins/ncu "
               "(see `workbench plugins`)")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?", help="project folder or kernel .py file (default: this folder)")
    parser.add_argument("--profiler", "-p", metavar="NAME", help="which profiler (default: the first installed)")
    parser.add_argument("--case", type=int, action="append", metavar="K", dest="cases",
                        help="profile case K (its index in CASES); repeatable (default: the benchmark cases)")
    parser.add_argument("--full", action="store_true", help="collect everything the tool can (ncu: --set full)")
    parser.add_argument("--timeout", type=seconds_argument, metavar="S", help="give up when the worker is silent S seconds")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--list", action="store_true", help="list the installed profilers, then exit")


def choose_profiler(profilers: dict[str, Profiler], name: str | None) -> Profiler:
    if not profilers:
        raise CommandError(NO_PROFILER, EXIT_ENVIRONMENT)
    if name is None:
        return next(iter(profilers.values()))
    if name not in profilers:
        raise CommandError(f"no profiler named {name!r}; installed: {', '.join(profilers)}", EXIT_UNUSABLE)
    return profilers[name]


def _run(args: argparse.Namespace, context: Context) -> int:
    profilers = collect_profilers(context.pm)
    if args.list:
        if not profilers:
            raise CommandError(NO_PROFILER, EXIT_ENVIRONMENT)
        for i, profiler in enumerate(profilers.values()):
            print(f"{profiler.name:<12} {profiler.help}{'  (default)' if i == 0 else ''}")
        return EXIT_OK
    profiler = choose_profiler(profilers, args.profiler)
    projects = resolve_projects([args.project] if args.project else [])
    if len(projects) != 1:
        raise CommandError("name one project to profile, e.g. workbench profile projects/rmsnorm")
    project = projects[0]
    progress = Progress(enabled=sys.stderr.isatty() and not args.json)
    options = {"cases": args.cases, "full": args.full, "timeout_s": args.timeout, "on_event": progress}
    try:
        result = profiler.run(project, options)
    finally:
        progress.clear()
    if args.json:
        print(json.dumps({"profiler": profiler.name, "project": project.name, "exit_code": result.exit_code,
                          "summary_lines": result.summary_lines, "report_path": result.report_path,
                          "metrics": result.metrics}, indent=2, default=str))
        return result.exit_code
    if result.exit_code != EXIT_OK:
        for line in result.summary_lines:
            print(f"workbench profile: {line}", file=sys.stderr)
        return result.exit_code
    for line in result.summary_lines:
        print(line)
    if result.report_path:
        print(f"report: {result.report_path}")
    return EXIT_OK


@hookimpl
def workbench_register_commands(register):
    register(Command(name="profile", help="profile a project's kernel with a profiler plugin (Nsight Compute ...)",
                     add_arguments=_add_arguments, run=_run))
