"""Every pluggy hook of the workbench, each documented.

Plugins implement these with ``@workbench.hookimpl`` on functions of a module (or methods of
an object) that the plugin manager registers: the built-ins (``workbench.builtin.*``), the
modules of entry-point group ``workbench``, and a project's own ``workbench_plugin.py``
(see :mod:`workbench.plugins`). An implementation may accept fewer parameters than the spec
names, never more.

Two kinds of hook:

- Registration hooks (``workbench_register_*``) are called when the workbench builds one of its
  catalogs. They receive a ``register`` callable and call it once per thing they add; their
  return value is ignored. pluggy calls the most recently registered plugin first: a project's
  own plugin, then entry-point plugins, then the built-ins.
- Notification hooks (``workbench_observe_event``, ``workbench_finish_run``) are called in the
  process that started a run (the CLI, the TUI, pytest --workbench or the MCP server, never the
  worker process that runs the kernel), for every verify/bench run, one call at a time
  (``workbench.core.run.session.PluginHooks``). Their return values are ignored. An exception
  raised by an implementation stops no run: an observer's becomes a log line of the run, a
  finish hook's is printed (the TUI: its log). Keep them small and safe all the same.

One hook is ``firstresult`` (``workbench_make_runner``): the first implementation that returns
something other than None wins and the rest are not called. Every other hook calls every implementation.

Each docstring below says **When** the hook is called, what each **parameter** is, and what
becomes of the **Result**; ``tests/test_plugins.py`` fails when one of the three is missing.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pluggy

hookspec = pluggy.HookspecMarker("workbench")


@hookspec
def workbench_register_commands(register: Callable[[Any], None]) -> None:
    """Add subcommands to the ``workbench`` CLI.

    When: once per plugin manager, when the CLI collects its commands
    (:func:`workbench.commands.collect_commands`), before it parses the command line. The
    built-in commands (new, verify, list, doctor, plugins, profile ...) are registered through
    this same hook.

    register: call ``register(command)`` with a :class:`workbench.commands.Command` for each
    command; the command's ``run(args, context)`` returns the exit code (README: 0 passed,
    1 failed, 2 unusable input, 3 environment). Registering a name twice raises ``ValueError``,
    so a plugin cannot replace a built-in command.

    Result: ignored; every implementation is called.
    """


@hookspec
def workbench_register_scaffolds(register: Callable[[Any], None]) -> None:
    """Add scaffolds (templates and known ops) to ``workbench new``.

    When: each time the scaffold catalog is built (``workbench new``, ``workbench new --list``,
    the TUI's new-project dialog).

    register: call ``register(scaffold)`` with a :class:`workbench.core.project.scaffold.Scaffold`
    (a folder holding kernel.py and scaffold.toml; ``load_scaffold(path)`` reads one). The
    built-in scaffolds are listed first, so a plugin cannot shadow a built-in name.

    Result: ignored; every implementation is called.
    """


@hookspec
def workbench_register_profilers(register: Callable[[Any], None]) -> None:
    """Add profilers for ``workbench profile`` and the TUI's Profile panel.

    When: each time the profiler list is built (:func:`workbench.profiling.collect_profilers`):
    by ``workbench profile`` before it runs, and by the TUI when it starts.

    register: call ``register(profiler)`` with a :class:`workbench.profiling.Profiler` (a name,
    a one-line help, and ``run(project, options) -> ProfileResult``). The first profiler
    registered is the default; since the most recently registered plugin is called first, a
    project's own plugin provides the default in that project. A plugin that should not become
    the default marks its implementation ``@hookimpl(trylast=True)``. A name registered twice
    raises ``ValueError``.

    Result: ignored; every implementation is called.
    """


@hookspec
def workbench_register_panels(register: Callable[[Any], None]) -> None:
    """Add panels to the TUI.

    When: once, when the TUI app is built (never by the headless CLI).

    register: call ``register(panel)`` with a :class:`workbench.tui.panels.PanelSpec` (an id of
    lower-case letters, digits, '-' and '_'; a title; a factory returning a Textual widget). The
    app mounts each as a tab after its own and, when the widget has a method
    ``workbench_event(event)``, hands it every run event. A bad or taken id is refused with a
    notice, not an error.

    Result: ignored; every implementation is called.
    """


@hookspec
def workbench_register_checks(register: Callable[[Any], None]) -> None:
    """Add a check to the battery every verify and bench run makes.

    When: once per run, in the process that starts it (``workbench.core.run.session.PluginHooks``).

    register: call ``register(check)`` with a :class:`workbench.core.verify.checks.PluginCheck`: its JSON
    ``checks`` key, what failing it means, and ``"module:attribute"`` of an object with ``gather(inputs,
    outputs, reference)`` (run in the kernel's process after each case's first call; returns plain data) and
    ``decide(evidence)`` (run in the judge; returns the failure's message, or None), or of a
    :class:`workbench.core.verify.checks.Unit`, run as the built-in checks are. The module must import
    without the kernel. A key that is already a check's (built-in or registered) raises ``ValueError``.

    Result: ignored; every implementation is called.
    """


@hookspec
def workbench_register_config_tables(register: Callable[[str], None]) -> None:
    """Claim top-level tables of workbench.toml for this plugin (``[ncu]``, ``[cluster]``).

    When: as the plugin manager is made (:func:`workbench.plugins.make_plugin_manager`), before any
    workbench.toml is read in that process.

    register: call ``register(name)`` for each table the plugin reads (from ``ProjectConfig.extra``). A table
    no plugin claims and the workbench does not own is an error naming the closest known one, so that a typo
    (``[verfiy]``) is never ignored.

    Result: ignored; every implementation is called.
    """


@hookspec
def workbench_add_arguments(command: str, parser: Any) -> None:
    """Add options to a command that another plugin (or the workbench) registered.

    When: each time the CLI builds its parser, once per command, right after the command's own
    ``add_arguments``; before the command line is parsed.

    command: the command's name (``"verify"``, ``"bench"`` ...); add options only to those the
    plugin serves, and read them back from the parsed ``args`` (e.g. in ``workbench_make_runner``).

    parser: that command's :class:`argparse.ArgumentParser`. An option name the command already has
    raises ``argparse.ArgumentError``: choose names of the plugin's own.

    Result: ignored; every implementation is called.
    """


@hookspec(firstresult=True)
def workbench_make_runner(args: Any, interpret: bool, keep_warm: bool, projects: int, stages: Sequence[str]) -> Any:
    """Provide the runner that ``workbench verify`` and ``workbench bench`` run their projects with.

    When: once per command, before the first project runs, in the process that started the command.

    args: the parsed command line (:class:`argparse.Namespace`), with any options the plugin added
    through ``workbench_add_arguments``; ``args.command`` is the command's name.

    interpret: ``--interpret`` was given (the worker runs the Triton interpreter).

    keep_warm: more than one project will run: a runner may start the next worker ahead.

    projects: how many projects the command runs; stages: the stages each run takes (``["verify"]`` for
    ``workbench verify``). A plugin may return a list of runners for several projects: lanes, each running one
    project at a time, side by side (as ``workbench verify`` of several does on this machine's GPUs).

    Result: firstresult=True: the first non-None result is used, and no other implementation is
    called. Return None unless the command line asks for this plugin's runner (e.g. its
    ``--cluster`` option was given). A runner is a :class:`workbench.core.run.RunnerLike`
    (``run(job, on_event, timeout_s, interpret_timeout_s)``, ``cancel()``, ``close()``, ``prewarm()``,
    ``cancelled``). A plugin whose workers run elsewhere implements :class:`workbench.core.run.WorkerSource`
    (and :class:`~workbench.core.run.WorkerHandle` for each worker) and returns
    ``workbench.core.run.make_runner(workers=source, ...)``: the sharding, restarts and re-queueing stay
    the workbench's.
    A runner that cannot start (an unreachable cluster) raises
    :class:`workbench.commands.CommandError` with exit code 3 and a message naming what it tried.
    With no result the command runs on this machine's GPUs (``--gpus``).
    """


@hookspec
def workbench_observe_event(event: Any, project: Any) -> None:
    """See every event of a verify or bench run as it arrives.

    When: in the process that started the run (never the worker), once
    for each event the run emits, in order, from the worker's ``WorkerReady`` to the final
    ``RunFinished``. It runs on the path that renders results: return quickly and never block.

    event: a :class:`workbench.core.events.Event` (``WorkerReady``, ``RunStarted``,
    ``StageChanged``, ``CaseResult``, ``Problem``, ``LogLine``, ``BenchResult``,
    ``AutotuneReport``, ``RunFinished`` ...); every one is a dataclass with ``to_dict()``.

    project: the :class:`workbench.core.project.folder.Project` the run belongs to.

    Result: ignored; every implementation is called.
    """


@hookspec
def workbench_finish_run(project: Any, finished: Any, events: list[Any]) -> None:
    """React to a finished verify or bench run (notify, upload, record ...).

    When: once per run, in the process that started it, after its final ``RunFinished``
    event has been observed and before the CLI prints the run's report.

    project: the :class:`workbench.core.project.folder.Project` that ran.

    finished: the run's :class:`workbench.core.events.RunFinished` (verdict: passed, failed,
    error, or cancelled for a run a newer save overtook; counts; duration).

    events: every event of the run, in the order they arrived.

    Result: ignored; every implementation is called.
    """
