"""The workbench's engine, free of any UI (nothing under core/ imports textual; nothing here imports the
commands, the reports, the app or the plugins). docs/ARCHITECTURE.md draws the whole.

Layers, each importing only those before it, even for annotations (tests/test_layering.py holds the line):

    events, exit_codes, verdict, text, fsutil, heap
                            what a run emits; every exit status; its verdict; numbers as text; atomic files;
                            the C heap of a long-lived process
    project/                a project: its folder, workbench.toml, kernel.py's contract, history, scaffolds
    stage                   a job and what a stage is given
    verify/                 the verification battery: the checks, the judge, the comparison, interpreter fixes
    timing/                 benchmarks: timers, statistics, GPU facts and ceilings, autotune records
    run/                    processes: the runner and its workers (parent side), run/child/ (child side)
    live/                   the live loop: file watching, save -> run, changes between runs

Plugins import from the subpackages' own names (``workbench.core.project``, ``.run``, ``.verify``)
and from ``workbench.core.events``, ``.verdict``, ``.text`` and ``.stage``.
"""
