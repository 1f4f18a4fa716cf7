"""`workbench bench --cluster ... --per-gpu-kind`: each project verified and benchmarked once on every
kind of GPU in the cluster, at the same time (different kinds are different GPUs), as one run.

Each kind gets a Runner over Ray workers (runner.ray_runner) whose actors ask Ray for that accelerator_type; their events are relayed
as one run's (each result names its GPU, whose kind the DeviceFacts tell), and the bench report lays
the kinds side by side (workbench.reports.kinds_table).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from workbench.commands import EXIT_ENVIRONMENT, CommandError
from workbench.core.events import Event, RunFinished
from workbench.core.run import Job
from workbench.core.verdict import Tally

from .runner import cluster_gpus, connect, ray_runner


class KindsRunner:
    """A runner (workbench.core.run.RunnerLike) over one Ray runner per GPU kind; its `run` is theirs,
    together, reported as one run."""

    def __init__(self, kinds: dict[str, int], interpret: bool = False, connected_here: bool = False):
        """`kinds`: the GPU kinds to run on, with the cluster's count of each."""
        self.kinds, self.connected_here = list(kinds), connected_here
        self.runners = {kind: ray_runner(interpret=interpret, parallel=max(1, count),
                                         actor_options={"accelerator_type": kind}) for kind, count in kinds.items()}

    def run(self, job: Job, on_event: Any, timeout_s: float | None = None,
            interpret_timeout_s: float | None = None) -> RunFinished:
        started = time.monotonic()
        tally = Tally()
        lock = threading.Lock()

        def relay(event: Event) -> None:
            if isinstance(event, RunFinished):
                return  # one kind's end; the run's comes when every kind is over
            with lock:
                tally.add(event)
                on_event(event)

        threads = [threading.Thread(target=runner.run, args=(job, relay, timeout_s, interpret_timeout_s), daemon=True)
                   for runner in self.runners.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        finished = tally.finished(time.monotonic() - started, cancelled=self.cancelled)
        on_event(finished)
        return finished

    @property
    def cancelled(self) -> bool:
        return any(runner.cancelled for runner in self.runners.values())

    def prewarm(self) -> None:
        for runner in self.runners.values():
            runner.prewarm()

    def cancel(self) -> None:
        for runner in self.runners.values():
            runner.cancel()

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()
        if self.connected_here:
            import ray

            ray.shutdown()


def make_matrix_runner(address: str, interpret: bool = False) -> KindsRunner:
    connected = connect(address)
    gpus = cluster_gpus()
    kinds = sorted(gpus)
    named = {k: gpus[k] for k in kinds if k != "GPU"}
    if not named:
        if connected:
            import ray

            ray.shutdown()
        raise CommandError(f"--per-gpu-kind: no node of the Ray cluster at {address} names its GPU kind "
                           f"(Ray's accelerator_type resource); found: {', '.join(kinds) or 'no GPU'}",
                           EXIT_ENVIRONMENT)
    return KindsRunner(named, interpret=interpret, connected_here=connected)
