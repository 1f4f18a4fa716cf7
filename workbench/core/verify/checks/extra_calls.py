"""kernel_fn called again beyond the case's two calls, each call judged against its own reference (an ExtraRun):
on fresh inputs and on the first call's own tensors refilled with them (a result kept from an earlier call),
and the compatibility findings: under torch.compile and replayed from a CUDA graph (verify/compat.py), on
non-contiguous inputs and inputs at a storage offset (verify/layouts.py).
"""

from __future__ import annotations

from typing import Any

from ...events import CaseResult, StageChanged
from ...project.contract import first_line
from ...stage import CHECKING, ContextPoisoned, RunAborted
from ..compat import compat_runs
from ..compat_beside import fresh_inputs
from ..edge_cases import once_per_dtype
from ..handoff import ExtraRun
from ..layouts import layout_runs
from ..structure import paired_by_name
from ..tensors import clone_inputs, flatten_outputs, owned, restore_inputs, same_layout
from .unit import CaseCalls, Check, Unit, Verdict, dtype_name, no_tolerance, own_error_of


class ExtraCalls(Unit):
    checks = (
        Check("repeat_fresh_inputs", "a second call on fresh inputs is wrong (a result kept from an earlier call)"),
        Check("repeat_recycled_addresses", "a call on the first call's tensors refilled with new values is wrong"),
        Check("torch_compile", "torch.compile(kernel_fn, fullgraph=True) breaks the graph, fails or differs",
              "compat.compat_runs", finding=True),
        Check("cuda_graph", "kernel_fn captured into a CUDA graph and replayed is wrong, or the capture fails",
              "compat.compat_runs", finding=True),
        Check("noncontiguous", "kernel_fn on the same values non-contiguous is wrong", "layouts.layout_runs",
              finding=True),
        Check("storage_offset", "kernel_fn on inputs 16 bytes into their storage is wrong", "layouts.layout_runs",
              finding=True),
    )

    def finish(self, calls: CaseCalls) -> None:
        if calls.case.generated:
            return  # the edge shapes and value stresses: the case they derive from makes these calls
        restore_inputs(calls.inputs, calls.originals)
        calls.data.extra_runs = self.extra_runs(calls)
        restore_inputs(calls.inputs, calls.originals)

    @staticmethod
    def extra_runs(calls: CaseCalls) -> list[ExtraRun]:
        """kernel_fn again on fresh inputs, then on the first call's own tensors refilled with those values:
        a result kept from an earlier call (cached by id() or data_ptr()) comes out wrong. Then the compatibility
        runs, on the fresh inputs where there are some."""
        battery, case, inputs, originals, data = calls.battery, calls.case, calls.inputs, calls.originals, calls.data
        runs: list[ExtraRun] = []
        fresh_run = ExtraRun("repeat_fresh_inputs", hint="a result kept from an earlier call, or a kernel right "
                                                         "only on its first call?")
        recycled_run = ExtraRun("repeat_recycled_addresses", hint="an output cached by the inputs' id() or "
                                                                  "data_ptr()?")
        fresh: list[Any] | None = None
        fresh_ref: list[Any] = []
        fresh_native: list[Any] = []
        fresh_rounded: list[Any] = []
        if not battery.config.repeat_calls:
            fresh_run.skipped = recycled_run.skipped = "[verify] repeat_calls = false"
        elif battery.interpret and case.index not in battery.anchors:
            # The interpreter is slow: a kernel that keeps state across calls shows on any case,
            # so it checks the first of each dtype; on a GPU every case is checked.
            fresh_run.skipped = recycled_run.skipped = (once_per_dtype(case, battery.anchors)
                                                        + " (in the interpreter; every case on a GPU)")
        else:
            try:
                fresh = fresh_inputs(battery.km, case)  # as the torch.compile check's own process builds them
                fresh_reference = battery.reference(fresh, case, quiet=True, native=True)
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
                    out = flatten_outputs(calls.call(list(args), "repeat"))
                except (RunAborted, ContextPoisoned):
                    raise
                except BaseException as exc:  # noqa: BLE001
                    run.error = f"kernel_fn raised: {type(exc).__name__}: {first_line(exc)}"
                    continue
                out = owned(out)
                run.outputs, run.names, run.reference, run.native = out.tensors, out.names, fresh_ref, fresh_native
                run.rounded = fresh_rounded
        runs += [fresh_run, recycled_run]
        runs += compat_runs(battery.km, case, originals if fresh is None else fresh_values,
                            data.reference if fresh is None else fresh_ref,
                            data.native if fresh is None else fresh_native,
                            data.rounded if fresh is None else fresh_rounded, battery.config, battery.interpret,
                            battery.anchors, live=battery.live, kept=battery.kept_findings,
                            announce=lambda check: battery.emit(StageChanged(stage=CHECKING, detail=check,
                                                                             case_index=case.index)),
                            beside=getattr(battery, "beside", None))
        runs += layout_runs(lambda args: calls.call(args, "layout"), battery.km.reference_fn,
                            originals, data.reference, data.native, data.rounded, battery.config,
                            skip=once_per_dtype(case, battery.layout_anchors), live=battery.live)
        for run in runs:  # every run's reference is reference_fn's, with its output names
            run.reference_names = data.reference_names
        return runs

    def decide(self, verdict: Verdict) -> None:
        result, config = verdict.result, verdict.config
        first_call_failed = bool(result.messages)
        for run in verdict.data.extra_runs:
            if run.skipped:
                result.checks[run.name] = f"skipped: {run.skipped}"
                continue
            if run.refused:  # the launcher said no before launching: loud, so no wrong result (verify/layouts.py)
                result.checks[run.name] = f"skipped: {run.refused}"
                result.compat[run.name] = {"status": "refused", "required": run.required, "error": run.refused}
                continue
            if first_call_failed:
                # The repeat calls exist to catch a kernel right only once; one already wrong says
                # nothing more through them, and their hints (a cached result?) would mislead.
                result.checks[run.name] = "skipped: the first call already failed"
                continue
            if run.kept:  # passed before on the same sources, case, GPU, versions and config: not run again
                compat_finding(result, run, "")
                result.compat[run.name]["kept"] = run.kept
                continue
            problem = run.error
            if not problem:
                order, problems = paired_by_name(run.names, run.reference_names, len(run.outputs),
                                                 len(run.reference))
                several = len(run.reference) > 1
                for j, i in enumerate(order):
                    if i is None:
                        continue
                    out, expected = run.outputs[i], run.reference[j]
                    tol = config.tolerance_for(dtype_name(out))
                    if tol is None:
                        problems.append(no_tolerance(dtype_name(out)))
                        continue
                    name = run.names[i] if several and i < len(run.names) else ""
                    cmp = verdict.compare(out, expected, own_error_of(run, j), tol)
                    problems += [f"output{name}: {m}" if name else m for m in cmp.messages]
                problem = f"{problems[0]} ({run.hint})" if problems and run.hint else (problems[0] if problems else "")
            if run.compat:
                compat_finding(result, run, problem)
            elif problem:
                result.messages.append(f"{run.name}: {problem}")
                result.checks[run.name] = "failed"
            else:
                result.checks[run.name] = "passed"


UNIT = ExtraCalls()


def compat_finding(result: CaseResult, run: ExtraRun, problem: str) -> None:
    """A compatibility check's outcome: a finding of its own (CaseResult.compat), which fails the case only
    when the project requires it; otherwise the check says "warning"."""
    error = problem if not run.detail or run.detail in problem else f"{problem}\n{run.detail}"
    result.compat[run.name] = {"status": "failed" if problem else "passed", "required": run.required,
                               "error": error if problem else "", "key": run.key}
    if run.notes:  # beside the outcome: a scalar that reaches the kernel as another type (compiled_context.py)
        result.compat[run.name]["notes"] = list(run.notes)
        result.notes += [f"{run.name}: {note}" for note in run.notes if f"{run.name}: {note}" not in result.notes]
    if not problem:
        result.checks[run.name] = "passed"
    elif run.required:
        result.messages.append(f"{run.name}: {problem}")
        result.checks[run.name] = "failed"
    else:
        result.checks[run.name] = "warning"
