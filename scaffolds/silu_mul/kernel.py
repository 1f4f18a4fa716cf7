"""silu_mul: SwiGLU gating, out = silu(gate) * up = gate * sigmoid(gate) * up, element by element.

gate and up are separate tensors of one shape (split a fused [..., 2 * d] projection with
.chunk(2, -1) and .contiguous() first). fp32 math whatever the input dtype; any tensor size
(indices are 64-bit). Dtypes: float32, float16, bfloat16; gate and up share shape, dtype and
device and must be contiguous.
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
def silu_mul_kernel(
    gate_ptr, up_ptr, out_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    # int64: pid * BLOCK_SIZE passes 2**31 on tensors of 2**31 elements and more.
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    # Each element is touched once: stream it past L2 rather than evict reusable data.
    gate = tl.load(gate_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    up = tl.load(up_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    # exp in fp32: in half precision exp(-gate) overflows for gate < -11.
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for tensors of one shape and dtype."""
    if gate.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"silu_mul: gate must be float32, float16 or bfloat16, got {gate.dtype}")
    if up.shape != gate.shape:
        raise ValueError(f"silu_mul: up shape {tuple(up.shape)} differs from gate shape {tuple(gate.shape)}")
    if up.dtype != gate.dtype:
        raise ValueError(f"silu_mul: up dtype {up.dtype} differs from gate dtype {gate.dtype}")
    if up.device != gate.device:
        raise ValueError(f"silu_mul: up is on {up.device}, gate on {gate.device}")
    if not gate.is_contiguous() or not up.is_contiguous():
        raise ValueError("silu_mul: gate and up must be contiguous (call .contiguous())")

    out = torch.empty_like(gate)
    n_elements = gate.numel()
    if n_elements == 0:
        return out
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    silu_mul_kernel[grid](gate, up, out, n_elements)
    return out


kernel_fn = silu_mul


def reference_fn(gate, up):
    return gate * torch.sigmoid(gate) * up


def get_inputs(shape=(2**27,), dtype=torch.bfloat16):
    # gate spread wide enough to reach both saturated ends of the sigmoid.
    gate = torch.randn(shape, device="cuda", dtype=dtype) * 4.0
    up = torch.randn(shape, device="cuda", dtype=dtype)
    return [gate, up]


CASES = [
    # Verification: one element, odd sizes, a size just past the largest block (8192),
    # and a 3-D (tokens, hidden) shape to check the flattening.
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


def flops(gate, up):
    # negate, exp (counted as one), plus one, divide, multiply
    return 5 * gate.numel()


def bytes_moved(gate, up):
    return 3 * gate.numel() * gate.element_size()
