"""Parent side of a run: warm worker processes (run/workers.py), shards, time-outs, crashes, cancellation.

The parent never imports the user's kernel, torch or triton: it takes a warm worker, sends it
one job, and relays the events it streams back. A worker that segfaults,
poisons its CUDA context or hangs past the time-out is killed; the case it was
on is reported as failed and the remaining cases resume in a fresh worker.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from typing import Callable, Sequence

from ..events import (
    BenchResult,
    CaseResult,
    DeviceFacts,
    Event,
    LogLine,
    Problem,
    Requeued,
    RunFinished,
    RunStarted,
    StageChanged,
    Tally,
    WorkerReady,
)
from ..stage import Job, shard_of
from . import compile_pool
from .forkserver import ForkedProcess, ForkServer
from .gpus import GpuSlot
from .precompile import PRECOMPILING
from .worker import JOB_DONE
from .workers import (
    WorkerProcess,
    WorkerStartError,
    describe_exit,
    forkserver_wanted,
    worker_env,
)

OnEvent = Callable[[Event], None]
VERIFY_PHASE = ("importing", "verifying")  # a worker's stages before its verification cases are all done
MAX_RESTARTS = 3
SPARE_WARMUP_WAIT_S = 10.0  # the most a benchmark waits at its gate for the next save's spares to be warm


def compile_processes() -> int:
    """Compile processes beside a run's one GPU worker (run/compile_pool.py): WORKBENCH_COMPILE_PROCESSES, else
    one per core (the GPU worker and its judge mostly wait while they compile; H100, 16 cores: the verdict
    0.87 s with 16, 1.07 s with 14; RESULTS.md 3f)."""
    configured = os.environ.get("WORKBENCH_COMPILE_PROCESSES", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, os.cpu_count() or 2)


def default_parallel() -> int:
    """Verification workers: compilation is per process, so shards compile in parallel.

    WORKBENCH_WORKERS overrides; by default one per two cores, at most 8.
    """
    configured = os.environ.get("WORKBENCH_WORKERS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min(8, (os.cpu_count() or 2) // 2))


class Runner:
    """Runs jobs in worker processes, keeping spares warm when asked to.

    Verification is sharded over `parallel` workers: most of a cold run is
    Triton compiling one specialisation per case shape and dtype, and separate
    processes compile in parallel. Later stages (benchmarking) run after every
    shard passed, in one fresh worker, so nothing else is on the GPU while it is timed.

    `gpus`: the GPUs to place workers on (gpus.select_gpus). Shard k runs on GPU k mod len(gpus),
    so there are at least as many shards as GPUs; the stages after verification run on the first.
    Each result is stamped with the GPU that produced it. Empty: workers see the environment's GPUs.

    On one GPU, where Triton can compile in processes without a GPU (WorkerReady.compile_target), a run
    takes one GPU worker instead of `parallel`: the compiling is spread over compile processes forked for
    the run (run/compile_pool.py), the GPU worker verifies every case and benchmarks. Two GPU spares are
    kept; the one a run takes is replaced once the run is over, so no spare warms up beside a timing.
    """

    # A sharded run's benchmark worker starts when the verdict is in and waits at the GPU gate (see run()).
    early_benchmark = True
    # Workers run on this machine, so compile processes forked here can reach them (run/compile_pool.py).
    compiles_beside_workers = True

    def __init__(self, interpret: bool = False, keep_warm: bool = False, env: dict[str, str] | None = None,
                 python: str = sys.executable, launcher: Sequence[str] = (), parallel: int = 1,
                 gpus: Sequence[GpuSlot] = ()):
        self.interpret, self.keep_warm, self.env, self.python = interpret, keep_warm, env or {}, python
        self.launcher = list(launcher)
        self.gpus = list(gpus)
        self.parallel = max(1, parallel, len(self.gpus))
        self._spares: list[WorkerProcess] = []
        self._active: set[WorkerProcess] = set()
        self._compiling: set[ForkedProcess] = set()  # the run's compile processes (run/compile_pool.py)
        self._exiting: list[WorkerProcess] = []
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._forkserver: ForkServer | None = None  # started with the first worker
        self._forkserver_lock = threading.Lock()
        # Sharded verification in flight: the next save's spares are forked once its verdict is in. Forked
        # beside the shards, their warm-up slows the compiles (H100: the verdict 0.2 s later, RESULTS 3e).
        self._verifying = threading.Event()
        self._gpu_free = threading.Event()  # the run's verification workers have exited: an early benchmark may time
        self._compile_target: list | None = None  # None: not known yet; []: runs shard verification over GPU workers

    # -- worker supply -------------------------------------------------------------------

    def _template(self) -> ForkServer | None:
        """The warm template workers are forked from (started on first use; None: workers start from scratch)."""
        with self._forkserver_lock:  # prewarm calls this under self._lock
            if self._forkserver is None and forkserver_wanted(self.launcher):
                self._forkserver = ForkServer(worker_env(self.env), self.python)
            return self._forkserver

    def _new_worker(self, gpu: GpuSlot | None = None) -> WorkerProcess:
        """A worker on `gpu`."""
        return WorkerProcess(self.interpret, self.env, self.python, self.launcher, self._template(), gpu=gpu)

    def _gpu_for(self, shard: int) -> GpuSlot | None:
        return self.gpus[shard % len(self.gpus)] if self.gpus else None

    @property
    def workers_per_run(self) -> int:
        """A sharded run takes one worker per shard, then those of the stages after verification."""
        return len(self._run_gpus())

    def _run_gpus(self) -> list[GpuSlot | None]:
        """The GPU of each worker a run takes: the shards', then those of the stages after verification
        (one per GPU when there are several: a benchmark is spread over them). With compile processes,
        the GPU worker and a second spare (replaced after the run, not beside its timing)."""
        if self._compile_target:
            return [self._gpu_for(0)] * 2
        if self.parallel == 1:
            return [self._gpu_for(0)]
        after = list(self.gpus) if len(self.gpus) > 1 else [self._gpu_for(0)]
        return [self._gpu_for(k) for k in range(self.parallel)] + after

    def prewarm(self) -> None:
        """Start spare workers now (as many as a run takes, each on its GPU), so the next run waits for no start-up."""
        with self._lock:
            self._spares = [w for w in self._spares if w.proc.poll() is None]
            missing = Counter(self._run_gpus()) - Counter(w.gpu for w in self._spares)
            for gpu, count in missing.items():
                self._spares += [self._new_worker(gpu) for _ in range(count)]

    def _take_worker(self, gpu: GpuSlot | None = None, timed: bool = False) -> WorkerProcess:
        """A warm spare on `gpu` (else a new worker). `timed`: it will benchmark; on placed GPUs its
        replacement starts after the run, not beside the timing (a warming worker launches on its GPU)."""
        with self._lock:
            alive = [w for w in self._spares if w.proc.poll() is None]
            worker = next((w for w in alive if w.gpu == gpu), None)
            self._spares = [w for w in alive if w is not worker]
        if worker is None:
            worker = self._new_worker(gpu)
        if self.keep_warm and not self._verifying.is_set() and not (timed and self.gpus) and not self._compile_target:
            self.prewarm()  # now: the next save may come soon
        with self._lock:
            self._active.add(worker)
        return worker

    def _release(self, worker: WorkerProcess) -> None:
        """Kill a worker whose job is over. A GPU process takes a few hundred ms to exit (its
        context torn down): that is waited for in the background, or by `_await_exits`."""
        with self._lock:
            self._active.discard(worker)
            self._exiting = [w for w in self._exiting if w.proc.poll() is None] + [worker]
        worker.kill(wait=False)

    def _await_exits(self) -> None:
        """Until the workers of earlier stages are gone: nothing else holds the GPU while a kernel is timed."""
        with self._lock:
            exiting, self._exiting = self._exiting, []
        for worker in exiting:
            worker.wait_exit()

    def _await_spares(self) -> None:
        """Until the spares started for the next save are warm (or gone): a warming worker brings up a CUDA
        context and launches its warm-up kernels, which must not land inside a timed series."""
        deadline = time.monotonic() + SPARE_WARMUP_WAIT_S
        with self._lock:
            spares = list(self._spares)
        for spare in spares:
            left = deadline - time.monotonic()
            if left <= 0 or self._cancelled.is_set() or not spare.started_up.wait(left):
                return  # one still warming past the limit: the benchmark goes on without waiting longer
            with contextlib.suppress(WorkerStartError):  # a spare that could not start: its take reports it
                spare.wait_ready()  # at once: its WorkerReady (or its end) is in the queue

    def cancel(self) -> None:
        """Kill the run in progress (kill-then-restart: the caller starts the next run). Returns at once: its
        workers' exits are waited for in the background, and by the next benchmark before it times."""
        self._cancelled.set()
        with self._lock:
            active = list(self._active)
        self._stop_compile_processes()
        for worker in active:
            worker.kill(wait=False)
            worker.queue.put(("cancelled", None))  # its event pump returns now, not at the exit

    def close(self) -> None:
        self.cancel()
        with self._lock:
            spares, self._spares = self._spares, []
            gone = list(self._active)
        for worker in [*gone, *spares]:
            worker.kill()
        with self._forkserver_lock:
            forkserver, self._forkserver = self._forkserver, None
        if forkserver is not None:
            forkserver.close()

    # -- one run ------------------------------------------------------------------------

    def run(self, job: Job, on_event: OnEvent, timeout_s: float | None = None,
            interpret_timeout_s: float | None = None) -> RunFinished:
        """Run `job` to the end, relaying events; returns the aggregate RunFinished (also emitted).

        A sharded run's benchmark starts the moment the verdict is complete and passed, beside the shards'
        last work (compiling the benchmark cases, exiting): its worker imports kernel.py, makes the first
        case's inputs, reference and first call, and waits at the GPU gate (Job.options["gpu_gate"]) until
        every shard's worker has exited before it times anything (or autotunes)."""
        self._cancelled.clear()
        self._gpu_free = threading.Event()  # this run's own: a thread of an earlier run may still set its old one
        started = time.monotonic()
        tally = Tally()
        lock = threading.Lock()
        seen: set[tuple] = set()

        limits = (timeout_s, interpret_timeout_s)
        rest = job.stages[job.stages.index("verify") + 1:] if "verify" in job.stages else []
        sharded = self.parallel > 1 and "verify" in job.stages and job.case_indices != []
        pool: dict | None = None  # the compile processes' address, key and count
        if sharded and self._pooling_possible():
            sharded = False
            pool = new_compile_pool(self._compile_target)
            job = served_by(job, pool)
        requeued: list[Requeued] = []
        gated = self.early_benchmark and sharded and "bench" in rest and len(self.gpus) < 2
        early = EarlyStart(lambda: self._run_after_verification(replace(job, stages=rest, options={
            **job.options, "gpu_gate": True}), relay, limits)) if gated else None

        def relay(event: Event) -> None:
            key = result_key(event)
            with lock:
                if key is not None:
                    if key in seen:
                        return  # a re-queued job's repeat of a result that did come back: recorded once
                    seen.add(key)
                tally.add(event)
                on_event(event)
                verified = isinstance(event, StageChanged) and event.stage == "verified"
            if not verified or self._cancelled.is_set():
                return
            self._verifying.clear()  # the compiles are over: the next save's spares start (at the benchmark's take)
            if early is not None and tally.exit_code == 0:
                early.start()  # the benchmark sets up beside the shards' last work; it times once they are gone

        if sharded:
            first = job.stages[:len(job.stages) - len(rest)]
            if "bench" in rest:
                first = [*first, "precompile"]  # the shards compile the bench cases while the verdict is shown
            self._verifying.set()
            try:
                self._run_sharded(replace(job, stages=first), relay, limits)
            finally:
                self._verifying.clear()
                if self.keep_warm and not self._cancelled.is_set():
                    self.prewarm()
                if early is not None and early.started:
                    self._await_exits()
                    self._await_spares()
                    self._gpu_free.set()  # the early benchmark's worker may time now
                    early.join()
        else:
            def watch(event: Event) -> None:
                if isinstance(event, Requeued) and event.stage in VERIFY_PHASE:
                    requeued.append(event)
                relay(event)

            start_compilers: Callable[[], None] | None = None
            if pool is not None:
                threading.Thread(target=self._free_gpu_once_spares_warm, args=(self._gpu_free,), name="gpu-free",
                                 daemon=True).start()
                # The compile processes start once the GPU worker has its job, before its events reach the
                # app: started on a thread instead, they waited on the app's rendering (0.45 s on an H100 host).
                start_compilers = functools.partial(self._start_compile_processes, pool, job)
            try:
                self._run_with_restarts(job, watch, limits, after_send=start_compilers)
            finally:
                self._stop_compile_processes()
        # What follows verification (the benchmark) runs once every case passed: after the shards, or after
        # a worker lost during verification had its re-queued cases run alone (the job's own stages stopped).
        if (sharded or requeued) and rest and tally.exit_code == 0 and not self._cancelled.is_set() \
                and not (early is not None and early.started):
            self._await_exits()
            self._run_after_verification(replace(job, stages=rest), relay, limits)
        finished = tally.finished(time.monotonic() - started)
        if self._cancelled.is_set():
            finished = replace(finished, verdict="cancelled")
        # After the benchmark: the spares it did not let start beside it. A cancelled pooled run leaves its
        # replacement to the run that overtook it (one spare is left), not beside that run's compiles.
        if self.keep_warm and (self.gpus or pool is not None) and not self._cancelled.is_set():
            self.prewarm()
        on_event(finished)
        return finished

    def _pooling_possible(self) -> bool:
        """Whether this run's kernels can be compiled by processes without a GPU: one GPU (or none placed),
        workers forked from the template, and a GPU worker that says Triton can (its compile target). The
        first run asks a spare, and from then on the runner keeps the spares a pooled run needs."""
        if self._compile_target is None:
            if (not self.compiles_beside_workers or len(self.gpus) > 1 or not compile_pool.wanted()
                    or not forkserver_wanted(self.launcher)):
                self._compile_target = []
                return False
            with self._lock:
                probe = next((w for w in self._spares if w.proc.poll() is None), None)
                if probe is None:
                    probe = self._new_worker(self._gpu_for(0))
                    self._spares.append(probe)
            try:
                target = probe.wait_ready().compile_target
            except WorkerStartError:
                return False  # the run's take reports it
            self._compile_target = list(target)
            if target:
                self._trim_spares()
                with self._forkserver_lock:
                    if self._forkserver is not None:
                        self._forkserver.warm_compiler(self._compile_target)
        return bool(self._compile_target)

    def _trim_spares(self) -> None:
        """Let the spares a pooled run never takes go (each holds a CUDA context)."""
        keep = Counter(self._run_gpus())
        kept: list[WorkerProcess] = []
        unused: list[WorkerProcess] = []
        with self._lock:
            for worker in self._spares:
                if keep[worker.gpu] > 0 and worker.proc.poll() is None:
                    keep[worker.gpu] -= 1
                    kept.append(worker)
                else:
                    unused.append(worker)
            self._spares = kept
        for worker in unused:
            threading.Thread(target=worker.close_unused, daemon=True).start()

    def _start_compile_processes(self, pool: dict, job: Job) -> list[ForkedProcess]:
        """The run's compile processes, forked from the template in one request, told in their environment what
        to import and where to connect. They need no pipes: each reports to the GPU worker alone."""
        template = self._template()
        if template is None or self._cancelled.is_set():
            return []
        env = worker_env({**self.env, "WORKBENCH_ROLE": compile_pool.ROLE,
                          compile_pool.ORDER_ENV: compile_pool.order_for(pool, job.kernel_path, job.cache_dir)},
                         self.interpret)
        processes = template.spawn_detached(env, pool["processes"])
        with self._lock:
            self._compiling.update(processes)
        if self._cancelled.is_set():
            self._stop_compile_processes()
        return processes

    def _stop_compile_processes(self) -> None:
        """Kill the compile processes still running (those done have exited by themselves)."""
        with self._lock:
            processes, self._compiling = list(self._compiling), set()
        for process in processes:
            if process.poll() is None:
                process.kill()

    def _free_gpu_once_spares_warm(self, gpu_free: threading.Event) -> None:
        """A pooled run's benchmark times once the spares started after the last run are warm."""
        self._await_spares()
        gpu_free.set()

    def _run_after_verification(self, job: Job, relay: OnEvent, limits: tuple[float | None, float | None]) -> None:
        """The stages after verification; a benchmark on several GPUs is spread over them, a worker each:
        each GPU times its share of the sweep with nothing else on it."""
        if "bench" not in job.stages or len(self.gpus) < 2 or job.case_indices == []:
            self._run_with_restarts(job, relay, limits)
            return
        self._fan_out(job, relay, limits, len(self.gpus), "bench_shard", lambda k: self.gpus[k])

    def _run_sharded(self, job: Job, relay: OnEvent, limits: tuple[float | None, float | None]) -> None:
        """Verification split over `parallel` workers, their events merged into one run.

        Once every shard is past its verification cases, one StageChanged("verified") says
        the verdict is complete, ahead of whatever the shards do next (precompiling).
        """
        n = self.parallel if job.case_indices is None else min(self.parallel, len(job.case_indices))
        self._fan_out(job, relay, limits, n, "shard", self._gpu_for, verifying=True)

    def _fan_out(self, job: Job, relay: OnEvent, limits: tuple[float | None, float | None], n: int, option: str,
                 gpu_of: Callable[[int], GpuSlot | None], verifying: bool = False) -> None:
        """`job` split n ways (`options[option] = [k, n]`), share k in a worker on `gpu_of(k)`, all at once;
        their events merged into one run (one WorkerReady, one RunStarted, each Problem once)."""
        merged = ShardMerger(relay, n)

        def share(k: int) -> None:
            try:
                self._run_with_restarts(replace(job, options={**job.options, option: [k, n]}),
                                        lambda event: merged.relay(event, k), limits, gpu_of(k))
            finally:
                if verifying:
                    merged.shard_over(k)

        threads = [threading.Thread(target=share, args=(k,), daemon=True) for k in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _run_with_restarts(self, job: Job, relay: OnEvent, limits: tuple[float | None, float | None],
                           gpu: GpuSlot | None = None, after_send: Callable[[], None] | None = None) -> None:
        """`after_send`: called once the first worker has the job."""
        restarts = 0
        pending: Job | None = job
        if gpu is None:
            gpu = self._gpu_for(0)
        while pending is not None and not self._cancelled.is_set():
            pending = self._run_once(pending, relay, *limits, gpu=gpu, after_send=after_send)
            after_send = None
            if pending is not None:
                # The compile processes served the lost worker and are gone: the next one compiles alone.
                pending = replace(pending, options={k: v for k, v in pending.options.items() if k != "compile_pool"})
                restarts += 1
                if restarts > MAX_RESTARTS:
                    left = pending.case_indices or []
                    relay(Problem(kind="crash", message=f"stopped after {MAX_RESTARTS} worker restarts; "
                                                        f"{len(left)} cases not run"))
                    return

    def _run_once(self, job: Job, relay: OnEvent, timeout_s: float | None, interpret_timeout_s: float | None,
                  gpu: GpuSlot | None = None, after_send: Callable[[], None] | None = None) -> Job | None:
        """One worker's share of a job. Returns the job for the remaining cases after a crash, else None."""
        # A gated benchmark's worker starts the next save's spares as it is taken: its gate waits for them.
        worker = self._take_worker(gpu, timed="bench" in job.stages and not job.options.get("gpu_gate"))
        try:
            try:
                ready = worker.wait_ready()
            except WorkerStartError as exc:
                if not self._cancelled.is_set():
                    relay(exc.problem)
                return None
            if worker.gpu_id:
                relay = stamp_gpu(relay, worker.gpu_id)
            relay(ready)
            if self._cancelled.is_set():
                return None
            worker.send(job)
            if after_send is not None:
                after_send()
            if job.options.get("gpu_gate"):
                self._open_gate_when_free(worker)
            interpret = ready.mode == "interpreter"
            limit = (interpret_timeout_s if interpret else timeout_s) or None
            return self._pump(worker, job, relay, limit)
        finally:
            self._release(worker)

    def _open_gate_when_free(self, worker: WorkerProcess) -> None:
        """Tell `worker` the GPU is its own once the run's verification workers have exited (or the run
        is cancelled: then it is killed anyway)."""
        free = self._gpu_free  # this run's

        def when_free() -> None:
            while not free.wait(0.05):
                if self._cancelled.is_set() or worker.proc.poll() is not None:
                    return
            with contextlib.suppress(OSError, ValueError):  # gone meanwhile: the event pump reports it
                worker.send_line("gpu")

        threading.Thread(target=when_free, name="gpu-gate", daemon=True).start()

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
                if kind == "cancelled":
                    return None
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
                if self._cancelled.is_set():
                    return None
                if worker.lost:
                    return self._requeue(job, planned, done, stage, relay, worker)
                if code == 0:
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
                planned = shard_of(event.planned, job.options.get("shard"))
            elif isinstance(event, StageChanged) and event.stage == JOB_DONE:
                # A clean end: the exit is not waited for. Under a launcher (a profiler, a sanitizer)
                # it is: the launcher writes its report once the worker has gone.
                if event.current == 0 and not self.launcher:
                    for line in worker.drain_log(timeout=0.02):  # its last prints, already sent
                        relay(line)
                    return None
                continue  # a poisoned context, or a launcher still at work: the exit says the rest
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
    def _requeue(job: Job, planned: list[int], done: set[int], stage: str, relay: OnEvent,
                 worker: WorkerProcess) -> Job | None:
        """The worker's GPU or machine went away: its unfinished cases, the one in flight included, go
        to another worker. Results that came back stay; `run` drops their repeats.

        Lost during verification, the re-queued job verifies the remaining cases only: `run` starts
        the stages after verification once every case has its verdict (a worker that never saw the
        first cases' failures must not benchmark)."""
        if planned and stage in VERIFY_PHASE:
            remaining = [i for i in planned if i not in done]
            again = verification_of(job, remaining)
        else:  # lost before its plan was known, or past verification: the job again, less what is done
            remaining = []
            again = job if not planned else replace(job, stages=[s for s in job.stages if s != "verify"])
        # Lost before its plan was known: the whole job runs again, so `run` has nothing to add after it.
        relay(Requeued(reason=worker.lost, cases=remaining, gpu=worker.gpu_id, stage=stage if planned else "start-up"))
        return again

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
        return verification_of(job, [i for i in planned if i not in done])


class EarlyStart:
    """A run's stages after verification, started on a thread at most once (when the verdict is in)."""

    def __init__(self, target: Callable[[], None]):
        self._thread = threading.Thread(target=target, name="after-verification", daemon=True)
        self._lock = threading.Lock()
        self.started = False

    def start(self) -> None:
        with self._lock:
            if not self.started:
                self.started = True
                self._thread.start()

    def join(self) -> None:
        self._thread.join()


def new_compile_pool(target: list) -> dict:
    """A run's compile pool (run/compile_pool.py): a fresh abstract-socket address and key, how many
    processes compile, and the GPU target they compile for."""
    return {"address": f"\0workbench-compile-{os.getpid()}-{os.urandom(6).hex()}", "authkey": os.urandom(16).hex(),
            "processes": compile_processes(), "target": list(target)}


def served_by(job: Job, pool: dict) -> Job:
    """`job` for one GPU worker serving the compile processes of `pool`; its benchmark times once the
    runner opens the GPU gate (spares warming are the only other GPU users)."""
    return replace(job, options={**job.options, "compile_pool": pool, "gpu_gate": True})


def verification_of(job: Job, cases: list[int]) -> Job | None:
    """`job`'s stages through verification, for these cases alone (None: no case left). It names its
    cases itself: no longer a shard of the plan."""
    if not cases:
        return None
    options = {k: v for k, v in job.options.items() if k != "shard"}
    stages = job.stages[:job.stages.index("verify") + 1] if "verify" in job.stages else ["verify"]
    return replace(job, case_indices=cases, options=options, stages=stages)


def result_key(event: Event) -> tuple | None:
    """What makes a result one of a kind within a run (None: not a result)."""
    if isinstance(event, CaseResult):
        return ("case", event.case_index, event.config, event.output, event.phase)
    if isinstance(event, BenchResult):
        return ("bench", event.case_index)
    if isinstance(event, DeviceFacts):
        return ("device", event.gpu)
    return None


def stamp_gpu(relay: OnEvent, gpu: str) -> OnEvent:
    """`relay`, writing the GPU that ran each result into it."""

    def stamped(event: Event) -> None:
        if isinstance(event, (CaseResult, BenchResult, DeviceFacts)) and not event.gpu:
            event = replace(event, gpu=gpu)
        relay(event)

    return stamped


class ShardMerger:
    """Merges the events of verification shards into those of one run.

    One WorkerReady and one RunStarted (the first; RunStarted.planned is the
    whole plan), progress counted over every shard, each Problem once.
    """

    def __init__(self, relay: OnEvent, shards: int = 1):
        self._relay = relay
        self._lock = threading.Lock()
        self._seen_ready = self._seen_started = False
        self._total = 0
        self._done: set[int] = set()
        self._problems: set[tuple[str, str]] = set()
        self._shards = shards
        self._verified: set[int] = set()  # shards past their verification cases

    def shard_over(self, shard: int) -> None:
        """Shard `shard` verified its cases (and maybe more): the last one completes the verdict."""
        with self._lock:
            if shard in self._verified:
                return
            self._verified.add(shard)
            if len(self._verified) == self._shards:
                self._relay(StageChanged(stage="verified", detail=f"{len(self._done)} of {self._total} cases"))

    def relay(self, event: Event, shard: int = 0) -> None:
        if isinstance(event, StageChanged) and event.stage == PRECOMPILING:
            self.shard_over(shard)  # a shard's own work after verification is not the run's progress
            return
        with self._lock:
            if isinstance(event, WorkerReady):
                if self._seen_ready:
                    return
                self._seen_ready = True
            elif isinstance(event, RunStarted):
                if self._seen_started:
                    return
                self._seen_started = True
                self._total = len(event.planned)
            elif isinstance(event, StageChanged) and event.stage == "verifying":
                event = replace(event, current=min(len(self._done) + 1, self._total or event.total),
                                total=self._total or event.total)
            elif isinstance(event, CaseResult) and not event.config:
                self._done.add(event.case_index)
            elif isinstance(event, Problem):
                key = (event.kind, event.message)
                if key in self._problems:
                    return
                self._problems.add(key)
            self._relay(event)
