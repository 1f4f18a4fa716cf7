"""Guard regions: out-of-bounds stores and loads made visible on a GPU, as the interpreter's checks make them
visible on the CPU.

On a GPU nothing stops a kernel without a mask: its stores past the end of an output land in the caching
allocator's slack (in a model, the next tensor), its loads past the end of an input read whatever is there,
and every element the judge looks at can still be right. So in verification each input a case hands to
kernel_fn, and each tensor kernel_fn allocates with torch.empty* (verify/torchmodes.PrefillEmpty), sits
inside a larger allocation whose margins, before and after it, hold the byte 0xFF: a NaN in every float
dtype (-1 in the integers). After each call the margins are read back:

- a store outside: the margin's bytes changed. "out-of-bounds store: 63 elements after the end of
  output[0] were written" fails the case;
- a load outside reads NaN from the margin: an unmasked reduction poisons its row, and the case fails
  with the usual messages (NaN where the reference has a number).

A margin is as long as the tensor's span (at least 4 KiB, at most 1 MiB, a multiple of 512 bytes, so
the tensor keeps the alignment an allocation has). Under the Triton interpreter, loads are checked against
the tensor itself (its bounds check knows the guarded span: a precise "out-of-bounds load" message), and
stores reach the margins as on a GPU.

Not guarded: an input that shares memory with another input (views of one buffer: their layout is the
contract), tensor subclasses, tensors that require grad, pinned host memory, and tensors of no elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .tensors import sharing_memory

FILL = 0xFF
MIN_MARGIN = 4 << 10
MAX_MARGIN = 1 << 20
ALIGN = 512

# storage address -> (first byte, end byte) of the guarded tensor's span: the interpreter's bounds check
# reads it (interpreter/fixes._check_bounds), so a load into a margin is reported there as out of bounds
GUARDED_SPANS: dict[int, tuple[int, int]] = {}


def span_elements(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements from the first to the last a tensor of this shape and stride addresses (0 when empty)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def margin_bytes(span: int) -> int:
    margin = min(MAX_MARGIN, max(MIN_MARGIN, span))
    return -(-margin // ALIGN) * ALIGN


@dataclass
class Guard:
    """One guarded tensor: its whole allocation as bytes, and where the tensor's span sits in it."""

    raw: torch.Tensor  # uint8, the whole allocation
    start: int  # byte offset of the span
    end: int
    element_size: int
    what: str = ""  # "input #0", "output[1]", "a buffer kernel_fn allocated"

    def written(self) -> torch.Tensor:
        """(elements before the start, elements after the end) whose margin bytes changed, as a tensor on the
        guard's device (Guards.check reads every guard's at once: one synchronisation, not two a guard)."""
        return torch.stack([_changed_elements(self.raw[:self.start], self.element_size),
                            _changed_elements(self.raw[self.end:], self.element_size)])

    def reset(self) -> None:
        self.raw[:self.start].fill_(FILL)
        self.raw[self.end:].fill_(FILL)

    def forget(self) -> None:
        GUARDED_SPANS.pop(self.raw.untyped_storage().data_ptr(), None)


def _changed_elements(margin: torch.Tensor, element_size: int) -> torch.Tensor:
    if not margin.numel():
        return torch.zeros((), dtype=torch.int64, device=margin.device)
    return (margin != FILL).view(-1, element_size).any(dim=1).sum()


def _any_changed(guards: list[Guard]) -> bool:
    """Whether any byte of these guards' margins (all on one device) is not FILL."""
    margins = [m for g in guards for m in (g.raw[:g.start], g.raw[g.end:]) if m.numel()]
    return bool(margins) and bool((torch.cat(margins) != FILL).any().item())


def guardable(t: Any) -> bool:
    return (type(t) is torch.Tensor and t.numel() > 0 and not t.requires_grad and t.device.type in ("cpu", "cuda")
            and not (t.device.type == "cpu" and t.is_pinned()) and all(s >= 0 for s in t.stride()))


def guarded_like(t: torch.Tensor) -> tuple[torch.Tensor, Guard]:
    """An uninitialised tensor of t's shape, strides and dtype, inside guard margins (its span: FILL bytes)."""
    size = t.element_size()
    span = span_elements(tuple(t.shape), tuple(t.stride())) * size
    margin = margin_bytes(span)
    raw = torch.empty(margin + span + margin, dtype=torch.uint8, device=t.device)
    raw.fill_(FILL)
    flat = raw[margin:margin + span].view(t.dtype)
    guarded = flat.as_strided(tuple(t.shape), tuple(t.stride()))
    base = raw.data_ptr()
    GUARDED_SPANS[raw.untyped_storage().data_ptr()] = (base + margin, base + margin + span)
    return guarded, Guard(raw, margin, margin + span, size)


@dataclass
class Guards:
    """The guarded tensors of one case: its inputs (for all its calls) and what each call allocated."""

    inputs: list[Guard] = field(default_factory=list)
    allocated: list[Guard] = field(default_factory=list)

    def guard_inputs(self, inputs: list[Any]) -> list[Any]:
        """The inputs, each guardable one copied into a guarded allocation (the same values and layout)."""
        shared = sharing_memory(inputs)
        guarded_inputs = []
        for i, x in enumerate(inputs):
            if guardable(x) and i not in shared:
                copy, guard = guarded_like(x)
                with torch.no_grad():
                    copy.copy_(x)
                guard.what = f"input #{i}"
                self.inputs.append(guard)
                guarded_inputs.append(copy)
            else:
                guarded_inputs.append(x)
        return guarded_inputs

    def allocate(self, result: torch.Tensor) -> torch.Tensor:
        """torch.empty*'s result, moved inside guard margins (PrefillEmpty calls it)."""
        if not guardable(result):
            return result
        guarded, guard = guarded_like(result)
        self.allocated.append(guard)
        return guarded

    def check(self, outputs: list[torch.Tensor], names: list[str]) -> list[str]:
        """The out-of-bounds stores of the call just made (its allocations forgotten after, the input margins
        reset): 'out-of-bounds store: 63 elements after the end of output[0] were written'."""
        owners = {}
        for t, name in zip(outputs, names):
            if isinstance(t, torch.Tensor) and t.numel():
                owners.setdefault(t.untyped_storage().data_ptr(), f"output{name}")
        found = []
        guards = self.inputs + self.allocated
        by_device: dict[torch.device, list[Guard]] = {}
        for guard in guards:
            by_device.setdefault(guard.raw.device, []).append(guard)
        counts: dict[int, list[int]] = {}
        for members in by_device.values():
            # Almost always nothing was written: one comparison over every margin says so (a few launches
            # and one synchronisation); only then are the counts taken guard by guard.
            if not _any_changed(members):
                continue
            for guard, pair in zip(members, torch.stack([g.written() for g in members]).tolist()):
                counts[id(guard)] = pair
        for guard in guards:
            before, after = counts.get(id(guard), (0, 0))
            if not before and not after:
                continue
            what = guard.what or owners.get(guard.raw.untyped_storage().data_ptr(),
                                            "a buffer kernel_fn allocated (torch.empty*)")
            where = [f"{n} element{'s' if n != 1 else ''} {side} of {what}"
                     for n, side in ((before, "before the start"), (after, "after the end")) if n]
            found.append(f"out-of-bounds store: {' and '.join(where)} {'were' if before + after != 1 else 'was'} "
                         "written (a missing or wrong mask on a store?)")
            guard.reset()
        self.release()
        return found

    def release(self) -> None:
        """Forget the call's allocations (the inputs' guards stay for the case's next call)."""
        for guard in self.allocated:
            guard.forget()
        self.allocated = []

    def close(self) -> None:
        self.release()
        for guard in self.inputs:
            guard.forget()
        self.inputs = []
