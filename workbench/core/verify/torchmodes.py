"""Torch function modes the worker runs user code under.

- `CudaToCpu`: under the Triton interpreter there is no GPU; tensors a
  kernel.py asks for on "cuda" land on the CPU, so a file written for the GPU
  runs unchanged.
- `PrefillEmpty`: outputs the kernel allocates with torch.empty* come back
  filled with a poison value (NaN, or a sentinel), so an element the kernel
  never writes cannot pass by luck; in verification, inside guard margins
  too (guards.py), so a store past their end shows.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def _is_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.startswith("cuda")
    return False


class CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            args = tuple("cpu" if _is_cuda(a) else a for a in args)
        return func(*args, **kwargs)


_EMPTY_FUNCS = {torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty}


def poison_value(dtype: torch.dtype, kind: str) -> float | int | bool | None:
    """The fill for an allocation: kind "nan" (first run) or "sentinel" (second run)."""
    if dtype.is_floating_point:
        return float("nan") if kind == "nan" else float(torch.finfo(dtype).max)
    if dtype == torch.bool:
        return None
    if dtype.is_complex:
        return None
    info = torch.iinfo(dtype)
    return info.max if kind == "nan" else info.min


class PrefillEmpty(TorchFunctionMode):
    """`guards` (verify/guards.Guards): each allocation is also moved inside guard margins."""

    def __init__(self, kind: str = "nan", guards: Any = None):
        super().__init__()
        self.kind, self.guards = kind, guards

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func in _EMPTY_FUNCS and isinstance(result, torch.Tensor) and result.numel():
            if self.guards is not None:
                result = self.guards.allocate(result)
            value = poison_value(result.dtype, self.kind)
            if value is not None:
                with torch.no_grad():
                    result.fill_(value)
        return result
