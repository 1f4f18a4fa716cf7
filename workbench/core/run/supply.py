"""Parent side: the warm-worker supply. Spares started ahead of need, the workers a run holds, the ones
exiting, and a run's compile processes; taking, releasing, killing and waiting for them.

Importing torch and starting CUDA costs seconds, so a run must not wait for it: the supply keeps
spares warm (each on the GPU a run will want it on) and a run takes one. A GPU process takes a few
hundred ms to exit (its context torn down): that is waited for in the background, or by
`await_exits` before a kernel is timed, so nothing else holds the GPU then.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

from . import trace
from .contracts import WorkerHandle, WorkerSource
from .workers import WorkerStartError

if TYPE_CHECKING:
    from .gpus import GpuSlot

SPARE_WARMUP_WAIT_S = 10.0  # the most a benchmark waits at its gate for the next save's spares to be warm


class WorkerSupply:
    """Workers from `source`, kept warm. `spares` and `active` are read-only views for reports and tests."""

    def __init__(self, source: WorkerSource):
        self.source = source
        self._spares: list[WorkerHandle] = []
        self._active: set[WorkerHandle] = set()
        self._exiting: list[WorkerHandle] = []
        self._compiling: set[Any] = set()  # the run's compile processes (run/child/compile_pool.py)
        self._lock = threading.Lock()

    @property
    def spares(self) -> list[WorkerHandle]:
        with self._lock:
            return list(self._spares)

    @property
    def active(self) -> list[WorkerHandle]:
        with self._lock:
            return list(self._active)

    @property
    def exiting(self) -> list[WorkerHandle]:
        """Workers released and not yet waited for by `await_exits`."""
        with self._lock:
            return list(self._exiting)

    @property
    def compiling(self) -> list[Any]:
        """The run's compile processes started and not yet stopped."""
        with self._lock:
            return list(self._compiling)

    def new_worker(self, gpu: GpuSlot | None = None) -> WorkerHandle:
        return self.source.new_worker(gpu)

    def prewarm(self, wanted: Sequence[GpuSlot | None]) -> None:
        """Start spares now, one for each GPU in `wanted` (a GPU may be wanted several times), so that the next
        run waits for no start-up."""
        with trace.span("prewarm"), self._lock:
            self._spares = [w for w in self._spares if w.proc.poll() is None]
            missing = Counter(wanted) - Counter(w.gpu for w in self._spares)
            for gpu, count in missing.items():
                self._spares += [self.source.new_worker(gpu) for _ in range(count)]

    def any_spare(self, gpu: GpuSlot | None) -> WorkerHandle:
        """A live spare (any GPU) left in the supply, else a new one on `gpu` added as a spare: to ask a worker
        what it can do before the first run takes one."""
        with self._lock:
            probe = next((w for w in self._spares if w.proc.poll() is None), None)
            if probe is None:
                probe = self.source.new_worker(gpu)
                self._spares.append(probe)
            return probe

    def take(self, gpu: GpuSlot | None = None, label: str = "") -> WorkerHandle:
        """A warm spare on `gpu` (else a new worker), now the run's."""
        with self._lock:
            alive = [w for w in self._spares if w.proc.poll() is None]
            worker = next((w for w in alive if w.gpu == gpu), None)
            self._spares = [w for w in alive if w is not worker]
        if worker is None:
            worker = self.source.new_worker(gpu)
        with self._lock:
            self._active.add(worker)
        trace.mark(f"take {id(worker) % 10000:04d}{label}"
                   f"{' not ready' if worker.ready is None and worker.queue.empty() else ''}")
        return worker

    def release(self, worker: WorkerHandle) -> None:
        """Kill a worker whose job is over; its exit is waited for in the background, or by `await_exits`."""
        with self._lock:
            self._active.discard(worker)
            self._exiting = [w for w in self._exiting if w.proc.poll() is None] + [worker]
        worker.kill(wait=False)

    def await_exits(self) -> None:
        """Until the workers released so far are gone: nothing else holds the GPU while a kernel is timed."""
        with trace.span("await exits"):
            with self._lock:
                exiting, self._exiting = self._exiting, []
            for worker in exiting:
                worker.wait_exit()

    def await_spares(self, cancelled: threading.Event) -> None:
        """Until the spares started for the next save are warm (or gone, or SPARE_WARMUP_WAIT_S passed): a
        warming worker brings up a CUDA context and launches its warm-up kernels, which must not land inside
        a timed series."""
        deadline = time.monotonic() + SPARE_WARMUP_WAIT_S
        for spare in self.spares:
            left = deadline - time.monotonic()
            if left <= 0 or cancelled.is_set() or not spare.started_up.wait(left):
                return  # one still warming past the limit: the benchmark goes on without waiting longer
            with contextlib.suppress(WorkerStartError):  # a spare that could not start: its take reports it
                spare.wait_ready()  # at once: its WorkerReady (or its end) is in the queue

    def trim(self, keep: Sequence[GpuSlot | None]) -> None:
        """Let the spares beyond `keep` (one per listed GPU) go: each holds a CUDA context."""
        wanted = Counter(keep)
        kept: list[WorkerHandle] = []
        unused: list[WorkerHandle] = []
        with self._lock:
            for worker in self._spares:
                if wanted[worker.gpu] > 0 and worker.proc.poll() is None:
                    wanted[worker.gpu] -= 1
                    kept.append(worker)
                else:
                    unused.append(worker)
            self._spares = kept
        for worker in unused:
            threading.Thread(target=worker.close_unused, daemon=True).start()

    def start_compile_processes(self, env: dict[str, str], count: int) -> list[Any]:
        """A run's compile processes (the source forks them), held until `stop_compile_processes`."""
        processes = self.source.start_compile_processes(env, count)
        with self._lock:
            self._compiling.update(processes)
        return processes

    def stop_compile_processes(self) -> None:
        """Kill the compile processes still running (those done have exited by themselves)."""
        with self._lock:
            processes, self._compiling = list(self._compiling), set()
        for process in processes:
            if process.poll() is None:
                process.kill()

    def stop_active(self) -> None:
        """Kill every worker a run holds now and stop reading it (a cancel): returns at once."""
        for worker in self.active:
            worker.kill(wait=False)
            worker.queue.put(("cancelled", None))  # its event pump returns now, not at the exit

    def close(self) -> None:
        """Kill every worker, spare or held, and close the source (its template)."""
        self.stop_compile_processes()
        with self._lock:
            spares, self._spares = self._spares, []
            held = list(self._active)
        for worker in [*held, *spares]:
            worker.kill()
        self.source.close()
