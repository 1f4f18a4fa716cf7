"""The streaming copies that measure the copy ceiling (device.py), beside torch's own copy.

A ceiling is only one if nothing the workbench times beats it, so the copy ceiling is the best
of several ways to stream a buffer far larger than the L2 through the GPU: torch's copy kernel
and a plain Triton read-and-write copy at a few tile sizes (bytes in flight per program against
programs in flight). Imported by the worker only: it needs torch and triton.
"""

from __future__ import annotations

from typing import Any, Callable

import triton
import triton.language as tl

# (elements per program, warps): 16 bytes per thread per load, 4 to 16 loads in flight per thread.
TRITON_COPY_CONFIGS = ((4096, 4), (8192, 8), (16384, 8), (16384, 16))


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    # Each word is touched once: let it leave L2 first.
    words = tl.load(src_ptr + offsets, mask=mask, eviction_policy="evict_first")
    tl.store(dst_ptr + offsets, words, mask=mask)


def triton_copy(src: Any, dst: Any, block: int, num_warps: int) -> Callable[[], None]:
    """A call that copies src into dst (same shape, contiguous) with one Triton launch."""
    n = src.numel()
    grid = (triton.cdiv(n, block),)

    def call() -> None:
        _copy_kernel[grid](src, dst, n, BLOCK=block, num_warps=num_warps)

    return call


def copy_methods(src: Any, dst: Any) -> list[tuple[str, Callable[[], None]]]:
    """Every streaming copy of src into dst the ceiling is the best of: (label, call)."""
    methods: list[tuple[str, Callable[[], None]]] = [("torch copy_", lambda: dst.copy_(src))]
    for block, warps in TRITON_COPY_CONFIGS:
        methods.append((f"triton copy BLOCK={block} num_warps={warps}", triton_copy(src, dst, block, warps)))
    return methods
