"""The verification battery (DESIGN.md "Verification: what passed means").

Runs inside a worker. For every case: fresh random inputs, the reference on
upcast inputs, the kernel's own allocations poisoned (NaN first, a sentinel
second) so unwritten elements show, NaN/Inf positions compared, inputs checked
unchanged, a second run compared bit for bit, and every config of every
autotuned kernel forced in turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..events import CaseResult, Event, Problem, StageChanged
from ..project.config import VerifyConfig
from ..project.contract import (
    Case,
    KernelModule,
    describe_config,
    find_autotuners,
    is_compilation_error,
    kernel_frame,
    problem_from_exception,
    root_cause,
    select_cases,
)
from ..stage import ContextPoisoned, RunAborted, is_cuda_fatal, shard_of
from .compare import compare, tensors_equal_bitwise
from .interpreter_fixes import OutOfBoundsAccess
from .torchmodes import PrefillEmpty

Emit = Callable[[Event], None]



@dataclass
class Outputs:
    tensors: list[torch.Tensor]
    names: list[str]


def flatten_outputs(value: Any, prefix: str = "") -> Outputs:
    if isinstance(value, torch.Tensor):
        return Outputs([value], [prefix])
    if isinstance(value, (list, tuple)):
        tensors, names = [], []
        for i, item in enumerate(value):
            sub = flatten_outputs(item, f"{prefix}[{i}]")
            tensors += sub.tensors
            names += sub.names
        return Outputs(tensors, names)
    if isinstance(value, dict):
        tensors, names = [], []
        for key, item in value.items():
            sub = flatten_outputs(item, f"{prefix}[{key!r}]")
            tensors += sub.tensors
            names += sub.names
        return Outputs(tensors, names)
    if value is None:
        return Outputs([], [])
    return Outputs([torch.as_tensor(value)], [prefix])


@dataclass
class Reference:
    outputs: Outputs
    precision: str  # float64 | float32 | native
    note: str = ""


def cast_floats(inputs: list[Any], dtype: torch.dtype) -> list[Any]:
    return [x.detach().to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def clone_inputs(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def main_dtype(inputs: list[Any], outputs: list[torch.Tensor]) -> str:
    for t in outputs + [x for x in inputs if isinstance(x, torch.Tensor)]:
        if t.is_floating_point():
            return str(t.dtype).replace("torch.", "")
    for t in outputs:
        return str(t.dtype).replace("torch.", "")
    return ""


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Verifier:
    def __init__(self, km: KernelModule, config: VerifyConfig, emit: Emit, interpret: bool,
                 pins: dict[str, int] | None = None):
        self.km, self.config, self.emit, self.interpret = km, config, emit, interpret
        self.autotuners = find_autotuners(km.module)
        self.pins = pins or {}
        for name, index in self.pins.items():
            tuner = self.autotuners.get(name)
            if tuner is not None and 0 <= index < len(tuner.configs):
                tuner.configs = [tuner.configs[index]]
        if interpret:
            self._quiet_autotuners_for_interpreter()

    def _quiet_autotuners_for_interpreter(self) -> None:
        # The interpreter has no timer: every config "takes" the same time, so
        # the tuner keeps its first config. Each config is still verified below.
        for tuner in self.autotuners.values():
            tuner.__dict__["do_bench"] = lambda kernel_call, quantiles=None: [0.0, 0.0, 0.0]

    # -- running user code ------------------------------------------------------------

    def _call_kernel(self, inputs: list[Any], fill: str, case: Case, config_label: str) -> Any:
        try:
            with PrefillEmpty(fill):
                out = self.km.kernel_fn(*inputs)
            synchronize()
            return out
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - user code
            if is_cuda_fatal(exc):
                self.emit(problem_from_exception("crash", exc, self.km.path, "the kernel crashed the GPU context",
                                                 case.index))
                raise ContextPoisoned(str(exc)) from exc
            if self._is_compile_error(exc) and not config_label:
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

    def _inputs(self, case: Case) -> list[Any]:
        try:
            inputs = self.km.get_inputs(**case.params)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001
            self.emit(problem_from_exception("inputs", exc, self.km.path, f"get_inputs({case.label}) raised",
                                             case.index))
            raise RunAborted() from exc
        if isinstance(inputs, tuple):
            inputs = list(inputs)
        if not isinstance(inputs, list):
            self.emit(Problem(kind="contract", file=str(self.km.path), case_index=case.index,
                              message=f"get_inputs({case.label}) returned {type(inputs).__name__}; expected a list"))
            raise RunAborted()
        return inputs

    def reference(self, inputs: list[Any], case: Case) -> "Reference":
        """reference_fn on upcast inputs: float64, else float32 (a reference that refuses float64,
        or a benchmark shape too big for it), else the inputs' own dtype; the note says which."""
        notes = []
        for dtype in (torch.float64, torch.float32):
            try:
                out = self.km.reference_fn(*cast_floats(inputs, dtype))
                synchronize()
                note = f"reference_fn ran in float32 ({'; '.join(notes)})" if notes else ""
                return Reference(flatten_outputs(out), str(dtype).replace("torch.", ""), note)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                notes.append(f"{str(dtype).replace('torch.', '')} ran out of GPU memory")
            except Exception as exc:  # noqa: BLE001 - some references refuse float64; try the next precision
                if is_cuda_fatal(exc):
                    raise ContextPoisoned(str(exc)) from exc
                notes.append(f"{str(dtype).replace('torch.', '')} failed: {type(exc).__name__}")
        try:
            out = self.km.reference_fn(*clone_inputs(inputs))
            synchronize()
        except Exception as exc:  # noqa: BLE001
            if is_cuda_fatal(exc):
                raise ContextPoisoned(str(exc)) from exc
            self.emit(problem_from_exception("reference", exc, self.km.path,
                                             f"reference_fn raised on case {case.label}", case.index))
            raise RunAborted() from exc
        return Reference(flatten_outputs(out), "native",
                         f"reference_fn ran in the inputs' own dtype ({'; '.join(notes)})")

    # -- one case -----------------------------------------------------------------------

    def verify_case(self, case: Case) -> list[CaseResult]:
        start = time.perf_counter()
        inputs = self._inputs(case)
        limit = self.config.interpret_max_elements
        # The plain contract's only case always runs; among many, the interpreter skips the huge ones.
        if self.interpret and len(self.km.cases) > 1 and input_elements(inputs) > limit:
            return [CaseResult(case_index=case.index, label=case.label, status="skipped",
                               notes=[f"inputs hold more than {limit} elements: too large for the interpreter "
                                      "([verify] interpret_max_elements)"])]
        originals = clone_inputs(inputs)
        reference = self.reference(inputs, case)
        ref, ref_note = reference.outputs, reference.note
        results = []
        base = CaseResult(case_index=case.index, label=case.label, status="passed", dtype=main_dtype(inputs, []))
        if ref_note:
            base.notes.append(ref_note)
        try:
            first = flatten_outputs(self._call_kernel(inputs, "nan", case, ""))
        except (RunAborted, ContextPoisoned):
            raise
        except BaseException as exc:  # noqa: BLE001
            results.append(self._error_result(base, exc, start))
            return results
        mutated = self._mutated_inputs(inputs, originals)
        if mutated and not self.config.inplace:
            base.messages.append(f"input {', '.join(mutated)} changed by the kernel "
                                 "(declare [verify] inplace = true if that is intended)")
        if mutated:
            restore_inputs(inputs, originals)
        try:
            second = flatten_outputs(self._call_kernel(inputs, "sentinel", case, ""))
        except (RunAborted, ContextPoisoned):
            raise
        except BaseException as exc:  # noqa: BLE001
            results.append(self._error_result(base, exc, start, "second run"))
            return results
        verdict = self._judge(base, inputs, first, second, ref, start)
        if mutated and verdict.status == "failed":
            verdict.notes += autotune_mutation_hints(self.autotuners)
        results.append(verdict)
        results += self._verify_each_config(case, inputs, originals, ref)
        return results

    def _judge(self, base: CaseResult, inputs: list[Any], first: Outputs, second: Outputs, ref: Outputs,
               start: float) -> CaseResult:
        result = base
        result.dtype = main_dtype(inputs, first.tensors)
        if len(first.tensors) != len(ref.tensors):
            result.messages.append(f"kernel_fn returned {len(first.tensors)} tensors, "
                                   f"reference_fn {len(ref.tensors)}")
        for i, (out, out2, expected) in enumerate(zip(first.tensors, second.tensors, ref.tensors)):
            name = first.names[i]
            tol = self.config.tolerance_for(str(out.dtype).replace("torch.", ""))
            unwritten = unwritten_mask(out, out2)
            cmp = compare(out, expected, tol, unwritten)
            prefix = f"output{name}: " if len(first.tensors) > 1 else ""
            result.messages += [prefix + m for m in cmp.messages]
            result.numel += cmp.numel
            result.bad_count += cmp.bad_count
            result.rtol, result.atol = tol.rtol, tol.atol
            result.max_abs_err = _max(result.max_abs_err, cmp.max_abs_err)
            result.max_rel_err = _max(result.max_rel_err, cmp.max_rel_err)
            result.rel_norm_err = _max(result.rel_norm_err, cmp.rel_norm_err)
            if cmp.worst is not None and result.worst is None:
                result.worst, result.pattern, result.error_map, result.output = cmp.worst, cmp.pattern, \
                    cmp.error_map, name
            if out.shape == out2.shape and not cmp.unwritten:
                differ = int((~tensors_equal_bitwise(out, out2)).sum())
                if differ:
                    text = f"{prefix}nondeterministic: {differ} elements differ bit for bit between two runs"
                    (result.messages if self.config.deterministic else result.notes).append(text)
        result.status = "failed" if result.messages else "passed"
        result.duration_s = time.perf_counter() - start
        return result

    def _verify_each_config(self, case: Case, inputs: list[Any], originals: list[Any],
                            ref: Outputs) -> list[CaseResult]:
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
                    base = CaseResult(case_index=case.index, label=case.label, status="passed", config=label)
                    try:
                        out = flatten_outputs(self._call_kernel(inputs, "nan", case, label))
                    except ContextPoisoned:
                        raise
                    except BaseException as exc:  # noqa: BLE001
                        results.append(self._error_result(base, exc, start))
                        continue
                    # No second run per config: unwritten elements show as NaN mismatches.
                    results.append(self._judge(base, inputs, out, out, ref, start))
            finally:
                tuner.configs = configs
                tuner.cache.clear()
        return results

    def _mutated_inputs(self, inputs: list[Any], originals: list[Any]) -> list[str]:
        changed = []
        for i, (now, before) in enumerate(zip(inputs, originals)):
            if isinstance(now, torch.Tensor) and not bool(tensors_equal_bitwise(now, before).all()):
                changed.append(f"#{i}")
        return changed

    def _error_result(self, base: CaseResult, exc: BaseException, start: float, when: str = "") -> CaseResult:
        problem = problem_from_exception("runtime", exc, self.km.path, "kernel_fn raised" + (f" ({when})" if when else ""))
        base.status = "error"
        base.messages.append(problem.message + (f" [{problem.location}]" if problem.line else ""))
        base.duration_s = time.perf_counter() - start
        return base


def autotune_mutation_hints(autotuners: dict[str, Any]) -> list[str]:
    """Why an in-place kernel can come out wrong only when autotuned, for each tuner that allows it."""
    return [f"the kernel changes its inputs and {name} is autotuned: the autotuner times each config by running "
            "it many times on the same tensors, changing them every time; list the arguments it writes in "
            "@triton.autotune(restore_value=[...])"
            for name, tuner in autotuners.items()
            if len(tuner.configs) > 1 and not getattr(tuner, "restore_value", None)
            and not getattr(tuner, "reset_to_zero", None)]


def unwritten_mask(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor | None:
    """Elements still holding the poison of both runs (NaN, then the sentinel): never written."""
    if not first.is_floating_point() or first.shape != second.shape:
        return None
    sentinel = float(torch.finfo(first.dtype).max)
    return torch.isnan(first) & (second == sentinel)


def restore_inputs(inputs: list[Any], originals: list[Any]) -> None:
    with torch.no_grad():
        for now, before in zip(inputs, originals):
            if isinstance(now, torch.Tensor):
                now.copy_(before)


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def run_verification(km: KernelModule, cases: list[Case], config: VerifyConfig, emit: Emit, interpret: bool,
                     pins: dict[str, int] | None = None) -> None:
    """Verify each case, emitting StageChanged before and CaseResult(s) after each."""
    verifier = Verifier(km, config, emit, interpret, pins)
    for n, case in enumerate(cases, 1):
        emit(StageChanged(stage="verifying", detail=case.label, current=n, total=len(cases), case_index=case.index))
        for result in verifier.verify_case(case):
            emit(result)


def input_elements(inputs: list[Any]) -> int:
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))


def verify_stage(context: Any) -> None:
    """Worker stage "verify" (see worker.STAGES)."""
    indices = context.job.case_indices
    unknown = sorted(set(indices or []) - {c.index for c in context.km.cases})
    if unknown:
        context.emit(Problem(kind="inputs", file=str(context.km.path),
                             message=f"no case {', '.join(map(str, unknown))} in CASES "
                                     f"(it has {len(context.km.cases)}: 0..{len(context.km.cases) - 1})"))
        raise RunAborted()
    cases = shard_of(select_cases(context.km.cases, indices, "verify"), context.job.options.get("shard"))
    run_verification(context.km, cases, context.config.verify, context.emit, context.interpret, context.job.pins)
