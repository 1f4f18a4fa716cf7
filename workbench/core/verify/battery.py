"""The verification battery (docs/ARCHITECTURE.md, "What verified means").

Runs inside a worker. For every case: fresh random inputs, the reference on
upcast inputs, the kernel's own allocations poisoned (NaN first, a sentinel
second) so unwritten elements show, NaN/Inf positions compared, inputs checked
unchanged, a second run compared bit for bit, and every config of every
autotuned kernel forced in turn.
"""

from __future__ import annotations

import time
import traceback
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Callable, Iterable

import torch

from ..events import CaseResult, Event, LogLine, Problem, StageChanged
from ..project.config import VerifyConfig
from ..project.contract import (
    Case,
    KernelModule,
    describe_config,
    dot_may_use_tf32,
    find_autotuners,
    first_line,
    is_compilation_error,
    kernel_frame,
    problem_from_exception,
    root_cause,
    select_cases,
)
from ..stage import CHECKING, RECORDING, ContextPoisoned, JobContext, RunAborted, is_cuda_fatal, shard_of
from ..verdict import GPU_ONLY_KIND
from .compat import KeptFindings, compat_runs, import_torch_compile_in_background, torch_compile_to_run
from .gradients import for_training, input_names
from .checks import gather_evidence
from .edge_cases import first_case_per_dtype, once_per_dtype
from .failures import interpreter_cannot_run, is_refusal, not_runnable_note
from .guards import Guards
from .handoff import CaseData, ExtraRun
from .interpreter.fixes import OutOfBoundsAccess
from .judge import Judge, dtype_name
from .large_index import NOTE as LARGE_INDEX_NOTE
from .large_index import free_device_memory, is_large_index, launch_refused, taking_turns
from .large_index import plan as plan_large_index
from .launches import LaunchCounter
from .quick_tuning import verification_timer
from .references import Reference, native_reference, reference_or_skip, sampled_case, upcast_reference
from .structure import output_label
from .layouts import layout_runs
from .tensors import (
    Outputs,
    clone_inputs,
    flatten_outputs,
    input_elements,
    owned,
    restore_inputs,
    same_layout,
    shared_memory,
    synchronize,
    tensors_only,
)
from .torchmodes import PrefillEmpty
from .torchops import TorchOpRecorder
from .value_stress import stressed

Emit = Callable[[Event], None]


class Verifier:
    def __init__(self, km: KernelModule, config: VerifyConfig, emit: Emit, interpret: bool,
                 pins: dict[str, int] | None = None, judge: Callable[[CaseData], CaseResult] | None = None,
                 live: bool = False, kept_findings: dict[str, Any] | None = None,
                 plugin_checks: list[dict[str, str]] | None = None):
        self.km, self.config, self.emit, self.interpret = km, config, emit, interpret
        self.kept_findings = KeptFindings(km, config, kept_findings)  # checks passed before: not run again
        self.remote_judge = judge  # the judge process (run/child/judge_process.py); None: judged in this process
        self.local_judge = Judge(config)
        # The cases that run the once-per-dtype checks (compatibility; in the interpreter the repeat calls too):
        # the first of each dtype among the run's cases, the same whatever the sharding (verify_stage sets them).
        self.anchors = first_case_per_dtype(km.cases)
        self.layout_anchors = first_case_per_dtype(km.cases, sized=True)  # verify/layouts.py
        self.live = live  # the live loop's run: no torch.compile / CUDA-graph checks
        self.plugin_checks = list(plugin_checks or [])  # checks plugins add (verify/checks.py)
        LaunchCounter.install()
        self.autotuners = find_autotuners(km.module)
        self.dot_may_use_tf32 = dot_may_use_tf32(km)
        self.pins = pins or {}
        for name, index in self.pins.items():
            tuner = self.autotuners.get(name)
            if tuner is not None and 0 <= index < len(tuner.configs):
                tuner.configs = [tuner.configs[index]]

    # -- running user code ------------------------------------------------------------

    def _call_kernel(self, inputs: list[Any], fill: str, case: Case, config_label: str,
                     recorder: TorchOpRecorder | None = None, guards: Guards | None = None) -> Any:
        """kernel_fn(*inputs), its allocations filled with `fill`; under `recorder` (torchops.py) and inside
        `guards`' margins (guards.py) when given. A crash of a large-index case names the likely cause."""
        try:
            with PrefillEmpty(fill, guards), (recorder or nullcontext()):
                out = self.km.kernel_fn(*inputs)
            synchronize()
            return out
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - user code
            if is_cuda_fatal(exc):
                said = "the kernel crashed the GPU context"
                if is_large_index(case):
                    said += f" on {case.label}: {LARGE_INDEX_NOTE}"
                self.emit(problem_from_exception("crash", exc, self.km.path, said, case.index))
                raise ContextPoisoned(str(exc)) from exc
            gap = interpreter_cannot_run(exc) if self.interpret else ""
            if gap:
                line, _ = kernel_frame(exc, self.km.path)
                self.emit(Problem(kind=GPU_ONLY_KIND, message=gap, file=str(self.km.path), line=line, case_index=case.index,
                                  traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
                raise RunAborted() from exc
            if self._is_compile_error(exc) and not config_label and not case.generated:
                self.emit(problem_from_exception("compile", exc, self.km.path, "the kernel does not compile",
                                                 case.index))
                raise RunAborted() from exc
            raise

    def _torch_op_recorder(self) -> TorchOpRecorder | None:
        """A recorder of the torch ops behind each output, unless every op is allowed or torch may do it all."""
        if self.config.allow_torch_ops is True or not self.config.require_triton:
            return None
        return TorchOpRecorder()

    def _is_compile_error(self, exc: BaseException) -> bool:
        if is_compilation_error(exc):
            return True
        if not self.interpret:
            return False
        # The interpreter reports a bad kernel body at run time, from inside the @jit function;
        # an out-of-bounds access found there is the kernel being wrong, not failing to compile.
        if isinstance(root_cause(exc), OutOfBoundsAccess):
            return False
        line, _ = kernel_frame(exc, self.km.path)
        return any(first <= line <= last for first, last, _ in self.km.jit_line_ranges)

    def _inputs(self, case: Case) -> list[Any] | None:
        try:
            inputs = self.km.get_inputs(**case.params)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001
            if case.generated:
                self.deliver(CaseData(case_index=case.index, label=case.label, generated=True, status="skipped",
                                      notes=[f"get_inputs refuses this generated shape ({type(exc).__name__}: "
                                             f"{first_line(exc)}): case dropped"]))
                return None
            self.emit(problem_from_exception("inputs", exc, self.km.path, f"get_inputs({case.label}) raised",
                                             case.index))
            raise RunAborted() from exc
        if isinstance(inputs, tuple):
            inputs = list(inputs)
        if not isinstance(inputs, list):
            self.emit(Problem(kind="contract", file=str(self.km.path), case_index=case.index,
                              message=f"get_inputs({case.label}) returned {type(inputs).__name__}; expected a list"))
            raise RunAborted()
        if case.stress and not is_large_index(case):
            reference = getattr(self.km.module, "reference_fn", self.km.reference_fn)  # named as written
            inputs = stressed(inputs, case.stress, input_names(reference, len(inputs)),
                              self.config.value_stress)
        return inputs

    def reference(self, inputs: list[Any], case: Case, quiet: bool = False, native: bool = False) -> Reference:
        """The case's references (verify/references.upcast_reference), for the benchmark's recheck too."""
        return upcast_reference(self.km, inputs, case, self.emit, quiet, native)

    # -- one case -----------------------------------------------------------------------

    def deliver(self, data: CaseData) -> CaseResult:
        """Hand a case to the judge: the judge process when there is one (it reports the verdict), else here."""
        data.dot_may_use_tf32 = self.dot_may_use_tf32
        if self.remote_judge is not None:
            return self.remote_judge(data)
        result = self.local_judge.judge(data)
        self.emit(result)
        return result

    def verify_case(self, case: Case) -> list[CaseResult]:
        if is_large_index(case):
            return self.large_index_case(case)
        start = time.perf_counter()
        inputs = self._inputs(case)
        if inputs is None:
            return []
        data = CaseData(case_index=case.index, label=case.label, generated=case.generated, stress=case.stress)
        if self._too_large(inputs):
            data.status = "skipped"
            data.notes.append(f"inputs hold more than {self.config.interpret_max_elements} elements: too large "
                              "for the interpreter ([verify] interpret_max_elements)")
            return [self.deliver(data)]
        guards = Guards() if self.config.guard_regions else None
        try:
            return self._verify_case(case, inputs, data, guards, start)
        finally:
            if guards is not None:
                guards.close()

    def _verify_case(self, case: Case, inputs: list[Any], data: CaseData, guards: Guards | None,
                     start: float) -> list[CaseResult]:
        if guards is not None:
            inputs = guards.guard_inputs(inputs)
        else:
            data.checks["out_of_bounds"] = "skipped: guard_regions = false"
        originals = clone_inputs(inputs)
        reference = reference_or_skip(self.km, inputs, case, data, self.emit)
        if reference is None:
            return [self.deliver(data)]
        if reference.note:
            data.notes.append(reference.note)
        data.reference, data.before = reference.outputs.tensors, tensors_only(originals)
        data.reference_names = reference.outputs.names
        native, reference_aliases = native_reference(self.km, inputs)
        data.expected_dtypes = [] if native is None else [dtype_name(t) for t in native.tensors]
        data.native = [] if native is None else native.tensors
        data.rounded = [] if reference.rounded is None else reference.rounded.tensors
        LaunchCounter.reset()
        try:
            first = flatten_outputs(self._call_kernel(inputs, "nan", case, "", guards=guards))
        except (RunAborted, ContextPoisoned):
            raise
        except BaseException as exc:  # noqa: BLE001
            return [self.deliver(self._error_data(data, case, exc, start, launched=LaunchCounter.count))]
        launches_first = LaunchCounter.count
        if guards is not None:
            data.out_of_bounds = guards.check(first.tensors, first.names)
        data.after = tensors_only(clone_inputs(inputs))
        data.aliases = shared_memory(first, inputs, reference_aliases)
        first = owned(first)  # an output that is an input would change when the inputs are restored
        if case.index == min(self.anchors, default=case.index) and not case.generated and not case.stress:
            data.warnings += roofline_counts_raise(self.km, originals)
        if self.plugin_checks:
            data.plugin_evidence = gather_evidence(
                self.plugin_checks, originals, dict(zip(map(output_label, first.names), first.tensors)),
                dict(zip(map(output_label, reference.outputs.names), reference.outputs.tensors)))
        if case.stress:  # values are what a stress case is for: the second call's checks ran on the case it varies
            data.first, data.names, data.launches = first.tensors, first.names, launches_first
            data.torch_ops_unknown = "a value-stress case: followed on the case whose values it varies"
            data.duration_s = time.perf_counter() - start
            return [self.deliver(data)]
        restore_inputs(inputs, originals)
        LaunchCounter.reset()
        # The torch ops are followed in the second call: the autotuner timed its configs in the first
        # (each of those launches would be compared byte for byte around it).
        recorder = self._torch_op_recorder()
        try:
            second = flatten_outputs(self._call_kernel(inputs, "sentinel", case, "", recorder, guards))
        except (RunAborted, ContextPoisoned):
            raise
        except BaseException as exc:  # noqa: BLE001
            return [self.deliver(self._error_data(data, case, exc, start, "second run", launched=1))]
        if guards is not None:
            data.out_of_bounds += [m for m in guards.check(second.tensors, second.names) if m not in data.out_of_bounds]
        # The second call's count (the first may include the autotuner's timing runs); a kernel_fn that
        # launched on its first call only (a cache) is still a Triton kernel: the repeat calls judge it.
        data.launches = LaunchCounter.count or launches_first
        if recorder is not None:
            data.torch_ops = recorder.computed_by_torch(second.tensors, second.names)
            data.torch_ops_unknown = recorder.unknown
            del recorder  # the storages it kept alive
        second = owned(second)
        data.first, data.second, data.names = first.tensors, second.tensors, first.names
        data.mutation_hints = autotune_mutation_hints(self.autotuners)
        if not case.generated:
            restore_inputs(inputs, originals)
            data.extra_runs = self._repeat_calls(case, inputs, originals, data)
            restore_inputs(inputs, originals)
        data.duration_s = time.perf_counter() - start
        results = [self.deliver(data)]
        if not case.generated:
            results += self._verify_each_config(case, inputs, originals, reference.outputs, data, guards)
        return results

    def large_index_case(self, case: Case) -> list[CaseResult]:
        """A case scaled past 2^31 elements (verify/large_index.py): one call, judged on a sample; skipped, with
        the reason, where it does not fit, or the shape is refused before a launch or by the GPU."""
        def waiting(seconds: float) -> None:
            self.emit(StageChanged(stage="verifying", case_index=case.index,
                                   detail=f"{case.label}: waiting {seconds:.0f} s for another large-index case"))

        with taking_turns(waiting):
            start = time.perf_counter()
            try:
                params, note = plan_large_index(self.km, case, self.config, free_device_memory())
            except (KeyboardInterrupt, SystemExit, ContextPoisoned):
                raise
            except BaseException as exc:  # noqa: BLE001 - user code on the case's own sizes
                params, note = None, f"sizing it raised {type(exc).__name__}: {first_line(exc)}"
            if params is None:
                return [self.deliver(large_index_skipped(case, f"large-index case not run: {note}"))]
            case = replace(case, params=params)
            try:
                data = self._large_index_data(case, note, start)
            except torch.cuda.OutOfMemoryError:
                data = large_index_skipped(case, "large-index case not run: the device ran out of memory at this size")
            finally:
                torch.cuda.empty_cache()  # gigabytes: given back before the next case (or the next worker's)
            if data is None:
                return []
            data.duration_s = time.perf_counter() - start
            return [self.deliver(data)]

    def _large_index_data(self, case: Case, note: str, start: float) -> CaseData | None:
        """The large-index case's CaseData to judge, skipped with the reason, or None where it was dropped (and
        said so)."""
        inputs = self._inputs(case)
        if inputs is None:
            return None  # get_inputs refuses the size: said as a dropped case
        try:
            reference = upcast_reference(self.km, inputs, case, self.emit, quiet=True, native=True)
        except RunAborted as exc:
            return large_index_skipped(case, f"reference_fn refuses this size ({exc}): case dropped")
        if reference.precision != "float64":
            return large_index_skipped(case, f"large-index case not judged: {reference.note}; a reference below "
                                             "float64 cannot ground the error budget")
        LaunchCounter.reset()
        try:
            out = flatten_outputs(self._call_kernel(inputs, "nan", case, ""))
        except (RunAborted, ContextPoisoned, torch.cuda.OutOfMemoryError):
            raise
        except BaseException as exc:  # noqa: BLE001
            if launch_refused(exc):
                return large_index_skipped(case, f"the GPU refuses this launch ({first_line(exc)}): a grid dimension "
                                                 "past its limit (65,535 in the second and third)? Not judged")
            data = self._error_data(CaseData(case_index=case.index, label=case.label, generated=True,
                                             stress=case.stress), case, exc, start, launched=LaunchCounter.count)
            if data.status == "error":
                data.notes.append(LARGE_INDEX_NOTE)
            return data
        data = sampled_case(case, out, reference, [note])
        data.generated, data.stress, data.launches = True, case.stress, LaunchCounter.count or None
        return data

    def forward_case(self, case: Case, forward: KernelModule) -> list[CaseResult]:
        """A training kernel's forward alone (`forward`: the module as written, without its gradients), judged on
        one call against the reference: CaseResult.phase "forward". The live loop's first verdict; the case's
        whole battery, gradients included, judges it again after."""
        start = time.perf_counter()
        training, self.km = self.km, forward
        try:
            inputs = self._inputs(case)
            if inputs is None:
                return []
            if self._too_large(inputs):
                return []  # the whole battery says it skips the case
            data = CaseData(case_index=case.index, label=case.label, generated=case.generated, phase="forward")
            reference = reference_or_skip(self.km, inputs, case, data, self.emit)
            if reference is None:
                return []  # a generated shape the reference refuses: the whole battery drops it
            data.notes += [reference.note] if reference.note else []
            data.reference, data.before = reference.outputs.tensors, tensors_only(clone_inputs(inputs))
            data.reference_names = reference.outputs.names
            native, _ = native_reference(self.km, inputs)
            data.expected_dtypes = [] if native is None else [dtype_name(t) for t in native.tensors]
            data.native = [] if native is None else native.tensors
            data.rounded = [] if reference.rounded is None else reference.rounded.tensors
            LaunchCounter.reset()
            try:
                out = owned(flatten_outputs(self._call_kernel(inputs, "nan", case, "")))
            except (RunAborted, ContextPoisoned):
                raise
            except BaseException as exc:  # noqa: BLE001
                if case.generated:
                    return []  # a refusal or an error: the whole battery tells which
                return [self.deliver(self._error_data(data, case, exc, start, launched=LaunchCounter.count))]
            data.first, data.names, data.launches = out.tensors, out.names, LaunchCounter.count or None
            data.after = tensors_only(clone_inputs(inputs))
            data.duration_s = time.perf_counter() - start
            return [self.deliver(data)]
        finally:
            self.km = training

    def _too_large(self, inputs: list[Any]) -> bool:
        """In the interpreter, among many cases, inputs too large to run (the plain contract's only case runs)."""
        return self.interpret and len(self.km.cases) > 1 and input_elements(inputs) > self.config.interpret_max_elements

    def _repeat_calls(self, case: Case, inputs: list[Any], originals: list[Any], data: CaseData) -> list[ExtraRun]:
        """kernel_fn again on fresh inputs, then on the first call's own tensors refilled with those values:
        a result kept from an earlier call (cached by id() or data_ptr()) comes out wrong."""
        runs: list[ExtraRun] = []
        fresh_run = ExtraRun("repeat_fresh_inputs", hint="a result kept from an earlier call, or a kernel right "
                                                         "only on its first call?")
        recycled_run = ExtraRun("repeat_recycled_addresses", hint="an output cached by the inputs' id() or "
                                                                  "data_ptr()?")
        fresh: list[Any] | None = None
        fresh_ref: list[Any] = []
        fresh_native: list[Any] = []
        fresh_rounded: list[Any] = []
        if not self.config.repeat_calls:
            fresh_run.skipped = recycled_run.skipped = "[verify] repeat_calls = false"
        elif self.interpret and case.index not in self.anchors:
            # The interpreter is slow: a kernel that keeps state across calls shows on any case,
            # so it checks the first of each dtype; on a GPU every case is checked.
            fresh_run.skipped = recycled_run.skipped = (once_per_dtype(case, self.anchors)
                                                        + " (in the interpreter; every case on a GPU)")
        else:
            try:
                torch.manual_seed(0x5EED + case.index)
                fresh = self.km.get_inputs(**case.params)
                fresh = list(fresh)
                fresh_reference = self.reference(fresh, case, quiet=True, native=True)
                fresh_ref = fresh_reference.outputs.tensors
                fresh_native = [] if fresh_reference.native is None else fresh_reference.native.tensors
                fresh_rounded = [] if fresh_reference.rounded is None else fresh_reference.rounded.tensors
                fresh_values = clone_inputs(fresh)  # an in-place kernel changes `fresh`
            except (KeyboardInterrupt, SystemExit, ContextPoisoned):
                raise
            except BaseException as exc:  # noqa: BLE001
                fresh = None
                fresh_run.skipped = recycled_run.skipped = f"a second get_inputs/reference_fn call raised: {exc}"
        if fresh is not None:
            for run, args in ((fresh_run, fresh), (recycled_run, None)):
                if args is None:  # the first call's tensors, at the same addresses, holding the fresh values
                    if not same_layout(inputs, fresh):
                        run.skipped = "get_inputs gave differently shaped inputs the second time"
                        continue
                    restore_inputs(inputs, fresh_values)
                    args = inputs
                try:
                    out = flatten_outputs(self._call_kernel(list(args), "nan", case, "repeat"))
                except (RunAborted, ContextPoisoned):
                    raise
                except BaseException as exc:  # noqa: BLE001
                    run.error = f"kernel_fn raised: {type(exc).__name__}: {first_line(exc)}"
                    continue
                out = owned(out)
                run.outputs, run.names, run.reference, run.native = out.tensors, out.names, fresh_ref, fresh_native
                run.rounded = fresh_rounded
        runs += [fresh_run, recycled_run]
        runs += compat_runs(self.km, case, originals if fresh is None else fresh_values,
                            data.reference if fresh is None else fresh_ref,
                            data.native if fresh is None else fresh_native,
                            data.rounded if fresh is None else fresh_rounded, self.config, self.interpret,
                            self.anchors, live=self.live, kept=self.kept_findings,
                            announce=lambda check: self.emit(StageChanged(stage=CHECKING, detail=check,
                                                                          case_index=case.index)))
        runs += layout_runs(lambda args: self._call_kernel(args, "nan", case, "layout"), self.km.reference_fn,
                            originals, data.reference, data.native, data.rounded, self.config,
                            skip=once_per_dtype(case, self.layout_anchors), live=self.live)
        for run in runs:  # every run's reference is reference_fn's, with its output names
            run.reference_names = data.reference_names
        return runs

    def _error_data(self, data: CaseData, case: Case, exc: BaseException, start: float, when: str = "",
                    launched: int = 0) -> CaseData:
        """A case whose kernel_fn raised. `launched`: Triton launches of that call before it raised."""
        problem = problem_from_exception("runtime", exc, self.km.path, "kernel_fn raised" + (f" ({when})" if when else ""))
        data.duration_s = time.perf_counter() - start
        if case.generated and not launched and is_refusal(exc, self.km.path):
            # A launcher that refuses a shape explicitly (a ValueError, an assert) is no wrong result.
            data.status = "skipped"
            data.notes.append(f"kernel_fn refuses this generated shape ({problem.message}): case dropped")
            return data
        data.status = "error"
        data.messages.append(problem.message + (f" [{problem.location}]" if problem.line else ""))
        if case.generated and not isinstance(root_cause(exc), OutOfBoundsAccess):
            data.notes.append("a generated shape: only an explicit ValueError, TypeError, AssertionError or "
                              "NotImplementedError raised by the launcher before any launch is a refusal")
        return data

    def _verify_each_config(self, case: Case, inputs: list[Any], originals: list[Any],
                            ref: Outputs, tuned: CaseData, guards: Guards | None = None) -> list[CaseResult]:
        """Force every config of every autotuned kernel in turn; the tuner's own pick ran above."""
        results = []
        for name, tuner in self.autotuners.items():
            configs = list(tuner.configs)
            if len(configs) < 2:
                continue
            try:
                for config in configs:
                    label = f"{name}: {describe_config(config)}"
                    tuner.configs = [config]
                    tuner.cache.clear()
                    restore_inputs(inputs, originals)
                    start = time.perf_counter()
                    data = CaseData(case_index=case.index, label=case.label, config=label,
                                    reference=ref.tensors, reference_names=ref.names, native=tuned.native,
                                    rounded=tuned.rounded,
                                    expected_dtypes=tuned.expected_dtypes, before=tensors_only(originals))
                    LaunchCounter.reset()
                    try:
                        out = flatten_outputs(self._call_kernel(inputs, "nan", case, label, guards=guards))
                    except ContextPoisoned:
                        raise
                    except BaseException as exc:  # noqa: BLE001
                        if guards is not None:
                            guards.check([], [])  # margins put back: what this call wrote is not the next's
                        skipped = not_runnable_note(exc)
                        if skipped:  # a config the autotuner never picks (too much shared memory, ptxas, an assert)
                            data.status, data.duration_s = "skipped", time.perf_counter() - start
                            data.notes.append(skipped)
                            results.append(self.deliver(data))
                            continue
                        results.append(self.deliver(self._error_data(data, case, exc, start,
                                                                     launched=LaunchCounter.count)))
                        continue
                    if guards is not None:
                        data.out_of_bounds = guards.check(out.tensors, out.names)
                    # No second run per config: unwritten elements show as NaN mismatches.
                    out = owned(out)
                    # A forced config that launched nothing (kernel_fn cached its result) is the repeat
                    # calls' to judge, not "no Triton kernel".
                    data.first, data.names, data.launches = out.tensors, out.names, LaunchCounter.count or None
                    data.after = tensors_only(inputs)
                    data.duration_s = time.perf_counter() - start
                    results.append(self.deliver(data))
            finally:
                tuner.configs = configs
                tuner.cache.clear()
        return results


def large_index_skipped(case: Case, why: str) -> CaseData:
    """A large-index case not judged, and why."""
    return CaseData(case_index=case.index, label=case.label, generated=True, stress=case.stress, status="skipped",
                    notes=[why])


def roofline_counts_raise(km: KernelModule, inputs: list[Any]) -> list[str]:
    """kernel.py's flops() and bytes_moved(), called once on a verification case's inputs: one that raises says
    so here, on the machine the kernel is written on, not first in a benchmark on the GPU (where it is a note
    and the roofline is missing)."""
    said = []
    for name in ("flops", "bytes_moved"):
        fn = getattr(km, name, None)
        if fn is None:
            continue
        try:
            int(fn(*clone_inputs(inputs)))
        except Exception as exc:  # noqa: BLE001 - said, never a verdict: the kernel is not what is wrong
            said.append(f"{name}() raised {type(exc).__name__}: {first_line(exc)}: a benchmark will have no "
                        f"{'FLOP rate' if name == 'flops' else 'bandwidth'} for this kernel")
    return said


def autotune_mutation_hints(autotuners: dict[str, Any]) -> list[str]:
    """Why an in-place kernel can come out wrong only when autotuned, for each tuner that allows it."""
    return [f"the kernel changes its inputs and {name} is autotuned: the autotuner times each config by running "
            "it many times on the same tensors, changing them every time; list the arguments it writes in "
            "@triton.autotune(restore_value=[...])"
            for name, tuner in autotuners.items()
            if len(tuner.configs) > 1 and not getattr(tuner, "restore_value", None)
            and not getattr(tuner, "reset_to_zero", None)]


def run_verification(km: KernelModule, cases: list[Case], config: VerifyConfig, emit: Emit, interpret: bool,
                     pins: dict[str, int] | None = None,
                     judge: Callable[[CaseData], CaseResult] | None = None, live: bool = False,
                     order: Iterable[Case] | None = None, among: list[Case] | None = None,
                     forward_first: KernelModule | None = None, kept_findings: dict[str, Any] | None = None,
                     plugin_checks: list[dict[str, str]] | None = None) -> None:
    """Verify each case, emitting StageChanged before and CaseResult(s) after each. `order`: the same
    cases in the order to run them (as their kernels are compiled), when not as listed; `among`: the cases
    whose first of each dtype runs the once-per-dtype checks (all of a sharded run's), when not `cases`.
    `forward_first` (a training kernel's module without its gradients, in the live loop): every case's forward
    is judged first, on one call each (phase "forward"), so its verdict shows before the gradients'.
    `kept_findings`: the compatibility checks that passed in earlier runs (not run again); `plugin_checks`: the
    checks plugins add ({"key", "target"}: verify/checks.py), gathered on each case's first call."""
    verifier = Verifier(km, config, emit, interpret, pins, judge, live, kept_findings, plugin_checks)
    verifier.anchors = first_case_per_dtype(among or cases)
    verifier.layout_anchors = first_case_per_dtype(among or cases, sized=True)
    if torch_compile_to_run(km, cases, config, interpret, verifier.anchors, live, verifier.kept_findings):
        import_torch_compile_in_background()  # Dynamo and Inductor load while the kernels compile
    with verification_timer(verifier.autotuners, interpret):  # every config is verified: the pick needs no bench
        if forward_first is not None:
            ready = []  # the cases in the order their kernels became ready: the whole battery keeps it
            for n, case in enumerate(cases if order is None else order, 1):
                emit(StageChanged(stage="verifying", detail=case.label, current=n, total=len(cases),
                                  case_index=case.index, phase="forward"))
                verifier.forward_case(case, forward_first)
                ready.append(case)
            order = ready
        # The large-index cases last: the biggest allocations, and a crash there ends the process.
        sequence = list(cases if order is None else order)
        sequence = [c for c in sequence if not is_large_index(c)] + [c for c in sequence if is_large_index(c)]
        for n, case in enumerate(sequence, 1):
            emit(StageChanged(stage="verifying", detail=case.label, current=n, total=len(cases),
                              case_index=case.index))
            verifier.verify_case(case)  # the judge reports each verdict


def verify_stage(context: JobContext) -> None:
    """Worker stage "verify" (see worker.STAGES)."""
    indices = context.job.case_indices
    unknown = sorted(set(indices or []) - {c.index for c in context.km.cases})
    if unknown:
        context.emit(Problem(kind="inputs", file=str(context.km.path),
                             message=f"no case {', '.join(map(str, unknown))} in CASES "
                                     f"(it has {len(context.km.cases)}: 0..{len(context.km.cases) - 1})"))
        raise RunAborted()
    selected = select_cases(context.km.cases, indices, "verify")
    if not selected and context.km.cases:  # said, not a silent "0 passed, 0 failed"
        context.emit(Problem(kind="contract", file=str(context.km.path),
                             message=f"no case of CASES is for verification: all {len(context.km.cases)} have "
                                     "purpose \"bench\"; verification runs those whose purpose is \"verify\" (the "
                                     "default): give at least one"))
        raise RunAborted()
    cases = shard_of(selected, context.job.shard)
    order = None
    if context.compiles is not None:  # compile processes beside this worker: each case once its kernels are built
        later = select_cases(context.km.cases, indices, "bench") if "bench" in context.job.stages else []
        order = context.compiles.ahead(context.km, cases, later, lambda case: context.emit(
            StageChanged(stage=RECORDING, detail=case.label, case_index=case.index)))
    verify = context.config.verify
    km = for_training(context.km, verify.backward, verify.require_triton)  # a training kernel: with its gradients
    live_training = context.job.live and km is not context.km
    run_verification(km, cases, verify, context.emit, context.interpret, context.job.pins,
                     context.judge, context.job.live, order,
                     among=selected, forward_first=context.km if live_training else None,
                     kept_findings=context.job.kept_findings, plugin_checks=context.job.checks)
    if context.compiles is not None:  # the verdict is complete; the benchmark may follow in this worker
        context.emit(StageChanged(stage="verified", detail=f"{len(cases)} of {len(cases)} cases"))
        context.emit(LogLine(text=context.compiles.describe(), stream="workbench"))
