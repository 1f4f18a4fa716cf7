"""Compare a kernel's output with the reference: error statistics, where the bad
elements are, and a hint at the pattern ("all in the last 31 columns: a boundary mask?").

Pure tensor arithmetic on the CPU or GPU; no Triton, no kernel code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..events import Worst, finite_or_none
from ..project.config import Tolerance
from ..text import plural
from .error_model import (
    DEFAULT_ERROR_FACTOR,
    element_budget,
    floor_budget,
    integer_matches,
    multiple_of_torch,
    norm_budget,
    torch_error,
    typical_magnitude,
)

ERROR_MAP_ROWS = 12
ERROR_MAP_COLS = 48
MIN_NORM_ELEMENTS = 32


@dataclass
class Comparison:
    numel: int
    bad_count: int = 0
    unwritten: int = 0
    nan_mismatch: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_norm_err: float | None = None
    worst: Worst | None = None
    pattern: str = ""
    messages: list[str] = field(default_factory=list)
    error_map: list[list[float]] | None = None
    # The error model (verify/error_model.py): torch's own error in this output and the kernel's against it
    torch_error: float | None = None  # max |native - ref64| (None: no native result to measure it by)
    torch_dtype: str = ""  # the dtype torch computed in
    # what set the budget: torch's own result, or "inputs" (and intermediates) rounded once more
    torch_source: str = "torch"
    # the kernel's error as a multiple of torch's own, over the elements past the dtype's floor (None: every
    # element within the floor, or torch exact here)
    multiple: float | None = None
    within_torch: int = 0  # elements past the dtype's floor but within F times torch's own error
    factor: float = DEFAULT_ERROR_FACTOR

    @property
    def passed(self) -> bool:
        return not self.messages


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance,
            unwritten_mask: torch.Tensor | None = None, native: torch.Tensor | None = None,
            factor: float = DEFAULT_ERROR_FACTOR, rounded: torch.Tensor | None = None) -> Comparison:
    """Check `out` against the float64 `ref` (any dtypes; compared in float64) by the error model
    (verify/error_model.py): `native` is reference_fn on the inputs' own dtype, whose distance from `ref`
    is torch's own error, and `rounded` reference_fn in float64 on the inputs and its intermediates rounded once
    more, whose distance is the error one more rounding makes; each element may be off by the larger of the
    dtype's floor and `factor` times the larger of the two."""
    result = Comparison(numel=ref.numel(), factor=factor)
    if tuple(out.shape) != tuple(ref.shape):
        result.messages.append(f"shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}")
        result.bad_count = result.numel
        return result
    if out.numel() == 0:
        return result
    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    if unwritten_mask is None:
        unwritten_mask = torch.zeros_like(o, dtype=torch.bool)

    o_nan, r_nan = torch.isnan(o), torch.isnan(r)
    both_finite = torch.isfinite(o) & torch.isfinite(r)
    # NaN matches NaN, inf matches the same inf; anything else non-finite is a mismatch.
    same_special = (o_nan & r_nan) | (torch.isinf(o) & torch.isinf(r) & (o == r))
    if native is not None and tuple(native.shape) == tuple(o.shape) and native.is_floating_point():
        # torch in the inputs' own dtype overflows (or makes a NaN) there too: the dtype's doing, not the kernel's
        n = native.detach().to(o.device, torch.float64)
        same_special |= torch.isfinite(r) & ((o_nan & torch.isnan(n)) | (torch.isinf(o) & torch.isinf(n) & (o == n)))
    nan_mismatch = ~both_finite & ~same_special & ~unwritten_mask

    diff = torch.where(both_finite, (o - r).abs(), torch.zeros_like(o))
    significant = both_finite & (r.abs() > tol.atol)
    exact = not out.is_floating_point() and not ref.is_floating_point()
    matched_native = False
    if exact:  # integers and booleans: equal to one of the two references
        close, matched_native = integer_matches(o, r, native)
        close = both_finite & close
        own = None
    else:
        # once: the floor's atol and torch's error are both scaled by it
        m = typical_magnitude(r, out.dtype)
        own = torch_error(r, native, significant, m, rounded)
        floor = floor_budget(r, tol, m)
        floor_close = both_finite & (diff <= floor)
        close = both_finite & (diff <= element_budget(floor, own, factor))
        result.within_torch = int((close & ~floor_close).sum())
        if own is not None:
            result.torch_error, result.torch_dtype, result.torch_source = own.absolute_max, own.dtype, own.source
            # the multiple is said where it decides: over the elements the dtype's floor alone would not pass
            result.multiple = multiple_of_torch(diff, both_finite & ~floor_close, own)
    bad = ~(close | same_special) | unwritten_mask

    norm_bound = norm_budget(tol, own, factor)
    result.unwritten = int(unwritten_mask.sum())
    result.nan_mismatch = int(nan_mismatch.sum())
    result.bad_count = int(bad.sum())
    if both_finite.any():
        d = diff[both_finite]
        result.max_abs_err = finite_or_none(float(d.max()))
        rel = d / r[both_finite].abs().clamp_min(tol.atol if tol.atol > 0 else 1e-30)
        result.max_rel_err = finite_or_none(float(rel.max()))
        # The norm judges the output as a whole: over the elements above atol (below it a kernel
        # may lose every digit to cancellation and still be right), and only where there are
        # enough of them for one element's rounding not to be the whole norm.
        if int(significant.sum()) >= MIN_NORM_ELEMENTS:
            ref_norm = float(torch.linalg.vector_norm(r[significant]))
            err_norm = float(torch.linalg.vector_norm((o - r)[significant]))
            result.rel_norm_err = finite_or_none(err_norm / ref_norm)

    if result.unwritten:
        result.messages.append(f"{result.unwritten} of {plural(result.numel, 'element')} never written")
    if result.nan_mismatch:
        result.messages.append(f"{plural(result.nan_mismatch, 'element')} {'is' if result.nan_mismatch == 1 else 'are'} "
                               "NaN/Inf where the reference is not (or the reverse)")
    close_fail = int((~close & both_finite).sum())
    if close_fail and exact:
        against = "both the float64 reference and reference_fn at the inputs' own precision" if matched_native \
            else "the reference (exact: an integer output)"
        result.messages.append(f"{close_fail} of {plural(result.numel, 'element')} "
                               f"{'differs' if close_fail == 1 else 'differ'} from {against}")
    elif close_fail:
        result.messages.append(f"{close_fail} of {plural(result.numel, 'element')} "
                               f"{budget_broken(result, tol, str(out.dtype).replace('torch.', ''))}")
    if result.rel_norm_err is not None and result.rel_norm_err > norm_bound and not close_fail and not exact:
        result.messages.append(
            f"relative error norm {result.rel_norm_err:.3g} exceeds {norm_bound:.3g} "
            "(a systematic error hiding under atol)")
    if result.bad_count:
        result.worst = worst_element(o, r, bad, unwritten_mask)
        result.pattern = describe_pattern(bad)
        result.error_map = error_map(bad)
    elif result.messages:  # rel-norm failure: every element is inside atol, the map shows the error size
        result.pattern = "every element within tolerance, but the overall error is too large"
    return result


def budget_broken(c: Comparison, tol: Tolerance, dtype: str) -> str:
    """Which budget the elements broke, and where it comes from (docs/VERIFIED.md)."""
    floor = f"outside rtol={tol.rtol:g} atol={tol.atol:g} (the {dtype} floor)"
    if c.torch_error is None:
        return floor + "; no result of reference_fn on the inputs' own dtype to measure torch's own error by"
    if c.multiple is None:  # torch's error is zero wherever the kernel's is past the floor
        return floor + f"; torch's own {c.torch_dtype} result is exact there, so the floor is the budget"
    if c.torch_source == "inputs":
        return (floor + f" and past {c.factor:g}x the error one more {c.torch_dtype} rounding of the inputs and "
                f"intermediates makes: the kernel's error is up to {c.multiple:.3g}x that (it moves the output by "
                f"up to {c.torch_error:.3g} here; torch's own is smaller)")
    return (floor + f" and past {c.factor:g}x torch's own {c.torch_dtype} error: the kernel's error is up to "
            f"{c.multiple:.3g}x torch's own (torch is off by up to {c.torch_error:.3g} here)")


def worst_element(o: torch.Tensor, r: torch.Tensor, bad: torch.Tensor, unwritten: torch.Tensor) -> Worst:
    score = torch.where(torch.isfinite(o - r), (o - r).abs(), torch.full_like(o, float("inf")))
    score = torch.where(bad, score, torch.full_like(o, -1.0))
    flat = int(torch.argmax(score.reshape(-1)))
    index = unravel(flat, tuple(o.shape))
    kernel_value = None if bool(unwritten.reshape(-1)[flat]) else float(o.reshape(-1)[flat])
    # JSON carries no NaN/inf: a non-finite value travels as None, and kernel_special says which it was.
    special = "unwritten" if kernel_value is None else "" if math.isfinite(kernel_value) else str(kernel_value)
    return Worst(index=index, kernel=finite_or_none(kernel_value),
                 reference=finite_or_none(float(r.reshape(-1)[flat])), kernel_special=special)


def unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The index of element `flat` of a row-major tensor of this shape. (torch.unravel_index imports
    sympy on first use: half a second, paid by the first failing case of every worker.)"""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def _as_rows(mask: torch.Tensor) -> torch.Tensor:
    if mask.dim() == 0:
        return mask.reshape(1, 1)
    if mask.dim() == 1:
        return mask.reshape(1, -1)
    return mask.reshape(-1, mask.shape[-1])


SMALL_OUTPUT = 8  # below this many elements a pattern says nothing


def describe_pattern(bad: torch.Tensor) -> str:
    """A one-line guess at where the bad elements are and why."""
    total, count = bad.numel(), int(bad.sum())
    if count == 0:
        return ""
    if total < SMALL_OUTPUT:  # every element of a handful is both edge and interior: no guess
        return f"{count} of {plural(total, 'element')}"
    if count > 0.5 * total:
        return f"everywhere ({count} of {total}): the computation itself, not a boundary"
    if bad.dim() <= 1:
        return _describe_flat(bad.reshape(-1), count, total)
    rows = _as_rows(bad)
    n_rows, n_cols = rows.shape
    bad_cols = torch.nonzero(rows.any(dim=0)).reshape(-1)
    bad_rows = torch.nonzero(rows.any(dim=1)).reshape(-1)
    first_col, last_col = int(bad_cols[0]), int(bad_cols[-1])
    first_row, last_row = int(bad_rows[0]), int(bad_rows[-1])
    if last_col == n_cols - 1 and len(bad_cols) == n_cols - first_col and first_col > 0:
        width = n_cols - first_col
        return f"all in the last {width} columns (from column {first_col}): a boundary mask on the columns?"
    if len(bad_rows) == 1:
        return f"all in row {first_row} of {n_rows}: one program's row"
    if last_row == n_rows - 1 and len(bad_rows) == n_rows - first_row and first_row > 0:
        height = n_rows - first_row
        return f"all in the last {height} rows (from row {first_row}): the grid one block short, or a row mask?"
    if len(bad_cols) == 1:
        return f"all in column {first_col}"
    return f"scattered: {count} elements over {len(bad_rows)} rows and {len(bad_cols)} columns"


def _describe_flat(bad: torch.Tensor, count: int, total: int) -> str:
    idx = torch.nonzero(bad).reshape(-1)
    first, last = int(idx[0]), int(idx[-1])
    contiguous = last - first + 1 == count
    if contiguous and last == total - 1 and first > 0:
        block = first & -first  # largest power of two dividing the start
        hint = f" (a multiple of {block}): the last block — grid one block short or a missing mask?" if block >= 16 else \
            ": the tail — a missing mask?"
        return f"all in the last {count} elements, from index {first}{hint}"
    if contiguous:
        return f"one contiguous run of {count} elements, indices {first}..{last}"
    return f"scattered: {count} elements between indices {first} and {last}"


def error_map(bad: torch.Tensor, rows: int = ERROR_MAP_ROWS, cols: int = ERROR_MAP_COLS) -> list[list[float]]:
    """Fraction of bad elements per cell of a coarse grid over the (rows, last dim) view."""
    grid = _as_rows(bad).to(torch.float32)
    n_rows, n_cols = grid.shape
    out_rows, out_cols = min(rows, n_rows), min(cols, n_cols)
    pooled = torch.nn.functional.adaptive_avg_pool2d(grid[None, None], (out_rows, out_cols))[0, 0]
    # A single bad element in a big cell must stay visible: round tiny fractions up.
    pooled = torch.where((pooled > 0) & (pooled < 0.01), torch.full_like(pooled, 0.01), pooled)
    return [[round(float(v), 3) for v in row] for row in pooled.cpu()]


def tensors_equal_bitwise(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Element mask: a and b hold the same bits (so NaN == NaN)."""
    if a.dtype.is_floating_point and a.element_size() in (2, 4, 8):
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return a.contiguous().view(view) == b.contiguous().view(view)
    return a == b
