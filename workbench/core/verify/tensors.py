"""The tensors of a call: kernel_fn's outputs flattened, inputs cloned, restored, compared for
change, and the memory an output shares with an input. Used by the battery in the kernel's process."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import torch

from .structure import paired_by_name


@dataclass
class Outputs:
    tensors: list[torch.Tensor]
    names: list[str]


def flatten_outputs(value: Any, prefix: str = "") -> Outputs:
    if isinstance(value, torch.Tensor):
        return Outputs([value], [prefix])
    if isinstance(value, (list, tuple)):
        tensors, names = [], []
        for i, item in enumerate(value):
            sub = flatten_outputs(item, f"{prefix}[{i}]")
            tensors += sub.tensors
            names += sub.names
        return Outputs(tensors, names)
    if isinstance(value, dict):
        tensors, names = [], []
        for key, item in value.items():
            sub = flatten_outputs(item, f"{prefix}[{key!r}]")
            tensors += sub.tensors
            names += sub.names
        return Outputs(tensors, names)
    if value is None:
        return Outputs([], [])
    return Outputs([torch.as_tensor(value)], [prefix])


def in_order_of(out: Outputs, names: list[str]) -> Outputs:
    """`out` reordered to follow `names` (the reference's), paired as the judge pairs them (structure.py): a
    dict built in another key order is the same result. Outputs the reference has no name for follow at the
    end, for the judge to name."""
    order, _ = paired_by_name(out.names, names, len(out.names), len(names))
    kept = [i for i in order if i is not None]
    placed = set(kept)
    kept += [i for i in range(len(out.names)) if i not in placed]
    if kept == list(range(len(out.names))):
        return out
    return Outputs([out.tensors[i] for i in kept], [out.names[i] for i in kept])


def cast_floats(inputs: list[Any], dtype: torch.dtype) -> list[Any]:
    return [x.detach().to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def clone_inputs(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def restore_inputs(inputs: list[Any], originals: list[Any]) -> None:
    with torch.no_grad():
        for now, before in zip(inputs, originals):
            if isinstance(now, torch.Tensor):
                now.copy_(before)


def owned(outputs: Outputs) -> Outputs:
    return Outputs([t.detach().clone() for t in outputs.tensors], outputs.names)


def tensors_only(inputs: list[Any]) -> list[Any]:
    return [x if isinstance(x, torch.Tensor) else None for x in inputs]


def same_layout(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        (x.shape == y.shape and x.dtype == y.dtype) if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
        else not isinstance(x, torch.Tensor) and not isinstance(y, torch.Tensor) for x, y in zip(a, b))


def _storage_span(t: torch.Tensor) -> tuple[str, int, int]:
    storage = t.untyped_storage()
    return str(t.device), storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def overlaps(outputs: Outputs, inputs: list[Any]) -> list[tuple[int, int]]:
    """(output k, input i) for each output whose memory overlaps an input's (a view, or the input itself)."""
    spans = [(i, _storage_span(x)) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.numel()]
    pairs = []
    for k, out in enumerate(outputs.tensors):
        if not out.numel():
            continue
        device, lo, hi = _storage_span(out)
        pairs += [(k, i) for i, (in_device, in_lo, in_hi) in spans if device == in_device and lo < in_hi and in_lo < hi]
    return pairs


def shared_memory(outputs: Outputs, inputs: list[Any], allowed: set[int] = frozenset()) -> list[str]:
    """'output[0] and input #1' for each output whose memory overlaps an input's, but for the outputs in
    `allowed` (those the reference itself returns as views of its inputs)."""
    return [f"output{outputs.names[k]} and input #{i}" for k, i in overlaps(outputs, inputs) if k not in allowed]


def aliased_outputs(outputs: Outputs, inputs: list[Any]) -> set[int]:
    """The indices of the outputs that share an input's memory."""
    return {k for k, _ in overlaps(outputs, inputs)}


def sharing_memory(inputs: list[Any]) -> set[int]:
    """The indices of the tensor inputs that share a storage with another input (views of one buffer: their
    layout is the contract, so the guard margins and the layouts leave them as they are)."""
    owners: dict[tuple[str, int], list[int]] = {}
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.numel():
            owners.setdefault((str(x.device), x.untyped_storage().data_ptr()), []).append(i)
    return {i for members in owners.values() if len(members) > 1 for i in members}


def input_elements(inputs: list[Any]) -> int:
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))


def seeded_generator(position: int | str, shape: Any, device: Any = "cpu") -> torch.Generator:
    """A generator seeded by a tensor's position and shape: the same draws on every run, for the kernel and the
    reference alike (upstream gradients, outlier positions, the inputs rounded once more)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(zlib.crc32(f"{position}:{tuple(shape)}".encode()))
    return generator
