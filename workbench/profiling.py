"""What a profiler is, and the list that the ``workbench_register_profilers`` hook fills.

A profiler plugin (Nsight Compute: ``workbench-ncu``) registers a :class:`Profiler`; ``workbench
profile`` and the TUI's Profile panel call its ``run(project, options)`` and show the
:class:`ProfileResult`. ``run`` is called in the UI-free parent process: like every run it must
execute the kernel in a worker process, never in the caller: it describes its run with a
``workbench.core.run.RunSpec`` (its stage, the tool's ``launcher`` and ``env``, a Triton ``cache_dir`` of
its own) and runs it through a ``workbench.core.run.Session``, which starts the worker under the tool.

Options every profiler understands (each optional; a profiler ignores keys it does not know):

    cases      list[int]   indices into the kernel's CASES to profile (default: the profiler's own
                           choice, for ncu the benchmark cases, else ``get_inputs()``)
    full       bool        collect everything the tool can (ncu: ``--set full``), slower
    timeout_s  float       give up on a worker silent this long
    on_event   callable    receives each ``workbench.core.events.Event`` of the run as it arrives
                           (progress for a UI); called from the thread that called ``run``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pluggy

from .commands import collect_by_name


@dataclass
class ProfileResult:
    """The outcome of one profiler run.

    exit_code      0 profiled; 1 the kernel failed while profiled; 2 the project is unusable;
                   3 an environment problem (tool missing, no GPU, counters not permitted,
                   no kernel matched the filter). The CLI exits with it.
    summary_lines  what to show, one line per entry, no trailing newlines; on failure a single
                   line saying why. The caller shows report_path itself.
    report_path    the file the tool wrote for its own viewer (an ``.ncu-rep``), or None.
    metrics        machine-readable results, for ``--json`` and UIs; each profiler documents its keys.
    """

    exit_code: int
    summary_lines: list[str]
    report_path: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failure(cls, exit_code: int, reason: str, report_path: str | None = None) -> "ProfileResult":
        """A failed run, described in one line."""
        return cls(exit_code=exit_code, summary_lines=[reason], report_path=report_path)


@dataclass
class Profiler:
    """A profiler a plugin adds: ``run(project, options) -> ProfileResult`` (see the module doc)."""

    name: str
    help: str
    run: Callable[[Any, dict], ProfileResult]


def collect_profilers(pm: pluggy.PluginManager) -> dict[str, Profiler]:
    """Every registered profiler by name, in registration order: the first is the default."""
    return collect_by_name(pm.hook.workbench_register_profilers, "profiler")
