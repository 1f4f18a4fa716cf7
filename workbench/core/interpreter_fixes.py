"""Work-arounds for the Triton interpreter, applied in interpreter workers only.

The interpreter keeps bfloat16 values as their raw 16 bits (numpy has no
bfloat16) and `tl.dot` multiplies those bits as integers, so a bf16 matrix
product is wrong on the CPU while the same kernel is right on a GPU
(triton-lang/triton#11584). Widening bf16 operands to float32 first gives the
product a GPU computes with an fp32 accumulator.
"""

from __future__ import annotations

from typing import Any


def apply() -> list[str]:
    """Patch what the installed interpreter needs; returns the names of the fixes applied."""
    applied = []
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return applied
    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle = getattr(interpreter, "TensorHandle", None)
    original = getattr(builder, "create_dot", None)
    if original is None or handle is None or getattr(original, "_workbench_fixed", False):
        return applied

    def widen(h: Any) -> Any:
        if h.dtype.scalar == tl.bfloat16:
            return handle((h.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return h

    def create_dot(self: Any, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        return original(self, widen(a), widen(b), *args, **kwargs)

    create_dot._workbench_fixed = True  # type: ignore[attr-defined]
    builder.create_dot = create_dot
    applied.append("bf16 tl.dot")
    return applied
