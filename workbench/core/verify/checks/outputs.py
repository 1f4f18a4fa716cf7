"""The outputs of the case's two calls against the reference: the checks one comparison decides together.

Gathered by the battery for every case (battery.Verifier._verify_case): the outputs of the first call (kernel_fn's
allocations NaN-filled: torchmodes.PrefillEmpty) and of the second (sentinel-filled), reference_fn's on float64
inputs (references.upcast_reference) and on the inputs as given (references.native_reference: the dtypes
expected, torch's own error). Decided here through one error model (compare.compare, error_model.py).
"""

from __future__ import annotations

from math import prod
from typing import Any

import torch

from ...project.config import Tolerance
from ..compare import Comparison, tensors_equal_bitwise, unravel
from ..structure import output_label, paired_by_name
from .unit import Check, Unit, Verdict, dtype_name, no_tolerance, own_error_of

TF32_HINT = ("errors consistent with TF32 (tl.dot's default input_precision): pass input_precision='ieee' for "
             "float32 accuracy, or accept TF32 with `[verify] fp32_precision = \"tf32\"`")
LOW_PRECISION = (torch.float16, torch.bfloat16)
# A reference that had to run in the inputs' own 16-bit dtype (a benchmark shape too big for float32)
# carries rounding errors of the kernel's size: the tolerances widen by this factor, and the verdict says so.
LOW_PRECISION_REFERENCE_FACTOR = 2.0


class OutputsCompared(Unit):
    checks = (
        Check("structure", "the outputs' structure differs from reference_fn's (a missing or extra dict key, a tuple "
              "for a tensor, a tensor subclass)", "tensors.flatten_outputs"),
        Check("dtype", "an output's dtype differs from reference_fn's on the same inputs",
              "references.native_reference"),
        Check("shape", "an output's shape differs from the reference's"),
        Check("tolerance", "an output's dtype has no tolerance ([tolerance.<dtype>] in workbench.toml)",
              "project.config.VerifyConfig.tolerance_for"),
        Check("values", "an output is further from the float64 reference than the error model allows",
              "references.upcast_reference"),
        Check("unwritten", "an element kernel_fn never wrote (NaN on the first call, a sentinel on the second)",
              "torchmodes.PrefillEmpty"),
        Check("nan", "NaN or Inf where the reference has a number (or the reverse)"),
        Check("deterministic", "two calls on the same inputs differ (only with [verify] deterministic = true)"),
    )

    def decide(self, verdict: Verdict) -> None:
        self.outputs(verdict)
        self.tf32_hint(verdict)

    @staticmethod
    def outputs(verdict: Verdict) -> None:
        result, data, config = verdict.result, verdict.data, verdict.config
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
            tol = config.tolerance_for(got_dtype)
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
            cmp = verdict.compare(out, expected, own_error_of(data, j), tol, unwritten)
            result.messages += [prefix + m for m in cmp.messages]
            if cmp.unwritten:
                result.checks["unwritten"] = "failed"
            if data.sampled_from and i < len(data.nan_where_reference_has_none) \
                    and data.nan_where_reference_has_none[i]:  # the whole output's count, wherever the sample fell
                result.messages.append(f"{prefix}{data.nan_where_reference_has_none[i]} NaN where the reference "
                                       "has a number, counted over the whole output (elements never written?)")
                cmp.nan_mismatch = True
            result.compared.append(compared_entry(output_label(name), got_dtype, cmp, tol))
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
                    if config.deterministic:
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

    @staticmethod
    def tf32_hint(verdict: Verdict) -> None:
        """A float32 output that fails float32's tolerance but would pass TF32's, from a kernel whose tl.dot
        multiplies in TF32 by default: the failure stands, and says what it most likely is."""
        result, data, config = verdict.result, verdict.data, verdict.config
        tf32, fp32 = config.tolerance_for("tf32"), config.tolerance_for("float32")
        if not data.dot_may_use_tf32 or config.tf32 or tf32 is None or fp32 is None \
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
            if verdict.compare(out, expected, own, fp32).passed \
                    or not verdict.compare(out, expected, own, tf32).passed:
                continue
            name = data.names[i] if i < len(data.names) else f"[{i}]"
            result.messages.append((f"output{name}: " if len(data.reference) > 1 else "") + TF32_HINT)


UNIT = OutputsCompared()


def compared_entry(output: str, dtype: str, cmp: Comparison, tol: Tolerance) -> dict[str, Any]:
    """What was compared for one output and by how much (CaseResult.compared)."""
    return {"output": output, "dtype": dtype, "passed": not cmp.messages, "max_abs_err": cmp.max_abs_err,
            "torch_error": cmp.torch_error, "torch_dtype": cmp.torch_dtype, "source": cmp.torch_source,
            "multiple": cmp.multiple, "factor": cmp.factor, "rtol": tol.rtol, "atol": tol.atol,
            "non_finite": bool(cmp.nan_mismatch)}


def broadcasts(got: tuple[int, ...], expected: tuple[int, ...]) -> bool:
    try:
        return tuple(torch.broadcast_shapes(got, expected)) == tuple(expected)
    except RuntimeError:
        return False


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
