"""What a case is judged against: reference_fn three ways (verify/error_model.py says why).

- `upcast_reference`: on float64-upcast inputs (`r`, the truth); float32 where a reference refuses float64 or
  runs out of memory, else the inputs' own dtype, with a note saying which;
- `native_reference`: on the inputs as given (`n`: torch in the inputs' dtype, whose outputs' dtypes kernel_fn
  must return and whose distance from `r` is torch's own error);
- `rounded_reference`: in float64 on the inputs rounded once more, its intermediates too (`p`: what one more
  rounding costs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import time

import torch

from ..events import Event
from ..project.contract import Case, KernelModule, first_line, problem_from_exception
from ..stage import ContextPoisoned, RunAborted, is_cuda_fatal
from .error_model import (STRESSED_ROUNDING_DRAWS, RoundEachOp, farthest, intermediate_unit, rounded_once_more,
                          rounding_draws)
from .handoff import CaseData
from .tensors import Outputs, aliased_outputs, cast_floats, clone_inputs, flatten_outputs, in_order_of, synchronize


@dataclass
class Reference:
    outputs: Outputs
    note: str = ""
    native: Outputs | None = None  # reference_fn on the inputs as given (torch's own error: verify/error_model.py)
    rounded: Outputs | None = None  # in float64 on the inputs rounded once more (error_model.rounded_once_more)
    precision: str = "float64"  # what reference_fn ran in: "float64", "float32", or "native" (the inputs' own)


def upcast_reference(km: KernelModule, inputs: list[Any], case: Case, emit: Callable[[Event], None],
                     quiet: bool = False, native: bool = False, tf32: bool = False) -> Reference:
    """reference_fn on upcast inputs: float64, else float32 (a reference that refuses float64, or a benchmark
    shape too big for it), else the inputs' own dtype; the note says which. `native`: also reference_fn on the
    inputs as given (Reference.native). In float64, also on the inputs rounded once more (Reference.rounded;
    `tf32`: float32 inputs by TF32's unit, error_model.rounded_once_more).
    Raises RunAborted when reference_fn raises in every precision (`quiet`: with the reason, else reported)."""
    notes = []
    for dtype in (torch.float64, torch.float32):
        try:
            out = flatten_outputs(km.reference_fn(*cast_floats(inputs, dtype)))
            synchronize()
            note = f"reference_fn ran in float32 ({'; '.join(notes)})" if notes else ""
            return Reference(out, note, native_reference(km, inputs)[0] if native else None,
                             rounded_reference(km, inputs, out, tf32) if dtype == torch.float64 else None,
                             str(dtype).replace("torch.", ""))
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            notes.append(f"{str(dtype).replace('torch.', '')} ran out of GPU memory")
        except Exception as exc:  # noqa: BLE001 - some references refuse float64; try the next precision
            if is_cuda_fatal(exc):
                raise ContextPoisoned(str(exc)) from exc
            notes.append(f"{str(dtype).replace('torch.', '')} failed: {type(exc).__name__}")
    try:
        out = km.reference_fn(*clone_inputs(inputs))
        synchronize()
    except Exception as exc:  # noqa: BLE001
        if is_cuda_fatal(exc):
            raise ContextPoisoned(str(exc)) from exc
        if quiet:
            raise RunAborted(f"{type(exc).__name__}: {first_line(exc)}") from exc
        emit(problem_from_exception("reference", exc, km.path, f"reference_fn raised on case {case.label}",
                                    case.index))
        raise RunAborted() from exc
    return Reference(flatten_outputs(out), f"reference_fn ran in the inputs' own dtype ({'; '.join(notes)})",
                     precision="native")


def reference_or_skip(km: KernelModule, inputs: list[Any], case: Case, data: CaseData,
                      emit: Callable[[Event], None], tf32: bool = False) -> Reference | None:
    """upcast_reference; for a generated case whose shape reference_fn refuses, None with `data` skipped."""
    if not case.generated:
        return upcast_reference(km, inputs, case, emit, tf32=tf32)
    try:
        return upcast_reference(km, inputs, case, emit, quiet=True, tf32=tf32)
    except RunAborted as exc:
        data.status = "skipped"
        data.notes.append(f"reference_fn refuses this generated shape ({exc}): case dropped")
        return None


def rounded_reference(km: KernelModule, inputs: list[Any], truth: Outputs, tf32: bool = False,
                      stressed: bool = False, taken: Outputs | None = None) -> Outputs | None:
    """reference_fn in float64 on the inputs rounded once more, with each of its intermediate results rounded once
    more too (verify/error_model.py: how much one more rounding moves the output); for small outputs and
    `stressed` cases (value_stress.is_value_stress) several draws, each element the farthest from `truth` (the float64
    reference's outputs). `taken`: what an unstressed call returned for the same inputs (its draws are not taken
    again; the stressed draws go on from there). None when it raises or does not fit."""
    unit = intermediate_unit(inputs)
    start = 0 if taken is None else rounding_draws(truth.tensors)
    try:
        draws = [] if taken is None else [taken]
        for draw in range(start, rounding_draws(truth.tensors, STRESSED_ROUNDING_DRAWS if stressed else 1)):
            with RoundEachOp(draw, unit):
                draws.append(flatten_outputs(km.reference_fn(*rounded_once_more(clone_inputs(inputs), draw, tf32))))
        synchronize()
        out = draws[0]
        if len(draws) > 1 and all(d.names == truth.names for d in draws):
            out = Outputs([farthest(r, [d.tensors[j] for d in draws]) for j, r in enumerate(truth.tensors)],
                          truth.names)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None
    except Exception as exc:  # noqa: BLE001 - then torch's own error is the measure alone
        if is_cuda_fatal(exc):
            raise ContextPoisoned(str(exc)) from exc
        return None
    return out


def native_reference(km: KernelModule, inputs: list[Any]) -> tuple[Outputs | None, set[int]]:
    """reference_fn on the inputs as given: the outputs whose dtypes kernel_fn must return (and whose distance
    from the upcast reference is the op's own rounding), and which outputs the reference itself returns as
    views of its inputs (the kernel may too). (None, set()) when it raises."""
    args = clone_inputs(inputs)
    try:
        out = flatten_outputs(km.reference_fn(*args))
        synchronize()
    except Exception as exc:  # noqa: BLE001 - no dtype check then
        if is_cuda_fatal(exc):
            raise ContextPoisoned(str(exc)) from exc
        return None, set()
    return out, aliased_outputs(out, args)


def native_of(ref: Reference) -> list[Any]:
    """reference_fn on the inputs' own dtype ([] when it was not run)."""
    return [] if ref.native is None else ref.native.tensors


def rounded_of(ref: Reference) -> list[Any]:
    """reference_fn in float64 on the inputs rounded once more ([] when it was not run)."""
    return [] if ref.rounded is None else ref.rounded.tensors


def on_cpu(outputs: Outputs) -> Outputs:
    return Outputs([t.cpu() for t in outputs.tensors], outputs.names)


def sampled_case(case: Case, out: Outputs, ref: Reference, notes: list[str], messages: list[str] | None = None,
                 phase: str = "") -> CaseData:
    """A case too big to hand over whole, for the judge: a random sample of each output and its references,
    with the whole outputs' shapes and NaN counts (handoff.CaseData.sample); counted on the host where the
    device has no memory left for it."""
    start = time.perf_counter()
    out = in_order_of(out, ref.outputs.names)  # the sample pairs outputs by position
    data = CaseData(case_index=case.index, label=case.label, names=out.names, messages=list(messages or []),
                    notes=([ref.note] if ref.note else []) + notes, phase=phase,
                    reference_names=ref.outputs.names)
    try:
        data.sample(out.tensors, ref.outputs.tensors, native=native_of(ref), rounded=rounded_of(ref))
    except torch.cuda.OutOfMemoryError:  # the whole-output NaN count: on the host instead
        torch.cuda.empty_cache()
        data.sample(on_cpu(out).tensors, on_cpu(ref.outputs).tensors,
                    native=native_of(ref) and on_cpu(ref.native).tensors,
                    rounded=rounded_of(ref) and on_cpu(ref.rounded).tensors)
    data.duration_s = time.perf_counter() - start
    return data
