"""gelu: exact GELU, out = 0.5 * x * (1 + erf(x / sqrt(2))), element by element.

The erf form (PyTorch's default, approximate="none"), not the tanh approximation; computed in
fp32 whatever the input dtype. Any tensor size (indices are 64-bit).
Dtypes: float32, float16, bfloat16; x must be contiguous.
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
def gelu_kernel(
    x_ptr, out_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    # int64: pid * BLOCK_SIZE passes 2**31 on tensors of 2**31 elements and more.
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    # Each element is touched once: stream it past L2 rather than evict reusable data.
    x = tl.load(x_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    # erf is only accurate (and on some versions only defined) in fp32.
    out = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact (erf) GELU of x."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"gelu: x must be float32, float16 or bfloat16, got {x.dtype}")
    if not x.is_contiguous():
        raise ValueError("gelu: x must be contiguous (call .contiguous())")

    out = torch.empty_like(x)
    n_elements = x.numel()
    if n_elements == 0:
        return out
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    gelu_kernel[grid](x, out, n_elements)
    return out


kernel_fn = gelu


def reference_fn(x):
    # PyTorch's exact GELU, written out: renaming this scaffold replaces its name as a word
    # everywhere in the file, and would rename a call to the built-in too.
    return 0.5 * x * (1.0 + torch.erf(x * 0.7071067811865476))


def get_inputs(shape=(2**27,), dtype=torch.bfloat16):
    # Scaled so that both tails (out ~ 0 and out ~ x) and the curved middle are exercised.
    return [torch.randn(shape, device="cuda", dtype=dtype) * 3.0]


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


def flops(x):
    # scale, erf (counted as one), plus one, two multiplies
    return 5 * x.numel()


def bytes_moved(x):
    return 2 * x.numel() * x.element_size()
