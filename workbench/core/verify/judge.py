"""The verdict on one case, given what the kernel's process handed over (verify/handoff.py).

Where this runs (threat model)
------------------------------
kernel.py is user code, and users include people and programs iterating fast: a kernel.py that
monkeypatches ``torch.allclose``, ``torch.testing.assert_close``, ``torch.Tensor.__eq__``, this
package's compare or battery modules, or ``builtins`` at import time must not turn a wrong result
into a pass. So the verdict is not given in the process that imports kernel.py.

The worker process (run/child/worker.py) imports torch and then forks *before* anything else: the child
is the judge (run/child/judge_process.py). It never imports kernel.py or triton, owns the only channel
to the parent (the worker's stdout), reads the job (and so the project's config and tolerances)
itself, and is the only process that can produce a CaseResult. The kernel's process runs
kernel_fn and reference_fn and hands each case's tensors over a pipe (outputs of both runs, the
reference's, the inputs before and after, the extra calls); the judge compares them here with
its own torch and this module. A CaseResult event the kernel's process writes itself is turned
into an error; whatever it reports as skipped or errored is never a pass.

Defended: patching torch, the workbench's modules or builtins in the kernel's process; tensor
subclasses and torch function modes that answer for an output (packing runs under
DisableTorchFunction with C methods bound before kernel.py was imported; a subclass output fails);
forged verdicts, tolerances or config.

Not defended: code written against the hand-off itself (rewriting its captured functions or its
frames, walking the garbage collector to them); torch dispatch modes pushed through private
torch._C APIs, or ctypes writes into memory; reaching the judge through the OS (ptrace,
/proc/<pid>/fd, signals); a reference_fn that is wrong, or CASES that leave out what fails (both
are the project's own statements); which cases the kernel's process runs and what it reports as
skipped (never a pass, but a case it leaves out is not judged); the launch count, the aliasing
facts and the NaN/sentinel prefill, which happen in the kernel's process; for a benchmark-sized
case, which elements are drawn for the judge (see handoff.CaseData.sample: drawn with the bound
functions, from os.urandom, so patching torch does not choose them) and the whole-output NaN count;
the benchmark's recheck after timing (compared in the kernel's process; only a failure reaches the
judge, and a recheck that lies can only post a time). Against those, read the diff of kernel.py.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from math import prod
from typing import Any

import torch

from ..events import CaseResult
from ..project.config import Tolerance, VerifyConfig
from .checks import decide
from .compare import Comparison, compare, tensors_equal_bitwise, unravel
from .handoff import CaseData
from .structure import output_label, paired_by_name
from .torchops import AUTOGRAD, base_name
from .large_index import LARGE_INDEX
from .large_index import NOTE as LARGE_INDEX_NOTE
from .value_stress import stress_note

NO_TRITON = ("no Triton kernel launched: kernel_fn ran no @triton.jit kernel (a torch computation, or "
             "reference_fn?); set [verify] require_triton = false if that is intended")
TF32_HINT = ("errors consistent with TF32 (tl.dot's default input_precision): pass input_precision='ieee' for "
             "float32 accuracy, or accept TF32 with `[verify] fp32_precision = \"tf32\"`")
LOW_PRECISION = (torch.float16, torch.bfloat16)
# A reference that had to run in the inputs' own 16-bit dtype (a benchmark shape too big for float32)
# carries rounding errors of the kernel's size: the tolerances widen by this factor, and the verdict says so.
LOW_PRECISION_REFERENCE_FACTOR = 2.0
WEAK_MIN_ELEMENTS = 8  # fewer elements than this cannot be called "all zeros" by design rather than chance


@dataclass
class Judge:
    """Gives CaseResults; remembers the reference outputs seen so far to spot identical ones."""

    config: VerifyConfig
    seen_references: dict[str, str] = field(default_factory=dict)  # digest -> label of the first case

    def judge(self, data: CaseData, weak_inputs: bool = True) -> CaseResult:
        """The verdict on one case. `weak_inputs`: also warn about inputs that prove nothing (a digest of
        the whole reference: the recheck of a benchmark-sized output skips it)."""
        start = time.perf_counter()
        result = CaseResult(case_index=data.case_index, label=data.label, status="passed", config=data.config,
                            notes=list(data.notes), generated=data.generated, launches=data.launches,
                            checks=dict(data.checks), phase=data.phase, warnings=list(data.warnings))
        if data.status in ("error", "skipped"):
            result.status = data.status
            result.messages = list(data.messages)
            result.duration_s = data.duration_s
            return result
        result.messages = list(data.messages)
        self._outputs(result, data)
        self._tf32_hint(result, data)
        mutated = self._inputs(result, data)
        self._launches(result, data)
        self._out_of_bounds(result, data)
        self._torch_ops(result, data)
        self._extra_runs(result, data)
        self._plugin_checks(result, data)
        if weak_inputs and not data.config and not data.generated and not data.sampled_from:
            self._weak_inputs(result, data)
        result.status = "failed" if result.messages else "passed"
        if result.status == "failed" and mutated:
            result.notes += data.mutation_hints
        if result.status == "failed" and data.stress == LARGE_INDEX:
            result.notes.append(LARGE_INDEX_NOTE)
        elif result.status == "failed" and data.stress:
            result.notes.append(stress_note(data.stress, overflow=result.checks.get("nan") == "failed"))
        result.duration_s = data.duration_s + (time.perf_counter() - start)
        return result

    # -- the outputs of the two runs against the reference ------------------------------

    def _outputs(self, result: CaseResult, data: CaseData) -> None:
        first, second, ref = data.first, data.second or data.first, data.reference
        result.dtype = main_dtype(data.before, first)
        order, problems = paired_by_name(data.names, data.reference_names, len(first), len(ref))
        if problems:
            result.messages += problems
            result.checks["structure"] = "failed"
        for i in data.not_plain:
            result.messages.append(f"output{data.names[i]} is a torch.Tensor subclass, not a plain tensor: "
                                   "return the tensor the kernel wrote")
            result.checks["structure"] = "failed"
        several = len(ref) > 1
        for j, i in enumerate(order):
            if i is None:
                continue  # missing: the structure message names it
            out, out2, expected = first[i], second[i], ref[j]
            name = data.names[i] if i < len(data.names) else f"[{i}]"
            prefix = f"output{name}: " if several else ""
            got_dtype = dtype_name(out)
            want_dtype = data.expected_dtypes[j] if j < len(data.expected_dtypes) else ""
            if want_dtype and got_dtype != want_dtype:
                result.messages.append(f"{prefix}dtype {got_dtype}, expected {want_dtype} (reference_fn's on the "
                                       "same inputs)")
                result.checks["dtype"] = "failed"
            got_shape = tuple(data.output_shapes[i]) if i < len(data.output_shapes) else tuple(out.shape)
            want_shape = tuple(data.reference_shapes[j]) if j < len(data.reference_shapes) else tuple(expected.shape)
            if got_shape != want_shape:
                result.messages.append(f"{prefix}shape {got_shape}, expected {want_shape}"
                                       + (" (it only broadcasts to it)" if broadcasts(got_shape, want_shape) else ""))
                result.checks["shape"] = "failed"
                result.numel += prod(want_shape)
                result.bad_count += prod(want_shape)
                continue
            tol = self.config.tolerance_for(got_dtype)
            if tol is None:
                result.messages.append(prefix + no_tolerance(got_dtype))
                result.checks["tolerance"] = "failed"
                continue
            if expected.dtype in LOW_PRECISION:
                tol = Tolerance(tol.rtol * LOW_PRECISION_REFERENCE_FACTOR, tol.atol * LOW_PRECISION_REFERENCE_FACTOR,
                                tol.rel_norm * LOW_PRECISION_REFERENCE_FACTOR)
                note = (f"tolerances multiplied by {LOW_PRECISION_REFERENCE_FACTOR:g}: the reference ran in "
                        f"{dtype_name(expected)}")
                if note not in result.notes:
                    result.notes.append(note)
            unwritten = unwritten_mask(out, out2) if data.second else None
            cmp = self._compare(out, expected, own_error_of(data, j), tol, unwritten)
            result.compared.append(compared_entry(output_label(name), got_dtype, cmp, tol))
            result.messages += [prefix + m for m in cmp.messages]
            if cmp.unwritten:
                result.checks["unwritten"] = "failed"
            if data.sampled_from and i < len(data.nan_where_reference_has_none) \
                    and data.nan_where_reference_has_none[i]:  # the whole output's count, wherever the sample fell
                result.messages.append(f"{prefix}{data.nan_where_reference_has_none[i]} NaN where the reference "
                                       "has a number, counted over the whole output (elements never written?)")
                cmp.nan_mismatch = True
            if cmp.nan_mismatch:
                result.checks["nan"] = "failed"
            if cmp.messages and not cmp.unwritten and not cmp.nan_mismatch:
                result.checks["values"] = "failed"
            result.numel += cmp.numel
            result.bad_count += cmp.bad_count
            result.rtol, result.atol = tol.rtol, tol.atol
            result.max_abs_err = _max(result.max_abs_err, cmp.max_abs_err)
            result.max_rel_err = _max(result.max_rel_err, cmp.max_rel_err)
            result.rel_norm_err = _max(result.rel_norm_err, cmp.rel_norm_err)
            index = data.sample_index[i] if i < len(data.sample_index) else None
            if index is not None:  # a sample: the worst element's place in the whole output; no map of a sample
                if cmp.worst is not None:
                    cmp.worst.index = unravel(int(index[cmp.worst.index[0]]), got_shape)
                cmp.error_map = None
                cmp.pattern = f"{cmp.bad_count:,} of {cmp.numel:,} elements drawn at random" if cmp.bad_count else ""
            if cmp.worst is not None and result.worst is None:
                result.worst, result.pattern, result.error_map, result.output = cmp.worst, cmp.pattern, \
                    cmp.error_map, name
            if data.second and out.shape == out2.shape and not cmp.unwritten:
                differ = int((~tensors_equal_bitwise(out, out2)).sum())
                if differ:
                    text = f"{prefix}nondeterministic: {differ} elements differ bit for bit between two runs"
                    if self.config.deterministic:
                        result.messages.append(text)
                        result.checks["deterministic"] = "failed"
                    else:
                        result.notes.append(text)
        if data.sampled_from:
            drawn = max(index.numel() for index in data.sample_index if index is not None)
            result.notes.append(f"judged on {drawn:,} elements drawn at random from up to "
                                f"{data.sampled_from:,} per output; NaN counted over every element")
        for check in ("values", "unwritten", "nan", "dtype", "shape", "structure"):
            result.checks.setdefault(check, "passed")

    def _tf32_hint(self, result: CaseResult, data: CaseData) -> None:
        """A float32 output that fails float32's tolerance but would pass TF32's, from a kernel whose tl.dot
        multiplies in TF32 by default: the failure stands, and says what it most likely is."""
        tf32, fp32 = self.config.tolerance_for("tf32"), self.config.tolerance_for("float32")
        if not data.dot_may_use_tf32 or self.config.fp32_precision == "tf32" or tf32 is None or fp32 is None \
                or result.checks.get("values") != "failed":
            return
        order, _ = paired_by_name(data.names, data.reference_names, len(data.first), len(data.reference))
        for j, i in enumerate(order):
            if i is None:
                continue
            out, expected = data.first[i], data.reference[j]
            if dtype_name(out) != "float32" or out.shape != expected.shape:
                continue
            own = own_error_of(data, j)
            if self._compare(out, expected, own, fp32).passed \
                    or not self._compare(out, expected, own, tf32).passed:
                continue
            name = data.names[i] if i < len(data.names) else f"[{i}]"
            result.messages.append((f"output{name}: " if len(data.reference) > 1 else "") + TF32_HINT)

    def _inputs(self, result: CaseResult, data: CaseData) -> list[str]:
        """The input and aliasing checks; returns the inputs the kernel changed ("#1"), declared or not."""
        mutated = [f"#{i}" for i, (now, before) in enumerate(zip(data.after, data.before))
                   if now is not None and before is not None
                   and (now.shape != before.shape or not bool(tensors_equal_bitwise(now, before).all()))]
        if mutated and not self.config.inplace:
            result.messages.append(f"input {', '.join(mutated)} changed by the kernel "
                                   "(declare [verify] inplace = true if that is intended)")
            result.checks["mutated_input"] = "failed"
        if data.aliases and not self.config.inplace:
            result.messages += [f"{alias}: the output shares the input's memory (return a new tensor, or declare "
                                "[verify] inplace = true)" for alias in data.aliases]
            result.checks["aliasing"] = "failed"
        result.checks.setdefault("mutated_input", "passed" if not self.config.inplace else "skipped: inplace = true")
        result.checks.setdefault("aliasing", "passed" if not self.config.inplace else "skipped: inplace = true")
        return mutated

    def _launches(self, result: CaseResult, data: CaseData) -> None:
        if data.launches is None:
            return
        if data.launches == 0:
            if self.config.require_triton:
                result.messages.insert(0, NO_TRITON)
                result.checks["triton_launched"] = "failed"
            else:
                result.notes.append("no Triton kernel launched (require_triton = false)")
                result.checks["triton_launched"] = "skipped: require_triton = false"
        else:
            result.checks["triton_launched"] = "passed"

    def _out_of_bounds(self, result: CaseResult, data: CaseData) -> None:
        """Stores the guard margins caught (verify/guards.py)."""
        if "out_of_bounds" in result.checks:
            return  # skipped, and said why
        if data.out_of_bounds:
            result.messages[:0] = data.out_of_bounds
            result.checks["out_of_bounds"] = "failed"
        else:
            result.checks["out_of_bounds"] = "passed"

    def _torch_ops(self, result: CaseResult, data: CaseData) -> None:
        """Outputs torch computed, with no Triton kernel's data in them (verify/torchops.py)."""
        if data.config or data.phase:
            return  # followed in the case's second call only
        if data.torch_ops_unknown:
            result.checks["torch_ops"] = f"skipped: {data.torch_ops_unknown}"
            return
        if data.launches == 0:
            return  # "no Triton kernel launched" says it
        if self.config.allow_torch_ops is True or not self.config.require_triton:
            result.checks["torch_ops"] = "skipped: " + ("allow_torch_ops = true" if self.config.allow_torch_ops is True
                                                        else "require_triton = false")
            return
        found = []
        for line in data.torch_ops:
            output, _, ops = line.partition(": ")
            refused = [op for op in ops.split(", ") if op and not allows_torch_op(self.config, op)]
            if refused:
                found.append((output, refused))
        if not found:
            result.checks["torch_ops"] = "passed" if data.launches is not None else "skipped: not followed"
            return
        gradients = [output for output, refused in found if refused == [AUTOGRAD]]
        found = [(output, refused) for output, refused in found if refused != [AUTOGRAD]]
        if gradients:
            result.messages.append(
                f"{', '.join(gradients)}: torch autograd computed {'it' if len(gradients) == 1 else 'them'}: the "
                "backward launched no Triton kernel and read nothing a Triton kernel wrote in the forward (give the "
                "torch.autograd.Function a backward that launches Triton kernels, or save for it the gradient a "
                f'forward kernel writes); if torch is meant to, [verify] allow_torch_ops = ["{AUTOGRAD}"]')
        if found:
            ops = sorted({op for _, refused in found for op in refused})
            where = "; ".join(f"{output} with {', '.join(refused)}" for output, refused in found)
            allow = ", ".join(f'"{op}"' for op in ops)
            result.messages.append(f"kernel_fn computed with torch ops: {where} (no Triton kernel wrote any of it); "
                                   f"if torch is meant to, [verify] allow_torch_ops = [{allow}]")
        result.checks["torch_ops"] = "failed"

    def _extra_runs(self, result: CaseResult, data: CaseData) -> None:
        first_call_failed = bool(result.messages)
        for run in data.extra_runs:
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
                self._compat_finding(result, run, "")
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
                    tol = self.config.tolerance_for(dtype_name(out))
                    if tol is None:
                        problems.append(no_tolerance(dtype_name(out)))
                        continue
                    name = run.names[i] if several and i < len(run.names) else ""
                    cmp = self._compare(out, expected, own_error_of(run, j), tol)
                    problems += [f"output{name}: {m}" if name else m for m in cmp.messages]
                problem = f"{problems[0]} ({run.hint})" if problems and run.hint else (problems[0] if problems else "")
            if run.compat:
                self._compat_finding(result, run, problem)
            elif problem:
                result.messages.append(f"{run.name}: {problem}")
                result.checks[run.name] = "failed"
            else:
                result.checks[run.name] = "passed"

    @staticmethod
    def _plugin_checks(result: CaseResult, data: CaseData) -> None:
        """The checks plugins add (verify/checks.py), decided here from the evidence the kernel's process gathered."""
        for key, (target, status, evidence) in data.plugin_evidence.items():
            message = decide(target, status, evidence)
            result.checks[key] = "failed" if message else "passed"
            if message:
                result.messages.append(f"{key}: {message}")

    def _compare(self, out: torch.Tensor, expected: torch.Tensor, own: tuple[Any, Any], tol: Tolerance,
                 unwritten: torch.Tensor | None = None) -> Comparison:
        """Every comparison the judge makes goes through here: one error model (verify/error_model.py). `own`:
        (native, rounded), the results that measure the dtype's own error (own_error_of)."""
        native, rounded = own
        return compare(out, expected, tol, unwritten, native, self.config.error_factor, rounded)

    @staticmethod
    def _compat_finding(result: CaseResult, run: Any, problem: str) -> None:
        """A compatibility check's outcome: a finding of its own (CaseResult.compat), which fails the case only
        when the project requires it; otherwise the check says "warning"."""
        error = problem if not run.detail or run.detail in problem else f"{problem}\n{run.detail}"
        result.compat[run.name] = {"status": "failed" if problem else "passed", "required": run.required,
                                   "error": error if problem else "", "key": run.key}
        if not problem:
            result.checks[run.name] = "passed"
        elif run.required:
            result.messages.append(f"{run.name}: {problem}")
            result.checks[run.name] = "failed"
        else:
            result.checks[run.name] = "warning"

    # -- inputs that prove nothing ----------------------------------------------------

    def _weak_inputs(self, result: CaseResult, data: CaseData) -> None:
        warnings = []
        tensors = [t for t in data.before if t is not None and t.numel() >= WEAK_MIN_ELEMENTS]
        if tensors and all(is_constant(t) for t in tensors):
            warnings.append("every input is constant (all elements equal): such inputs prove little; "
                            "use random values in get_inputs")
        big = [t for t in data.reference if t.numel() >= WEAK_MIN_ELEMENTS]
        if big and all(not bool(torch.any(t != 0)) for t in big):
            warnings.append("the reference output is all zeros: a kernel that writes nothing but zeros passes")
        if data.reference and not warnings:
            digest = reference_digest(data.reference)
            first = self.seen_references.setdefault(digest, data.label)
            if first != data.label:
                warnings.append(f"the reference output is identical to case {first}'s: the cases test the same thing")
        if warnings:
            result.warnings += warnings
            result.checks["inputs"] = "warning"
        else:
            result.checks["inputs"] = "passed"


def own_error_of(holder: Any, j: int) -> tuple[Any, Any]:
    """(native, rounded) of reference output j of a CaseData or an ExtraRun: reference_fn on the inputs' own dtype
    and in float64 on them rounded once more (None where it has none)."""
    return (holder.native[j] if j < len(holder.native) else None,
            holder.rounded[j] if j < len(holder.rounded) else None)


def judge_outputs(config: VerifyConfig, case_index: int, label: str, outputs: list[Any], names: list[str],
                  reference: list[Any], native: list[Any] | None = None,
                  reference_names: list[str] | None = None, rounded: list[Any] | None = None) -> CaseResult:
    """Outputs of one call against the reference, in this process: for rechecks that are reported, never
    the verdict (no weak-input checks: those hash the whole reference)."""
    data = CaseData(case_index=case_index, label=label, first=outputs, names=names, reference=reference,
                    native=list(native or []), reference_names=list(reference_names or []),
                    rounded=list(rounded or []))
    return Judge(config).judge(data, weak_inputs=False)


def compared_entry(output: str, dtype: str, cmp: Comparison, tol: Tolerance) -> dict[str, Any]:
    """What was compared for one output and by how much (CaseResult.compared)."""
    return {"output": output, "dtype": dtype, "passed": not cmp.messages, "max_abs_err": cmp.max_abs_err,
            "torch_error": cmp.torch_error, "torch_dtype": cmp.torch_dtype, "source": cmp.torch_source,
            "multiple": cmp.multiple, "factor": cmp.factor, "rtol": tol.rtol, "atol": tol.atol}


def is_constant(t: torch.Tensor) -> bool:
    flat = t.reshape(-1)
    return bool(tensors_equal_bitwise(flat, flat[:1].expand_as(flat)).all())


def reference_digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha1()
    for t in tensors:
        c = t.detach().contiguous().cpu()
        h.update(f"{c.dtype}{tuple(c.shape)}".encode())
        if c.numel():
            h.update(c.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def broadcasts(got: tuple[int, ...], expected: tuple[int, ...]) -> bool:
    try:
        return tuple(torch.broadcast_shapes(got, expected)) == tuple(expected)
    except RuntimeError:
        return False


def no_tolerance(dtype: str) -> str:
    """Why an output of `dtype` cannot be judged: no tolerance for it (project/config.DEFAULT_TOLERANCES)."""
    return (f"no tolerance for {dtype} outputs: the workbench has no default for {dtype}; give one in "
            f"workbench.toml ([tolerance.{dtype}] rtol, atol, rel_norm)")


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def allows_torch_op(config: VerifyConfig, name: str) -> bool:
    """torch.add is allowed by allow_torch_ops = true, ["torch.add"], ["add"], ["add_"] or ["aten.add"]."""
    if isinstance(config.allow_torch_ops, bool):
        return config.allow_torch_ops
    return any(allowed == name or base_name(allowed) == base_name(name) for allowed in config.allow_torch_ops)


def main_dtype(inputs: list[Any], outputs: list[torch.Tensor]) -> str:
    tensors = list(outputs) + [x for x in inputs if isinstance(x, torch.Tensor)]
    for t in tensors:
        if t.is_floating_point():
            return dtype_name(t)
    for t in outputs:
        return dtype_name(t)
    return ""


def unwritten_mask(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor | None:
    """Elements still holding the poison of both runs (NaN, then the sentinel): never written."""
    if not first.is_floating_point() or first.shape != second.shape:
        return None
    sentinel = float(torch.finfo(first.dtype).max)
    return torch.isnan(first) & (second == sentinel)


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)
