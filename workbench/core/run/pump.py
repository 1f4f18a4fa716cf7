"""Parent side: the event pump. One worker's events read until its job ends, with what can go wrong on the
way: a hang past the time-out (killed, reported, the cases left resumed), a crash (the case in flight
fails, the cases left resume in a fresh worker), a worker whose machine or GPU was lost (its unfinished
cases re-queued, not failed), and a cancel.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace

from ..events import CaseResult, LogLine, Problem, Requeued, RunStarted, StageChanged
from ..stage import CHECK_TIMEOUT_S, CHECKING, RECORDING, Job, shard_of
from .contracts import OnEvent, WorkerHandle
from .protocol import JOB_DONE
from .workers import describe_exit

RESUMABLE = (RECORDING, "verifying", CHECKING)  # a worker lost in these: verification goes on with the other cases
VERIFY_PHASE = ("importing", *RESUMABLE)  # a worker's stages before its verification cases are all done
WHILE = {"": "during start-up", "importing": "while importing kernel.py"}


def pump(worker: WorkerHandle, job: Job, relay: OnEvent, limit: float | None, cancelled: threading.Event,
         waits_for_exit: bool = False) -> Job | None:
    """Relay `worker`'s events until its job ends. Returns the job for the cases it never reached after a
    crash, a hang or a lost machine (None when there is nothing left to run). `waits_for_exit`: the worker
    runs under a launcher (a profiler) that writes its report once the worker is gone, so its clean end is
    its exit, not its last event."""
    planned: list[int] = []
    generated: set[int] = set()  # the planned cases derived from CASES
    done: set[int] = set()
    current: int | None = None
    current_label = ""
    stage = ""
    check = ""  # the compatibility check running within the current case (stage CHECKING), until its next event
    allowed = limit  # the quiet spell allowed since the last event: the case's, or a check's (CHECK_TIMEOUT_S)
    crash_reported: Problem | None = None
    job_done = False  # the job's last event (JOB_DONE) came: an exit after it is the worker's end, not a crash
    last_words: list[str] = []  # the worker's last stderr lines: why it died, often
    deadline = time.monotonic() + limit if limit else None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            kind, payload = worker.queue.get(timeout=wait)
            if kind == "cancelled":
                return None
        except queue.Empty:
            if cancelled.is_set():
                return None
            worker.kill()
            what = f"case {current}" if current is not None else (stage or "start-up")
            what += f", {check}" if check else ""
            message = f"timed out after {allowed:.0f} s in {what} (a hang?); the worker was killed"
            relay(Problem(kind="timeout", message=message, case_index=current, file=job.kernel_path))
            return resume_after(job, planned, done, (current, current_label, current in generated), stage, relay,
                                message)
        if kind == "eof":
            worker.proc.wait()
            for line in worker.drain_log():
                relay(line)
                if line.text.strip():
                    last_words = [*last_words[-4:], line.text.strip()]
            code = worker.proc.returncode
            if cancelled.is_set():
                return None
            if worker.lost:
                return requeue(job, planned, done, stage, relay, worker)
            if code == 0 and job_done:
                return None
            message = f"the worker {describe_exit(code)}"
            if code == 0:  # os._exit(0) or sys.exit() in kernel.py (or a library it calls): a crash all the same
                where = f"in case {current}" if current is not None else WHILE.get(stage, f"while {stage}")
                message += (f" before its job was done, {where}: kernel.py or something it calls ended the process "
                            "(os._exit, sys.exit?)")
            if crash_reported is not None:
                message += f": {crash_reported.message}"
            else:
                if last_words:
                    message += f" (its last output: {last_words[-1][:200]})"
                relay(Problem(kind="crash", message=message, case_index=current, file=job.kernel_path))
            return resume_after(job, planned, done, (current, current_label, current in generated), stage, relay,
                                message)
        event = payload
        checking = isinstance(event, StageChanged) and event.stage == CHECKING
        check = event.detail if checking else ""
        if limit:
            allowed = max(limit, CHECK_TIMEOUT_S) if checking else limit
            deadline = time.monotonic() + allowed
        if isinstance(event, RunStarted):
            planned = shard_of(event.planned, job.shard)
            generated = set(event.generated)
        elif isinstance(event, StageChanged) and event.stage == JOB_DONE:
            # A clean end: the exit is not waited for. Under a launcher (a profiler, a sanitizer)
            # it is: the launcher writes its report once the worker has gone.
            job_done = True
            if event.current == 0 and not waits_for_exit:
                for line in worker.drain_log(timeout=0.02):  # its last prints, already sent
                    relay(line)
                return None
            continue  # a poisoned context, or a launcher still at work: the exit says the rest
        elif checking:
            stage = CHECKING  # within the current case: its index and label stay
        elif isinstance(event, StageChanged):
            stage, current, current_label = event.stage, event.case_index, event.detail
        elif isinstance(event, CaseResult) and not event.config and event.phase != "forward":
            done.add(event.case_index)  # a forward judged first is not the case's verdict: resumed if it dies
        elif isinstance(event, Problem) and event.kind == "crash":
            crash_reported = event
        elif isinstance(event, LogLine) and event.text.strip():
            last_words = [*last_words[-4:], event.text.strip()]
        relay(event)


def requeue(job: Job, planned: list[int], done: set[int], stage: str, relay: OnEvent,
            worker: WorkerHandle) -> Job | None:
    """The worker's GPU or machine went away: its unfinished cases, the one in flight included, go
    to another worker. Results that came back stay; the run drops their repeats.

    Lost during verification, the re-queued job verifies the remaining cases only: the run starts
    the stages after verification once every case has its verdict (a worker that never saw the
    first cases' failures must not benchmark)."""
    if planned and stage in VERIFY_PHASE:
        remaining = [i for i in planned if i not in done]
        again = verification_of(job, remaining)
    else:  # lost before its plan was known, or past verification: the job again, less what is done
        remaining = []
        again = job if not planned else replace(job, stages=[s for s in job.stages if s != "verify"])
    # Lost before its plan was known: the whole job runs again, so the run has nothing to add after it.
    relay(Requeued(reason=worker.lost, cases=remaining, gpu=worker.gpu_id, stage=stage if planned else "start-up"))
    return again


def case_error(index: int, label: str, message: str, generated: bool = False) -> CaseResult:
    """The record of a case its worker never finished (a crash, a hang, a run given up)."""
    return CaseResult(case_index=index, label=label or f"case {index}", status="error", messages=[message],
                      generated=generated)


def resume_after(job: Job, planned: list[int], done: set[int], at: tuple[int | None, str, bool], stage: str,
                 relay: OnEvent, message: str) -> Job | None:
    """Report the case a dead worker was on; return a job for the cases it never reached.

    Only verification resumes; a crashed run is never benchmarked.
    """
    current, label, generated = at  # the case in flight: its index, label, and whether it was derived from CASES
    if current is not None and current not in done:
        relay(case_error(current, label, message, generated))
        done.add(current)
    if stage not in RESUMABLE:
        return None
    return verification_of(job, [i for i in planned if i not in done])


def verification_of(job: Job, cases: list[int]) -> Job | None:
    """`job`'s stages through verification, for these cases alone (None: no case left). It names its
    cases itself: no longer a shard of the plan."""
    if not cases:
        return None
    stages = job.stages[:job.stages.index("verify") + 1] if "verify" in job.stages else ["verify"]
    return replace(job, case_indices=cases, shard=None, stages=stages)
