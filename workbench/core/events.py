"""The events a run emits, as dataclasses that travel as JSON lines.

A worker process writes one JSON object per line; the parent turns each back
into the same dataclass with `event_from_json`. Every renderer (the CLI table,
the TUI, the run history, plugin hooks) consumes these and nothing else, so
anything a user can see about a run is in here.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

_REGISTRY: dict[str, type["Event"]] = {}


@dataclass
class Event:
    type: ClassVar[str] = "event"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.type] = cls

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, default=str)


@dataclass
class WorkerReady(Event):
    """The worker has imported torch and triton and brought up the device."""

    type: ClassVar[str] = "worker_ready"
    pid: int
    mode: str  # "gpu" or "interpreter"
    device_name: str
    torch_version: str
    triton_version: str
    python_version: str
    warmup_s: float
    reason: str = ""  # why the interpreter is used, when it is
    warmup_phases: dict[str, float] = field(default_factory=dict)  # seconds of each warm-up step, in order
    compile_target: list = field(default_factory=list)  # Triton's GPU target, when processes without a GPU can
    # compile for this worker (run/child/compile_pool.py): [backend, arch, warp size]


@dataclass
class RunStarted(Event):
    type: ClassVar[str] = "run_started"
    kernel_path: str
    source_hash: str
    mode: str
    device_name: str
    n_cases: int
    autotuned: list[str] = field(default_factory=list)  # names of autotuned kernels
    planned: list[int] = field(default_factory=list)  # case indices verification will run, in order
    labels: list[str] = field(default_factory=list)  # each planned case's label, in the same order
    generated: list[int] = field(default_factory=list)  # the planned cases derived from CASES (edge shapes, stresses)
    bench_only: list[int] = field(default_factory=list)  # CASES for the benchmark alone (purpose "bench")
    seed: int | None = None  # the seed the cases' inputs are drawn from ([verify] seed as the run was given it)


@dataclass
class StageChanged(Event):
    """Progress: what the worker is doing now ("verifying", case 3/12)."""

    type: ClassVar[str] = "stage"
    stage: str  # importing | verifying | verified (every case has its verdict) | benchmarking | profiling
    detail: str = ""
    current: int = 0
    total: int = 0
    case_index: int | None = None
    # "forward": a training kernel's forward alone, judged before the gradients (the live loop's first
    # verdict, verify/battery.py `forward_first`); "": the case's whole battery
    phase: str = ""


@dataclass
class Worst:
    index: list[int]
    kernel: float | None  # None: not a finite number (JSON carries none), as `kernel_special` says
    reference: float | None
    kernel_special: str = ""  # "unwritten", "nan", "inf" or "-inf" where `kernel` is None; "" in older records


@dataclass
class CaseResult(Event):
    """The verdict for one case under one autotune config (or the tuner's own pick)."""

    type: ClassVar[str] = "case_result"
    case_index: int
    label: str  # e.g. "M=127 N=4097 float16"
    status: str  # passed | failed | error | skipped
    config: str = ""  # "" = the autotuner's own pick; else "kernel: BLOCK_SIZE=1024, num_warps=4"
    dtype: str = ""
    numel: int = 0
    bad_count: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_norm_err: float | None = None
    rtol: float | None = None
    atol: float | None = None
    worst: Worst | None = None
    pattern: str = ""  # "all in the last 31 columns: a boundary mask?"
    messages: list[str] = field(default_factory=list)  # each failed check, one line each
    notes: list[str] = field(default_factory=list)  # non-failing observations (nondeterminism)
    error_map: list[list[float]] | None = None  # coarse grid of bad-element fractions (0..1)
    output: str = ""  # which output (for kernels returning several), "" if one
    duration_s: float = 0.0
    gpu: str = ""  # which GPU ran it (GpuSlot.id: "0", "1", "10.0.0.5/0"); "" when the run had no GPU placement
    generated: bool = False  # an edge-shape case derived from CASES (verify/edge_cases.py), not one of CASES
    launches: int | None = None  # Triton kernel launches in one call of kernel_fn (None: not counted)
    checks: dict[str, str] = field(default_factory=dict)  # check -> "passed" | "failed" | "warning" | "skipped: why"
    warnings: list[str] = field(default_factory=list)  # the case proves little (constant inputs, zero reference)
    # "" = the case's verdict; "after timing" = the benchmark's recheck, a second result; "forward" = a training
    # kernel's forward alone, judged first in the live loop (the "" result with its gradients follows)
    phase: str = ""
    # The compatibility checks run on this case (verify/compat.py), each a finding beside the verdict:
    # name -> {"status": "passed" | "failed", "required": bool, "error": the whole error ("" when passed)}
    compat: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Each output compared (the forward's, each gradient), with its error against the error model's budget
    # (verify/error_model.py): {"output", "dtype", "passed", "max_abs_err", "torch_error", "torch_dtype",
    # "multiple" (the kernel's error over torch's own; None where torch was exact), "factor", "rtol", "atol",
    # "non_finite" (NaN or Inf where the reference has a number: max_abs_err is then the finite elements' alone)}
    compared: list[dict[str, Any]] = field(default_factory=list)

    @property
    def non_finite(self) -> bool:
        """NaN or Inf where the reference has numbers (the "nan" check failed): the error sizes then are the finite
        elements' alone, and the tables show NaN/Inf instead (core/text.fmt_case_err)."""
        return self.checks.get("nan") == "failed"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseResult":
        worst = data.get("worst")
        return cls(**{**data, "worst": Worst(**worst) if worst else None})


@dataclass
class Problem(Event):
    """Something that stopped the project from being used, or a case from running.

    kind: syntax | import | contract | inputs | reference | compile | runtime |
          crash | timeout | environment | internal
    """

    type: ClassVar[str] = "problem"
    kind: str
    message: str
    file: str = ""
    line: int = 0
    traceback: str = ""
    case_index: int | None = None

    @property
    def location(self) -> str:
        if not self.file:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class LogLine(Event):
    """Text the kernel or the worker printed (stdout/stderr of the worker)."""

    type: ClassVar[str] = "log"
    text: str
    stream: str = "stderr"


@dataclass
class RunFinished(Event):
    type: ClassVar[str] = "run_finished"
    verdict: str  # passed | failed | gpu_only | error | cancelled
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    duration_s: float = 0.0


@dataclass
class Timing:
    """One measured series. Times in milliseconds; spread as the inter-quartile range."""

    median_ms: float
    q25_ms: float
    q75_ms: float
    min_ms: float
    samples: int  # how many were timed
    method: str  # e.g. "cuda events, L2 flushed" or "cuda graph replay, L2 flushed"
    # The samples themselves, sorted, at most stats.MAX_KEPT_SAMPLES of them at evenly spaced ranks and to 4
    # significant digits (stats.kept_samples): what a comparison between runs needs for its interval
    # (timing/noise.py). Empty in records written before they were kept, and for the reference's timings.
    samples_ms: list[float] = field(default_factory=list)
    # Device memory one call took at its peak beyond what was allocated before it (outputs, saved tensors,
    # temporaries): timing/memory.peak_memory. None where not measured.
    peak_memory_bytes: int | None = None


@dataclass
class DeviceFacts(Event):
    """The GPU a benchmark ran on, its state and its measured ceilings (sent before timings)."""

    type: ClassVar[str] = "device_facts"
    name: str
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    driver: str = ""
    torch_version: str = ""
    triton_version: str = ""
    copy_gbps: float | None = None  # measured device-to-device copy, bytes read + written
    matmul_tflops: float | None = None  # measured large bf16 matmul
    ceilings_measured_at: str = ""
    l2_bytes: int | None = None
    notes: list[str] = field(default_factory=list)  # e.g. where the ceilings came from
    gpu: str = ""  # GpuSlot.id of the GPU described, as on the BenchResults timed on it


@dataclass
class BenchResult(Event):
    """One benchmark case: the kernel against the reference and torch.compile(reference)."""

    type: ClassVar[str] = "bench_result"
    case_index: int
    label: str
    dtype: str = ""
    kernel: Timing | None = None
    reference: Timing | None = None
    compiled: Timing | None = None
    compiled_note: str = ""  # why torch.compile has no time, when it has none
    # kernel_fn itself under torch.compile: Inductor launches the kernel (a Python float argument as fp64: see
    # verify/compiled_context.py), timed by the same timer; its output judged by verification's torch.compile check
    kernel_compiled: Timing | None = None
    kernel_compiled_note: str = ""  # why it has no time, when it has none
    # what its compile for that timing changed in the kernel's launches (compiled_context.changed_scalars: a scalar
    # that reached the kernel as fp64), kept with its time
    kernel_compiled_scalars: list[str] = field(default_factory=list)
    bytes_moved: int | None = None
    bytes_source: str = ""  # "bytes_moved()" or "lower bound: inputs read once + outputs written once"
    flops: int | None = None
    flops_source: str = ""
    gbps: float | None = None
    tflops: float | None = None
    bandwidth_fraction: float | None = None  # of the measured copy ceiling
    compute_fraction: float | None = None  # of the measured matmul ceiling
    speedup_vs_reference: float | None = None
    speedup_vs_compiled: float | None = None
    recheck: str = ""  # "passed" or what failed when the output was re-checked after timing
    sampled_calls_checked: int = 0  # timed calls, chosen at random, whose outputs the recheck compared too
    notes: list[str] = field(default_factory=list)
    sm_clock_mhz: int | None = None  # read right after the kernel's timed series (boost clocks, or not)
    temperature_c: int | None = None
    reference_key: str = ""  # what the reference's time depends on (baselines.reference_key): the live loop reuses it
    compiled_key: str = ""  # ... and torch.compile's (baselines.compiled_key): kept across runs (project/kept.py)
    compiled_reused: bool = False  # `compiled` is a time measured by an earlier run (its note says when)
    kernel_compiled_key: str = ""  # ... and kernel_fn's under torch.compile (baselines.kernel_compiled_key): kept too
    kernel_compiled_reused: bool = False
    reference_reused: bool = False  # ... and `reference` (the live loop's earlier save, or a kept baseline)
    gpu: str = ""  # which GPU timed it (GpuSlot.id), as on CaseResult
    phases: dict[str, float] = field(default_factory=dict)  # wall-clock seconds of the case's steps, in order
    # Why the kernel's measured time is not posted ("": it is, or the recheck failed): the timed calls launched
    # fewer Triton kernels than a checked call, or a rate past this GPU's ceilings (timing/plausible.py).
    withheld: str = ""
    timed_launches_per_call: float | None = None  # Triton launches per timed call, capture included (None: not counted)
    checked_launches: int | None = None  # Triton launches of one call on inputs it had not seen before
    input_sets: int | None = None  # input sets the timed calls went through in turn (the inputs and their copies)
    # A training kernel's benchmark mode (timing/modes.py): "fwd", "bwd" or "full"; "" for a forward-only kernel.
    mode: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchResult":
        timings = {k: Timing(**data[k]) if data.get(k) else None
                   for k in ("kernel", "reference", "compiled", "kernel_compiled")}
        return cls(**{**data, **timings})


@dataclass
class Requeued(Event):
    """A worker's GPU or machine was lost mid-run (not the kernel's fault): its cases run again elsewhere.

    The runner sends the lost worker's unfinished cases to another worker; a result that did come back
    is kept and never recorded twice.
    """

    type: ClassVar[str] = "requeued"
    reason: str  # e.g. "the Ray node 10.0.0.5 running GPU 10.0.0.5/1 died"
    cases: list[int] = field(default_factory=list)  # the verification cases run again ([]: the job's other work)
    gpu: str = ""  # the GPU that was lost
    stage: str = ""  # what the lost worker was doing (importing, verifying, benchmarking ...)


@dataclass
class ConfigTiming:
    config: str
    ms: float | None  # None when it did not run
    status: str = "ok"  # ok | failed to compile | out of resources | pruned


@dataclass
class AutotuneReport(Event):
    """What one autotuned kernel tried, timed and picked for one tuning key."""

    type: ClassVar[str] = "autotune"
    kernel: str
    key: str
    picked: str
    timings: list[ConfigTiming] = field(default_factory=list)
    case_index: int | None = None
    tuning_s: float | None = None
    source: str = ""  # "listener" (triton's autotuning listener) or "autotuner object"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AutotuneReport":
        return cls(**{**data, "timings": [ConfigTiming(**t) for t in data.get("timings", [])]})


@dataclass
class KernelFacts:
    """What the compiler made of one config of one @triton.jit function, for one specialisation."""

    kernel: str  # the name it is launched by: the autotuner's (as in AutotuneReport.kernel), else the function's
    config: str  # "BLOCK_SIZE=1024, num_warps=4, num_stages=3" (project.contract.describe_config)
    signature: str  # Triton's specialisation of the arguments: "*fp32:16, *fp32:16, i32, fp32"
    target: str  # what it was compiled for: "sm_90"
    num_warps: int
    num_stages: int
    num_ctas: int = 1
    registers: int | None = None  # per thread
    spill_bytes: int | None = None  # local memory per thread: spilled registers (and local arrays)
    static_shared: int | None = None  # bytes per block
    dynamic_shared: int = 0  # bytes per block, as Triton launches it
    occupancy: float | None = None  # theoretical: resident warps over the SM's warp slots (timing/occupancy.py)
    blocks_per_sm: int | None = None
    limiter: str = ""  # what bounds the occupancy: registers, shared memory, warps, blocks
    case_indices: list[int] = field(default_factory=list)  # the cases that launch it
    files: dict[str, str] = field(default_factory=dict)  # IR stage -> its file in the project's Triton cache
    hash: str = ""  # Triton's hash of the compiled kernel


@dataclass
class CompiledKernels(Event):
    """Every config of every kernel compiled for a case (or a benchmark case), with the compiler's facts."""

    type: ClassVar[str] = "compiled_kernels"
    kernels: list[KernelFacts] = field(default_factory=list)
    target: str = ""  # "sm_90", compiled for this GPU, or named with `workbench ir --target`
    compiled_here: bool = True  # False: compiled for a named target, not for a GPU in this machine
    facts_source: str = ""  # where registers and spills were read: the CUDA driver, or ptxas's report in the cubin
    case_index: int | None = None
    seconds: float = 0.0  # spent gathering them (nothing is launched)
    tools: dict[str, str] = field(default_factory=dict)  # "nvdisasm"/"cuobjdump" -> path, for SASS
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompiledKernels":
        return cls(**{**data, "kernels": [KernelFacts(**k) for k in data.get("kernels", [])]})


def event_from_dict(data: dict[str, Any]) -> Event:
    data = dict(data)
    kind = data.pop("type")
    cls = _REGISTRY.get(kind)
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    from_dict = getattr(cls, "from_dict", None)
    if from_dict is not None:
        return from_dict(data)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def event_from_json(line: str) -> Event:
    return event_from_dict(json.loads(line))


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/inf: keep them out of events."""
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


def foreign_event(line: str) -> bool:
    """Whether `line` is one JSON object whose "type" no event of this process has: a plugin's own event, from a
    module this process never imported (the parent, which loads the plugins, reads it). Never a verdict: every
    type the workbench judges by is known here."""
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("type"), str) and data["type"] not in _REGISTRY


class EventStream:
    """Events written to a file descriptor as JSON lines, one flushed line each (the worker's channel)."""

    def __init__(self, fd: int):
        self._file = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def __call__(self, event: Event) -> None:
        self.line(event.to_json())

    def line(self, text: str) -> None:
        """One event already written as JSON (one line)."""
        self._file.write(text.replace("\n", " ") + "\n")
        self._file.flush()
