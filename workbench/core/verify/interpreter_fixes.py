"""Fixes and checks for the Triton interpreter, applied in interpreter workers only.

- bf16 `tl.dot`: the interpreter keeps bfloat16 values as their raw 16 bits
  (numpy has no bfloat16) and multiplies those bits as integers, so a bf16
  matrix product is wrong on the CPU while the same kernel is right on a GPU
  (triton-lang/triton#11584). Widening the operands to float32 first gives the
  product a GPU computes with an fp32 accumulator.
- Bounds: the interpreter loads and stores through raw host pointers with no
  check, so a missing mask corrupts the worker's heap (a crash later, or
  nothing at all). Every active lane of a load or store is checked against the
  launch's tensor arguments first, and an access outside all of them raises
  `OutOfBoundsAccess` naming the argument it ran past: on the CPU, the check
  compute-sanitizer's memcheck makes on a GPU.
"""

from __future__ import annotations

from typing import Any


class OutOfBoundsAccess(Exception):
    """A load or store outside every tensor argument of the launch (a missing or wrong mask?)."""


def apply() -> list[str]:
    """Patch what the installed interpreter needs; returns the names of the fixes applied."""
    applied = []
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return applied
    if _check_bounds(interpreter, np):
        applied.append("bounds checks")
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


class _LaunchMemory:
    """The byte ranges of the current launch's tensor arguments: (start, end, name, element size)."""

    ranges: list[tuple[int, int, str, int]] = []


def _check_bounds(interpreter: Any, np: Any) -> bool:
    executor = getattr(interpreter, "GridExecutor", None)
    builder = getattr(interpreter, "InterpreterBuilder", None)
    init_args = getattr(executor, "_init_args_hst", None)
    load = getattr(builder, "create_masked_load", None)
    store = getattr(builder, "create_masked_store", None)
    if None in (init_args, load, store) or getattr(load, "_workbench_fixed", False):
        return False

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        named = list(zip(getattr(self, "arg_names", []), args_hst)) + list(kwargs_hst.items())
        ranges = []
        for name, arg in named:
            storage = getattr(arg, "untyped_storage", None)
            if storage is None:
                continue
            st = storage()
            ranges.append((st.data_ptr(), st.data_ptr() + st.nbytes(), name, arg.element_size()))
        _LaunchMemory.ranges = ranges
        return args_hst, kwargs_hst

    def check(kind: str, ptrs: Any, mask: Any) -> None:
        if not _LaunchMemory.ranges:
            return
        addresses = ptrs.data.astype(np.uint64)
        active = np.broadcast_to(mask.data.astype(bool), addresses.shape)
        wanted = addresses[active]
        if wanted.size == 0:
            return
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        inside = np.zeros(wanted.shape, dtype=bool)
        for start, end, _, _ in _LaunchMemory.ranges:
            inside |= (wanted >= start) & (wanted + size <= end)
        if inside.all():
            return
        bad = wanted[~inside]
        first = int(bad[0])
        start, end, name, esize = min(_LaunchMemory.ranges,
                                      key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
        index = (first - start) // max(esize, 1)
        raise OutOfBoundsAccess(
            f"out-of-bounds {kind}: {bad.size} of {wanted.size} active lanes outside every tensor argument; "
            f"the first at element {index} of {name} (which holds {(end - start) // max(esize, 1)}): "
            "a missing or wrong mask?")

    def masked_load(self: Any, ptrs: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        check("load", ptrs, mask)
        return load(self, ptrs, mask, *args, **kwargs)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        check("store", ptrs, mask)
        return store(self, ptrs, value, mask, *args, **kwargs)

    masked_load._workbench_fixed = True  # type: ignore[attr-defined]
    executor._init_args_hst = init_args_hst
    builder.create_masked_load = masked_load
    builder.create_masked_store = masked_store
    return True
