"""The error model: how far from the float64 truth a correct kernel's output may be.

One rule for every comparison the judge makes (the verification call, repeat calls, forced configs, layouts,
the compatibility checks, gradients, generated cases, the benchmark's recheck). With `r` the reference_fn
result on float64-upcast inputs, `n` reference_fn on the inputs as given (torch doing the op in the inputs'
own dtype) and `o` the kernel's output, element i of a floating-point output passes when

    |o_i - r_i| <= max(floor_i, F * T_i)
    floor_i = atol * max(1, m) + rtol * |r_i|        the dtype's floor ([tolerance.<dtype>])
    T_i     = E * (|r_i| + m)                        torch's own error, scaled to element i
    E       = max_j |n_j - r_j| / (|r_j| + m)        torch's largest error in this output, relative
    m       = median_j |r_j|                         the output's typical magnitude

F is `[verify] error_factor` (2: FlashAttention's tests allow twice PyTorch's own error in the same precision).
atol is an absolute error for outputs of order 1; an output whose typical element is 4000 (a matmul of inputs
scaled by 64) is near zero at 40, so atol scales with m where m is above 1.

Why per output and not per element: torch's error is a draw of rounding, and at any one element it can be
zero where a kernel that rounds as accurately but in another order lands an ulp away; the largest error torch
makes anywhere in the output, scaled to each element's magnitude, is what the dtype lets a correct kernel
do. The median in the scale keeps elements near zero (a gradient that is a difference of near-equal terms)
from being held to a relative error of their own tiny size, without letting the few largest elements of a
wide-ranging output set everyone's budget. The error-norm bound follows the same rule: the larger of the
dtype's rel_norm and F times torch's own ||n - r|| / ||r||.

Integer and boolean outputs have no rounding to scale: an element passes when it equals the float64
reference's or the reference at the inputs' own precision (a quantiser rounding an exact .5 tie as torch
does in float32 is right; one that matches neither is not).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..project.config import Tolerance

DEFAULT_ERROR_FACTOR = 2.0


@dataclass
class TorchError:
    """torch's own error in one output: per element (T_i above) and as numbers to report."""

    per_element: torch.Tensor  # T_i, float64, the output's shape
    absolute_max: float  # max_j |n_j - r_j|
    norm: float | None  # ||n - r|| / ||r|| over the elements above atol (None when too few)
    dtype: str  # the dtype torch computed in


def torch_error(reference: torch.Tensor, native: torch.Tensor | None, significant: torch.Tensor | None = None,
                scale: float | None = None) -> TorchError | None:
    """torch's own error in `native`'s dtype against the float64 `reference`; None when there is no native
    result to measure it by (reference_fn raised on the inputs as given, another shape, not floating-point).
    Elements where either is NaN or infinite count for nothing. `scale`: m (typical_magnitude), when the
    caller has it."""
    if native is None or not reference.is_floating_point() or not native.is_floating_point() \
            or tuple(native.shape) != tuple(reference.shape) or reference.numel() == 0:
        return None
    r = reference.detach().to(torch.float64)
    n = native.detach().to(r.device, torch.float64)
    finite = torch.isfinite(r) & torch.isfinite(n)
    if not bool(finite.any()):
        return None
    err = torch.where(finite, (n - r).abs(), torch.zeros_like(r))
    magnitude = torch.where(finite, r.abs(), torch.zeros_like(r))
    weight = magnitude + (typical_magnitude(r) if scale is None else scale)
    positive = weight > 0
    relative = float((err[positive] / weight[positive]).max()) if bool(positive.any()) else 0.0
    # Where the reference is exactly zero and so is the median (an output that is all zeros in exact
    # arithmetic), torch's error there is absolute: it bounds every element.
    zero_floor = float(err[~positive].max()) if bool((~positive).any()) else 0.0
    per_element = torch.clamp_min(relative * weight, zero_floor)
    norm = None
    if significant is not None and bool(significant.any()):
        ref_norm = float(torch.linalg.vector_norm(r[significant & finite]))
        if ref_norm > 0:
            norm = float(torch.linalg.vector_norm(err[significant & finite])) / ref_norm
    return TorchError(per_element, float(err.max()), norm, str(native.dtype).replace("torch.", ""))


def typical_magnitude(r: torch.Tensor) -> float:
    """m: the median |r_j| over the finite elements (0 when there are none)."""
    finite = r[torch.isfinite(r)].abs()
    return float(finite.median()) if finite.numel() else 0.0


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

