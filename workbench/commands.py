"""What a command is, and the registry that hooks fill.

Exit codes are an API (README.md): 0 all passed, 1 a verification failed,
2 the project or its kernel.py could not be used (also: bad arguments, a refused
name), 3 an environment problem (no torch/triton, no GPU where one is needed).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable

import pluggy

hookimpl = pluggy.HookimplMarker("workbench")

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE, EXIT_ENVIRONMENT = 0, 1, 2, 3


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
