"""Every exit status the workbench's processes give, in one place (README, "Exit codes").

The commands' (`workbench verify`, `bench`, `ir`, ...; the pytest plugin and the MCP server say the same words):

    EXIT_OK           0    verified (bench: and timed)
    EXIT_FAILED       1    a kernel ran and was wrong (or posted no time)
    EXIT_UNUSABLE     2    the project could not be used: syntax, import, contract, config, a compile error
    EXIT_ENVIRONMENT  3    this machine cannot run it (no GPU for bench, cannot judge here, a worker that
                           cannot start)
    EXIT_SLOWER       4    verified, but slower than the baseline beyond noise (`bench --fail-slower`)
    EXIT_INTERRUPTED  130  Ctrl-C (128 + SIGINT); SIGTERM gives 128 + 15
    EXIT_BROKEN_PIPE  141  the reader of stdout went away (128 + SIGPIPE)

A child process's, read by the parent and never shown as a command's:

    EXIT_FORK_FAILED  70   a worker the template forked could not become one (run/child/template.py)
    EXIT_POISONED     75   a worker whose CUDA context an illegal access poisoned (run/protocol.py)
    EXIT_JUDGE_GONE   76   a worker whose judge process ended under it (run/child/judge_process.py)
"""

from __future__ import annotations

import signal

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE, EXIT_ENVIRONMENT = 0, 1, 2, 3
EXIT_SLOWER = 4
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE (signal.SIGPIPE does not exist on every platform)

EXIT_FORK_FAILED = 70
EXIT_POISONED = 75
EXIT_JUDGE_GONE = 76

# `workbench --help` lists them from here (README, "Exit codes", says the same at length).
EXIT_CODES_HELP = (f"exit codes: {EXIT_OK} verified, {EXIT_FAILED} verification failed, {EXIT_UNUSABLE} project "
                   f"unusable or bad input, {EXIT_ENVIRONMENT} environment problem, {EXIT_SLOWER} slower than the "
                   f"baseline (bench --fail-slower), {EXIT_INTERRUPTED} interrupted (Ctrl-C), {EXIT_TERMINATED} "
                   f"terminated (SIGTERM), {EXIT_BROKEN_PIPE} stdout closed early")
