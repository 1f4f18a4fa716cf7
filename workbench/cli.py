"""The `workbench` command. Commands come from the plugin manager; exit codes are an API.

    0  all passed
    1  a verification failed (or a benchmark's re-check failed)
    2  the project or its kernel.py could not be used; bad arguments; a refused name
    3  an environment problem (no torch/triton, no GPU where one is needed, a missing profiler)
  141  stdout was closed before everything was printed (`workbench ... | head -1`): 128 + SIGPIPE, as a
       shell reports a command a closed pipe killed; the command stops quietly (no traceback), and
       what it finished stands (a project `new` wrote is complete, the runs verified are recorded)
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from pathlib import Path

import pluggy

from . import __version__
from .commands import (
    EXIT_ENVIRONMENT,
    EXIT_UNUSABLE,
    CommandError,
    Context,
    collect_commands,
)
from .core.exit_codes import EXIT_BROKEN_PIPE, EXIT_CODES_HELP, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_TERMINATED
from .plugins import PluginError, make_plugin_manager


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; say how to get help too
        self.print_usage(sys.stderr)
        self.exit(EXIT_UNUSABLE, f"{self.prog}: error: {message}\n")


def build_parser(commands: dict, pm: pluggy.PluginManager | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="workbench", description="Write, verify and benchmark Triton kernels.",
                     epilog=EXIT_CODES_HELP)
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    parser.add_argument("--no-plugins", action="store_true", help="load built-in commands only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in sorted(commands):
        command = commands[name]
        p = sub.add_parser(name, help=command.help, description=command.description or command.help)
        command.add_arguments(p)
        if pm is not None:
            pm.hook.workbench_add_arguments(command=name, parser=p)
    return parser




def main(argv: list[str] | None = None, pm: pluggy.PluginManager | None = None) -> int:
    """Run one command; returns its exit code. `pm`: a ready plugin manager (tests), else one is built."""
    try:
        code = _main(argv, pm)
        sys.stdout.flush()  # here, not at the interpreter's exit: a closed pipe is met in the try
        return code
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null, so that nothing later (the interpreter's last flush
    of what is still buffered) meets the closed pipe again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _main(argv: list[str] | None, pm: pluggy.PluginManager | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    plugins = "--no-plugins" not in argv  # built-ins only: no installed, no project-local plugins
    try:
        if pm is None:
            # `--no-plugins`: the built-ins only; otherwise WORKBENCH_DISABLE_PLUGIN_AUTOLOAD decides (plugins.py).
            pm = make_plugin_manager(autoload=None if plugins else False,
                                     project_dir=_project_dir_hint(argv) if plugins else None)
        commands = collect_commands(pm)
    except PluginError as exc:
        print(f"workbench: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    parser = build_parser(commands, pm)
    if not argv or argv == ["--no-plugins"]:
        # Plain `workbench` inside a project opens the live loop on it.
        if (Path.cwd() / "kernel.py").is_file() and "watch" in commands:
            argv = [*argv, "watch", "."]
        else:
            parser.print_help()
            return EXIT_UNUSABLE
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_UNUSABLE
    previous = signal.signal(signal.SIGTERM, _terminated) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        return commands[args.command].run(args, Context(pm=pm))
    except CommandError as exc:
        print(f"workbench {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        print(f"workbench {args.command}: interrupted (SIGTERM); its workers were stopped", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print(f"workbench {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # main's: stdout went away
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # A full disk is the machine's, not the kernel's (it was a traceback and exit 1): what was written is
        # whole (every record and report is written atomically), what was not is absent.
        print(f"workbench {args.command}: no space left to write {exc.filename or 'a file'} "
              f"({exc.strerror}); free some and run it again", file=sys.stderr)
        return EXIT_ENVIRONMENT
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI job's time-out, `kill`), handled as Ctrl-C is: every command's cleanup runs (its
    runners close and kill their workers) and the command says it was interrupted. Workers die with the
    workbench however it ends (run/protocol.py), but a clean end also prints why."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _project_dir_hint(argv: list[str]) -> Path | None:
    """The project whose workbench_plugin.py to load: the first argument that is one, else cwd."""
    for arg in argv:
        if not arg.startswith("-"):
            path = Path(arg)
            try:
                if path.is_dir() and (path / "kernel.py").is_file():
                    return path
                if path.suffix == ".py" and path.is_file():
                    return path.parent
            except OSError:  # a name too long for the file system, a folder not ours to read: not a project
                continue
    return Path.cwd() if (Path.cwd() / "kernel.py").is_file() else None


if __name__ == "__main__":
    sys.exit(main())
