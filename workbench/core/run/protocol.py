"""What crosses the process boundary between the parent (the runner) and its children, in one place.

The parent never imports the user's kernel, torch or triton; a child (run/child/) runs one job. They
share nothing but what this module names (docs/ARCHITECTURE.md, "The process boundary"):

- how a child is started: ``python -m WORKER_MODULE`` (or forked from ``TEMPLATE_MODULE``, the warm
  template, run/forkserver.py); a compile process is a worker whose ROLE_ENV is COMPILE_ROLE, with its
  order (`CompilePoolOrder.order_for`) in COMPILE_ORDER_ENV;
- the job: one JSON line on the child's stdin (`core.stage.Job`), later a GPU_GATE line ("the GPU is yours");
- the events: JSON lines on its stdout (core/events.py); its prints on stderr;
- how it ends: a StageChanged(stage=JOB_DONE) with the exit status in `current`, then the exit: 0, or
  exit_codes.EXIT_POISONED after a CUDA error left its context unusable (the parent resumes the cases left in a fresh
  worker); a shard past its verification cases says PRECOMPILING. A child ending before its job is done
  crashed, whatever its status (os._exit(0) in kernel.py is a crash too);
- how it dies with the parent: the child holds the read end of a pipe whose write end only the parent
  holds (PARENT_FD_ENV names it); when the parent is gone, however it went (SIGKILL, a CI job's time-out,
  a crash), the read sees the end of the pipe and the child ends its process group (`die_with_parent`).
"""

from __future__ import annotations

import os
import signal
import threading

from ..stage import COMPILE_MODE, COMPILE_TARGET_ENV  # noqa: F401 - a worker that compiles for a named target

WORKER_MODULE = "workbench.core.run.child.worker"
TEMPLATE_MODULE = "workbench.core.run.child.template"
COMPILE_CHECK_MODULE = "workbench.core.run.child.torch_compile_process"  # verify/compat_beside.py

JOB_DONE = "done"  # the last StageChanged of a job; `current` holds the worker's exit status
PRECOMPILING = "precompiling"  # the StageChanged a verification shard sends when its verification is over
GPU_GATE = "gpu"  # the line the parent sends a gated job once the GPU is its own

ROLE_ENV = "WORKBENCH_ROLE"
COMPILE_ROLE = "compile"  # ROLE_ENV of a compile process (child/compile_pool.py)
COMPILE_ORDER_ENV = "WORKBENCH_COMPILE_ORDER"  # a compile process's order, in its environment
COMPILE_POOL_ENV = "WORKBENCH_COMPILE_POOL"  # "0": verification sharded over GPU workers instead
COMPILE_PROCESSES_ENV = "WORKBENCH_COMPILE_PROCESSES"
PARENT_FD_ENV = "WORKBENCH_PARENT_FD"  # the child's read end of the parent-death pipe


def compile_pool_wanted() -> bool:
    return os.environ.get(COMPILE_POOL_ENV, "1") != "0"


def compile_processes() -> int:
    """Compile processes beside a run's one GPU worker (child/compile_pool.py): WORKBENCH_COMPILE_PROCESSES, else
    one per core (the GPU worker and its judge mostly wait while they compile; H100, 16 cores: the verdict
    0.87 s with 16, 1.07 s with 14; RESULTS.md 3f)."""
    return count_from_env(COMPILE_PROCESSES_ENV, max(1, os.cpu_count() or 2))


def count_from_env(name: str, default: int) -> int:
    """A count the environment may set (a positive integer in `name`), else `default`."""
    configured = os.environ.get(name, "")
    return int(configured) if configured.isdigit() and int(configured) > 0 else default


_death_pipe: tuple[int, int] | None = None
_death_pipe_lock = threading.Lock()


def parent_death_fd() -> int:
    """The read end of this process's parent-death pipe (run/protocol.py): made once; the write end never
    leaves this process (both ends are non-inheritable, and only the read end is passed to a child)."""
    global _death_pipe
    with _death_pipe_lock:
        if _death_pipe is None:
            _death_pipe = os.pipe()
        return _death_pipe[0]


def dies_with_this_process(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child that must end when this process does (the child also needs the fd passed)."""
    return {**env, PARENT_FD_ENV: str(parent_death_fd())}


def die_with_parent() -> None:
    """Child side: end this process's group (this process, and the judge it forked) the moment the parent
    is gone. A thread blocks on the parent-death pipe (PARENT_FD_ENV); its end of file means no process
    holds the write end any more. Nothing happens where the variable is not set (a worker started by hand,
    by a Ray actor, or a test)."""
    value = os.environ.get(PARENT_FD_ENV, "")
    if not value.isdigit():
        return
    fd = int(value)
    try:
        os.fstat(fd)
    except OSError:
        return  # not passed to this process after all

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-death", daemon=True).start()
