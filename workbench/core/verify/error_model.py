"""The error model: how far from the float64 truth a correct kernel's output may be.

One rule for every comparison the judge makes (the verification call, repeat calls, forced configs, layouts,
the compatibility checks, gradients, generated cases, the benchmark's recheck). With `r` the reference_fn
result on float64-upcast inputs, `n` reference_fn on the inputs as given (torch doing the op in the inputs'
own dtype) and `o` the kernel's output, element i of a floating-point output passes when

    |o_i - r_i| <= max(floor_i, F * T_i)
    floor_i = atol * max(1, m) + rtol * |r_i|        the dtype's floor ([tolerance.<dtype>])
    T_i     = max(E * (|r_i| + m), |p_i - r_i|)      the dtype's own error, scaled to element i, and never
                                                     below that element's own move under one more rounding
    E       = max(E_n, E_p)
    E_n     = max_j |n_j - r_j| / (|r_j| + m)        torch's largest error in this output, relative
    E_p     = spread_j |p_j - r_j| / (|r_j| + m)     the error one more rounding of the inputs makes
    m       = median_j |r_j|, |r_j| > u max|r|        the output's typical magnitude (u: the output dtype's
                                                     unit roundoff)

`p` is reference_fn in float64 on the inputs each rounded once more: every float element moved by a random
fraction of its dtype's unit roundoff (u = eps/2: 2^-11 in float16, 2^-8 in bfloat16, 2^-24 in float32),
and with each of its own arithmetic results (forward and backward: every aten op that rounds in float32, an
add, a sum, an exp, a matmul) moved by a random fraction of float32's unit roundoff, the precision a kernel
keeps its intermediates in (RoundEachOp). torch keeps its intermediates in float32 and rounds once, at the
end; a correct kernel that keeps a statistic or a partial result in the inputs' dtype (a LayerNorm saving
mean and rstd in float16, an input cast before a product) rounds in the middle too, and what that costs is how
sensitive the output is to its inputs: a weight gradient summed over rows, a normalisation at an offset of
1000. And a correct kernel rounds its intermediates in another order than torch's: the compiler contracts
dy * w - mean(dy * w) into one FMA, so the product is rounded in the mean and exact in the difference; where
such terms cancel (a LayerNorm's dx over a single column is exactly 0, a difference of terms that rstd =
1/sqrt(eps) scales by 316) torch's own result is exact by luck of its order and the kernel's is one rounding
of the terms away. E_p measures both sensitivities with the op itself. Its spread is the largest relative
error, but at most 4x the 99th percentile: an output that jumps (a rounding step, an argmax) moves a whole
step where the perturbation crosses it, and those few elements must not become everyone's budget. The ops
that are exact (a copy, a max, a where, an index) are left as they are, so nothing jumps that would not; a
fused op (layer_norm and its backward, softmax) runs as torch's own decomposition of it, so that its inner
roundings move too (over one column, F.layer_norm's backward moved only at its result stays ~0). A draw of
rounding can land near zero by luck too; an output of fewer than 8 elements takes p from several draws
(rounding_draws), each element the draw farthest from r.

An element's own move |p_i - r_i| is a floor under T_i: where an op is ill-conditioned at a few elements (an
attention over scores 4000 apart, at 64x the values, whose near-tie rows turn on the last bit of a product),
a correct kernel's error there is many times the output's typical one, and the element's own sensitivity is
what the dtype lets it be; a value-stress case that one draw's budget fails, but not by far, takes p from
STRESSED_ROUNDING_DRAWS draws, the farthest at each element, so that no such element stays near r by the luck of
one draw (where one draw passes, every draw does: the farthest is never nearer r). A draw cannot make the budget
smaller than E's: it only widens it at elements that are sensitive.

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
from torch._decomp import decomposition_table
from torch.utils._python_dispatch import TorchDispatchMode

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
    source: str = "torch"  # what set E: "torch" (E_n) or "inputs" (E_p: inputs and intermediates rounded once more)


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
    return (_spread(rel) if spread else float(rel.max())), float(err.max()), err


def _spread(values: torch.Tensor) -> float:
    """The largest of `values` (a flat tensor), but at most SPREAD_OF_PERCENTILE x their 99th percentile where
    there are 100 or more."""
    top = float(values.max())
    if values.numel() >= 100:
        top = min(top, SPREAD_OF_PERCENTILE * kth_smallest(values, max(1, int(0.99 * values.numel()))))
    return top


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
    # The same holds for one more rounding's: a difference that cancels exactly in float64 (and in torch's order)
    # is one rounding of its terms away in another's. (Weight is 0 only where r is and so is m: then r is zero
    # wherever it is finite, and `relative` is 0.)
    positive = weight > 0
    zero_floor = 0.0
    if bool((~positive).any()):
        zero_floor = float(err[~positive].max())
        moved = 0.0 if by_inputs is None else _spread(by_inputs[2][~positive])
        if moved > zero_floor:
            zero_floor, absolute, source = moved, moved, "inputs"
    per_element = torch.clamp_min(relative * weight, zero_floor)
    if by_inputs is not None:  # and never below the element's own move under one more rounding (see above)
        per_element = torch.maximum(per_element, by_inputs[2])
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


def rounded_once_more(inputs: list[Any], draw: int = 0, tf32: bool = False) -> list[Any]:
    """The inputs in float64, each float element moved by a random fraction (uniform in [-1, 1], the same on
    every run of the same `draw`) of its own dtype's unit roundoff: what reference_fn on them (under
    RoundEachOp) gives is `p` above. Everything else as it was. `tf32` (`[verify] fp32_precision = "tf32"`: the
    kernel's tl.dot rounds float32 inputs to TF32): float32 inputs move by TF32's unit roundoff, the rounding
    such a kernel gives its inputs."""
    moved = []
    for index, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            unit = TF32_UNIT if tf32 and x.dtype == torch.float32 else torch.finfo(x.dtype).eps / 2
            generator = seeded_generator(index if draw == 0 else f"{draw}.{index}", x.shape, x.device)
            x = x.detach().to(torch.float64).mul_(moving_factor(tuple(x.shape), unit, generator, x.device))
        moved.append(x)
    return moved


# The aten ops whose result float32 rounds (by name, in-place forms included): RoundEachOp moves their results.
# The rest are exact (copies, views, indexing, max and min, where, abs, neg, comparisons, clamp, rounding
# functions) and stay as they are: a max moved off its element no longer equals it, a rounding function moved
# across a step jumps a whole step.
ROUNDING_OPS = frozenset("""
    add sub rsub mul div true_divide addcmul addcdiv lerp reciprocal sqrt rsqrt pow square exp exp2 expm1 log
    log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh erf erfc erfinv hypot
    sigmoid logit softplus gelu silu mish elu selu celu logsumexp sum mean prod cumsum cumprod var std var_mean
    std_mean norm linalg_vector_norm frobenius_norm dot vdot mv mm bmm addmm addmv addbmm baddbmm _softmax
    _log_softmax _softmax_backward_data _log_softmax_backward_data gelu_backward silu_backward mish_backward
    sigmoid_backward tanh_backward logit_backward softplus_backward elu_backward native_layer_norm
    native_layer_norm_backward native_group_norm native_group_norm_backward native_batch_norm
    native_batch_norm_backward _fused_rms_norm _fused_rms_norm_backward _scaled_dot_product_flash_attention
    _scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention
    _scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_flash_attention_backward
    _scaled_dot_product_efficient_attention_backward _scaled_dot_product_cudnn_attention_backward
    _scaled_dot_product_flash_attention_for_cpu_backward convolution convolution_backward cross_entropy_loss
    nll_loss_forward nll_loss_backward mse_loss mse_loss_backward binary_cross_entropy
    binary_cross_entropy_backward binary_cross_entropy_with_logits smooth_l1_loss huber_loss scatter_add
    scatter_reduce index_add index_reduce embedding_dense_backward logcumsumexp float_power xlogy lgamma digamma
    polygamma sinc
""".split())

# Fused ops, several roundings in one kernel: RoundEachOp runs torch's decomposition of them instead.
FUSED_OPS = frozenset("""
    native_layer_norm native_layer_norm_backward native_group_norm native_group_norm_backward native_batch_norm
    native_batch_norm_backward _fused_rms_norm _fused_rms_norm_backward _softmax _log_softmax
    _softmax_backward_data _log_softmax_backward_data
""".split())

INTERMEDIATE_UNIT = 2.0 ** -24  # float32's unit roundoff: a kernel's intermediates
TF32_UNIT = 2.0 ** -11  # TF32's (10 stored mantissa bits): tl.dot's float32 inputs unless input_precision="ieee"
MIN_ROUNDING_SAMPLES = 8  # an output of fewer elements takes p from several draws
MAX_ROUNDING_DRAWS = 8
# A value-stress case's p from this many draws where one draw's budget does not pass the kernel already
# (calls.KernelCalls.settle_rounding): its large values make an op ill-conditioned at a few elements (a near-tie
# between two scores of an attention), whose own move under one more rounding is their budget; one draw can leave
# such an element near where it was by luck, and eight rarely do (0 of 600 draws of RESULTS 11g's fixture)
STRESSED_ROUNDING_DRAWS = 8
NOISE_CHUNK = 1 << 24


class RoundEachOp(TorchDispatchMode):
    """Under it, each result of an aten op in ROUNDING_OPS that is float64 is moved by a random fraction (uniform
    in [-1, 1], the same on every run of the same `draw`) of `unit`: reference_fn run in float64 with each of its
    intermediate results rounded once more, in float32's precision. Below autograd, so the backward's ops are
    moved too and no graph records the move. An op in FUSED_OPS runs as torch's decomposition, under this mode
    again, so each of its inner results moves (the op itself where the decomposition fails)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in dynamo.disable, importing Dynamo (1.5 s) at the first op;
        # this one compiles nothing.
        return False

    def __init__(self, draw: int = 0, unit: float = INTERMEDIATE_UNIT):
        super().__init__()
        self.draw, self.unit = draw, unit
        self.generators: dict[torch.device, torch.Generator] = {}

    def _move(self, t: Any) -> None:
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float64 or t.numel() == 0:
            return
        generator = self.generators.get(t.device)
        if generator is None:
            generator = self.generators[t.device] = seeded_generator(f"ops.{self.draw}", (), t.device)
        # in pieces of NOISE_CHUNK elements: a benchmark-sized float64 result leaves little memory beside it
        pieces = [t] if t.numel() <= NOISE_CHUNK or not t.is_contiguous() else t.view(-1).split(NOISE_CHUNK)
        for piece in pieces:
            # times 1 + a fraction of unit, not plus a fraction of itself: an infinity stays as it is, where -inf
            # (a causal mask's score) plus a negative fraction of itself is -inf + inf = NaN, which measures nothing
            piece.mul_(moving_factor(tuple(piece.shape), self.unit, generator, t.device))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in FUSED_OPS and func in decomposition_table:
            try:
                with self:
                    return decomposition_table[func](*args, **(kwargs or {}))
            except Exception:  # noqa: BLE001 - then the fused op, moved at its results only
                pass
        out = func(*args, **(kwargs or {}))
        if name.rstrip("_") not in ROUNDING_OPS:
            return out
        if name.endswith("_"):  # in place: the result is the first argument
            self._move(args[0] if args else None)
        elif not any(r.alias_info is not None for r in func._schema.returns):  # a fresh result, not a view
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                self._move(t)
        return out


def moving_factor(shape: tuple, unit: float, generator: torch.Generator, device: Any) -> torch.Tensor:
    """1 + a random fraction, uniform in [-1, 1], of `unit`, in float64: drawn in one pass, the draws torch.rand
    would give this generator. (torch.rand, scaled, shifted, then the multiply were four kernels over each
    float64 result, now two: a large-index case's reference moves 2^31-element intermediates: RESULTS.md 3y.)"""
    return torch.empty(shape, device=device, dtype=torch.float64).uniform_(1 - unit, 1 + unit, generator=generator)


def intermediate_unit(inputs: list[Any]) -> float:
    """The unit RoundEachOp moves intermediates by: float32's, or float64's where every floating-point tensor
    input is float64 (a kernel in float64 keeps its intermediates in float64)."""
    units = [torch.finfo(x.dtype).eps / 2 for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    return min(INTERMEDIATE_UNIT, max(units)) if units else INTERMEDIATE_UNIT


def rounding_draws(outputs: list[Any], at_least: int = 1) -> int:
    """How many draws of p an output set needs: enough that its smallest floating-point output has
    MIN_ROUNDING_SAMPLES elements' worth (at most MAX_ROUNDING_DRAWS); `at_least` (STRESSED_ROUNDING_DRAWS for a
    value-stress case), else 1, for outputs of 8 elements or more."""
    sizes = [t.numel() for t in outputs if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
    if not sizes:
        return at_least
    return max(at_least, min(MAX_ROUNDING_DRAWS, -(-MIN_ROUNDING_SAMPLES // min(sizes))))


def farthest(truth: Any, draws: list[Any]) -> Any:
    """Of several draws of one output, element by element the value farthest from `truth` (the first draw where
    it is not a floating-point tensor of truth's shape)."""
    best = draws[0]
    usable = [d for d in draws if isinstance(d, torch.Tensor) and d.shape == getattr(truth, "shape", None)]
    if not (isinstance(truth, torch.Tensor) and truth.is_floating_point()) or len(usable) < len(draws):
        return best
    r = truth.detach().to(best.device, torch.float64)
    for other in draws[1:]:
        best = torch.where((other.to(torch.float64) - r).abs() > (best.to(torch.float64) - r).abs(), other, best)
    return best
