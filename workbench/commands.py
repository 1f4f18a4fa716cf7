"""What a command is, the registry that hooks fill, and what commands share (a progress line).

Exit codes are an API (README.md), defined once in workbench/core/verdict.py and re-exported here
for commands and plugins: 0 all passed, 1 a verification failed, 2 the project or its kernel.py
could not be used (also: bad arguments, a refused name), 3 an environment problem (no
torch/triton, no GPU where one is needed, GPU ONLY), 4 verified but slower than the baseline beyond
noise (`workbench bench --fail-slower`; only where the run would otherwise exit 0).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
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


HEARTBEAT_ENV = "WORKBENCH_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 30.0


class Heartbeat:
    """Where stderr is no terminal (CI, an agent's pipe) and the live status line is off: one line on stderr when
    a project has said nothing new for `every_s` seconds ("rmsnorm: still importing kernel.py, 60 s"), so that
    a slow import or compile is not 300 s of silence. WORKBENCH_HEARTBEAT_S sets the interval (0: none)."""

    def __init__(self, enabled: bool, every_s: float | None = None):
        every_s = float(os.environ.get(HEARTBEAT_ENV, DEFAULT_HEARTBEAT_S)) if every_s is None else every_s
        self.every_s = every_s if enabled and every_s > 0 else 0.0
        self._lock = threading.Lock()
        self._doing: dict[str, tuple[str, float, float]] = {}  # project -> (what, since, last said)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self, project: str) -> None:
        """A project's run starts: said if its worker takes `every_s` to start."""
        self(project, None)

    def __call__(self, project: str, event: Event | None) -> None:
        if not self.every_s:
            return
        now = time.monotonic()
        with self._lock:
            if isinstance(event, StageChanged):
                what = {"importing": "importing kernel.py"}.get(event.stage, event.stage)
                self._doing[project] = (f"{what} {event.detail}".strip(), now, now)
            elif project in self._doing and event is not None:
                what, _, _ = self._doing[project]
                self._doing[project] = (what, now, now)
            else:
                self._doing[project] = ("starting", now, now)
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="workbench-heartbeat", daemon=True)
            self._thread.start()

    def done(self, project: str) -> None:
        with self._lock:
            self._doing.pop(project, None)

    def close(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.every_s)):
            now = time.monotonic()
            with self._lock:
                for project, (what, since, said) in list(self._doing.items()):
                    if now - said >= self.every_s:
                        sys.stderr.write(f"workbench: {project}: still {what}, {now - since:.0f} s\n")
                        sys.stderr.flush()
                        self._doing[project] = (what, since, now)


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


def seed_argument(text: str) -> int:
    """An argparse `type` for --seed: a whole number from 0 to config.MAX_SEED, else exit 2 naming the option."""
    from .core.project.config import seed_value

    try:
        return seed_value(text, from_text=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_argument(text: str) -> float:
    """An argparse `type` for a time-out in seconds: finite and above 0, else exit 2 naming the option."""
    from .core.project.config import timeout_argument

    try:
        return timeout_argument(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
