"""Parent side: how one run spreads over workers, chosen once per run (`choose`).

- `OneWorker`: the whole job in one worker (one shard's worth of work, a launcher's run, `--case K`).
- `Pooled`: one GPU worker, and compile processes without a GPU that build each of the run's kernels
  once, in parallel (run/child/compile_pool.py); on one GPU where this Triton can.
- `Sharded`: verification split over `parallel` workers (several GPUs, or no compile pool), merged into
  one run; the stages after verification in a fresh worker once every case passed. On one GPU with a
  benchmark, that worker starts the moment the verdict is in and waits at a GPU gate (Job.gpu_gate)
  until the shards' workers have exited, before it times anything.

Every strategy drives workers through `WorkerJobs` (one job in a worker, with restarts after a crash
or a hang; a job fanned out over several workers; the stages after verification).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

from ..events import CaseResult, Event, LogLine, Problem, Requeued, RunStarted
from ..stage import CompilePoolOrder, Job
from .contracts import OnEvent, WorkerHandle, WorkerSource
from .gpus import GpuSlot
from .protocol import (
    COMPILE_ORDER_ENV,
    COMPILE_ROLE,
    GPU_GATE,
    ROLE_ENV,
    compile_processes,
)
from .pump import VERIFY_PHASE, case_error, pump
from .relay import EarlyStart, RunRelay, ShardMerger, stamp_gpu
from .supply import WorkerSupply
from .workers import WorkerStartError

class Runner(Protocol):
    """What a strategy asks of the runner that chose it (run/runner.Runner is the one there is): its workers and
    their GPUs, the cancel flag, and the few decisions that are the runner's. A protocol, so that this module
    never imports the runner that imports it."""

    supply: WorkerSupply
    source: WorkerSource
    gpus: list[GpuSlot]
    parallel: int
    launcher: list[str]
    keep_warm: bool
    cancel_event: threading.Event
    compile_target: list | None

    @property
    def cancelled(self) -> bool: ...

    def gpu_for(self, shard: int) -> GpuSlot | None: ...

    def take_worker(self, gpu: GpuSlot | None = None, timed: bool = False) -> WorkerHandle: ...

    def prewarm(self) -> None: ...

    def verification_started(self) -> None: ...

    def verification_over(self) -> None: ...

    def pooling_possible(self) -> bool: ...


# A worker lost in a case fails that case and the cases left go on in a fresh one. A kernel that crashes on one
# shape crashes that shape's value stresses too, so restarts that finish cases are allowed many times; a worker that
# dies before finishing any (an import that crashes) is given up sooner, and so is one that hangs: each hang costs a
# whole time-out.
MAX_IDLE_RESTARTS = 3
MAX_RESTARTS = 12
MAX_HANGS = 3
# A worker that has not said it is ready by then (they take 2-10 s, more on a loaded host) is given up once, with
# what its threads were doing in the log, and another takes its place (workers.STARTUP_TIMEOUT_S for that one).
FIRST_START_TIMEOUT_S = 90.0
Limits = tuple  # (timeout_s, interpret_timeout_s)


@dataclass
class RunInFlight:
    """One run's state while its strategy executes it."""

    job: Job
    relay: RunRelay
    limits: Limits
    gpu_free: threading.Event = field(default_factory=threading.Event)  # an early benchmark may time now
    requeued: bool = False  # a worker was lost while verifying: its cases ran again on another
    early: EarlyStart | None = None  # the stages after verification, started at the verdict

    @property
    def after_verification(self) -> list[str]:
        stages = self.job.stages
        return stages[stages.index("verify") + 1:] if "verify" in stages else []


class CasesSeen:
    """The cases a job's workers announced (RunStarted: label, generated or not) and the verdicts they sent,
    read off the events on their way to `relay`: what a restart needs to tell progress from a loop, and to
    name a case it never ran."""

    def __init__(self, relay: OnEvent):
        self._relay = relay
        self.labels: dict[int, str] = {}
        self.generated: set[int] = set()
        self.verdicts = 0
        self.hangs = 0

    def relay(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.labels.update(zip(event.planned, event.labels))
            self.generated.update(event.generated)
        elif isinstance(event, CaseResult) and not event.config and event.phase == "":
            self.verdicts += 1
        elif isinstance(event, Problem) and event.kind == "timeout":
            self.hangs += 1
        self._relay(event)

    def not_run(self, index: int, message: str) -> CaseResult:
        return case_error(index, self.labels.get(index, ""), message, index in self.generated)


class WorkerJobs:
    """Jobs in workers of one runner: one job in a worker with restarts, one fanned out over several."""

    def __init__(self, runner: Runner):
        self.runner = runner

    def with_restarts(self, run: RunInFlight, job: Job, relay: OnEvent, gpu: GpuSlot | None = None,
                      after_send: Callable[[], None] | None = None) -> None:
        """`job` in a worker; after a crash or a hang, the cases left in a fresh one. It gives up after
        MAX_IDLE_RESTARTS restarts in a row that brought no case a verdict, after MAX_HANGS hangs, or after
        MAX_RESTARTS restarts in all; each case left then gets an error of its own in the record, never a mere
        count. `after_send`: called once the first worker has the job."""
        runner = self.runner
        restarts = idle = 0
        pending: Job | None = job
        seen = CasesSeen(relay)
        if gpu is None:
            gpu = runner.gpu_for(0)
        while pending is not None and not runner.cancelled:
            before = seen.verdicts
            pending = self.once(run, pending, seen.relay, gpu, after_send)
            after_send = None
            if pending is None:
                return
            # The compile processes served the lost worker and are gone: the next one compiles alone.
            pending = replace(pending, compile_pool=None)
            restarts += 1
            idle = idle + 1 if seen.verdicts == before else 0
            why = (f"{idle} worker restarts in a row without a case finished" if idle > MAX_IDLE_RESTARTS
                   else f"{seen.hangs} cases that hung (each waited out its time-out)" if seen.hangs > MAX_HANGS
                   else f"{MAX_RESTARTS} worker restarts" if restarts > MAX_RESTARTS else "")
            if why:
                left = pending.case_indices or []
                # No case list yet: every worker died before it knew its cases (kernel.py's import, say).
                unplanned = "" if pending.case_indices is None else f"; {len(left)} cases not run"
                relay(Problem(kind="crash", message=f"stopped after {why}{unplanned}"))
                for index in left:
                    relay(seen.not_run(index, f"not run: the run stopped after {why}"))
                return

    def once(self, run: RunInFlight, job: Job, relay: OnEvent, gpu: GpuSlot | None,
             after_send: Callable[[], None] | None = None) -> Job | None:
        """One worker's share of a job. Returns the job for the remaining cases after a crash, else None."""
        runner = self.runner
        # A gated benchmark's worker starts the next save's spares as it is taken: its gate waits for them.
        timed = "bench" in job.stages and not job.gpu_gate
        worker = runner.take_worker(gpu, timed=timed)
        try:
            try:
                ready = worker.wait_ready(FIRST_START_TIMEOUT_S)
            except WorkerStartError as exc:
                if runner.cancelled:
                    return None
                if not exc.stalled:
                    relay(exc.problem)
                    return None
                # Alive but silent: what it was doing goes to the log, and another worker takes its place.
                relay(LogLine(text=f"{exc.problem.message}: another worker takes its place; the stalled one's "
                                   f"last words and threads:\n{exc.problem.traceback}", stream="workbench"))
                runner.supply.release(worker)
                worker = runner.take_worker(gpu, timed=timed)
                try:
                    ready = worker.wait_ready()
                except WorkerStartError as again:
                    if not runner.cancelled:
                        relay(replace(again.problem, message=f"{again.problem.message} (the second worker; the "
                                                             f"first did not start within {FIRST_START_TIMEOUT_S:.0f} s)"))
                    return None
            if worker.gpu_id:
                relay = stamp_gpu(relay, worker.gpu_id)
            relay(ready)
            if runner.cancelled:
                return None
            worker.send(job)
            if after_send is not None:
                after_send()
            if job.gpu_gate:
                self.open_gate_when_free(worker, run.gpu_free)
            timeout_s, interpret_timeout_s = run.limits
            limit = (interpret_timeout_s if ready.mode == "interpreter" else timeout_s) or None
            return pump(worker, job, relay, limit, runner.cancel_event, waits_for_exit=bool(runner.launcher))
        finally:
            runner.supply.release(worker)

    def open_gate_when_free(self, worker: object, free: threading.Event) -> None:
        """Tell `worker` the GPU is its own once the run's verification workers have exited (or the run
        is cancelled: then it is killed anyway)."""
        runner = self.runner

        def when_free() -> None:
            while not free.wait(0.05):
                if runner.cancelled or worker.proc.poll() is not None:
                    return
            with contextlib.suppress(OSError, ValueError):  # gone meanwhile: the event pump reports it
                worker.send_line(GPU_GATE)

        threading.Thread(target=when_free, name="gpu-gate", daemon=True).start()

    def fan_out(self, run: RunInFlight, job: Job, relay: OnEvent, n: int, shard_field: str,
                gpu_of: Callable[[int], GpuSlot | None], verifying: bool = False) -> None:
        """`job` split n ways (`job.<shard_field> = [k, n]`), share k in a worker on `gpu_of(k)`, all at once;
        their events merged into one run (one WorkerReady, one RunStarted, each Problem once)."""
        merged = ShardMerger(relay, n)

        def share(k: int) -> None:
            try:
                self.with_restarts(run, replace(job, **{shard_field: [k, n]}), lambda event: merged.relay(event, k),
                                   gpu_of(k))
            finally:
                if verifying:
                    merged.shard_over(k)

        threads = [threading.Thread(target=share, args=(k,), daemon=True) for k in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def after_verification(self, run: RunInFlight, job: Job, relay: OnEvent) -> None:
        """The stages after verification; a benchmark on several GPUs is spread over them, a worker each:
        each GPU times its share of the sweep with nothing else on it."""
        gpus = self.runner.gpus
        if "bench" not in job.stages or len(gpus) < 2 or job.case_indices == []:
            self.with_restarts(run, job, relay)
            return
        self.fan_out(run, job, relay, len(gpus), "bench_shard", lambda k: gpus[k])


class Strategy:
    """How a run's job spreads over workers; `execute` runs what it owns of the job."""

    name = "one worker"
    replaces_its_spare = False  # the spare the run took is replaced after the run, not when taken

    def __init__(self, runner: Runner):
        self.runner = runner
        self.jobs = WorkerJobs(runner)

    def prepare(self, run: RunInFlight) -> None:
        """Before the run's first event: whatever must exist once events arrive (an early benchmark)."""

    def on_verified(self, run: RunInFlight, tally: object) -> None:
        """The verdict is complete (a "verified" StageChanged came)."""
        self.runner.verification_over()

    def execute(self, run: RunInFlight) -> None:
        raise NotImplementedError

    def runs_after_verification(self, run: RunInFlight) -> bool:
        """Whether the runner must still run the stages after verification once `execute` returns."""
        return run.requeued


class OneWorker(Strategy):
    """The whole job in one worker. A worker lost while verifying has its cases run again on another,
    verification only: the stages after it run once every case has its verdict (see pump.requeue)."""

    def execute(self, run: RunInFlight, after_send: Callable[[], None] | None = None) -> None:
        def watch(event: Event) -> None:
            if isinstance(event, Requeued) and event.stage in VERIFY_PHASE:
                run.requeued = True
            run.relay(event)

        self.jobs.with_restarts(run, run.job, watch, after_send=after_send)


class Pooled(OneWorker):
    """One GPU worker serving compile processes forked for the run (run/child/compile_pool.py); its benchmark
    times once the spares started after the last run are warm (spares warming are the only other GPU users)."""

    name = "one GPU worker and compile processes"
    replaces_its_spare = True

    def __init__(self, runner: Runner, target: list):
        super().__init__(runner)
        self.pool = CompilePoolOrder.new(target, compile_processes())

    def execute(self, run: RunInFlight) -> None:
        run.job = replace(run.job, compile_pool=self.pool, gpu_gate=True)
        threading.Thread(target=self._free_gpu_once_spares_warm, args=(run.gpu_free,), name="gpu-free",
                         daemon=True).start()
        # The compile processes start once the GPU worker has its job, before its events reach the
        # app: started on a thread instead, they waited on the app's rendering (0.45 s on an H100 host).
        try:
            super().execute(run, after_send=functools.partial(self._start_compile_processes, run.job))
        finally:
            self.runner.supply.stop_compile_processes()

    def _start_compile_processes(self, job: Job) -> None:
        """The run's compile processes, told in their environment what to import and where to connect."""
        runner = self.runner
        if runner.cancelled:
            return
        runner.supply.start_compile_processes(
            {ROLE_ENV: COMPILE_ROLE, COMPILE_ORDER_ENV: self.pool.order_for(job.kernel_path, job.cache_dir)},
            self.pool.processes)
        if runner.cancelled:
            runner.supply.stop_compile_processes()

    def _free_gpu_once_spares_warm(self, gpu_free: threading.Event) -> None:
        self.runner.supply.await_spares(self.runner.cancel_event)
        gpu_free.set()


class Sharded(Strategy):
    """Verification over `parallel` workers (each shard compiles its share in parallel), then the rest."""

    name = "sharded verification"

    def prepare(self, run: RunInFlight) -> None:
        runner = self.runner
        rest = run.after_verification
        if runner.source.local and "bench" in rest and len(runner.gpus) < 2:
            gated = replace(run.job, stages=rest, gpu_gate=True)
            run.early = EarlyStart(lambda: self.jobs.after_verification(run, gated, run.relay))

    def on_verified(self, run: RunInFlight, tally: object) -> None:
        super().on_verified(run, tally)
        if run.early is not None and tally.verdict().verified:
            run.early.start()  # the benchmark sets up beside the shards' last work; it times once they are gone

    def execute(self, run: RunInFlight) -> None:
        runner = self.runner
        job, rest = run.job, run.after_verification
        first = job.stages[:len(job.stages) - len(rest)]
        if "bench" in rest:
            first = [*first, "precompile"]  # the shards compile the bench cases while the verdict is shown
        n = runner.parallel if job.case_indices is None else min(runner.parallel, len(job.case_indices))
        runner.verification_started()
        try:
            self.jobs.fan_out(run, replace(job, stages=first), run.relay, n, "shard", runner.gpu_for, verifying=True)
        finally:
            runner.verification_over()
            if runner.keep_warm and not runner.cancelled:
                runner.prewarm()
            if run.early is not None and run.early.started:
                runner.supply.await_exits()
                runner.supply.await_spares(runner.cancel_event)
                run.gpu_free.set()  # the early benchmark's worker may time now
                run.early.join()

    def runs_after_verification(self, run: RunInFlight) -> bool:
        return not (run.early is not None and run.early.started)


def choose(runner: Runner, job: Job) -> Strategy:
    """The strategy of a run: sharded when several workers may verify, pooled instead where one GPU worker
    and compile processes can, else one worker."""
    sharded = runner.parallel > 1 and "verify" in job.stages and job.case_indices != []
    if not sharded:
        return OneWorker(runner)
    if runner.pooling_possible():
        return Pooled(runner, runner.compile_target)
    return Sharded(runner)
