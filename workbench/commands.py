"""What a command is, the registry that hooks fill, and what commands share (a progress line).

Exit codes are an API (README.md), defined once in workbench/core/verdict.py and re-exported here
for commands and plugins: 0 all passed, 1 a verification failed, 2 the project or its kernel.py
could not be used (also: bad arguments, a refused name), 3 an environment problem (no
torch/triton, no GPU where one is needed, GPU ONLY), 4 verified but slower than the baseline beyond
noise (`workbench bench --fail-slower`; only where the run would otherwise exit 0).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable

import pluggy

hookimpl = pluggy.HookimplMarker("workbench")

from .core.events import Event, StageChanged
from .core.exit_codes import (  # noqa: F401 - the API plugins import
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SLOWER,
    EXIT_UNUSABLE,
)


@dataclass
class Context:
    """What a command's `run` gets besides its arguments."""

    pm: pluggy.PluginManager

    def hook(self) -> Any:
        return self.pm.hook


@dataclass
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Context], int]
    description: str = ""


class CommandError(Exception):
    """A user error a command reports in one line, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_UNUSABLE):
        super().__init__(message)
        self.exit_code = exit_code


def collect_by_name(hook: Callable[..., Any], what: str) -> dict[str, Any]:
    """Call a registration hook; return what was registered, by `.name`, in registration order."""
    found: dict[str, Any] = {}

    def register(thing: Any) -> None:
        if thing.name in found:
            raise ValueError(f"{what} {thing.name!r} is registered twice")
        found[thing.name] = thing

    hook(register=register)
    return found


def collect_commands(pm: pluggy.PluginManager) -> dict[str, Command]:
    return collect_by_name(pm.hook.workbench_register_commands, "command")


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


def seconds_argument(text: str) -> float:
    """An argparse `type` for a time-out in seconds: finite and above 0, else exit 2 naming the option."""
    from .core.project.config import timeout_argument

    try:
        return timeout_argument(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
