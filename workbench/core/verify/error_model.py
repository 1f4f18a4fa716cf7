"""The error model: how far from the float64 truth a correct kernel's output may be.

One rule for every comparison the judge makes (the verification call, repeat calls, forced configs, layouts,
the compatibility checks, gradients, generated cases, the benchmark's recheck). With `r` the reference_fn
result on float64-upcast inputs, `n` reference_fn on the inputs as given (torch doing the op in the inputs'
own dtype) and `o` the kernel's output, element i of a floating-point output passes when

    |o_i - r_i| <= max(floor_i, F * T_i)
    floor_i = atol * max(1, m) + rtol * |r_i|        the dtype's floor ([tolerance.<dtype>])
    T_i     = E * (|r_i| + m)                        the dtype's own error, scaled to element i
    E       = max(E_n, E_p)
    E_n     = max_j |n_j - r_j| / (|r_j| + m)        torch's largest error in this output, relative
    E_p     = spread_j |p_j - r_j| / (|r_j| + m)     the error one more rounding of the inputs makes
    m       = median_j |r_j|, |r_j| > u max|r|        the output's typical magnitude (u: the output dtype's
                                                     unit roundoff)

`p` is reference_fn in float64 on the inputs each rounded once more: every float element moved by a random
fraction of its dtype's unit roundoff (u = eps/2: 2^-11 in float16, 2^-8 in bfloat16, 2^-24 in float32).
torch keeps its intermediates in float32 and rounds once, at the end; a correct kernel that keeps a
statistic or a partial result in the inputs' dtype (a LayerNorm saving mean and rstd in float16, an input
cast before a product) rounds in the middle too, and what that costs is how sensitive the output is to its
inputs: a weight gradient summed over rows, a normalisation at an offset of 1000. E_p measures that sensitivity
with the op itself. Its spread is the largest relative error, but at most 4x the 99th percentile: an output
that jumps (a rounding step, an argmax) moves a whole step where the perturbation crosses it, and those few
elements must not become everyone's budget.

F is `[verify] error_factor` (2: FlashAttention's tests allow twice PyTorch's own error in the same precision).
atol is an absolute error for outputs of order 1; an output whose typical element is 4000 (a matmul of inputs
scaled by 64) is near zero at 40, so atol scales with m where m is above 1.

Why per output and not per element: the dtype's error is a draw of rounding, and at any one element it can be
zero where a kernel that rounds as accurately but in another order lands an ulp away; the largest error torch
makes anywhere in the output, scaled to each element's magnitude, is what the dtype lets a correct kernel
do. The median in the scale keeps elements near zero (a gradient that is a difference of near-equal terms)
from being held to a relative error of their own tiny size, without letting the few largest elements of a
wide-ranging output set everyone's budget. Its elements that are zero at the output's precision (below u times
its largest: exactly 0, or an exp that underflowed to 1e-170) are left out of the median: an output that is
mostly such zeros (a gradient of rows whose softmax is one-hot, a ReLU, a mask) has the typical magnitude of its
values, not ~0, so that its zeros are not held to the bare floor while torch, exact there by luck of rounding (a
weight that rounds to exactly 1), sets no budget. The error-norm bound follows
the same rule: the larger of the dtype's rel_norm and F times torch's own ||n - r|| / ||r||.

Integer and boolean outputs have no rounding to scale: an element passes when it equals the float64
reference's or the reference at the inputs' own precision (a quantiser rounding an exact .5 tie as torch
does in float32 is right; one that matches neither is not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..project.config import Tolerance
from .tensors import seeded_generator

DEFAULT_ERROR_FACTOR = 2.0


# E_p's spread: the largest relative error, but at most this many times its 99th percentile (see above)
SPREAD_OF_PERCENTILE = 4.0


@dataclass
class TorchError:
    """The dtype's own error in one output: per element (T_i above) and as numbers to report."""

    per_element: torch.Tensor  # T_i, float64, the output's shape
    absolute_max: float  # max_j |n_j - r_j| (or |p_j - r_j| where the rounded inputs set the budget)
    norm: float | None  # ||n - r|| / ||r|| over the elements above atol (None when too few)
    dtype: str  # the dtype torch computed in
    source: str = "torch"  # what set E: "torch" (E_n) or "inputs" (E_p, the inputs rounded once more)


def _relative(r: torch.Tensor, other: torch.Tensor | None, weight: torch.Tensor,
              spread: bool) -> tuple[float, float, torch.Tensor] | None:
    """(E, the largest absolute error, the per-element errors, 0 where either is not finite) of `other` against
    `r`; None when it is not a floating-point result of r's shape. `spread`: E capped at SPREAD_OF_PERCENTILE x
    its 99th percentile."""
    if other is None or not other.is_floating_point() or tuple(other.shape) != tuple(r.shape):
        return None
    o = other.detach().to(r.device, torch.float64)
    finite = torch.isfinite(r) & torch.isfinite(o)
    if not bool(finite.any()):
        return None
    err = torch.where(finite, (o - r).abs(), torch.zeros_like(r))
    positive = finite & (weight > 0)
    if not bool(positive.any()):
        return 0.0, float(err.max()), err
    rel = err[positive] / weight[positive]
    top = float(rel.max())
    if spread and rel.numel() >= 100:
        p99 = kth_smallest(rel, max(1, int(0.99 * rel.numel())))
        top = min(top, SPREAD_OF_PERCENTILE * p99)
    return top, float(err.max()), err


def torch_error(reference: torch.Tensor, native: torch.Tensor | None, significant: torch.Tensor | None = None,
                scale: float | None = None, rounded: torch.Tensor | None = None) -> TorchError | None:
    """The dtype's own error against the float64 `reference`: torch's in `native`'s dtype (E_n), or the
    error of the inputs rounded once more (`rounded`, E_p), whichever is larger. None when there is no native
    result to measure it by (reference_fn raised on the inputs as given, another shape, not floating-point), or
    torch's is NaN or infinite everywhere and there is no `rounded` result either. Elements where either is NaN or
    infinite count for nothing. `scale`: m (typical_magnitude), when the
    caller has it."""
    if native is None or not reference.is_floating_point() or not native.is_floating_point() \
            or tuple(native.shape) != tuple(reference.shape) or reference.numel() == 0:
        return None
    r = reference.detach().to(torch.float64)
    magnitude = torch.where(torch.isfinite(r), r.abs(), torch.zeros_like(r))
    weight = magnitude + (typical_magnitude(r, native.dtype) if scale is None else scale)
    own = _relative(r, native, weight, spread=False)
    by_inputs = _relative(r, rounded, weight, spread=True)
    measured = own is not None
    if own is None:  # torch overflowed (or gave NaN) at every element: what one more rounding costs still holds
        if by_inputs is None:
            return None
        own = (0.0, 0.0, torch.zeros_like(r))
    relative, absolute, err = own
    source = "torch"
    if by_inputs is not None and by_inputs[0] > relative:
        relative, absolute, source = by_inputs[0], by_inputs[1], "inputs"
    # Where the reference is exactly zero and so is the median (an output that is all zeros in exact
    # arithmetic), torch's error there is absolute: it bounds every element.
    positive = weight > 0
    zero_floor = float(err[~positive].max()) if bool((~positive).any()) else 0.0
    per_element = torch.clamp_min(relative * weight, zero_floor)
    errors = [err] if by_inputs is None else [err, by_inputs[2]]
    if significant is not None and measured:  # the elements where torch's result is finite too
        significant = significant & torch.isfinite(native.detach().to(r.device, torch.float64))
    norm = None if significant is None else _norm(r, errors, significant)
    return TorchError(per_element, absolute, norm, str(native.dtype).replace("torch.", ""), source)


def _norm(r: torch.Tensor, errors: list[torch.Tensor], significant: torch.Tensor) -> float | None:
    """The largest ||error|| / ||r|| over the `significant` elements where r is finite (torch's result too:
    the caller's mask); None when there are none or ||r|| is 0."""
    where = significant & torch.isfinite(r)
    if not bool(where.any()):
        return None
    ref_norm = float(torch.linalg.vector_norm(r[where]))
    if ref_norm <= 0:
        return None
    return max(float(torch.linalg.vector_norm(e[where])) for e in errors) / ref_norm


def typical_magnitude(r: torch.Tensor, dtype: torch.dtype | None = None) -> float:
    """m: the median |r_j| over the finite elements above u times the largest (0 when there are none), u the unit
    roundoff of the output's `dtype` (a floating-point one; else only exact zeros are left out): below it an
    element is, beside the largest, zero at the output's precision (an exp that underflowed in float64 to 1e-170
    where the kernel's dtype has 0)."""
    resolution = torch.finfo(dtype).eps / 2 if dtype is not None and dtype.is_floating_point else 0.0
    finite = r[torch.isfinite(r)].abs()
    if finite.numel():
        finite = finite[finite > resolution * float(finite.max())]
    return kth_smallest(finite, (finite.numel() + 1) // 2) if finite.numel() else 0.0  # torch's lower median


def kth_smallest(values: torch.Tensor, k: int) -> float:
    """The k-th smallest element (1-based) of a flat tensor. On a GPU by a sort: torch.kthvalue and median give
    a whole tensor to one thread block (a radix select of ~0.15 s over 16M float64 elements on an H100, where
    the sort takes milliseconds); on the CPU kthvalue's selection is the faster."""
    flat = values.reshape(-1)
    if flat.device.type == "cpu":
        return float(torch.kthvalue(flat, k).values)
    return float(torch.sort(flat).values[k - 1])


def floor_budget(r: torch.Tensor, tol: Tolerance, scale: float) -> torch.Tensor:
    """The dtype's floor: atol + rtol * |r_i|, atol taken relative to the output's typical magnitude `scale`
    (m) where that is above 1 (an output of values near 4000 is near zero at 40, not at 0.01)."""
    return tol.atol * max(1.0, scale) + tol.rtol * r.abs()


def element_budget(floor: torch.Tensor, torch_err: TorchError | None, factor: float) -> torch.Tensor:
    """Each element's allowed |o_i - r_i|: the larger of the dtype's floor (floor_budget) and F times torch's
    own error."""
    if torch_err is None:
        return floor
    return torch.maximum(floor, factor * torch_err.per_element)


def norm_budget(tol: Tolerance, torch_err: TorchError | None, factor: float) -> float:
    if torch_err is None or torch_err.norm is None:
        return tol.rel_norm
    return max(tol.rel_norm, factor * torch_err.norm)


def multiple_of_torch(diff: torch.Tensor, where: torch.Tensor, torch_err: TorchError | None) -> float | None:
    """The kernel's error as a multiple of torch's own: max_i |o_i - r_i| / T_i over the elements `where` says
    (None when there are none, or torch was exact at all of them)."""
    if torch_err is None:
        return None
    per = torch_err.per_element
    where = where & (per > 0)
    if not bool(where.any()):
        return None
    return float((diff[where] / per[where]).max())


def integer_matches(o: torch.Tensor, r: torch.Tensor, native: torch.Tensor | None) -> tuple[torch.Tensor, bool]:
    """Integer/bool elements equal to the float64 reference's or to the one at the inputs' own precision;
    and whether a native result was there to match."""
    close = o == r
    if native is not None and tuple(native.shape) == tuple(r.shape) and not native.is_floating_point():
        return close | (o == native.detach().to(o.device, torch.float64)), True
    return close, False


def rounded_once_more(inputs: list[Any]) -> list[Any]:
    """The inputs in float64, each float element moved by a random fraction (uniform in [-1, 1], the same on
    every run) of its own dtype's unit roundoff: what reference_fn on them gives is `p` above. Everything
    else as it was."""
    moved = []
    for index, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            unit = torch.finfo(x.dtype).eps / 2
            generator = seeded_generator(index, x.shape, x.device)
            noise = torch.rand(tuple(x.shape), generator=generator, device=x.device, dtype=torch.float64)
            x = x.detach().to(torch.float64) * (1 + unit * (2 * noise - 1))
        moved.append(x)
    return moved
