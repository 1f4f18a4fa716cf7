"""Large-index cases: a tensor past 2^31 elements, where 32-bit offsets wrap.

`tl.program_id` is a 32-bit integer, and so is every offset computed from it and from a stride that fits in
32 bits: `row * n_cols` wraps once a tensor passes 2^31 elements (a 70000 x 32768 activation), and the kernel
reads or writes another row's data, or outside the tensor (an illegal address that ends the process). Every
smaller case passes. So, on a GPU, `workbench verify` runs after every other case one case of each dtype whose
largest tensor (an input or an output) holds 2^31 + 2^27 elements: the smallest verification case of
that dtype whose sizes are all above 1 (rows of a row's width, not 2.7 billion rows of one element; else the
smallest) with one size parameter scaled. The parameter is one that scales the largest tensor in proportion
(doubling it doubles that tensor), preferably one that scales the outputs too (more rows or a larger batch:
the same work per output element, where a GEMM's k would make each a float32 sum of millions of terms, a
numerical question and not an indexing one), at the least memory, the first in the case's order within 10%
(rows before columns, a batch before a sequence); `[verify] large_index = "rows"` names it, `false` turns
the cases off. Not in the live loop (a case of gigabytes costs seconds) nor under the interpreter.

A large-index case is one call of kernel_fn, judged as a benchmark's case is: against reference_fn in float64
and in the inputs' own dtype (the error model's r and n), on a random sample of 2^20 elements of each output
(about 60,000 of them past 2^31), with the NaN count taken over every element (verify/handoff.CaseData.sample).
The large-index cases of every worker on one GPU take turns (a lock in the workbench's cache folder): each
sizes itself by the memory free when its turn comes, and two never hold their gigabytes at once. A case is
skipped, with a note saying why, where the device's free memory is below its estimated need (`footprint`:
the float64 reference included; an H100 runs the 16-bit cases of a row op, an H200 the float32 ones too),
where float64 runs out of memory all the same (a float32 reference cannot ground the error budget: for
float32 inputs it is torch's own answer, with no error left to measure), where no size parameter scales the
largest tensor in proportion, where kernel_fn refuses the shape before launching (an explicit ValueError or
assert) or where the GPU refuses its launch (a grid's second and third dimensions stop at 65,535). A failure
or a crash names the likely cause (NOTE).
"""

from __future__ import annotations

import fcntl
import time
import zlib
from contextlib import contextmanager
from dataclasses import replace
from math import ceil, prod
from typing import Any, Callable, Iterator

import torch

from ..fsutil import cache_root
from ..project.config import VerifyConfig
from ..project.contract import Case, KernelModule
from .edge_cases import best_per_dtype, is_size, sizes_of
from .tensors import flatten_outputs, synchronize

LARGE_INDEX = "past 2^31"  # the case's stress label: "rows=1342177 cols=2000 [past 2^31] (generated)"
INT32_LIMIT = 2 ** 31
TARGET = INT32_LIMIT + INT32_LIMIT // 16  # elements of the largest tensor: one in 17 past the limit
HINT = ("an int32 offset overflow: an index computed from tl.program_id (32 bits) times a stride wraps past "
        "2^31 elements; cast the row index to int64 before multiplying (row.to(tl.int64) * stride)")
NOTE = f"a tensor past 2^31 elements, where every smaller case passes: {HINT}?"  # a failure's, an error's, a crash's
LAUNCH_REFUSED = ("invalid argument", "grid", "too many resources")
WAIT_SAY_S = 10.0


def large_index_cases(cases: list[Case], config: VerifyConfig, first_index: int, on_gpu: bool) -> list[Case]:
    """The large-index cases, indexed from `first_index`: the smallest verification case of each dtype, to be
    scaled when it runs (`plan`). None unless `on_gpu` (not the interpreter, not the live loop)."""
    if not on_gpu or config.large_index is False or not config.generated_cases:
        return []
    fixed = frozenset(config.fixed_params)
    chosen = best_per_dtype(cases, lambda case: _rank(sizes_of(case, fixed)))
    return [replace(base, index=first_index + n, generated=True, stress=LARGE_INDEX)
            for n, base in enumerate(chosen)]


def is_large_index(case: Case) -> bool:
    return case.stress == LARGE_INDEX


def _rank(sizes: list[int]) -> tuple[bool, int] | None:
    """(a size of 1 among the case's, the product of its sizes): the smaller the better a base; None without
    a size to scale."""
    return (1 in sizes, prod(sizes)) if sizes else None


def _scaled(value: Any, factor: float) -> Any:
    """A size times `factor` (rounded up); a tuple or list of sizes with its first entry scaled."""
    if isinstance(value, (tuple, list)):
        return type(value)([_scaled(value[0], factor), *value[1:]])
    return max(1, ceil(value * factor))


def _footprint(km: KernelModule, params: dict[str, Any]) -> tuple[int, int, int]:
    """(elements of the largest tensor among the inputs and reference_fn's outputs, elements of the outputs,
    bytes `footprint` needs)."""
    inputs = km.get_inputs(**params)
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    outputs = [t for t in flatten_outputs(km.reference_fn(*inputs)).tensors if isinstance(t, torch.Tensor)]
    synchronize()
    ins = [t for t in inputs if isinstance(t, torch.Tensor)]
    largest = max((t.numel() for t in ins + outputs), default=0)
    return largest, sum(t.numel() for t in outputs), footprint(ins, outputs)


def footprint(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> int:
    """The device memory a large-index case is estimated to need: its inputs, the kernel's outputs and
    reference_fn's in their own dtype, and reference_fn in float64 (its inputs, its outputs and as much again
    in temporaries)."""
    in_bytes = sum(t.numel() * t.element_size() for t in inputs)
    out_bytes = sum(t.numel() * t.element_size() for t in outputs)
    in_elements = sum(t.numel() for t in inputs)
    out_elements = sum(t.numel() for t in outputs)
    return in_bytes + 2 * out_bytes + 8 * (in_elements + 2 * out_elements)


@contextmanager
def taking_turns(waiting: Callable[[float], None]) -> Iterator[None]:
    """Held while a large-index case runs: one at a time per GPU among every worker of every run on this
    machine. `waiting(seconds so far)` is called every WAIT_SAY_S while another holds it (a worker that says
    nothing for a minute is taken for hung)."""
    key = "host"  # the CPU (the tests: cases run on it only there)
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        key = str(getattr(props, "uuid", "") or f"{props.name}-{torch.cuda.current_device()}")
    path = cache_root() / "locks" / f"large-index-{zlib.crc32(key.encode()):08x}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        start = said = time.monotonic()
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - said >= WAIT_SAY_S:
                    said = time.monotonic()
                    waiting(said - start)
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def free_device_memory() -> int:
    """Bytes the device can still give this process: free memory plus what torch's allocator holds unused."""
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    return int(free)


def plan(km: KernelModule, case: Case, config: VerifyConfig, free: int) -> tuple[dict[str, Any] | None, str]:
    """(the case's params with one size scaled so its largest tensor holds TARGET elements, a note), or
    (None, why it is skipped). Sizes the candidates on the case itself and with each doubled (small tensors)."""
    fixed = frozenset(config.fixed_params)
    named = config.large_index if isinstance(config.large_index, str) else ""
    if named and named not in case.params:
        return None, (f"[verify] large_index names {named!r}, which this case has not (it has "
                      f"{', '.join(case.params) or 'no parameters'})")
    candidates = [k for k, v in case.params.items() if (k == named or not named) and is_size(k, v, fixed)]
    if not candidates:
        return None, f"[verify] large_index names {named!r}, which is no size" if named else "no size parameter"
    base, base_out, base_need = _footprint(km, case.params)
    if base <= 0:
        return None, "no tensor among the inputs and outputs"
    best: tuple[bool, int, float, str] | None = None  # (not more outputs, need, factor, name)
    for name in candidates:
        try:
            doubled, doubled_out, doubled_need = _footprint(km, {**case.params, name: _scaled(case.params[name], 2)})
        except Exception:  # noqa: BLE001 - get_inputs or reference_fn refuses the doubled size: not this one
            continue
        if not 1.8 <= doubled / base <= 2.2:
            continue
        factor = 1 + (TARGET - base) / (doubled - base)  # the largest tensor grows by (doubled - base) per p
        need = int(base_need + (doubled_need - base_need) * (factor - 1))
        # More outputs of the same work each (rows, a batch) before longer work per output (a GEMM's k, whose
        # float32 sum over millions of terms is a numerical question, not an indexing one)
        fewer = not 1.8 <= doubled_out / max(base_out, 1) <= 2.2
        if best is None or (fewer, need) < (best[0], best[1] * 0.9):
            best = (fewer, need, factor, name)
    if best is None:
        return None, (f"no size parameter ({', '.join(candidates)}) scales the largest tensor in proportion; "
                      "name one with [verify] large_index = \"...\"")
    _, need, factor, name = best
    params = {**case.params, name: _scaled(case.params[name], factor)}
    if need > free:
        return None, (f"{name} scaled to {params[name]} needs about {need / 2 ** 30:.0f} GiB of device memory, "
                      f"{free / 2 ** 30:.0f} GiB free: not run on this GPU")
    return params, f"{name} scaled so that the largest tensor passes 2^31 elements"


def launch_refused(exc: BaseException) -> bool:
    """The GPU refused the launch itself (a grid dimension past its limit), not the kernel's code."""
    text = str(exc).lower()
    return "triton error [cuda]" in text and any(word in text for word in LAUNCH_REFUSED)
