"""Device memory around a benchmark case: what one call takes at its peak (reported beside each time: the
kernel's, the reference's, torch.compile's), and what is free for the copies of the inputs the timed calls
rotate through (rotation.py)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..stage import is_cuda_fatal
from ..verify.tensors import synchronize


def peak_memory(fn: Callable[[], Any]) -> int | None:
    """Device memory one call of `fn` takes at its peak, beyond what was allocated before it (its outputs,
    saved tensors and temporaries); None where it cannot be read."""
    try:
        synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn()
        synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        del out
        return max(0, int(peak))
    except Exception as exc:  # noqa: BLE001 - a report beside the time, never a reason to fail
        if is_cuda_fatal(exc):
            raise
        return None


def free_device_bytes() -> int | None:
    """Device memory the input copies may take: free on the device, plus what torch holds unused."""
    try:
        free, _ = torch.cuda.mem_get_info()
        return int(free) + max(0, torch.cuda.memory_reserved() - torch.cuda.memory_allocated())
    except Exception:  # noqa: BLE001 - unknown: the inputs are not copied
        return None
