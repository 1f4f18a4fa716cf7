"""The workbench's engine, free of any UI (nothing under core/ imports textual).

Layers, each importing only those before it (tests/test_layering.py holds the line):

    events, fsutil, stage   what a run emits; atomic files; the runner <-> stage protocol
    project/                a project: its folder, workbench.toml, kernel.py's contract, history, scaffolds
    verify/                 the verification battery: the checks, the comparison, interpreter fixes
    timing/                 benchmarks: timers, statistics, GPU facts and ceilings, autotune records
    run/                    processes: warm workers, the runner, a run of a project end to end
    live/                   the live loop: file watching, save -> run, changes between runs

Plugins import from the subpackages' own names (``workbench.core.project``, ``.run``, ``.verify``)
and from ``workbench.core.events``.
"""
