"""Built-in command `watch`: the live loop (the TUI). Plain `workbench` inside a project opens it too."""

from __future__ import annotations

import argparse

from ..commands import EXIT_OK, Command, CommandError, Context, hookimpl, seed_argument
from ..core.project.folder import Project, ProjectError


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?", default=".", help="project folder or kernel .py file (default: .)")
    parser.add_argument("--interpret", action="store_true",
                        help="run under the Triton interpreter on the CPU even when a GPU is present")
    parser.add_argument("--no-bench", action="store_true", help="start with benchmarking off (b turns it on)")
    parser.add_argument("--seed", type=seed_argument, metavar="N",
                        help="draw every case's inputs from seed N on every save (default: workbench.toml's "
                             "[verify] seed, else one drawn when the app opens, shown beside the device)")


def _run(args: argparse.Namespace, context: Context) -> int:
    try:
        project = Project.open(args.project)
    except ProjectError as exc:
        raise CommandError(str(exc)) from None
    from ..tui.app import WorkbenchApp  # Textual loads only for this command
    from .verifying import make_runners

    (runner,) = make_runners(args, context, 1, keep_warm=True)  # every visible GPU, or a plugin's runner
    WorkbenchApp(project, pm=context.pm, interpret=args.interpret, bench=not args.no_bench, runner=runner,
                 seed=args.seed).run()
    return EXIT_OK


@hookimpl
def workbench_register_commands(register):
    register(Command(name="watch", help="open the live loop: every save is verified and benchmarked",
                     description="Watch a project: on each save of kernel.py (or workbench.toml, or a local "
                                 "module it imports) clear its Triton cache, verify, benchmark, and show the "
                                 "verdict, the errors, the timings and what changed.",
                     add_arguments=_add_arguments, run=_run))
