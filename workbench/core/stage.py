"""What a worker stage is given and how it ends: the protocol between the runner and the stages.

A stage is a function `stage(context: JobContext)` that a worker process runs (run/child/worker.py
dispatches on the job's stage names); the verification battery, the benchmark and plugins'
profilers are stages. They end early by raising `RunAborted` (the project cannot go on; the
Problem was emitted) or `ContextPoisoned` (a CUDA error left the process unusable: the runner
resumes the remaining cases in a fresh worker). Imports nothing of the workbench but events.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from .events import Problem

if TYPE_CHECKING:  # for the annotations only: at run time this module imports nothing of the workbench but events
    from .project.config import ProjectConfig
    from .project.contract import KernelModule
    from .verdict import Tally

# The stages of `workbench bench` (and of a bench any front end runs): the interpreter refused before anything
# is verified (timing/bench.require_gpu_stage), then the battery, then the timing.
BENCH_STAGES = ("require_gpu", "verify", "bench")

# A worker (and the template it forks from) started with this set ("sm_90") compiles for that GPU architecture
# and runs nothing: no CUDA, no interpreter (`workbench ir --target`: timing/compiled.ir_stage). Its mode is
# COMPILE_MODE. An interpreting process cannot do it: Triton's own @jit helpers (tl.sum ...) are interpreted there.
COMPILE_TARGET_ENV = "WORKBENCH_COMPILE_TARGET"
COMPILE_MODE = "compile only"
# The StageChanged before one case's launcher runs to record what it compiles (run/child/compile_pool.py, `ahead`):
# user code, outside the case's own run; a hang or a crash there is that case's, and verification resumes after it.
RECORDING = "recording"
# The StageChanged before a case's torch.compile check (verify/compat.py): Dynamo and Inductor's cold start and
# compile are the check's, not the kernel's, so the case's time-out ([verify] timeout_s) gives way to this
# allowance until the case's next event.
CHECKING = "checking"
CHECK_TIMEOUT_S = 300.0

CUDA_FATAL_MARKERS = ("illegal memory access", "unspecified launch failure", "misaligned address",
                      "illegal instruction", "device-side assert", "CUDA error: an illegal")


class RunAborted(Exception):
    """The project cannot be used any further (the Problem was emitted)."""


class ContextPoisoned(Exception):
    """A CUDA error that leaves this process's context unusable: the worker must be replaced."""


def is_cuda_fatal(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in CUDA_FATAL_MARKERS)


@dataclass
class CompilePoolOrder:
    """Where a run's compile processes (run/child/compile_pool.py) meet their GPU worker: a Linux
    abstract-socket address and an authentication key, chosen per run; how many processes compile,
    and the GPU target ([backend, arch, warp size]) they compile for."""

    address: str
    authkey: str  # hex
    processes: int
    target: list[Any]

    @classmethod
    def new(cls, target: list[Any], processes: int) -> CompilePoolOrder:
        return cls(address=f"\0workbench-compile-{os.getpid()}-{os.urandom(6).hex()}", authkey=os.urandom(16).hex(),
                   processes=processes, target=list(target))

    def order_for(self, kernel_path: str, cache_dir: str) -> str:
        """A compile process's order (run/protocol.COMPILE_ORDER_ENV): where to connect, what to import and
        compile for, and the run's Triton cache."""
        return json.dumps({"address": self.address, "authkey": self.authkey, "target": self.target,
                           "kernel_path": kernel_path, "cache_dir": cache_dir})


@dataclass
class Job:
    """One job for one worker, as it travels (one JSON line). The fields the workbench itself reads are
    typed; `options` is the plugins' own (a stage of theirs reads what it put there)."""

    kernel_path: str
    stages: list[str] = field(default_factory=lambda: ["verify"])
    config: dict[str, Any] = field(default_factory=dict)  # ProjectConfig.to_dict()
    case_indices: list[int] | None = None  # None: every case the stages use
    cache_dir: str = ""
    pins: dict[str, int | str] = field(default_factory=dict)  # kernel -> forced config (as described, or its index)
    live: bool = False  # the live loop's run: its shorter timing series, no compatibility checks
    reference_timings: dict[str, Any] = field(default_factory=dict)  # baselines.reference_key -> earlier Timing (live)
    # Baselines timed by earlier runs (project/kept.py): baselines.compiled_key -> torch.compile(reference_fn)'s,
    # baselines.reference_key -> reference_fn's, each {"timing", "measured_at"} (headless runs)
    kept_baselines: dict[str, Any] = field(default_factory=dict)
    # Compatibility checks that passed in earlier runs (project/kept.py): compat.finding_key -> {"check", "at"}
    kept_findings: dict[str, Any] = field(default_factory=dict)
    shard: list[int] | None = None  # [k, n]: this worker verifies every n-th case, from the k-th
    bench_shard: list[int] | None = None  # [k, n]: ... and times that share of the benchmark sweep
    gpu_gate: bool = False  # wait for the parent's GPU_GATE line before timing anything
    compile_pool: CompilePoolOrder | None = None  # compile processes serve this job (run/child/compile_pool.py)
    options: dict[str, Any] = field(default_factory=dict)  # plugins' switches (e.g. a profiler's)
    checks: list[dict[str, str]] = field(default_factory=list)  # plugins' checks: {"key", "target"} (verify/checks/)
    # The process started with the run that runs the torch.compile check (verify/compat_beside.py): {"folder",
    # "pid"}; empty: the worker runs the check itself
    compile_check: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        data = json.loads(text)
        pool = data.get("compile_pool")
        return cls(**{**data, "compile_pool": CompilePoolOrder(**pool) if pool else None})


@dataclass
class JobContext:
    """What a stage is given (see the module docstring). Typed for the workbench's own stages; a
    plugin's stage reads the same fields."""

    job: Job
    km: KernelModule | None  # None for a job without kernel.py (`doctor --measure`)
    config: ProjectConfig
    interpret: bool
    emit: Callable[[Any], None]
    tally: Tally | None = None  # what this job emitted so far: a later stage sees whether verification passed
    judge: Callable[[Any], Any] | None = None  # CaseData -> CaseResult, given (and reported) by the judge process
    # Blocks until the GPU is this job's alone; a job started beside its verification's last workers
    # (Job.gpu_gate) calls it before it times anything. Returns at once after the first call.
    wait_for_gpu: Callable[[], None] = lambda: None
    compiles: CompilesAhead | None = None  # processes without a GPU compile this job's kernels


class CompilesAhead(Protocol):
    """What a stage asks of the processes that compile its kernels beside a GPU worker (run/child/compile_pool.py's
    CompilePool is the one there is): a protocol here, so this module refers to nothing above it."""

    def ahead(self, km: Any, cases: list[Any], later: list[Any],
              announce: Callable[[Any], None] = ...) -> Iterator[Any]:
        """Record what `cases` (then `later`) compile, hand it out; `cases` in the order they become ready."""

    def close(self, wait: bool = False) -> None:
        """No more work (`wait`: until every queued compile is over)."""

    def describe(self) -> str:
        """One line on what was compiled, by how many processes."""


def shard_of(cases: list, shard: list[int] | None) -> list:
    """The cases shard [k, n] of a job takes: every n-th, from the k-th (the runner counts the same)."""
    if not shard:
        return list(cases)
    k, n = shard
    return list(cases[k::n])


def gpu_stage_cases(context: "JobContext", select: Callable[[list, list[int] | None], list],
                    refusal: str) -> list | None:
    """The opening of a GPU-only stage (a plugin's profiler or sanitizer): in the interpreter, emit
    `refusal`; else the cases `select(cases, asked-for indices)` picks, or None after saying none match."""
    if context.interpret:
        context.emit(Problem(kind="environment", message=refusal))
        return None
    km = context.km
    cases = select(km.cases, context.job.case_indices)
    if not cases:
        context.emit(Problem(kind="inputs", message=f"no case has index {context.job.case_indices} "
                                                    f"(CASES has {len(km.cases)})", file=str(km.path)))
        return None
    return cases


class Phases:
    """Wall-clock seconds of steps, in order: where a benchmark case's time went (BenchResult.phases), or a
    worker's warm-up (WorkerReady.warmup_phases)."""

    def __init__(self, carried: dict[str, float] | None = None):
        self.seconds: dict[str, float] = dict(carried or {})
        self._mark = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._mark, 4)
        self._mark = now
