"""The verification battery (docs/ARCHITECTURE.md, "What verified means").

Runs inside a worker. For every case: fresh random inputs, the reference on
upcast inputs, the kernel's own allocations poisoned (NaN first, a sentinel
second) so unwritten elements show, inputs checked unchanged, a second run
compared bit for bit, and every config of every autotuned kernel forced in turn.
Each check gathers its own evidence through the hooks called here (verify/checks/).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Any, Callable, Iterable

import torch

from ..events import CaseResult, LogLine, Problem, StageChanged
from ..project.config import VerifyConfig
from ..project.contract import (Case, KernelModule, describe_config, dot_may_use_tf32, find_autotuners, first_line,
                                select_cases)
from ..stage import CHECKING, RECORDING, ContextPoisoned, JobContext, RunAborted, shard_of
from .calls import Emit, KernelCalls, large_index_skipped
from .checks import UNITS, CaseCalls, Unit
from .compat import KeptFindings, finish_beside, import_torch_compile_in_background, torch_compile_to_run
from .compat_beside import CheckBeside
from .edge_cases import first_case_per_dtype
from .failures import not_runnable_note
from .forced_configs import autotuner_launches, configs_to_force, not_forced_note
from .gradients import for_training
from .handoff import CaseData
from .judge import Judge
from .large_index import free_device_memory, is_large_index, taking_turns
from .large_index import plan as plan_large_index
from .launches import LaunchCounter
from .quick_tuning import first_config_untimed, verification_timer
from .tensors import Outputs, clone_inputs, flatten_outputs, owned, restore_inputs, tensors_only


class Verifier(KernelCalls):
    def __init__(self, km: KernelModule, config: VerifyConfig, emit: Emit, interpret: bool,
                 pins: dict[str, int | str] | None = None, judge: Callable[[CaseData], CaseResult] | None = None,
                 live: bool = False, kept_findings: dict[str, Any] | None = None,
                 plugin_checks: list[dict[str, str]] | None = None):
        super().__init__(km, config, emit, interpret)
        self.kept_findings = KeptFindings(km, config, kept_findings)  # checks passed before: not run again
        self.remote_judge = judge  # the judge process (run/child/judge_process.py); None: judged in this process
        self.local_judge = Judge(config)
        # The cases that run the once-per-dtype checks (compatibility; in the interpreter the repeat calls too):
        # the first of each dtype among the run's cases, the same whatever the sharding (verify_stage sets them).
        self.anchors = first_case_per_dtype(km.cases)
        self.layout_anchors = first_case_per_dtype(km.cases, sized=True)  # verify/layouts.py
        self.live = live  # the live loop's run: no torch.compile / CUDA-graph checks
        self.plugin_checks = list(plugin_checks or [])  # checks plugins add (verify/checks/plugins.py)
        self.units: list[Unit] = list(UNITS)  # every check's hooks, called on each case (verify/checks/)
        LaunchCounter.install()
        self.autotuners = find_autotuners(km.module)
        self.dot_may_use_tf32 = dot_may_use_tf32(km)
        self.pins = pins or {}
        apply_pins(self.autotuners, self.pins)
        self.beside: CheckBeside | None = None  # a process runs the torch.compile check (verify/compat_beside.py)
        self.deferred: list[CaseData] = []  # cases whose torch.compile check is still in that process

    def _tuning_for(self, case: Case) -> contextlib.AbstractContextManager:
        """A generated case forces no config: its tuners take their first config untimed (quick_tuning.py)."""
        return first_config_untimed(self.autotuners) if case.generated else contextlib.nullcontext()

    def _called(self, calls: CaseCalls, call: str, outputs: Outputs | None) -> None:
        for unit in self.units:
            unit.called(calls, call, outputs)

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
        calls = CaseCalls(self, case, data, inputs)
        try:
            with self._tuning_for(case):
                return self._verify_case(calls, start)
        finally:
            for unit in self.units:
                unit.close(calls)

    def _verify_case(self, calls: CaseCalls, start: float) -> list[CaseResult]:
        case, data = calls.case, calls.data
        for unit in self.units:
            unit.prepare(calls)
        inputs = calls.inputs
        originals = calls.originals = clone_inputs(inputs)
        reference, calls.reference_aliases = self._referenced(data, inputs, case)
        if reference is None:
            return [self.deliver(data)]
        data.before = tensors_only(originals)
        LaunchCounter.reset()
        try:
            with autotuner_launches() as launched:  # which configs each tuner keeps here: the ones forced below
                first = flatten_outputs(self._call_kernel(inputs, "nan", case, "", guards=calls.guards))
        except (RunAborted, ContextPoisoned):
            raise
        except BaseException as exc:  # noqa: BLE001
            return [self.deliver(self._error_data(data, case, exc, start, launched=LaunchCounter.count))]
        launches_first = LaunchCounter.count
        data.after = tensors_only(clone_inputs(inputs))
        self._called(calls, "first", first)
        first = owned(first)  # an output that is an input would change when the inputs are restored
        if case.index == min(self.anchors, default=case.index) and not case.generated and not case.stress:
            data.warnings += roofline_counts_raise(self.km, originals)
        if case.stress:  # values are what a stress case is for: the second call's checks ran on the case it varies
            data.first, data.names, data.launches = first.tensors, first.names, launches_first
            self.settle_rounding(data, case, first, originals, reference)
            data.duration_s = time.perf_counter() - start
            return [self.deliver(data)]
        restore_inputs(inputs, originals)
        LaunchCounter.reset()
        try:
            with autotuner_launches() as launched_again:  # a kernel_fn that caches its result launches once
                second = flatten_outputs(self._call_kernel(inputs, "sentinel", case, "", calls.recorder,
                                                           calls.guards))
        except (RunAborted, ContextPoisoned):
            raise
        except BaseException as exc:  # noqa: BLE001
            return [self.deliver(self._error_data(data, case, exc, start, "second run", launched=1))]
        # The second call's count (the first may include the autotuner's timing runs); a kernel_fn that
        # launched on its first call only (a cache) is still a Triton kernel: the repeat calls judge it.
        data.launches = LaunchCounter.count or launches_first
        self._called(calls, "second", second)
        second = owned(second)
        data.first, data.second, data.names = first.tensors, second.tensors, first.names
        data.mutation_hints = autotune_mutation_hints(self.autotuners)
        forced = {} if case.generated else self._configs_to_force(launched + launched_again, data)
        del launched, launched_again  # the calls' arguments
        for unit in self.units:
            unit.finish(calls)
        data.duration_s = time.perf_counter() - start
        if any(run.pending is not None for run in data.extra_runs):
            self.deferred.append(data)  # to the judge once its torch.compile check is in (deliver_deferred)
            results = []
        else:
            results = [self.deliver(data)]
        if forced:
            results += self._verify_each_config(calls, reference.outputs, forced)
        return results

    def deliver_deferred(self, wait: bool) -> None:
        """The cases whose torch.compile check ran in its own process, to the judge: those whose result is in
        (`wait`: every one, waiting for the rest, or checking them here where the process has no result)."""
        for data in list(self.deferred):
            runs = [run for run in data.extra_runs if run.pending is not None]
            if not wait and not all(self.beside.ready(run.pending.case_index) for run in runs):
                continue
            self.deferred.remove(data)
            for run in runs:
                finish_beside(self.km, run, self.beside,
                              announce=lambda check, i=data.case_index: self.emit(
                                  StageChanged(stage=CHECKING, detail=check, case_index=i)),
                              log=lambda text: self.emit(LogLine(text=text, stream="workbench")))
            self.deliver(data)

    def _configs_to_force(self, launched: list, data: CaseData) -> dict[str, list[Any]]:
        """Each tuner's configs to force on this case: those its pruning keeps for the case's launches
        (verify/forced_configs.py); the case notes the ones it drops."""
        forced = {}
        for name, tuner in self.autotuners.items():
            if len(tuner.configs) < 2:
                continue  # one config (or a pinned one): the case's own run was it
            configs = configs_to_force(tuner, launched)
            if configs is None:
                configs = list(tuner.configs)
            elif len(configs) < len(tuner.configs):
                data.notes.append(not_forced_note(name, len(tuner.configs), len(configs)))
            if configs:
                forced[name] = configs
        return forced

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
            if self._referenced(data, inputs, case)[0] is None:
                return []  # a generated shape the reference refuses: the whole battery drops it
            data.before = tensors_only(clone_inputs(inputs))
            LaunchCounter.reset()
            try:
                with self._tuning_for(case):
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

    def _verify_each_config(self, tuned: CaseCalls, ref: Outputs, forced: dict[str, list[Any]]) -> list[CaseResult]:
        """Force each config the case's launches keep (`forced`, by tuner) in turn; the tuner's own pick ran above
        (`tuned`)."""
        case, inputs, originals = tuned.case, tuned.inputs, tuned.originals
        results = []
        for name, to_force in forced.items():
            tuner = self.autotuners[name]
            configs = list(tuner.configs)
            try:
                for config in to_force:
                    label = f"{name}: {describe_config(config)}"
                    tuner.configs = [config]
                    tuner.cache.clear()
                    restore_inputs(inputs, originals)
                    start = time.perf_counter()
                    data = CaseData(case_index=case.index, label=case.label, config=label,
                                    reference=ref.tensors, reference_names=ref.names, native=tuned.data.native,
                                    rounded=tuned.data.rounded,
                                    expected_dtypes=tuned.data.expected_dtypes, before=tensors_only(originals))
                    calls = replace(tuned, data=data)  # this config's calls: the case's guards, its own data
                    LaunchCounter.reset()
                    try:
                        out = flatten_outputs(self._call_kernel(inputs, "nan", case, label, guards=calls.guards))
                    except ContextPoisoned:
                        raise
                    except BaseException as exc:  # noqa: BLE001
                        self._called(calls, "config", None)
                        skipped = not_runnable_note(exc)
                        if skipped:  # a config the autotuner never picks (too much shared memory, ptxas, an assert)
                            data.status, data.duration_s = "skipped", time.perf_counter() - start
                            data.notes.append(skipped)
                            results.append(self.deliver(data))
                            continue
                        results.append(self.deliver(self._error_data(data, case, exc, start,
                                                                     launched=LaunchCounter.count)))
                        continue
                    self._called(calls, "config", out)
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


def apply_pins(autotuners: dict[str, Any], pins: dict[str, int | str]) -> None:
    """Leave each pinned tuner its pinned config alone: named as described ("BLOCK_SIZE=1024, num_warps=4", what
    the app pins) or by its index among the tuner's configs. Applied again, it changes nothing."""
    for name, pin in pins.items():
        tuner = autotuners.get(name)
        if tuner is None:
            continue
        if isinstance(pin, str):
            tuner.configs = [c for c in tuner.configs if describe_config(c) == pin][:1] or tuner.configs
        elif 0 <= pin < len(tuner.configs):
            tuner.configs = [tuner.configs[pin]]


def autotune_mutation_hints(autotuners: dict[str, Any]) -> list[str]:
    """Why an in-place kernel can come out wrong only when autotuned, for each tuner that allows it."""
    return [f"the kernel changes its inputs and {name} is autotuned: the autotuner times each config by running "
            "it many times on the same tensors, changing them every time; list the arguments it writes in "
            "@triton.autotune(restore_value=[...])"
            for name, tuner in autotuners.items()
            if len(tuner.configs) > 1 and not getattr(tuner, "restore_value", None)
            and not getattr(tuner, "reset_to_zero", None)]


def run_verification(km: KernelModule, cases: list[Case], config: VerifyConfig, emit: Emit, interpret: bool,
                     pins: dict[str, int | str] | None = None,
                     judge: Callable[[CaseData], CaseResult] | None = None, live: bool = False,
                     order: Iterable[Case] | None = None, among: list[Case] | None = None,
                     forward_first: KernelModule | None = None, kept_findings: dict[str, Any] | None = None,
                     plugin_checks: list[dict[str, str]] | None = None, beside: CheckBeside | None = None) -> None:
    """Verify each case, emitting StageChanged before and CaseResult(s) after each. `order`: the same
    cases in the order to run them (as their kernels are compiled), when not as listed; `among`: the cases
    whose first of each dtype runs the once-per-dtype checks (all of a sharded run's), when not `cases`.
    `forward_first` (a training kernel's module without its gradients, in the live loop): every case's forward
    is judged first, on one call each (phase "forward"), so its verdict shows before the gradients'.
    `kept_findings`: the compatibility checks that passed in earlier runs (not run again); `plugin_checks`: the
    checks plugins add ({"key", "target"}: verify/checks/plugins.py), gathered on each case's first call.
    `beside`: the process started with the run that runs the torch.compile check (verify/compat_beside.py)."""
    verifier = Verifier(km, config, emit, interpret, pins, judge, live, kept_findings, plugin_checks)
    verifier.anchors = first_case_per_dtype(among or cases)
    verifier.layout_anchors = first_case_per_dtype(among or cases, sized=True)
    if torch_compile_to_run(km, cases, config, interpret, verifier.anchors, live, verifier.kept_findings):
        if beside is not None:
            verifier.beside = beside  # the check's cases go to the judge once its result is in
        else:
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
            if verifier.deferred:  # the large-index cases need the GPU's memory: every check beside is in first
                verifier.deliver_deferred(wait=is_large_index(case))
            emit(StageChanged(stage="verifying", detail=case.label, current=n, total=len(cases),
                              case_index=case.index))
            verifier.verify_case(case)  # the judge reports each verdict
        verifier.deliver_deferred(wait=True)


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
    verify = context.config.verify
    km = for_training(context.km, verify.backward, verify.require_triton)  # a training kernel: with its gradients
    order = None
    if context.compiles is not None:  # compile processes beside this worker: each case once its kernels are built
        apply_pins(find_autotuners(km.module), context.job.pins)  # a pinned tuner's other configs: not compiled
        later = select_cases(context.km.cases, indices, "bench") if "bench" in context.job.stages else []
        # Recorded as verified (a training kernel's backward too), the benchmark's cases as the module is written.
        order = context.compiles.ahead(km, cases, later, lambda case: context.emit(
            StageChanged(stage=RECORDING, detail=case.label, case_index=case.index)), later_km=context.km)
    live_training = context.job.live and km is not context.km
    run_verification(km, cases, verify, context.emit, context.interpret, context.job.pins,
                     context.judge, context.job.live, order,
                     among=selected, forward_first=context.km if live_training else None,
                     kept_findings=context.job.kept_findings, plugin_checks=context.job.checks,
                     beside=CheckBeside.of_job(context.job.compile_check))
    if context.compiles is not None:  # the verdict is complete; the benchmark may follow in this worker
        context.emit(StageChanged(stage="verified", detail=f"{len(cases)} of {len(cases)} cases"))
        context.emit(LogLine(text=context.compiles.describe(), stream="workbench"))
