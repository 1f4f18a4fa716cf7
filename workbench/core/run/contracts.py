"""Parent side: what a runner and a worker are, as typed contracts that plugins implement from outside.

A plugin that runs workers elsewhere (workbench-ray: Ray actors, one GPU each) implements
`WorkerSource` and `WorkerHandle` and hands its source to `Runner(workers=...)`: the sharding,
restarts, time-outs and re-queueing stay the Runner's, and nothing a plugin needs is private. A
plugin that replaces the runner altogether (one per GPU kind) implements `RunnerLike`.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from ..events import Event, LogLine, RunFinished, WorkerReady
from ..stage import Job

if TYPE_CHECKING:
    from .gpus import GpuSlot

OnEvent = Callable[[Event], None]


@runtime_checkable
class ProcessLike(Protocol):
    """The parts of `subprocess.Popen` the runner reads of a worker's process."""

    pid: int | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int | None: ...


@runtime_checkable
class WorkerHandle(Protocol):
    """One worker, as the runner drives it: started warm, given one job, its events read until its end.

    `queue` carries ("event", Event), then ("eof", None) when the worker's event stream ends; the runner
    may put ("cancelled", None) to stop reading. `lost` says why the worker's machine or GPU went away
    ("" while it has not): then its unfinished cases are re-queued, not failed. `started_up` is set once
    its WorkerReady (or its end) has come.
    """

    queue: queue.Queue[tuple[str, Any]]
    proc: ProcessLike
    gpu: GpuSlot | None  # the GPU the runner placed it on (None: the environment's, or the source's own choice)
    started_up: threading.Event
    ready: WorkerReady | None
    lost: str

    @property
    def gpu_id(self) -> str:
        """How results name the GPU that ran them ("" when the run places none)."""
        ...

    def wait_ready(self, timeout: float = ...) -> WorkerReady: ...

    def send(self, job: Job) -> None: ...

    def send_line(self, line: str) -> None: ...

    def kill(self, wait: bool = True) -> None: ...

    def wait_exit(self, timeout: float = 5.0) -> None: ...

    def drain_log(self, timeout: float = 1.0) -> list[LogLine]: ...

    def close_unused(self) -> None: ...


@runtime_checkable
class WorkerSource(Protocol):
    """Where a runner's workers come from: this machine (workers.LocalWorkers) or elsewhere.

    `local`: the workers run on this machine, so compile processes forked here can reach them and an
    early benchmark can be held at a GPU gate beside its verification's last workers."""

    local: bool

    def new_worker(self, gpu: GpuSlot | None) -> WorkerHandle: ...

    def start_compile_processes(self, env: dict[str, str], count: int) -> list[Any]:
        """`count` compile processes (run/child/compile_pool.py) with this environment; [] where none can start."""
        ...

    def warm_compiler(self, target: list[Any]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class RunnerLike(Protocol):
    """What the CLI, the app, the pytest plugin and the profilers ask of a runner (core.run.Runner is one)."""

    def run(self, job: Job, on_event: OnEvent, timeout_s: float | None = None,
            interpret_timeout_s: float | None = None) -> RunFinished: ...

    def prewarm(self) -> None: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...

    @property
    def cancelled(self) -> bool:
        """The run in progress (or the last one) was cancelled."""
        ...
