"""Parent side: the Runner. Runs jobs in worker processes and relays their events as one run's.

The parent never imports the user's kernel, torch or triton: it takes a warm worker (supply.py), sends
it one job, and relays the events it streams back (pump.py, relay.py). A worker that segfaults,
poisons its CUDA context or hangs past the time-out is killed; the case it was on is reported as
failed and the remaining cases resume in a fresh worker. How a run spreads over workers is chosen
once per run (strategies.py). docs/ARCHITECTURE.md draws the whole.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ..events import RunFinished
from ..stage import Job
from . import trace
from .contracts import OnEvent, WorkerHandle, WorkerSource
from .gpus import GpuSlot
from .protocol import compile_pool_wanted, count_from_env
from .relay import RunRelay
from .strategies import RunInFlight, choose
from .supply import WorkerSupply
from .workers import LocalWorkers, WorkerStartError, forkserver_wanted


# A verification on a GPU runs its torch.compile check in a process of its own (verify/compat_beside.py): on a
# fresh machine 17.5 s instead of 22.9 s (benchmarks/RESULTS.md 3p). "0" keeps the check in the worker, as does
# a lane beside others (Runner.check_beside: measured for one project at a time only).
COMPILE_CHECK_ENV = "WORKBENCH_COMPILE_CHECK_PROCESS"


def compile_check_wanted(job: Job, interpret: bool, gpus: Sequence[GpuSlot], local: bool, alone: bool = True) -> bool:
    """Whether a run starts the process that runs its torch.compile check beside its workers
    (verify/compat_beside.py): a verification alone (a benchmark or a profiler wants nothing else on the GPU),
    not the live loop's (it runs no such check), on this machine's GPU, with the check on, on the repeat call's
    inputs (repeat_calls) and not a training kernel's by its config (the process finds the others itself), by a
    runner that is not one lane among several (`alone`: Runner.check_beside); and unless COMPILE_CHECK_ENV is
    "0"."""
    verify = job.config.get("verify", {})
    return (alone and job.stages == ["verify"] and not job.live and not interpret and bool(gpus) and local
            and verify.get("torch_compile", "check") != "off" and verify.get("repeat_calls", True)
            and not verify.get("backward", False) and os.environ.get(COMPILE_CHECK_ENV, "1") != "0")


class CompileCheck:
    """The run's torch.compile check process (started by the worker source) and its folder, ended with the run."""

    def __init__(self, proc: subprocess.Popen, folder: str):
        self.proc, self.folder = proc, folder

    @classmethod
    def start(cls, source: WorkerSource, job: Job, gpu: GpuSlot | None) -> "CompileCheck | None":
        starter = getattr(source, "start_compile_check", None)
        if starter is None:
            return None
        folder = tempfile.mkdtemp(prefix="workbench-compile-check-")
        job_file = Path(folder) / "job.json"
        job_file.write_text(job.to_json())
        try:
            return cls(starter(str(job_file), folder, gpu), folder)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            return None  # the worker runs the check itself

    def for_job(self, job: Job) -> Job:
        return replace(job, compile_check={"folder": self.folder, "pid": self.proc.pid})

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session (start_new_session)
            except OSError:
                pass

    def stop(self) -> None:
        self.kill()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


MAX_WORKERS_PER_RUN = 8


def machine_workers(cores: int | None = None) -> int:
    """Verification workers for the whole machine (or a cluster of `cores` cores), shared out among lanes of
    projects (factory.lanes): WORKBENCH_WORKERS, else one per two cores (no cap: 16 on 32 cores, where one run
    takes at most MAX_WORKERS_PER_RUN)."""
    return count_from_env("WORKBENCH_WORKERS", max(1, (cores or os.cpu_count() or 2) // 2))


def default_parallel(cores: int | None = None) -> int:
    """Verification workers of one run: compilation is per process, so shards compile in parallel.
    WORKBENCH_WORKERS as it is, else the machine's workers up to MAX_WORKERS_PER_RUN."""
    return count_from_env("WORKBENCH_WORKERS", min(MAX_WORKERS_PER_RUN, machine_workers(cores)))


class Runner:
    """Runs jobs in worker processes, keeping spares warm when asked to (contracts.RunnerLike).

    Verification is sharded over `parallel` workers: most of a cold run is Triton compiling one
    specialisation per case shape and dtype, and separate processes compile in parallel. Later stages
    (benchmarking) run after every shard passed, in one fresh worker, so nothing else is on the GPU while
    it is timed. `gpus`: the GPUs to place workers on (gpus.select_gpus); shard k runs on GPU k mod
    len(gpus), and each result is stamped with the GPU that produced it. Empty: the environment's GPUs.

    On one GPU, where Triton can compile in processes without a GPU (WorkerReady.compile_target), a run
    takes one GPU worker instead of `parallel`, and compile processes forked for the run do the compiling
    (strategies.Pooled). Two GPU spares are kept then; the one a run takes is replaced once the run is
    over, so no spare warms up beside a timing.

    `workers`: where workers come from (contracts.WorkerSource); by default this machine's
    (workers.LocalWorkers, built from `interpret`, `env`, `python` and `launcher`). `check_beside`: a
    verification may start its torch.compile check in a process of its own (compile_check_wanted); false for a
    lane beside others (factory.lanes), whose projects' runs overlap one another already.
    """

    def __init__(self, interpret: bool = False, keep_warm: bool = False, env: dict[str, str] | None = None,
                 python: str = sys.executable, launcher: Sequence[str] = (), parallel: int = 1,
                 gpus: Sequence[GpuSlot] = (), workers: WorkerSource | None = None, check_beside: bool = True):
        self.interpret, self.keep_warm, self.check_beside = interpret, keep_warm, check_beside
        self.launcher = list(launcher)
        self.source = workers or LocalWorkers(interpret, env, python, launcher)
        self.supply = WorkerSupply(self.source)
        self.gpus = list(gpus)
        self.parallel = max(1, parallel, len(self.gpus))
        self.cancel_event = threading.Event()
        # Sharded verification in flight: the next save's spares are forked once its verdict is in. Forked
        # beside the shards, their warm-up slows the compiles (H100: the verdict 0.2 s later, RESULTS 3e).
        self._verifying = threading.Event()
        self.compile_target: list | None = None  # None: not known yet; []: runs shard verification over GPU workers
        self.current_run: RunInFlight | None = None  # the run in flight (its gpu_free event opens its GPU gate)
        self.compile_check: CompileCheck | None = None  # the run's torch.compile check process, if it has one

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    # -- the workers a run takes ------------------------------------------------------------

    def gpu_for(self, shard: int) -> GpuSlot | None:
        return self.gpus[shard % len(self.gpus)] if self.gpus else None

    @property
    def workers_per_run(self) -> int:
        """A sharded run takes one worker per shard, then those of the stages after verification."""
        return len(self.run_gpus())

    def run_gpus(self) -> list[GpuSlot | None]:
        """The GPU of each worker a run takes: the shards', then those of the stages after verification
        (one per GPU when there are several: a benchmark is spread over them). With compile processes,
        the GPU worker and a second spare (replaced after the run, not beside its timing)."""
        if self.compile_target:
            return [self.gpu_for(0)] * 2
        if self.parallel == 1:
            return [self.gpu_for(0)]
        after = list(self.gpus) if len(self.gpus) > 1 else [self.gpu_for(0)]
        return [self.gpu_for(k) for k in range(self.parallel)] + after

    def prewarm(self) -> None:
        """Start spare workers now (as many as a run takes, each on its GPU), so the next run waits for no start-up."""
        self.supply.prewarm(self.run_gpus())

    def take_worker(self, gpu: GpuSlot | None = None, timed: bool = False) -> WorkerHandle:
        """A warm spare on `gpu` (else a new worker). `timed`: it will benchmark; on placed GPUs its
        replacement starts after the run, not beside the timing (a warming worker launches on its GPU)."""
        worker = self.supply.take(gpu, " (bench)" if timed else "")
        if self.keep_warm and not self._verifying.is_set() and not (timed and self.gpus) and not self.compile_target:
            self.prewarm()  # now: the next save may come soon
        return worker

    def verification_started(self) -> None:
        self._verifying.set()

    def verification_over(self) -> None:
        """The compiles are over: the next save's spares may start (at the benchmark's take)."""
        self._verifying.clear()

    def pooling_possible(self) -> bool:
        """Whether this run's kernels can be compiled by processes without a GPU: one GPU (or none placed),
        local workers forked from the template, and a GPU worker that says Triton can (its compile target).
        The first run asks a spare, and from then on the runner keeps the spares a pooled run needs."""
        if self.compile_target is None:
            if (not self.source.local or len(self.gpus) > 1 or not compile_pool_wanted()
                    or not forkserver_wanted(self.launcher)):
                self.compile_target = []
                return False
            probe = self.supply.any_spare(self.gpu_for(0))
            try:
                target = probe.wait_ready().compile_target
            except WorkerStartError:
                return False  # the run's take reports it
            self.compile_target = list(target)
            if target:
                self.supply.trim(self.run_gpus())
                self.source.warm_compiler(self.compile_target)
        return bool(self.compile_target)

    def cancel(self) -> None:
        """Kill the run in progress (kill-then-restart: the caller starts the next run). Returns at once: its
        workers' exits are waited for in the background, and by the next benchmark before it times."""
        with trace.span("cancel"):
            self.cancel_event.set()
            self.supply.stop_compile_processes()
            self.supply.stop_active()
            check = self.compile_check  # the run's own finally may clear it meanwhile
            if check is not None:
                check.kill()

    def close(self) -> None:
        self.cancel()
        self.supply.close()

    # -- one run ------------------------------------------------------------------------------

    def run(self, job: Job, on_event: OnEvent, timeout_s: float | None = None,
            interpret_timeout_s: float | None = None) -> RunFinished:
        """Run `job` to the end, relaying events; returns the aggregate RunFinished (also emitted)."""
        with trace.span("runner.run"):
            return self._run(job, on_event, (timeout_s, interpret_timeout_s))

    def _run(self, job: Job, on_event: OnEvent, limits: tuple[float | None, float | None]) -> RunFinished:
        self.cancel_event.clear()
        started = time.monotonic()
        # The torch.compile check in a process of its own, started now: its Dynamo and Inductor beside the
        # workers' start-up and cases (verify/compat_beside.py)
        if compile_check_wanted(job, self.interpret, self.gpus, self.source.local, self.check_beside):
            self.compile_check = CompileCheck.start(self.source, job, self.gpu_for(0))
            if self.compile_check is not None:
                job = self.compile_check.for_job(job)
        try:
            return self._execute(job, on_event, limits, started)
        finally:
            if self.compile_check is not None:
                self.compile_check.stop()
                self.compile_check = None

    def _execute(self, job: Job, on_event: OnEvent, limits: tuple[float | None, float | None],
                 started: float) -> RunFinished:
        strategy = choose(self, job)

        def verified(tally: object) -> None:
            if not self.cancelled:
                strategy.on_verified(run, tally)

        run = RunInFlight(job=job, relay=RunRelay(on_event, verified), limits=limits)
        self.current_run = run
        strategy.prepare(run)
        strategy.execute(run)
        # What follows verification (the benchmark) runs once every case passed: after the shards, or after
        # a worker lost during verification had its re-queued cases run alone (the job's own stages stopped).
        rest = run.after_verification
        if rest and strategy.runs_after_verification(run) and run.relay.tally.verdict().verified and not self.cancelled:
            self.supply.await_exits()
            strategy.jobs.after_verification(run, replace(run.job, stages=rest, gpu_gate=False, compile_pool=None),
                                             run.relay)
        finished = run.relay.tally.finished(time.monotonic() - started, cancelled=self.cancelled)
        # After the benchmark: the spares it did not let start beside it. A cancelled pooled run leaves its
        # replacement to the run that overtook it (one spare is left), not beside that run's compiles.
        if self.keep_warm and (self.gpus or strategy.replaces_its_spare) and not self.cancelled:
            self.prewarm()
        on_event(finished)
        return finished
