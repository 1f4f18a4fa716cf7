"""A GPU worker compiles and launches one tiny kernel while it warms up.

A process's first Triton compile pays for more than the kernel: the backend's
set-up, the code generator's first pass, the driver's helper module and the launch
path. A warm worker pays those before a save needs them, so the save's run pays for
the user's kernels alone. The launch uses the workbench's own Triton cache (never a
project's); a second, compile-only variant goes to a throwaway cache, so the code
generator has run once in this process too.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import triton
import triton.language as tl

from ..timing.device import cache_root


@triton.jit
def _bump(ptr, n, STEP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(ptr + offs, tl.load(ptr + offs, mask=mask) + STEP, mask=mask)


def warm_compiler(torch: Any) -> None:
    saved = os.environ.get("TRITON_CACHE_DIR")
    try:
        os.environ["TRITON_CACHE_DIR"] = str(cache_root() / "warmup-triton-cache")
        x = torch.zeros(16, device="cuda")
        _bump[(1,)](x, 16, STEP=1, BLOCK=16)
        torch.cuda.synchronize()
        with tempfile.TemporaryDirectory(prefix="workbench-warmup-") as scratch:
            os.environ["TRITON_CACHE_DIR"] = scratch
            _bump.warmup(x, 16, STEP=2, BLOCK=16, grid=(1,))
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved
