"""Value-stress cases: the values a kernel written against randn inputs gets wrong.

Shapes find masks and grids; values find numerics. A row softmax that never subtracts the row max overflows
once logits pass ~88 in float32; a variance taken as E[x^2] - E[x]^2 cancels to noise once rows carry a common
offset; an epsilon or an absolute threshold can swamp small values; a max taken over part of a row misses an
outlier. Each is invisible on N(0, 1) inputs. So beside the generated edge shapes, one verification case of each
dtype (the smallest of at least 1024 elements whose sizes are all above 1; 256 under the interpreter, which
runs each element in Python) runs again with every floating-point tensor input

    values x64        scaled up (exactly: a power of two)
    values x1/1024    scaled down
    offset            shifted by a common offset: +1000, or +64 in float16 and +16 in bfloat16 (a few bits
                      of each value stay below it: past that the input itself holds nothing to cancel)
    outliers          one element in 512 (at least one) times 100

(integer and boolean inputs, index tensors and Python scalars untouched; a tensor that requires grad stays a
leaf that requires grad). The reference sees the same stressed inputs, and the error model judges them as any
case (verify/error_model.py): where torch in the inputs' dtype loses digits or overflows too, the kernel may,
and at an offset one more rounding of the inputs costs what a correct kernel's blocked mean costs (torch's own
reductions are more accurate there). A case whose label carries the stress ("rows=7 cols=127 [values x64]
(generated)") fails with a note on what such a failure usually means. A stress case is one call of kernel_fn:
the second call's checks (unwritten elements by sentinel, determinism, the torch ops) ran on the case whose
values it varies. `[verify] value_stress = false` turns them off, or a list of input names (as reference_fn
calls them) stresses only those, for a kernel whose domain is narrower (a probability input, an angle). They
are generated cases: `generated_cases = false` turns them off too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod
from typing import Any, Callable

import torch

from ..project.config import VerifyConfig
from ..project.contract import Case
from .edge_cases import best_per_dtype, sizes_of
from .tensors import seeded_generator

# The common offset keeps a few bits of each value below it in every dtype: +1000 leaves a float32 value 14 of
# its 24 bits, +64 a float16 one 5 of 11, +16 a bfloat16 one 4 of 8.
OFFSETS = {torch.float16: 64.0, torch.bfloat16: 16.0}
DEFAULT_OFFSET = 1000.0
STABLE_SIZE = 1024  # a base case at least this big: torch's own error is measured over enough elements
INTERPRETED_SIZE = 256  # ... under the interpreter, which runs every element in Python: cheaper, still enough
OUTLIER_EVERY = 512
OUTLIER_FACTOR = 100.0


def _with_outliers(x: torch.Tensor, position: int) -> torch.Tensor:
    count = max(1, x.numel() // OUTLIER_EVERY)
    where = torch.randperm(x.numel(), generator=seeded_generator(position, x.shape))[:count].to(x.device)
    flat = x.clone().reshape(-1)
    flat[where] = flat[where] * OUTLIER_FACTOR
    return flat.reshape(x.shape)


@dataclass(frozen=True)
class Stress:
    """One value stress: what it does to every floating-point input (said in a failure's note), what a failure
    under it usually means, and the change itself (tensor, its position among the inputs) -> tensor."""

    name: str
    does: str
    hint: str
    apply: Callable[[torch.Tensor, int], torch.Tensor]


BY_NAME = {s.name: s for s in (
    Stress("values x64", "times 64",
           "large values: an exp that overflows (subtract the row max first?), or squares past the dtype's range "
           "(accumulate in float32?)",
           lambda x, position: x * 64.0),
    Stress("values x1/1024", "times 1/1024",
           "small values: an epsilon or an absolute threshold that swamps them, or an underflow (scale before "
           "squaring?)",
           lambda x, position: x * (1.0 / 1024.0)),
    Stress("offset", "plus 1000 (64 in float16, 16 in bfloat16)",
           "a common offset: cancellation, as in a variance taken as E[x^2] - E[x]^2 (subtract the mean first, or "
           "use Welford's update)",
           lambda x, position: x + OFFSETS.get(x.dtype, DEFAULT_OFFSET)),
    Stress("outliers", f"with one element in {OUTLIER_EVERY} times {OUTLIER_FACTOR:g}",
           "a few large elements: a max or absmax taken over part of the row, a clamp, or a block that misses them",
           _with_outliers),
)}
STRESSES = tuple(BY_NAME)


def is_value_stress(case: Case) -> bool:
    """A case whose inputs one of STRESSES changed (a large-index case is a stress case too, of sizes)."""
    return case.stress in BY_NAME


def stress_cases(cases: list[Case], config: VerifyConfig, first_index: int, interpret: bool = False) -> list[Case]:
    """The value-stress cases, indexed from `first_index`: every stress on the smallest verification case of
    each dtype with enough elements (STABLE_SIZE; INTERPRETED_SIZE under the interpreter)."""
    size = INTERPRETED_SIZE if interpret else STABLE_SIZE
    if not config.generated_cases or config.value_stress is False:
        return []
    chosen = best_per_dtype(cases, lambda case: _rank(case, size))
    out = []
    for base in chosen:
        for stress in STRESSES:
            out.append(replace(base, index=first_index + len(out), generated=True, stress=stress))
    return out


def _rank(case: Case, size: int) -> tuple[int, int]:
    """The smallest case of at least `size` elements whose sizes are all above 1 (a 1-element row has no
    cancellation to show), else the largest below that."""
    flat = sizes_of(case)
    volume = prod(flat) if flat else 0
    above_one = bool(flat) and all(n > 1 for n in flat)
    return (0 if above_one else 1, volume if volume >= size else 2 ** 62 - volume)


def stressed(inputs: list[Any], stress: str, names: list[str], only: bool | list[str]) -> list[Any]:
    """The inputs under `stress`: floating-point tensors changed (those named in `only` when it is a list)."""
    out = []
    for i, x in enumerate(inputs):
        name = names[i] if i < len(names) else f"input #{i}"
        wanted = only is True or (isinstance(only, list) and name in only)
        if not wanted or not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            out.append(x)
            continue
        with torch.no_grad():
            changed = BY_NAME[stress].apply(x.detach(), i)
        out.append(changed.requires_grad_(x.requires_grad) if x.requires_grad else changed)
    return out


OVERFLOW_HINT = ("an overflow: an exp of large values (subtract the row max first?), or squares or sums past the "
                 "dtype's range (accumulate in float32?)")


TF32_STRESS_HINT = ("TF32: the project says its tl.dot rounds float32 inputs to TF32 (`fp32_precision = \"tf32\"`), "
                    "10 mantissa bits where float32 keeps 23, and large values make a softmax of products turn on "
                    "that rounding (a near-tie between two scores goes the other way); float32's budget is float32's "
                    "error: pass input_precision=\"ieee\" to tl.dot for float32 inputs, or leave float32 out")


def stress_note(stress: str, overflow: bool, tf32: bool = False) -> str:
    """What a failure under `stress` usually means; `overflow`: the failure is NaN or infinity where the
    reference has numbers; `tf32`: a float32 case of a project whose tl.dot runs in TF32."""
    hint = OVERFLOW_HINT if overflow else BY_NAME[stress].hint
    if tf32 and not overflow and stress == "values x64":
        hint = f"{hint}; or {TF32_STRESS_HINT}"
    return (f"value stress [{stress}]: every floating-point input {BY_NAME[stress].does}; where the case passes "
            f"without it, this usually means {hint}")
