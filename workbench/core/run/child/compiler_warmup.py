"""A GPU worker compiles and launches one tiny kernel, and runs the battery's torch ops once, while it warms up.

A process's first Triton compile pays for more than the kernel: the backend's
set-up, the code generator's first pass, the driver's helper module and the launch
path. A warm worker pays those before a save needs them, so the save's run pays for
the user's kernels alone. The launch uses the workbench's own Triton cache (never a
project's); a second, compile-only variant goes to a throwaway cache, so the code
generator has run once in this process too.

CUDA loads each of torch's kernels on its first use (lazy module loading), a few milliseconds each;
the kernel's process uses dozens on the GPU (random inputs, the NaN prefill, a float64 reference,
copies for the judge, a benchmark case's random draw for the judge, and the comparison of the benchmark's
re-check; the verdicts' comparison runs
in the judge, on the CPU). `warm_battery_ops` runs those once per dtype, a failing comparison
included, so a save's first case does not pay for the loads.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable

import triton
import triton.language as tl

from ...timing.device import cache_root


@triton.jit
def _bump(ptr, n, STEP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(ptr + offs, tl.load(ptr + offs, mask=mask) + STEP, mask=mask)


def warm_compiler(torch: Any, done: Callable[[str], None] = lambda step: None) -> None:
    """`done(step)` after each step (the worker's warm-up phases)."""
    saved = os.environ.get("TRITON_CACHE_DIR")
    try:
        os.environ["TRITON_CACHE_DIR"] = str(cache_root() / "warmup-triton-cache")
        x = torch.zeros(16, device="cuda")
        _bump[(1,)](x, 16, STEP=1, BLOCK=16)
        torch.cuda.synchronize()
        done("a Triton launch")
        with tempfile.TemporaryDirectory(prefix="workbench-warmup-") as scratch:
            os.environ["TRITON_CACHE_DIR"] = scratch
            _bump.warmup(x, 16, STEP=2, BLOCK=16, grid=(1,))
        done("a Triton compile")
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved


def warm_battery_ops(torch: Any) -> None:
    from ...project.config import Tolerance
    from ...verify.compare import compare, tensors_equal_bitwise
    from ...verify.handoff import CaseData
    from ...verify.judge import unwritten_mask

    tol = Tolerance(rtol=1e-3, atol=1e-3, rel_norm=1e-3)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        ref = torch.randn(4, 64, device="cuda", dtype=dtype)
        expected = ref.double().pow(2).mean(dim=-1, keepdim=True).rsqrt() * ref.double()
        out = torch.empty_like(ref).fill_(float("nan"))
        out.copy_(expected.to(dtype))
        out[-1, -1] += 1  # a failure: its worst element, pattern and error map
        second = out.clone()
        compare(out, expected, tol, unwritten_mask(out, second))
        tensors_equal_bitwise(out, second).all()
        out.cpu()  # the hand-off to the judge copies every tensor to host memory
        CaseData(case_index=0, label="").sample([out], [expected], limit=16)  # a benchmark case's random draw
    torch.cuda.synchronize()
