"""Layouts: kernel_fn on the same values in other memory layouts than get_inputs gives.

A launcher written for the contiguous tensors of its own CASES meets others in a model: a transposed
weight, a slice of a fused QKV buffer, a tensor that starts part-way into its storage. Two more calls of
kernel_fn, on the first case of each dtype (edge_cases.first_case_per_dtype), each judged against that
case's reference (the values are the same, only where they sit differs):

- `noncontiguous`: every input that has a layout to vary is copied into a non-contiguous one: its last two
  dimensions transposed in memory (strides (1, rows) for a matrix), or, for a vector or a matrix with a
  dimension of one, every other element of a buffer twice as long (stride 2; the gaps hold NaN, or the
  dtype's largest value). A launcher that reads them as contiguous (a row pointer plus `tl.arange`) reads
  other elements. Most kernels are written for contiguous inputs (the Triton tutorials', Liger's), so by
  default this is a finding beside the verdict ("check"); `[verify] noncontiguous = "require"` makes it
  fail the case; "off" does not run it. It is not run in the live loop: new strides are a new
  specialisation to compile on every save.
- `storage_offset`: every input starts 16 bytes into its storage (a contiguous view, the 16-byte alignment
  Triton specialises on kept, so nothing new compiles), the bytes before it NaN. Only a launcher that takes
  its pointer from the storage rather than the tensor (`x.untyped_storage().data_ptr()`) gets it wrong, and
  in a model every slice `x[1:]` starts at an offset: a failure fails the case by default ("require").

A launcher may refuse a layout: anything it raises before launching a Triton kernel (an `assert
x.is_contiguous()`, a `ValueError`, torch refusing to `.view` the tensor) is a refusal, said as such, not
a failure. So is a reference_fn that raises on it ("where reference_fn accepts them"). Inputs that share
memory (views of one buffer: their layout is the contract), tensor subclasses and tensors of fewer than
two elements keep their layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..project.config import LIVE_LOOP_SKIPS, VerifyConfig
from ..project.contract import first_line, is_compilation_error, root_cause
from ..stage import ContextPoisoned, RunAborted
from .handoff import ExtraRun
from .interpreter.fixes import OutOfBoundsAccess
from .launches import LaunchCounter
from .tensors import flatten_outputs, owned, sharing_memory
from .torchmodes import poison_value

OFFSET_BYTES = 16  # the offset of the storage_offset layout: the alignment Triton specialises pointers on

HINTS = {
    "noncontiguous": "a launcher that reads them as contiguous (a row pointer plus tl.arange)? pass every stride to "
                     "the kernel, call .contiguous() in the launcher, or refuse them (assert x.is_contiguous())",
    "storage_offset": "a pointer taken from the start of the storage (x.untyped_storage().data_ptr()) rather than "
                      "from the tensor?",
}
LIVE_SKIP = "not in the live loop (new strides compile a new specialisation every save): `workbench verify` runs it"


@dataclass
class Relaid:
    inputs: list[Any]
    changed: list[str]  # "input #0 transposed (strides (1, 300))", one per input whose layout changed


def _fill_gaps(buffer: torch.Tensor) -> None:
    value = poison_value(buffer.dtype, "nan")
    if value is not None:
        buffer.fill_(value)


def noncontiguous(x: torch.Tensor) -> tuple[torch.Tensor, str]:
    """x's values in a non-contiguous layout, and how it was laid out."""
    if x.dim() >= 2 and x.shape[-1] > 1 and x.shape[-2] > 1:
        laid = torch.empty(*x.shape[:-2], x.shape[-1], x.shape[-2], dtype=x.dtype, device=x.device)
        laid = laid.transpose(-1, -2)
        how = "transposed"
    else:
        dim = max(d for d in range(x.dim()) if x.shape[d] > 1)
        wide = list(x.shape)
        wide[dim] *= 2
        buffer = torch.empty(wide, dtype=x.dtype, device=x.device)
        _fill_gaps(buffer)
        laid = buffer[(slice(None),) * dim + (slice(None, None, 2),)]
        how = "every other element"
    with torch.no_grad():
        laid.copy_(x)
    return laid, f"{how} (strides {tuple(laid.stride())})"


def storage_offset(x: torch.Tensor) -> tuple[torch.Tensor, str]:
    """x's values, contiguous, starting OFFSET_BYTES into a storage whose first bytes hold poison."""
    offset = max(1, OFFSET_BYTES // x.element_size())
    buffer = torch.empty(offset + x.numel(), dtype=x.dtype, device=x.device)
    _fill_gaps(buffer)
    laid = buffer[offset:].view(x.shape)
    with torch.no_grad():
        laid.copy_(x)
    return laid, f"at storage offset {offset}"


LAYOUTS: dict[str, Callable[[torch.Tensor], tuple[torch.Tensor, str]]] = {
    "noncontiguous": noncontiguous, "storage_offset": storage_offset}


def relaid(inputs: list[Any], layout: str) -> Relaid:
    """The inputs with every one that has a layout to vary in `layout` (LAYOUTS), values unchanged."""
    lay = LAYOUTS[layout]
    shared = sharing_memory(inputs)
    out: list[Any] = []
    changed: list[str] = []
    for i, x in enumerate(inputs):
        if type(x) is not torch.Tensor or x.numel() < 2 or i in shared or x.layout != torch.strided:
            out.append(x)
            continue
        laid, how = lay(x.detach())
        if x.requires_grad:
            laid.requires_grad_(True)
        out.append(laid)
        changed.append(f"input #{i} {how}")
    return Relaid(out, changed)


def outputs_or_why(call: Callable[[list[Any]], Any], args: list[Any]) -> tuple[list[Any], list[str]]:
    """`call(args)`'s outputs (owned, flattened), or LayoutRefused (it raised before launching any Triton
    kernel) or KernelRaised (after a launch, or it does not compile for them)."""
    before = LaunchCounter.count
    try:
        out = owned(flatten_outputs(call(list(args))))
    except (RunAborted, ContextPoisoned):
        raise
    except Exception as exc:  # noqa: BLE001 - user code: what it raised is the finding
        root = root_cause(exc)
        what = f"{type(root).__name__}: {first_line(root)}"
        if is_compilation_error(exc):
            raise KernelRaised(f"it does not compile for them: {what}") from exc
        if LaunchCounter.count == before and not isinstance(root, OutOfBoundsAccess):
            raise LayoutRefused(what) from exc
        raise KernelRaised(what) from exc
    return out.tensors, out.names


def layout_runs(call: Callable[[list[Any]], Any], reference_fn: Callable[..., Any], inputs: list[Any],
                reference: list[Any], native: list[Any], rounded: list[Any], config: VerifyConfig, skip: str = "",
                live: bool = False) -> list[ExtraRun]:
    """The noncontiguous and storage_offset runs of one case. `call(args)`: kernel_fn(*args) as the battery
    calls it (its allocations poisoned); `inputs`: the case's input values; `reference`/`native`: its
    reference outputs; `config`: [verify], whose noncontiguous and storage_offset say how each counts
    ("check", "require", "off"); `skip`: why neither runs on this case."""
    runs = []
    for name in LAYOUTS:
        mode = getattr(config, name)
        run = ExtraRun(name, compat=True, required=mode == "require")
        runs.append(run)
        if mode == "off":
            run.skipped = f"turned off ([verify] {name})"
        elif skip:
            run.skipped = skip
        elif live and name in LIVE_LOOP_SKIPS:
            run.skipped = LIVE_SKIP
        if run.skipped:
            continue
        laid = relaid(inputs, name)
        if not laid.changed:
            run.skipped = "no input has a layout to vary (views of one buffer, or fewer than two elements)"
            continue
        what = "; ".join(laid.changed)
        run.hint = f"kernel_fn on {what}: {HINTS[name]}"
        try:
            # A copy in the same layout (clone() would make a strided slice contiguous again), so the reference
            # meets what kernel_fn meets, and whatever it does to its arguments leaves kernel_fn's alone.
            reference_fn(*relaid(inputs, name).inputs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - "where reference_fn accepts them"
            run.skipped = f"reference_fn refuses {what} ({type(exc).__name__}: {first_line(exc)})"
            continue
        try:
            outputs, names = outputs_or_why(call, laid.inputs)
        except LayoutRefused as refused:
            run.refused = f"kernel_fn refuses {what}: {refused} (raised before any launch)"
            continue
        except KernelRaised as raised:
            run.error = f"kernel_fn raised on {what}: {raised}"
            continue
        run.outputs, run.names, run.reference, run.native = outputs, names, list(reference), list(native)
        run.rounded = list(rounded)
    return runs


class LayoutRefused(Exception):
    """kernel_fn raised before launching any Triton kernel: it refuses the layout (the message says what)."""


class KernelRaised(Exception):
    """kernel_fn raised after a launch, or failed to compile: the layout's finding (the message says what)."""
