"""Every pluggy hook of the workbench, each documented.

Plugins implement these with `@workbench.hookimpl`. Registration hooks are
called once, when the plugin manager is built into a `Registry`; they receive
a `register` callable and call it once per thing they add. Notification hooks
are called for every run, in the process that started the run (never in the
worker), and their return values are ignored unless the hook says otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

import pluggy

hookspec = pluggy.HookspecMarker("workbench")


@hookspec
def workbench_register_commands(register: Callable[[Any], None]) -> None:
    """Add CLI commands.

    Called once, when the CLI builds its parser. Call ``register(command)`` with a
    :class:`workbench.commands.Command` for each command. Built-in commands (new,
    verify, list, doctor ...) are registered through this same hook; a later
    registration of an existing name is an error. All implementations are called.
    """


@hookspec
def workbench_register_scaffolds(register: Callable[[Any], None]) -> None:
    """Add scaffolds for ``workbench new``.

    Called once, when the scaffold catalog is built. Call ``register(scaffold)``
    with a :class:`workbench.core.scaffold.Scaffold` (a folder holding kernel.py
    and scaffold.toml; load one with ``load_scaffold(path)``). Built-in scaffolds
    come first, so a plugin cannot shadow a built-in name. All implementations are called.
    """


@hookspec
def workbench_register_profilers(register: Callable[[Any], None]) -> None:
    """Add profilers for ``workbench profile`` and the TUI's profile key.

    Called once, when the profiler list is built. Call ``register(profiler)`` with
    a :class:`workbench.profiling.Profiler`. The first profiler registered is the
    default. All implementations are called.
    """


@hookspec
def workbench_register_panels(register: Callable[[Any], None]) -> None:
    """Add panels to the TUI.

    Called once, when the app is built. Call ``register(panel)`` with a
    :class:`workbench.tui.panels.PanelSpec` (an id, a title, and a factory that
    returns a Textual widget); the app shows each as a tab and hands it every run
    event. All implementations are called.
    """


@hookspec
def workbench_observe_event(event: Any, project: Any) -> None:
    """See every event of a run as it arrives.

    Called in the parent process for each event (``workbench.core.events``) of
    every verify/bench run started by the CLI or the TUI, with the
    :class:`workbench.core.project.Project` it belongs to. Must return quickly: it
    runs on the path that renders results. Return value ignored; all implementations are called.
    """


@hookspec
def workbench_finish_run(project: Any, finished: Any, events: list[Any]) -> None:
    """React to a finished run.

    Called once per run after its final ``RunFinished`` event, with the project,
    that event (verdict and counts) and every event of the run in order.
    Return value ignored; all implementations are called.
    """
