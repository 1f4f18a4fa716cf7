"""kernel.py's functions called for the battery (battery.Verifier, and the benchmark's check, are these): get_inputs
(value-stressed where the case says so), reference_fn, kernel_fn with its allocations poisoned, and what their
exceptions mean: a crash of the GPU context, a gap of the interpreter, a compile error, a refusal, an error. A
large-index case is one call of each (verify/large_index.py), judged on a sample.
"""

from __future__ import annotations

import time
import traceback
from contextlib import nullcontext
from typing import Any, Callable

import torch

from ..events import Event, Problem
from ..project.config import VerifyConfig, inputs_seed
from ..project.contract import (
    Case,
    KernelModule,
    first_line,
    is_compilation_error,
    kernel_frame,
    problem_from_exception,
    root_cause,
)
from ..stage import ContextPoisoned, RunAborted, is_cuda_fatal
from ..verdict import GPU_ONLY_KIND
from .failures import interpreter_cannot_run, is_refusal
from .gradients import input_names
from .guards import Guards
from .handoff import CaseData
from .interpreter.fixes import OutOfBoundsAccess
from .large_index import NOTE as LARGE_INDEX_NOTE
from .large_index import is_large_index, launch_refused
from .checks.unit import dtype_name, own_error_of
from .compare import compare
from .structure import paired_by_name
from .references import (Reference, native_reference, reference_or_skip, rounded_reference, sampled_case,
                         upcast_reference)
from .tensors import Outputs, flatten_outputs, input_elements, synchronize
from .torchmodes import PrefillEmpty
from .launches import LaunchCounter
from .torchops import TorchOpRecorder
from .value_stress import is_value_stress, stressed

Emit = Callable[[Event], None]


# A stress case that one draw of p fails by at most this many times its error factor takes further draws
# (settle_rounding): the flash attention of RESULTS 11g failed one draw at 1.1x its factor and passed eight
FURTHER_DRAWS_WITHIN = 8.0


class KernelCalls:
    """kernel.py's functions called safely for one run; a subclass hands the cases to the judge (`deliver`)."""

    def __init__(self, km: KernelModule, config: VerifyConfig, emit: Emit, interpret: bool):
        self.km, self.config, self.emit, self.interpret = km, config, emit, interpret

    def deliver(self, data: CaseData) -> Any:
        """Hand a case to the judge (battery.Verifier.deliver)."""
        raise NotImplementedError

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
        torch.manual_seed(inputs_seed(self.config.seed, case.index))  # the run's draw: replayed by --seed
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
        return upcast_reference(self.km, inputs, case, self.emit, quiet, native, self.config.tf32)

    def _referenced(self, data: CaseData, inputs: list[Any], case: Case) -> tuple[Reference | None, set[int]]:
        """The case's references into `data` (reference_fn three ways: verify/references.py), and the outputs
        reference_fn returns as views of its inputs; None for a generated shape it refuses (`data` skipped)."""
        reference = reference_or_skip(self.km, inputs, case, data, self.emit, self.config.tf32)
        if reference is None:
            return None, set()
        data.notes += [reference.note] if reference.note else []
        data.reference, data.reference_names = reference.outputs.tensors, reference.outputs.names
        native, aliases = native_reference(self.km, inputs)
        data.expected_dtypes = [] if native is None else [dtype_name(t) for t in native.tensors]
        data.native = [] if native is None else native.tensors
        data.rounded = [] if reference.rounded is None else reference.rounded.tensors
        return reference, aliases

    def settle_rounding(self, data: CaseData, case: Case, outputs: Outputs, inputs: list[Any],
                        reference: Reference) -> None:
        """A value-stress case's p from STRESSED_ROUNDING_DRAWS draws (verify/error_model.py), computed only where
        one draw's budget does not pass `outputs` but comes near (FURTHER_DRAWS_WITHIN): the farthest of several
        draws is never nearer r than the first, so where one draw passes every draw does; a kernel far past its
        budget, or with NaN where the reference has numbers, is not worth the further reference runs.
        `inputs`: the case's inputs as the references saw them."""
        if not is_value_stress(case) or reference.rounded is None or not self._near_one_draw(data, outputs):
            return
        more = rounded_reference(self.km, inputs, reference.outputs, self.config.tf32, stressed=True,
                                 taken=reference.rounded)
        if more is not None:
            data.rounded = more.tensors

    def _near_one_draw(self, data: CaseData, outputs: Outputs) -> bool:
        """Whether some floating-point output fails its budget with the one draw of p in `data` by no more than
        FURTHER_DRAWS_WITHIN times torch's own error, and none by more or by NaN (outputs paired as the judge pairs
        them; anything the judge would call a structure problem counts as near, and the judge has every draw)."""
        order, problems = paired_by_name(outputs.names, data.reference_names, len(outputs.tensors),
                                         len(data.reference))
        if problems or None in order:
            return True
        near, factor = False, self.config.error_factor
        for j, i in enumerate(order):
            out, ref = outputs.tensors[i], data.reference[j]
            if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
                continue
            tol = self.config.tolerance_for(dtype_name(out))
            if tol is None or not isinstance(ref, torch.Tensor) or out.shape != ref.shape:
                return True
            native, rounded = own_error_of(data, j)
            judged = compare(out, ref, tol, native=native, factor=factor, rounded=rounded)
            if judged.passed:
                continue
            if judged.nan_mismatch or (judged.multiple or 0) > FURTHER_DRAWS_WITHIN * factor:
                return False
            near = True
        return near

    def _too_large(self, inputs: list[Any]) -> bool:
        """In the interpreter, among many cases, inputs too large to run (the plain contract's only case runs)."""
        return self.interpret and len(self.km.cases) > 1 and input_elements(inputs) > self.config.interpret_max_elements

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

    def _large_index_data(self, case: Case, note: str, start: float) -> CaseData | None:
        """The large-index case's CaseData to judge, skipped with the reason, or None where it was dropped (and
        said so)."""
        inputs = self._inputs(case)
        if inputs is None:
            return None  # get_inputs refuses the size: said as a dropped case
        try:
            reference = upcast_reference(self.km, inputs, case, self.emit, quiet=True, native=True,
                                         tf32=self.config.tf32)
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


def large_index_skipped(case: Case, why: str) -> CaseData:
    """A large-index case not judged, and why."""
    return CaseData(case_index=case.index, label=case.label, generated=True, stress=case.stress, status="skipped",
                    notes=[why])
