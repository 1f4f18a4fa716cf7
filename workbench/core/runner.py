"""Parent side of a run: warm worker processes, time-outs, crashes, cancellation.

The parent never imports the user's kernel, torch or triton: it starts
`python -m workbench.core.worker`, waits for its `worker_ready` line, sends
one job, and relays the events it streams back. A worker that segfaults,
poisons its CUDA context or hangs past the time-out is killed; the case it was
on is reported as failed and the remaining cases resume in a fresh worker.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from .events import CaseResult, Event, LogLine, Problem, RunFinished, RunStarted, StageChanged, Tally, \
    WorkerReady, event_from_json
from .worker import EXIT_POISONED, Job

OnEvent = Callable[[Event], None]
MAX_RESTARTS = 3
STARTUP_TIMEOUT_S = 180.0
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class WorkerStartError(Exception):
    """A worker could not start (no torch/triton, a broken environment)."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


class WorkerProcess:
    """One child process and the threads that read its stdout (events) and stderr (log)."""

    def __init__(self, interpret: bool, env: dict[str, str] | None = None, python: str = sys.executable):
        child_env = dict(os.environ)
        child_env.update(env or {})
        child_env["PYTHONUNBUFFERED"] = "1"
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PACKAGE_ROOT), child_env.get("PYTHONPATH", "")) if p)
        if interpret:
            child_env["WORKBENCH_INTERPRET"] = "1"
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [python, "-m", "workbench.core.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=child_env, start_new_session=True, text=True, encoding="utf-8",
            errors="replace", bufsize=1)
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.ready: WorkerReady | None = None
        self._startup_problem: Problem | None = None
        self._log_thread = threading.Thread(target=self._read_log, daemon=True)
        threading.Thread(target=self._read_events, daemon=True).start()
        self._log_thread.start()

    def _read_events(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = event_from_json(line)
            except (ValueError, TypeError, KeyError):
                self.queue.put(("event", LogLine(text=line, stream="stdout")))
                continue
            self.queue.put(("event", event))
        self.queue.put(("eof", None))

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.queue.put(("event", LogLine(text=line.rstrip("\n"))))

    def drain_log(self, timeout: float = 1.0) -> list[LogLine]:
        """After the process ended: the stderr lines not yet taken from the queue."""
        self._log_thread.join(timeout)
        lines = []
        while True:
            try:
                _, payload = self.queue.get_nowait()
            except queue.Empty:
                return lines
            if isinstance(payload, LogLine):
                lines.append(payload)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> WorkerReady:
        if self.ready is not None:
            return self.ready
        deadline = time.monotonic() + timeout
        log: list[str] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerStartError(Problem(kind="environment",
                                               message=f"the worker did not start within {timeout:.0f} s"))
            try:
                kind, payload = self.queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if kind == "eof":
                self.proc.wait()
                tail = "\n".join(log[-15:])
                message = self._startup_problem.message if self._startup_problem else \
                    f"the worker exited during start-up (status {self.proc.returncode})"
                raise WorkerStartError(Problem(kind="environment", message=message, traceback=tail))
            if isinstance(payload, WorkerReady):
                self.ready = payload
                return payload
            if isinstance(payload, Problem):
                self._startup_problem = payload
            elif isinstance(payload, LogLine):
                log.append(payload.text)

    def send(self, job: Job) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(job.to_json() + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close_unused(self) -> None:
        """Let a warm worker that never got a job go."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.kill()


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    if returncode == EXIT_POISONED:
        return "hit a fatal CUDA error (the context is unusable)"
    return f"exited with status {returncode}"


class Runner:
    """Runs jobs in worker processes, keeping one spare warm when asked to."""

    def __init__(self, interpret: bool = False, keep_warm: bool = False, env: dict[str, str] | None = None,
                 python: str = sys.executable):
        self.interpret, self.keep_warm, self.env, self.python = interpret, keep_warm, env or {}, python
        self._spare: WorkerProcess | None = None
        self._current: WorkerProcess | None = None
        self._cancelled = threading.Event()
        self._lock = threading.Lock()

    # -- worker supply -------------------------------------------------------------------

    def prewarm(self) -> None:
        with self._lock:
            if self._spare is None or self._spare.proc.poll() is not None:
                self._spare = WorkerProcess(self.interpret, self.env, self.python)

    def _take_worker(self) -> WorkerProcess:
        with self._lock:
            worker, self._spare = self._spare, None
        if worker is None or worker.proc.poll() is not None:
            worker = WorkerProcess(self.interpret, self.env, self.python)
        if self.keep_warm:
            self.prewarm()
        return worker

    def cancel(self) -> None:
        """Kill the run in progress (kill-then-restart: the caller starts the next run)."""
        self._cancelled.set()
        worker = self._current
        if worker is not None:
            worker.kill()

    def close(self) -> None:
        self.cancel()
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.kill()

    # -- one run ------------------------------------------------------------------------

    def run(self, job: Job, on_event: OnEvent, timeout_s: float | None = None,
            interpret_timeout_s: float | None = None) -> RunFinished:
        """Run `job` to the end, relaying events; returns the aggregate RunFinished (also emitted)."""
        self._cancelled.clear()
        started = time.monotonic()
        tally = Tally()

        def relay(event: Event) -> None:
            tally.add(event)
            on_event(event)

        restarts = 0
        pending_job: Job | None = job
        while pending_job is not None and not self._cancelled.is_set():
            pending_job = self._run_once(pending_job, relay, timeout_s, interpret_timeout_s)
            if pending_job is not None:
                restarts += 1
                if restarts > MAX_RESTARTS:
                    left = pending_job.case_indices or []
                    relay(Problem(kind="crash", message=f"stopped after {MAX_RESTARTS} worker restarts; "
                                                        f"{len(left)} cases not run"))
                    break
        finished = tally.finished(time.monotonic() - started)
        if self._cancelled.is_set():
            finished = replace(finished, verdict="cancelled")
        on_event(finished)
        return finished

    def _run_once(self, job: Job, relay: OnEvent, timeout_s: float | None,
                  interpret_timeout_s: float | None) -> Job | None:
        """One worker's share of a job. Returns the job for the remaining cases after a crash, else None."""
        worker = self._take_worker()
        self._current = worker
        try:
            try:
                ready = worker.wait_ready()
            except WorkerStartError as exc:
                if not self._cancelled.is_set():
                    relay(exc.problem)
                return None
            relay(ready)
            if self._cancelled.is_set():
                return None
            worker.send(job)
            interpret = ready.mode == "interpreter"
            limit = (interpret_timeout_s if interpret else timeout_s) or None
            return self._pump(worker, job, relay, limit)
        finally:
            self._current = None
            worker.kill()

    def _pump(self, worker: WorkerProcess, job: Job, relay: OnEvent, limit: float | None) -> Job | None:
        planned: list[int] = []
        done: set[int] = set()
        current: int | None = None
        current_label = ""
        stage = ""
        crash_reported: Problem | None = None
        last_words: list[str] = []  # the worker's last stderr lines: why it died, often
        deadline = time.monotonic() + limit if limit else None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                kind, payload = worker.queue.get(timeout=wait)
            except queue.Empty:
                if self._cancelled.is_set():
                    return None
                worker.kill()
                what = f"case {current}" if current is not None else (stage or "start-up")
                message = f"timed out after {limit:.0f} s in {what} (a hang?); the worker was killed"
                relay(Problem(kind="timeout", message=message, case_index=current, file=job.kernel_path))
                return self._resume_after(job, planned, done, (current, current_label), stage, relay, message)
            if kind == "eof":
                worker.proc.wait()
                for line in worker.drain_log():
                    relay(line)
                    if line.text.strip():
                        last_words = [*last_words[-4:], line.text.strip()]
                code = worker.proc.returncode
                if self._cancelled.is_set() or code == 0:
                    return None
                message = f"the worker {describe_exit(code)}"
                if crash_reported is not None:
                    message += f": {crash_reported.message}"
                elif last_words:
                    message += f" (its last output: {last_words[-1][:200]})"
                else:
                    relay(Problem(kind="crash", message=message, case_index=current, file=job.kernel_path))
                return self._resume_after(job, planned, done, (current, current_label), stage, relay, message)
            event = payload
            if limit:
                deadline = time.monotonic() + limit
            if isinstance(event, RunStarted):
                planned = list(event.planned)
            elif isinstance(event, StageChanged):
                stage, current, current_label = event.stage, event.case_index, event.detail
            elif isinstance(event, CaseResult) and not event.config:
                done.add(event.case_index)
            elif isinstance(event, Problem) and event.kind == "crash":
                crash_reported = event
            elif isinstance(event, LogLine) and event.text.strip():
                last_words = [*last_words[-4:], event.text.strip()]
            relay(event)

    @staticmethod
    def _resume_after(job: Job, planned: list[int], done: set[int], at: tuple[int | None, str], stage: str,
                      relay: OnEvent, message: str) -> Job | None:
        """Report the case a dead worker was on; return a job for the cases it never reached.

        Only verification resumes; a crashed run is never benchmarked.
        """
        current, label = at
        if current is not None and current not in done:
            relay(CaseResult(case_index=current, label=label or f"case {current}", status="error",
                             messages=[message]))
            done.add(current)
        if stage != "verifying":
            return None
        remaining = [i for i in planned if i not in done]
        return replace(job, case_indices=remaining, stages=["verify"]) if remaining else None
