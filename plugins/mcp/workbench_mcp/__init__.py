"""workbench-mcp: Kernel Workbench as a Model Context Protocol server (`workbench mcp`).

Registered through the entry point ``[project.entry-points.workbench] mcp = "workbench_mcp"``. The SDK is
imported when the command runs, not when the plugin loads: `workbench verify` pays nothing for it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench import hookimpl
from workbench.commands import EXIT_ENVIRONMENT, Command, CommandError, Context

__version__ = "0.1.0"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path("."),
                        help="the folder project paths are relative to (default: this folder)")
    parser.add_argument("--interpret", action="store_true",
                        help="verify under the Triton interpreter by default, even with a GPU")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="start workers at the first call rather than at once")


def _run(args: argparse.Namespace, context: Context) -> int:
    try:
        from .server import serve
    except ImportError as exc:
        raise CommandError(f"the MCP SDK is not importable ({exc}): pip install 'mcp>=2.3,<3'",
                           EXIT_ENVIRONMENT) from None
    root = args.root.expanduser()
    if not root.is_dir():
        raise CommandError(f"--root {args.root}: not a folder")
    return serve(context.pm, root.resolve(), interpret=args.interpret, prewarm=not args.no_prewarm)


@hookimpl
def workbench_register_commands(register):
    register(Command(name="mcp", help="serve the workbench to coding agents over the Model Context Protocol (stdio)",
                     add_arguments=_add_arguments, run=_run))
