"""The server's runs: warm workers kept between tool calls, one run at a time, and cancelling one.

A runner per mode (the GPU, or the Triton interpreter with `interpret`) is made on first use with
`keep_warm`: like the live loop's, it keeps spare workers started (torch and triton imported, the CUDA
context up) for the next run, so a second verify pays what a save pays in the live loop, not a cold start.
Runs are blocking (the runner relays a worker's events to `on_event` as they come): the server calls
`Runs.run` from a worker thread and `Runs.cancel` from the event loop when the client cancels the call.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from workbench.core.events import Event
from workbench.core.project import Project
from workbench.core.run import PluginHooks, RunOutcome, RunSpec, choose_runners, run_project
from workbench.core.stage import BENCH_STAGES


class Runs:
    def __init__(self, make_runner: Callable[[bool], Any] | None = None, hooks: PluginHooks | None = None):
        self._make_runner = make_runner or default_runner
        self.hooks = hooks  # the plugins' notification hooks, fired by every run (run/session.PluginHooks)
        self._runners: dict[bool, Any] = {}
        self._one_at_a_time = threading.Lock()
        self._state = threading.Lock()
        self._current: Any = None
        self._cancel_asked = False

    def runner(self, interpret: bool) -> Any:
        with self._state:
            if interpret not in self._runners:
                self._runners[interpret] = self._make_runner(interpret)
            return self._runners[interpret]

    def prewarm(self, interpret: bool = False) -> None:
        """Start the spares of the default mode now, so the first call is warm too."""
        self.runner(interpret).prewarm()

    def run(self, project: Project, stages: list[str], interpret: bool = False, cases: list[int] | None = None,
            timeout_s: float | None = None, on_event: Callable[[Event], None] | None = None,
            live: bool = False) -> RunOutcome:
        """One run of `project` (blocking; one at a time: a second call waits for the first). `live`: as the
        live loop runs a save (no torch.compile, CUDA-graph or non-contiguous checks)."""
        with self._one_at_a_time:
            runner = self.runner(interpret)
            with self._state:
                self._current, self._cancel_asked = runner, False

            def relay(event: Event) -> None:
                if self._cancel_asked:  # asked before the runner had started this run: stop it now
                    runner.cancel()
                if on_event is not None:
                    on_event(event)

            try:
                spec = RunSpec(tuple(stages), case_indices=cases, timeout_s=timeout_s, live=live)
                return run_project(project, runner, spec, relay, self.hooks)
            finally:
                with self._state:
                    self._current = None

    def cancel(self) -> None:
        """Stop the run in progress, if any (its workers are killed; the runner stays for the next call)."""
        with self._state:
            self._cancel_asked = True
            current = self._current
        if current is not None:
            current.cancel()

    def close(self, wait_s: float = 0.5) -> None:
        """Stop every worker. A client ends the server by closing its stdin and sends SIGTERM two seconds
        later; a spare still importing torch takes longer than that to notice a closed pipe, so the closing
        is waited for at most `wait_s`: whatever is left dies with this process (every worker holds a pipe
        only this process keeps open, and ends when it closes)."""
        with self._state:
            runners, self._runners = list(self._runners.values()), {}
        closing = [threading.Thread(target=runner.close, daemon=True) for runner in runners]
        for thread in closing:
            thread.start()
        deadline = time.monotonic() + wait_s
        for thread in closing:
            thread.join(max(0.0, deadline - time.monotonic()))


def default_runner(interpret: bool) -> Any:
    """One lane over this machine's GPUs (none under the interpreter), spares kept warm."""
    return choose_runners(1, BENCH_STAGES, interpret=interpret, keep_warm=True)[0]
