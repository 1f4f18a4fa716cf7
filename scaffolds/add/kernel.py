"""add: out = x + y, element by element.

The smallest memory-bound kernel: its speed is the copy bandwidth of the GPU (two reads and
one write per element). The sum is taken in fp32 and rounded once. Any tensor size (indices
are 64-bit). Dtypes: float32, float16, bfloat16; x and y share shape, dtype and device and
must be contiguous (no broadcasting).
"""

import torch
import triton
import triton.language as tl


# Memory-bound: the configs trade bytes in flight per program against the number of programs.
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def add_kernel(
    x_ptr, y_ptr, out_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    # int64: pid * BLOCK_SIZE passes 2**31 on tensors of 2**31 elements and more.
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    # Each element is touched once: stream it past L2 rather than evict reusable data.
    x = tl.load(x_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    tl.store(out_ptr + offsets, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y for tensors of one shape and dtype."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"add: x must be float32, float16 or bfloat16, got {x.dtype}")
    if y.shape != x.shape:
        raise ValueError(f"add: y shape {tuple(y.shape)} differs from x shape {tuple(x.shape)}")
    if y.dtype != x.dtype:
        raise ValueError(f"add: y dtype {y.dtype} differs from x dtype {x.dtype}")
    if y.device != x.device:
        raise ValueError(f"add: y is on {y.device}, x on {x.device}")
    if not x.is_contiguous() or not y.is_contiguous():
        raise ValueError("add: x and y must be contiguous (call .contiguous())")

    out = torch.empty_like(x)
    n_elements = x.numel()
    if n_elements == 0:
        return out
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n_elements)
    return out


kernel_fn = add


def reference_fn(x, y):
    return x + y


def get_inputs(shape=(2**27,), dtype=torch.bfloat16):
    x = torch.randn(shape, device="cuda", dtype=dtype)
    y = torch.randn(shape, device="cuda", dtype=dtype)
    return [x, y]


CASES = [
    # Verification: one element, odd sizes, a size just past the largest block (8192),
    # and a 3-D tensor to check the flattening.
    *[
        {"shape": shape, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for shape in ((1,), (127,), (1000,), (4097,), (8193,), (3, 100, 7))
    ],
    # Benchmark: 8 MiB to 256 MiB per bf16 tensor, well past the 50 MB L2 at the top.
    {"purpose": "bench", "shape": (2**22,), "dtype": torch.bfloat16},
    {"purpose": "bench", "shape": (2**24,), "dtype": torch.bfloat16},
    {"purpose": "bench", "shape": (2**26,), "dtype": torch.bfloat16},
    {"purpose": "bench", "shape": (2**27,), "dtype": torch.bfloat16},
]


def flops(x, y):
    return x.numel()


def bytes_moved(x, y):
    return 3 * x.numel() * x.element_size()
