"""The benchmark stage (docs/ARCHITECTURE.md, "What a timing means").

Runs in a GPU worker, after the verify stage of the same job. For each benchmark
case (`CaseBencher`): fresh inputs; the kernel checked against the reference
before timing (the first call compiles and autotunes, outside any timed region;
the judge's check runs while the kernel is timed, and a time is posted only if
it passed: checking.py); the kernel timed by `timers.measure` over several copies
of its inputs in turn, its Triton launches counted: fewer per call than a call on
a copy it had not seen posts no time (timed_series.py); the kernel checked again
after its timed calls (right once and wrong under repetition posts no time:
checking.recheck); the reference and torch.compile(reference) timed the same way
(baselines.py); bytes and FLOPs (amounts.py) against this GPU's measured ceilings
(a rate past them posts no time: plausible.py); work the timed calls put on
another stream, thread or after returning, or L2 set aside to persist, posts no
time either (escapes.py). Each result says where its case's time went
(BenchResult.phases).

Large benchmark shapes can be too big for a float64 reference: it falls back to
float32 (still far more precise than the fp16/bf16 kernels such shapes usually
are), then to the inputs' own dtype with tolerances doubled, and says so.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..events import BenchResult, DeviceFacts, Problem, StageChanged
from ..project.config import MODE_WORDS
from ..project.contract import (
    Case,
    KernelModule,
    find_autotuners,
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
from ..verify.compat import GraphCaptureBroke
from ..verify.launches import LaunchCounter
from ..verify.tensors import clone_inputs, input_elements
from .amounts import count_amounts, derive_rates
from .autotune import AutotuneRecorder
from .baselines import Baselines
from .checking import BenchChecker, recheck
from .compiled import capture, gather
from .compilewatch import CompileWatch, jit_functions
from .device import device_uuid, gather_facts, gpu_state, load_or_measure
from .escapes import CallSample
from .memory import free_device_bytes, peak_memory
from .modes import ModeError, TimedMode, timed_mode
from .plausible import (
    escape_refusals,
    flops_ceiling_factor,
    headline,
    implausible_rates,
    launch_refusal,
    launches_per_call,
    withholds,
)
from .rotation import TuningLaunches
from .stats import tensor_bytes
from .timed_series import input_sets, time_series
from .timers import L2Flusher

INTERPRETER_REFUSAL = ("benchmarking needs a CUDA GPU, and this run uses the Triton interpreter on the CPU "
                       "({reason}); the interpreter's times say nothing about a kernel's speed, so none are taken. "
                       "Run `workbench verify` here for correctness, and `workbench bench` on a machine with a GPU.")


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
    set_up = Phases()
    ceilings, notes = gpu_ceilings(context)
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


def gpu_ceilings(context: JobContext) -> tuple[Any, list[str]]:
    """This GPU's ceilings (device.load_or_measure): from the cache, else measured once the GPU is this job's alone.
    A benchmark started beside its verification's last workers (Job.gpu_gate) would otherwise measure its copies
    beside theirs: a copy ceiling set too low, kept for the GPU, makes every kernel's share of it too high."""
    def measuring() -> None:
        context.wait_for_gpu()
        context.emit(StageChanged(stage="benchmarking", detail="measuring this GPU's ceilings (once per GPU)"))

    return load_or_measure(context.config.bench, on_measure=measuring)


def mode_note(mode: TimedMode) -> str:
    return (f"a training kernel, timed in mode {mode.mode}: {MODE_WORDS[mode.mode]}; the reference and "
            "torch.compile(reference_fn) the same way (`workbench bench --mode fwd|bwd|full`)")


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
        self.autotuners = find_autotuners(self.km.module)
        self.watch = CompileWatch(jit_functions(self.km.module))
        self.baselines = Baselines(context, facts.name, flusher, self.watch)
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
        count_amounts(result, self.project_km, inputs, first)
        # An in-place kernel's timed calls change their own inputs: only the recheck, on restored inputs, can say.
        free = free_device_bytes()  # before the input copies: they and the kept outputs share it
        sample = None if self.inplace else CallSample.for_outputs(tensor_bytes(first.tensors), free)
        del first
        phases.done("sample for the judge")
        try:
            rotation = input_sets(result, self.km.kernel_fn, inputs, originals, first_launches, free,
                                  mode.memory_factor)
            series = time_series(rotation, sample, self.config, self.flusher, self.watch, result.bytes_moved, phases)
        finally:
            verdict = pending.result()  # a failure is reported before whatever the timing raised
        measured, launched, calls, seen = series.measured, series.launched, series.calls, series.seen
        del rotation  # the copies
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
        recheck(self.checker, result, case, inputs, originals, ref, sample.take() if sample else [], calls)
        phases.done("recheck after timing")
        if result.recheck == "passed":
            for why in [launch_refusal(launched, calls, result.checked_launches)] + escape_refusals(seen):
                withhold(result, why)
        if seen.reset_note:
            result.notes.append(seen.reset_note)
        self.baselines.time(result, case, inputs, originals, phases, self.km, mode)
        self.baselines.time_kernel_compiled(result, case, inputs, originals, phases, mode)
        phases.done("baselines: the rest")
        derive_rates(result, self.facts)
        if result.kernel is not None:
            for why in implausible_rates(result.gbps, self.facts.copy_gbps, result.bytes_source, result.tflops,
                                         self.facts.matmul_tflops, result.flops_source,
                                         flops_ceiling_factor(element_bits(inputs))):
                if withholds(why):
                    withhold(result, why)
                else:
                    result.notes.append(why)
            if result.kernel is None:
                derive_rates(result, self.facts)  # no time, no rates or speed-ups from it
        result.phases = phases.seconds
        self.emit(result)


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
