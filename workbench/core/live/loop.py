"""The live loop's restart policy: one run at a time, the newest request wins (kill-then-restart).

    loop = LiveLoop(project, runner_or_None, on_event=..., on_done=...)
    loop.start()                      # warms a worker now, before the first save
    run_id = loop.submit(RunRequest(stages=("verify", "bench"), reason="save"))
    ...
    loop.close()

`submit` kills the run in progress and queues the new one; a run thread takes
the newest request, clears the project's Triton cache and runs it in a fresh
warm worker. The runs go through the loop's `run.session.Session` (one at a
time, cancel, close): on the runner given (`workbench watch`'s), else this
machine's, kept warm. Events reach `on_event(run_id, event)` on that thread;
once `submit` returns, no event of an older run is delivered, so a consumer only
ever sees the run it asked for last. UI-free.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Callable

from ..events import BenchResult, Event, Problem, RunFinished
from ..project.folder import Project
from ..project.history import RecorderLock
from ..run.contracts import RunnerLike
from ..run.session import PluginHooks, RunOutcome, RunSpec, Session
from .watch import Save


@dataclass(frozen=True)
class RunRequest:
    stages: tuple[str, ...] = ("verify",)
    reason: str = "save"  # start | save | rerun | verify only | new inputs
    pins: tuple[tuple[str, int | str], ...] = ()  # (autotuned kernel name, the config as described or its index)
    save: Save | None = None
    requested_at: float = field(default_factory=time.time)


OnRunEvent = Callable[[int, Event], None]
OnRunStart = Callable[[int, RunRequest], None]
OnRunDone = Callable[[int, RunRequest, RunOutcome], None]


class LiveLoop:
    def __init__(self, project: Project, runner: RunnerLike | None, on_event: OnRunEvent,
                 on_start: OnRunStart | None = None, on_done: OnRunDone | None = None,
                 hooks: PluginHooks | None = None, interpret: bool = False, seed: int | None = None):
        """`runner`: the runs' (None: this machine's, in the mode `interpret` says); `hooks`: the plugins', fired by
        each run; `seed`: the inputs' seed of every run (None: workbench.toml's, else the session's draw, the same
        for every save)."""
        self.project = project
        self.session = Session(hooks, [runner] if runner is not None else [], interpret=interpret, keep_warm=True)
        self.seed = seed
        self.on_event, self.on_start, self.on_done = on_event, on_start, on_done
        self._wakeup = threading.Condition()
        self._pending: tuple[int, RunRequest] | None = None
        self._latest = 0
        self._closed = False
        self._reference_timings: dict[str, dict] = {}  # baselines.reference_key -> Timing, from earlier runs
        self.recorder = RecorderLock(project)
        self.recording = True  # until start() finds another loop recording this project
        self._thread = threading.Thread(target=self._serve, name="workbench-live-loop", daemon=True)

    @property
    def latest(self) -> int:
        return self._latest

    def start(self) -> None:
        """Warm a worker now, and take the project's recorder lock: the runs of a second loop on one project
        are not recorded (`recording` says which this one is; `recorder.holder`, the pid of the one that is)."""
        self.recording = self.recorder.acquire()
        self.session.prewarm()
        self._thread.start()

    def submit(self, request: RunRequest) -> int:
        """Queue `request`, killing whatever runs now; returns its run id."""
        with self._wakeup:
            self._latest += 1
            self._pending = (self._latest, request)
            self._wakeup.notify()
        self.session.cancel()
        return self._latest

    def close(self) -> None:
        with self._wakeup:
            self._closed = True
            self._pending = None
            self._wakeup.notify()
        self.session.close()
        self.recorder.release()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _serve(self) -> None:
        while True:
            with self._wakeup:
                while self._pending is None and not self._closed:
                    self._wakeup.wait()
                if self._closed:
                    return
                run_id, request = self._pending
                self._pending = None
            self._run(run_id, request)

    def _run(self, run_id: int, request: RunRequest) -> None:
        if self.on_start is not None:
            self.on_start(run_id, request)

        def relay(event: Event) -> None:
            with self._wakeup:  # delivered under the lock: once submit() returns, older runs are silent
                current = run_id == self._latest
                if current:
                    self.on_event(run_id, event)
            if not current:
                self.session.cancel()  # overtaken after it was taken off the queue: stop it now

        started = time.monotonic()
        try:
            spec = RunSpec(tuple(request.stages), pins=dict(request.pins), live=True,
                           reference_timings=dict(self._reference_timings), record=self.recording, seed=self.seed)
            outcome = self.session.run(self.project, spec, relay)
        except Exception as exc:  # noqa: BLE001 - the loop must outlive any bug below it
            relay(Problem(kind="internal", message=f"the run failed inside the workbench: {type(exc).__name__}: {exc}",
                          traceback=traceback.format_exc()))
            relay(RunFinished(verdict="error", errors=1, duration_s=round(time.monotonic() - started, 3)))
            return
        self._learn_references(outcome)
        if self.on_done is not None and not self._closed:
            self.on_done(run_id, request, outcome)

    def _learn_references(self, outcome: RunOutcome) -> None:
        """Keep the reference times a run measured: the next save's benchmark reuses them (same key)."""
        for result in outcome.of_type(BenchResult):
            if result.reference is not None and result.reference_key:
                self._reference_timings[result.reference_key] = asdict(result.reference)
