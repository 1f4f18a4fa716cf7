"""The benchmark stage (docs/ARCHITECTURE.md, "What a timing means").

Runs in a GPU worker, after the verify stage of the same job. For each benchmark
case: fresh inputs; the kernel checked against the reference before timing (the
first call compiles and autotunes, outside any timed region; the judge's check
runs while the kernel is timed, and a time is posted only if it passed); the
kernel, the reference and torch.compile(reference) timed by `timers.measure`
(the kernel over several copies of its inputs in turn, its Triton launches
counted: fewer per call than a call on a copy it had not seen posts no time);
the kernel checked again after its timed calls (right once and wrong under
repetition posts no time); bytes and FLOPs against this GPU's measured ceilings
(a rate past them posts no time: plausible.py); work the timed calls put on
another stream, thread or after returning, or L2 set aside to persist, posts no
time either (escapes.py). Each result says where its
case's time went (BenchResult.phases).

Large benchmark shapes can be too big for a float64 reference: it falls back to
float32 (still far more precise than the fp16/bf16 kernels such shapes usually
are), then to the inputs' own dtype with tolerances doubled, and says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import torch

from ..events import BenchResult, CaseResult, DeviceFacts, Problem, StageChanged, Timing
from ..project.config import MODE_WORDS
from ..project.kept import kept_since
from ..project.contract import (
    Case,
    KernelModule,
    find_autotuners,
    first_line,
    problem_from_exception,
    select_cases,
)
from ..stage import (
    ContextPoisoned,
    JobContext,
    Phases,
    RunAborted,
    is_cuda_fatal,
    shard_of,
)
from ..verify.battery import Verifier
from ..verify.references import Reference, native_of, on_cpu, rounded_of, sampled_case
from ..verify.compat import GraphCaptureBroke
from ..verify.handoff import CaseData
from ..verify.judge import judge_outputs
from ..verify.launches import LaunchCounter
from ..verify.tensors import (
    Outputs,
    clone_inputs,
    flatten_outputs,
    input_elements,
    restore_inputs,
    synchronize,
)
from .autotune import AutotuneRecorder
from .modes import ModeError, TimedMode, takes_mode, timed_mode
from .compiled import capture, gather
from .compilewatch import CompileWatch, jit_functions
from .device import device_uuid, gather_facts, gpu_state, load_or_measure
from .escapes import CallSample, TimedCalls
from .plausible import (
    affordable_sets,
    escape_refusals,
    flops_ceiling_factor,
    headline,
    implausible_rates,
    launch_refusal,
    launches_per_call,
    rotation_note,
    withholds,
)
from .rotation import (
    Rotation,
    TuningLaunches,
    copy_inputs,
    input_storage_bytes,
    probe_launches,
    why_not_copied,
)
from .stats import (
    BYTES_FROM_KERNEL,
    BYTES_LOWER_BOUND,
    FLOPS_FROM_KERNEL,
    fraction,
    lower_bound_bytes,
    rate_per_s,
    speedup,
    tensor_bytes,
    without_samples,
)
from .timers import L2Flusher, measure

INTERPRETER_REFUSAL = ("benchmarking needs a CUDA GPU, and this run uses the Triton interpreter on the CPU "
                       "({reason}); the interpreter's times say nothing about a kernel's speed, so none are taken. "
                       "Run `workbench verify` here for correctness, and `workbench bench` on a machine with a GPU.")
REUSED_REFERENCE_NOTE = ("reference time from an earlier run of the live loop (reference_fn, get_inputs, case and "
                         "GPU unchanged); `workbench bench` times it afresh")
COMPILE_WARMUP_CALLS = 3


def refuse_interpreter(context: Any) -> bool:
    """Emit the refusal and return True when this worker runs the interpreter."""
    if not context.interpret:
        return False
    import os

    reason = "--interpret was asked for" if os.environ.get("WORKBENCH_INTERPRET") == "1" else \
        "no CUDA GPU is visible to torch"
    context.emit(Problem(kind="environment", message=INTERPRETER_REFUSAL.format(reason=reason)))
    return True


def require_gpu_stage(context: JobContext) -> None:
    """Worker stage "require_gpu": the first stage of `workbench bench`, so the interpreter refuses at once."""
    if refuse_interpreter(context):
        raise RunAborted()


def verification_failed(context: JobContext) -> bool:
    """This job verified, and the verdict is not "passed": nothing is timed."""
    if context.tally is None or "verify" not in context.job.stages:
        return False
    return not context.tally.verdict().verified


def bench_cases(km: KernelModule, indices: list[int] | None) -> tuple[list[Case], str]:
    """The sweep: the cases asked for, else those marked purpose="bench", else the largest case."""
    if indices is not None:
        missing = sorted(set(indices) - {c.index for c in km.cases})
        note = f"no case {', '.join(map(str, missing))} in CASES (it has {len(km.cases)})" if missing else ""
        return select_cases(km.cases, indices, "bench"), note
    marked = select_cases(km.cases, None, "bench")
    if marked or len(km.cases) == 1:
        return marked or km.cases, ""
    sizes = []
    for case in [c for c in km.cases if not c.generated]:
        try:
            sizes.append((input_elements(km.get_inputs(**case.params)), case))
        except Exception:  # noqa: BLE001 - verification reported it already
            continue
    if not sizes:
        return [km.cases[-1]], ""
    largest = max(sizes, key=lambda item: item[0])[1]
    return [largest], (f'no case in CASES has "purpose": "bench"; benchmarking the largest, case {largest.index} '
                       "(add bench cases for a sweep)")


def bench_stage(context: JobContext) -> None:
    """Worker stage "bench" (see worker.STAGES)."""
    if verification_failed(context):
        return  # a kernel that fails verification is never timed (nor refused: the verdict says what matters)
    if context.interpret and "verify" in context.job.stages:  # the refusal is the benchmark's, not the verdict's
        context.emit(StageChanged(stage="benchmarking", detail="refused: the Triton interpreter is never timed"))
    if refuse_interpreter(context):
        return
    if context.compiles is not None:
        context.compiles.close(wait=True)  # the benchmark's kernels are built, the compile processes gone
    km: KernelModule = context.km
    cases, selection_note = bench_cases(km, context.job.case_indices)
    cases = shard_of(cases, context.job.bench_shard)  # the runner spreads a sweep over GPUs
    if not cases:
        return  # a GPU left without a case of the sweep: no ceilings, facts or flush buffer for nothing
    emit = context.emit

    def announce_measuring() -> None:
        emit(StageChanged(stage="benchmarking", detail="measuring this GPU's ceilings (once per GPU)"))

    set_up = Phases()
    ceilings, notes = load_or_measure(context.config.bench, on_measure=announce_measuring)
    facts = gather_facts(ceilings)
    facts.notes = notes + ([selection_note] if selection_note else [])
    emit(facts)
    set_up.done("ceilings and GPU facts")
    flusher = L2Flusher(facts.l2_bytes, context.config.bench.l2_flush)
    bencher = CaseBencher(context, facts, flusher)
    set_up.done("flush buffer, autotuners, compile watch")
    with torch.no_grad():  # a training kernel's forward is timed as in inference: no graph recorded
        for n, case in enumerate(cases, 1):
            emit(StageChanged(stage="benchmarking", detail=case.label, current=n, total=len(cases),
                              case_index=case.index))
            bencher.run(case, set_up.seconds if n == 1 else None)  # the first case's result shows the set-up too


def mode_note(mode: TimedMode) -> str:
    return (f"a training kernel, timed in mode {mode.mode}: {MODE_WORDS[mode.mode]}; the reference and "
            "torch.compile(reference_fn) the same way (`workbench bench --mode fwd|bwd|full`)")


def peak_memory(fn: Callable[[], Any]) -> int | None:
    """Device memory one call of `fn` takes at its peak, beyond what was allocated before it (its outputs,
    saved tensors and temporaries); None where it cannot be read."""
    try:
        synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn()
        synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        del out
        return max(0, int(peak))
    except Exception as exc:  # noqa: BLE001 - a report beside the time, never a reason to fail
        if is_cuda_fatal(exc):
            raise
        return None


class BenchChecker(Verifier):
    """The verification battery's comparison, for one call at a time on benchmark-sized inputs.

    The check before timing is a verdict: it goes to the judge, on a random sample of each output
    (with the whole output's shape and NaN count beside it: see verify/handoff.CaseData.sample).
    The recheck after timing compares whole outputs here; only a failure goes to the judge."""

    def call(self, inputs: list[Any], case: Case) -> Outputs:
        return flatten_outputs(self._call_kernel(inputs, "nan", case, ""))

    def check(self, case: Case, out: Outputs, ref: Reference, notes: list[str],
              messages: list[str] | None = None, phase: str = "") -> CaseResult:
        """The judge's verdict on `out` (reported by the judge). `messages`: failures found here first;
        `phase`: "after timing" for the recheck (a second result for the case, never merged with the first)."""
        return self.deliver(sampled_case(case, out, ref, notes, messages, phase))

    def check_soon(self, case: Case, out: Outputs, ref: Reference, notes: list[str]) -> "Future[CaseResult]":
        """`check`, with the judge's work done while this process goes on: the sample is drawn and copied
        to the host here and now (nothing moves on the GPU later), then handed over on a thread."""
        data = sampled_case(case, out, ref, notes)
        data.to_host()
        return hand_over(self.deliver, data)

    def compare_here(self, case: Case, out: Outputs, ref: Reference) -> CaseResult:
        """The whole outputs compared in this process: a recheck, reported only through `check`."""
        try:
            return judge_outputs(self.config, case.index, case.label, out.tensors, out.names, ref.outputs.tensors,
                                 native_of(ref), ref.outputs.names, rounded_of(ref))
        except torch.cuda.OutOfMemoryError:  # float64 comparison temporaries: compare on the host instead
            torch.cuda.empty_cache()
            return judge_outputs(self.config, case.index, case.label, on_cpu(out).tensors, out.names,
                                 on_cpu(ref.outputs).tensors, native_of(ref) and on_cpu(ref.native).tensors,
                                 ref.outputs.names, rounded_of(ref) and on_cpu(ref.rounded).tensors)

    def error(self, case: Case, exc: BaseException, when: str, phase: str = "") -> CaseResult:
        data = self._error_data(CaseData(case_index=case.index, label=case.label, phase=phase), case, exc,
                                time.perf_counter(), when)
        return self.deliver(data)


_equal = torch._C._VariableFunctions.equal  # bound before kernel.py is imported (it may rebind torch.equal)


def identical(outputs: list[Any], others: list[Any]) -> bool:
    """Whether two calls' outputs are the same tensors, element for element (NaN never equals: compared instead)."""
    return len(outputs) == len(others) and all(
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
        and a.device == b.device and _equal(a, b) for a, b in zip(outputs, others))


# The judge's check of a benchmark case runs here while the kernel is timed (one case at a time).
_CHECKS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-check")


def hand_over(deliver: Callable[[CaseData], CaseResult], data: CaseData) -> "Future[CaseResult]":
    """`deliver(data)` on the check thread; the future's result() waits for the verdict (or raises what it raised)."""
    return _CHECKS.submit(deliver, data)


class CaseBencher:
    """Checks, times and re-checks one benchmark case after another."""

    def __init__(self, context: Any, facts: DeviceFacts, flusher: L2Flusher):
        self.project_km: KernelModule = context.km
        self.km: KernelModule = context.km  # the case's: kernel_fn and reference_fn called in its mode (modes.py)
        self.mode: TimedMode | None = None
        self.backward = context.config.verify.backward
        self.config = context.config.bench
        self.inplace = context.config.verify.inplace
        self.emit: Callable[[Any], None] = context.emit
        self.facts, self.flusher = facts, flusher
        self.checker = BenchChecker(self.km, context.config.verify, context.emit, False, context.job.pins,
                                    context.judge)
        self.live = context.job.live
        # The live loop passes the reference times of its earlier runs: a save changes the kernel, not them.
        self.known_references: dict[str, dict] = context.job.reference_timings
        self.kept_baselines: dict[str, dict] = context.job.kept_baselines
        self.autotuners = find_autotuners(self.km.module)
        self.watch = CompileWatch(jit_functions(self.km.module))
        self.props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.wait_for_gpu: Callable[[], None] = context.wait_for_gpu

    def run(self, case: Case, set_up: dict[str, float] | None = None) -> None:
        """Benchmark one case; `set_up`: the stage's own steps, shown in this case's phases."""
        try:
            self._run(case, set_up)
        except (RunAborted, ContextPoisoned):
            raise
        except GraphCaptureBroke as exc:
            self.emit(Problem(kind="crash", message=str(exc), case_index=case.index))
            raise ContextPoisoned(str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - a failure while timing ends this case, not the run
            if is_cuda_fatal(exc):
                self.emit(problem_from_exception("crash", exc, self.km.path, "the kernel crashed the GPU context",
                                                 case.index))
                raise ContextPoisoned(str(exc)) from exc
            self.emit(problem_from_exception("runtime", exc, self.km.path, f"benchmarking {case.label} failed",
                                             case.index))
        finally:
            if self.mode is not None:
                self.mode.clear()  # the forwards a backward-only timing kept
            self.mode, self.km = None, self.project_km
            self.checker.km = self.km
            torch.cuda.empty_cache()

    def _in_mode(self, case: Case, inputs: list[Any]) -> TimedMode:
        """This case's kernel_fn and reference_fn, called in its benchmark mode (modes.py)."""
        try:
            mode = timed_mode(self.project_km, inputs, self.config.mode, self.backward)
        except ModeError as exc:
            self.emit(Problem(kind="config", message=str(exc), file=str(self.project_km.path), case_index=case.index))
            raise RunAborted() from exc
        self.mode, self.km = mode, mode.module(self.project_km)
        self.checker.km = self.km
        return mode

    def _report_compiled(self, case: Case, inputs: list[Any]) -> None:
        """Registers, spills, shared memory and occupancy of every config the case compiled (compiled.py): a
        call that compiles (here: finds in the cache) and launches nothing. A report, never a verdict."""
        try:
            own = clone_inputs(inputs) if self.inplace else inputs
            captured, failed = capture(lambda: self.km.kernel_fn(*own), self.km.module)
            event = gather(captured, case.index, compiled_here=True, props=self.props)
        except Exception:  # noqa: BLE001 - the case's timing goes on without the facts
            return
        event.notes += [f"did not compile: {f}" for f in failed]
        self.emit(event)

    def _run(self, case: Case, set_up: dict[str, float] | None) -> None:
        phases = Phases(set_up)
        inputs = self.checker._inputs(case)
        originals = clone_inputs(inputs) if self.inplace else None
        mode = self._in_mode(case, inputs)
        phases.done("inputs")
        ref = self.checker.reference(inputs, case, native=True)
        phases.done("reference")
        if self.autotuners:
            self.wait_for_gpu()  # the autotuner times its configs: alone on the GPU
            phases.done("waiting for the GPU")
        LaunchCounter.install()
        # TuningLaunches first: the recorder's wrap of each tuner then calls its count.
        with TuningLaunches() as tuning, AutotuneRecorder(self.autotuners) as recorder:
            launched_before = LaunchCounter.count
            try:
                first = self.checker.call(inputs, case)  # compiles and autotunes: outside every timed region
            except (RunAborted, ContextPoisoned):
                raise
            except Exception as exc:  # noqa: BLE001 - the kernel refuses this case
                self.checker.error(case, exc, "benchmark case")
                return
            first_launches = max(0, LaunchCounter.count - launched_before - tuning.launches)
        for report in recorder.reports(case.index):
            self.emit(report)
        phases.done("first call (compile, autotune)")
        self._report_compiled(case, inputs)
        phases.done("compiled kernels' facts")
        self.wait_for_gpu()  # a benchmark started beside its verification's last workers times once they are gone
        phases.done("waiting for the GPU")
        # The judge checks this output while the kernel is timed; a time is posted only once it passed.
        pending = self.checker.check_soon(case, first, ref, ["benchmark case: checked before timing, and again "
                                                            "after it"])
        result = BenchResult(case_index=case.index, label=case.label)
        if mode.indices:
            result.mode = mode.mode
            result.notes.append(mode_note(mode))
        self._amounts(result, inputs, first)
        # An in-place kernel's timed calls change their own inputs: only the recheck, on restored inputs, can say.
        free = free_device_bytes()  # before the input copies: they and the kept outputs share it
        sample = None if self.inplace else CallSample.for_outputs(tensor_bytes(first.tensors), free)
        del first
        phases.done("sample for the judge")
        try:
            rotation = self._rotation(result, inputs, originals, first_launches, free)
            timed_calls = TimedCalls(rotation, rotation.uncounted, sample)
            timed_calls.probe()
            phases.done("input copies, a counted call on each, a probe of its streams")
            launched_before = LaunchCounter.count
            with timed_calls.watching():
                measured = measure(timed_calls, self.config, self.flusher, self.watch, "kernel", result.bytes_moved)
            launched = LaunchCounter.count - launched_before
        finally:
            verdict = pending.result()  # a failure is reported before whatever the timing raised
        calls, seen = rotation.calls, timed_calls.seen
        del rotation, timed_calls  # the copies
        phases.done("timing (the judge checking meanwhile)")
        if verdict.status != "passed":
            return  # a wrong kernel's time is never posted
        result.dtype = verdict.dtype
        result.kernel, result.notes = measured.timing, result.notes + measured.notes
        if result.kernel is not None:
            result.kernel.peak_memory_bytes = peak_memory(lambda: self.km.kernel_fn(*inputs))
        per_call = launches_per_call(launched, calls)
        result.timed_launches_per_call = round(per_call, 4) if per_call is not None else None
        state = gpu_state(device_uuid())
        result.sm_clock_mhz, result.temperature_c = state.sm_clock_mhz, state.temperature_c
        self._recheck(result, case, inputs, originals, ref, sample.take() if sample else [], calls)
        phases.done("recheck after timing")
        if result.recheck == "passed":
            for why in [launch_refusal(launched, calls, result.checked_launches)] + escape_refusals(seen):
                withhold(result, why)
        if seen.reset_note:
            result.notes.append(seen.reset_note)
        self._time_baselines(result, case, inputs, originals, phases)
        phases.done("baselines: the rest")
        self._derive(result)
        if result.kernel is not None:
            for why in implausible_rates(result.gbps, self.facts.copy_gbps, result.bytes_source, result.tflops,
                                         self.facts.matmul_tflops, result.flops_source,
                                         flops_ceiling_factor(element_bits(inputs))):
                if withholds(why):
                    withhold(result, why)
                else:
                    result.notes.append(why)
            if result.kernel is None:
                self._derive(result)  # no time, no rates or speed-ups from it
        result.phases = phases.seconds
        self.emit(result)

    def _rotation(self, result: BenchResult, inputs: list[Any], originals: list[Any] | None,
                  first_launches: int, free: int | None) -> Rotation:
        """The timed calls' input sets: the inputs and, where memory allows, copies of them (a result kept by
        input address or identity then misses), each copy called once with its launches counted
        (result.checked_launches: what one call launches, for the timed calls to match)."""
        if originals is not None:
            restore_inputs(inputs, originals)  # every set starts from get_inputs' values
        nbytes = input_storage_bytes(inputs)
        why_not = why_not_copied(inputs)
        sets = 1 if why_not else affordable_sets(nbytes * (self.mode.memory_factor if self.mode else 1), free)
        copies: list[list[Any]] = []
        if sets > 1:
            try:
                copies = [copy_inputs(inputs) for _ in range(sets - 1)]
            except torch.cuda.OutOfMemoryError:
                copies = []
                torch.cuda.empty_cache()
                why_not = "copying them ran out of device memory"
        note = rotation_note(len(copies) + 1, nbytes, free, why_not)
        if note:
            result.notes.append(note)
        probed = probe_launches(self.km.kernel_fn, copies) if copies else []
        synchronize()
        # A call on a copy it has never seen launches what a call launches; without a copy (or where none
        # counted anything), the first call's launches less those of its autotuning.
        result.checked_launches = max(probed, default=0) or first_launches
        result.input_sets = len(copies) + 1
        return Rotation(self.km.kernel_fn, [inputs] + copies)

    def _recheck(self, result: BenchResult, case: Case, inputs: list[Any], originals: list[Any] | None,
                 ref: Reference, sampled: list[tuple[int, Any]], calls: int) -> None:
        """The output of one more call after the timed calls, and the outputs of a random sample of the timed
        calls (escapes.CallSample), must be right, or the time is not posted. A sampled output identical to the
        call's after them (a deterministic kernel's) is as right as it; any other is compared on its own."""
        if originals is not None:
            restore_inputs(inputs, originals)  # an in-place kernel changed them on every timed call
        samples = result.kernel.samples if result.kernel else 0
        try:
            out = self.checker.call(inputs, case)
        except (RunAborted, ContextPoisoned):
            raise
        except Exception as exc:  # noqa: BLE001
            failure = self.checker.error(case, exc, f"after {samples} timed calls", phase="after timing")
        else:
            here = self.checker.compare_here(case, out, ref)
            if here.status == "passed":
                self._check_sampled(result, case, ref, out, sampled, calls)
                return
            failure = self.checker.check(case, out, ref, [], [f"after {samples} timed calls: {m}" for m in here.messages],
                                         phase="after timing")
            del out
        self._not_posted(result, failure, "its output was wrong after the timed calls")

    def _check_sampled(self, result: BenchResult, case: Case, ref: Reference, after: Outputs,
                       sampled: list[tuple[int, Any]], calls: int) -> None:
        result.sampled_calls_checked, result.recheck = len(sampled), "passed"
        while sampled:
            number, raw = sampled.pop(0)
            out = flatten_outputs(raw)
            del raw
            if identical(out.tensors, after.tensors):
                continue
            here = self.checker.compare_here(case, out, ref)
            if here.status != "passed":
                said = f"timed call {number:,} of {calls:,} (one of {result.sampled_calls_checked} chosen at random)"
                failure = self.checker.check(case, out, ref, [], [f"{said}: {m}" for m in here.messages],
                                             phase="after timing")
                del out, sampled[:]
                self._not_posted(result, failure, "its output was wrong on a timed call")
                return

    @staticmethod
    def _not_posted(result: BenchResult, failure: CaseResult, why: str) -> None:
        result.recheck = "failed: " + (failure.messages[0] if failure.messages else failure.status)
        result.notes.append(f"the kernel's time is not posted: {why}")
        result.kernel = None

    def _time_baselines(self, result: BenchResult, case: Case, inputs: list[Any],
                        originals: list[Any] | None, phases: Phases) -> None:
        if originals is not None:
            restore_inputs(inputs, originals)
        result.reference_key = reference_key(self.project_km, case, self.config, self.facts.name, result.mode)
        known = self.known_references.get(result.reference_key) if self.live else None
        if known:
            result.reference, result.reference_reused = Timing(**known), True
            result.notes.append(REUSED_REFERENCE_NOTE)
        else:
            result.reference = self._kept(result, result.reference_key, "reference_fn", "timing method")
            result.reference_reused = result.reference is not None
            if result.reference is None:
                self._time_reference(result, inputs)
        phases.done("baselines: reference_fn timed")
        if not self.config.compare_torch_compile:
            result.compiled_note = ("not measured in the live loop ([bench] live_compare_torch_compile; "
                                    "`workbench bench` measures it)" if self.live else
                                    "not measured ([bench] compare_torch_compile = false)")
            return
        result.compiled_key = compiled_key(result.reference_key)
        result.compiled = self._kept(result, result.compiled_key, "torch.compile", "Triton")
        if result.compiled is not None:
            result.compiled_reused = True
            return
        self.emit(StageChanged(stage="benchmarking", detail=f"{case.label}: torch.compile(reference_fn)",
                               case_index=case.index))
        training = self.mode is not None and self.mode.indices
        compiled, note = compile_reference(self.project_km.reference_fn, inputs,
                                           (lambda fn: self.mode.wrap(fn, False)) if training else None)
        phases.done("baselines: torch.compile(reference_fn) compiled")
        if compiled is None:
            result.compiled_note = note
            return
        try:
            timed = measure(lambda: compiled(*inputs), self.config, self.flusher, self.watch, "torch.compile",
                            result.bytes_moved)
        except Exception as exc:  # noqa: BLE001
            if is_cuda_fatal(exc):
                raise
            result.compiled_note = f"timing torch.compile(reference_fn) failed: {type(exc).__name__}: {first_line(exc)}"
            return
        result.compiled = without_samples(timed.timing)  # only the kernel's samples are compared between runs
        if result.compiled is not None:
            result.compiled.peak_memory_bytes = peak_memory(lambda: compiled(*inputs))
        result.notes += timed.notes
        phases.done("baselines: torch.compile(reference_fn) timed")

    def _kept(self, result: BenchResult, key: str, what: str, also: str) -> Timing | None:
        """A baseline's time kept from an earlier run (project/kept.py), noted as such; None when there is none."""
        entry = self.kept_baselines.get(key)
        if not entry:
            return None
        result.notes.append(f"{what}: its time from a run at {kept_since(entry.get('measured_at', 0))} (the same "
                            f"reference_fn, get_inputs, case, GPU, torch and {also}); `workbench bench "
                            "--fresh-baselines` measures it again")
        return Timing(**entry["timing"])

    def _time_reference(self, result: BenchResult, inputs: list[Any]) -> None:
        try:
            self.km.reference_fn(*inputs)  # its first call in the inputs' own dtype: warm it outside the timing
            reference = measure(lambda: self.km.reference_fn(*inputs), self.config, self.flusher, self.watch,
                                "reference", result.bytes_moved)
            result.reference = without_samples(reference.timing)
            if result.reference is not None:
                result.reference.peak_memory_bytes = peak_memory(lambda: self.km.reference_fn(*inputs))
            result.notes += reference.notes
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot be timed is a note, not a failure
            if is_cuda_fatal(exc):
                raise
            result.notes.append(f"reference_fn could not be timed: {type(exc).__name__}: {first_line(exc)}")

    def _amounts(self, result: BenchResult, inputs: list[Any], outputs: Outputs) -> None:
        """Bytes and FLOPs of one call: from kernel.py when it says, else the bytes' lower bound."""
        result.bytes_moved, result.bytes_source = None, ""
        bytes_moved, flops = self._counted(result, "bytes_moved"), self._counted(result, "flops")
        if bytes_moved is not None:
            try:
                result.bytes_moved, result.bytes_source = int(bytes_moved(*inputs)), BYTES_FROM_KERNEL
            except Exception as exc:  # noqa: BLE001
                result.notes.append(f"bytes_moved() raised {type(exc).__name__}: {first_line(exc)}; "
                                    "using the lower bound")
        if result.bytes_moved is None:
            result.bytes_moved = lower_bound_bytes(inputs, outputs.tensors)
            result.bytes_source = BYTES_LOWER_BOUND
        if flops is not None:
            try:
                result.flops, result.flops_source = int(flops(*inputs)), FLOPS_FROM_KERNEL
            except Exception as exc:  # noqa: BLE001
                result.notes.append(f"flops() raised {type(exc).__name__}: {first_line(exc)}")

    def _counted(self, result: BenchResult, name: str) -> Callable[..., Any] | None:
        """kernel.py's bytes_moved or flops for this case's mode: called with mode=... where it takes one; a
        training kernel's without one counts only its forward, so it is not used for bwd or full (noted)."""
        fn = getattr(self.project_km, name)
        if fn is None or not result.mode:
            return fn
        if takes_mode(fn):
            return lambda *inputs: fn(*inputs, mode=result.mode)
        if result.mode == "fwd":
            return fn
        result.notes.append(f"{name}() takes no mode argument, so it counts the forward only: not used for mode "
                            f"{result.mode} (give it `mode=\"full\"`: \"fwd\", \"bwd\" or \"full\")")
        return None

    def _derive(self, result: BenchResult) -> None:
        bytes_per_s = rate_per_s(result.bytes_moved, result.kernel)
        flops_per_s = rate_per_s(result.flops, result.kernel)
        result.gbps = bytes_per_s / 1e9 if bytes_per_s is not None else None
        result.tflops = flops_per_s / 1e12 if flops_per_s is not None else None
        result.bandwidth_fraction = fraction(result.gbps, self.facts.copy_gbps)
        result.compute_fraction = fraction(result.tflops, self.facts.matmul_tflops)
        result.speedup_vs_reference = speedup(result.reference, result.kernel)
        result.speedup_vs_compiled = speedup(result.compiled, result.kernel)


def withhold(result: BenchResult, why: str) -> None:
    """The kernel's time is measured but not posted, for `why` (nothing when `why` is empty)."""
    if not why:
        return
    result.withheld = result.withheld or headline(why)
    result.notes.append(why)
    result.kernel = None


def element_bits(inputs: list[Any]) -> list[int]:
    """The element width, in bits, of each tensor input (masks of bool aside: no tensor core multiplies them)."""
    return [8 * x.element_size() for x in inputs if isinstance(x, torch.Tensor) and x.dtype != torch.bool]


def free_device_bytes() -> int | None:
    """Device memory the input copies may take: free on the device, plus what torch holds unused."""
    try:
        free, _ = torch.cuda.mem_get_info()
        return int(free) + max(0, torch.cuda.memory_reserved() - torch.cuda.memory_allocated())
    except Exception:  # noqa: BLE001 - unknown: the inputs are not copied
        return None


def reference_key(km: KernelModule, case: Case, config: Any, device_name: str, mode: str = "") -> str:
    """What the reference's time depends on: reference_fn's and get_inputs' source, the case, the GPU,
    torch, the timing method and a training kernel's mode. Not the kernel: a save that changes only the kernel
    keeps the key."""
    parts = [function_source(km.reference_fn), function_source(km.get_inputs), repr(sorted(case.params.items())),
             device_name, torch.__version__,
             repr([getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "mode"])]
    if mode:
        parts.append(mode)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def compiled_key(reference: str) -> str:
    """What torch.compile(reference_fn)'s time depends on: the reference's key (reference_key) and Triton."""
    import triton

    return hashlib.sha256(f"{reference}\0{triton.__version__}".encode()).hexdigest()[:16]


def function_source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return repr(fn)


def compile_reference(reference_fn: Callable[..., Any], inputs: list[Any],
                      wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
                      ) -> tuple[Callable[..., Any] | None, str]:
    """torch.compile(reference_fn), specialised to this case's shapes and warmed up; or (None, why not).
    `wrap`: how a training kernel's mode calls it (modes.TimedMode.wrap: its backward compiled by AOTAutograd)."""
    try:
        import torch._dynamo

        torch._dynamo.reset()  # each case compiles afresh: no recompile limit, no shape-generic fallback
        if wrap is not None:
            # The backward alone is timed by calling it again on one graph (retain_graph=True), which AOTAutograd's
            # donated buffers (the backward reusing its saved tensors' memory) refuse.
            import torch._functorch.config

            torch._functorch.config.donated_buffer = False
        compiled = torch.compile(reference_fn, dynamic=False)
        if wrap is not None:
            compiled = wrap(compiled)
        for _ in range(COMPILE_WARMUP_CALLS):
            compiled(*inputs)
        synchronize()
        return compiled, ""
    except Exception as exc:  # noqa: BLE001 - torch.compile is a comparison, never a reason to fail
        if is_cuda_fatal(exc):
            raise
        return None, f"torch.compile(reference_fn) failed: {type(exc).__name__}: {first_line(exc)[:200]}"
