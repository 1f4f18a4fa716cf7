"""silu_mul for training: SwiGLU gating out = silu(gate) * up = gate * sigmoid(gate) * up, with its backward.

kernel_fn is a torch.autograd.Function: the forward launches a Triton kernel and saves gate and up
(the inputs, nothing computed from them); the backward launches one fused Triton kernel that
recomputes sigmoid(gate) and writes both gradients,
    d_up   = dy * silu(gate)
    d_gate = dy * up * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate))).
Element by element and memory-bound: the forward reads gate and up and writes out (3 element sizes
per element), the backward reads gate, up and dy and writes d_gate and d_up (5). Recomputing the
sigmoid costs an exp; saving it would cost a write in the forward and a read in the backward.

gate and up are separate tensors of one shape (split a fused [..., 2 * d] projection with
.chunk(2, -1) and .contiguous() first). fp32 math whatever the input dtype; any tensor size
(indices are 64-bit). Dtypes: float32, float16, bfloat16; gate and up share shape, dtype and
device and must be contiguous. The inputs need not require grad: then only the forward runs.
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
def silu_mul_fwd_kernel(
    gate_ptr, up_ptr, out_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    # int64: pid * BLOCK_SIZE passes 2**31 on tensors of 2**31 elements and more.
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    # Each element is read once in this pass: stream it past L2 rather than evict reusable data.
    gate = tl.load(gate_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    up = tl.load(up_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    # exp in fp32: in half precision exp(-gate) overflows for gate < -11.
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


# Three loads and two stores per element: the same trade as the forward, with fewer configs (each
# one is verified under the interpreter, forward and backward together).
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def silu_mul_bwd_kernel(
    gate_ptr, up_ptr, dy_ptr, dgate_ptr, dup_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    gate = tl.load(gate_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    up = tl.load(up_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    dy = tl.load(dy_ptr + offsets, mask=mask, eviction_policy="evict_first").to(tl.float32)
    # sigmoid recomputed in fp32. For gate < -88, exp(-gate) is inf and sig is 0: both gradients
    # come out 0 (times a finite factor), never NaN.
    sig = 1.0 / (1.0 + tl.exp(-gate))
    silu = gate * sig
    # d silu / d gate = sig + gate * sig * (1 - sig) = sig * (1 + gate * (1 - sig))
    dgate = dy * up * sig * (1.0 + gate * (1.0 - sig))
    dup = dy * silu
    tl.store(dgate_ptr + offsets, dgate.to(dgate_ptr.dtype.element_ty), mask=mask)
    tl.store(dup_ptr + offsets, dup.to(dup_ptr.dtype.element_ty), mask=mask)


def silu_mul_fwd(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """The forward: silu(gate) * up for tensors of one shape and dtype."""
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
    silu_mul_fwd_kernel[grid](gate, up, out, n_elements)
    return out


def silu_mul_bwd(gate: torch.Tensor, up: torch.Tensor, dy: torch.Tensor):
    """The backward: (d_gate, d_up) for the upstream gradient dy, from the forward's inputs."""
    if dy.shape != gate.shape:
        raise ValueError(f"silu_mul: dy shape {tuple(dy.shape)} differs from gate shape {tuple(gate.shape)}")
    # The upstream gradient may come expanded (the backward of a .sum()) or strided: one copy.
    dy = dy.to(gate.dtype).contiguous()
    dgate = torch.empty_like(gate)
    dup = torch.empty_like(up)
    n_elements = gate.numel()
    if n_elements == 0:
        return dgate, dup
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    silu_mul_bwd_kernel[grid](gate, up, dy, dgate, dup, n_elements)
    return dgate, dup


class SiluMulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up):
        out = silu_mul_fwd(gate, up)
        # The inputs only: the backward recomputes the sigmoid rather than read a saved one.
        ctx.save_for_backward(gate, up)
        return out

    @staticmethod
    def backward(ctx, dy):
        gate, up = ctx.saved_tensors
        dgate, dup = silu_mul_bwd(gate, up, dy)
        return (dgate if ctx.needs_input_grad[0] else None, dup if ctx.needs_input_grad[1] else None)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for tensors of one shape and dtype, differentiable in both."""
    return SiluMulFunction.apply(gate, up)


kernel_fn = silu_mul


def reference_fn(gate, up):
    return gate * torch.sigmoid(gate) * up


def get_inputs(shape=(2**27,), dtype=torch.bfloat16):
    # gate spread wide enough to reach both saturated ends of the sigmoid.
    gate = (torch.randn(shape, device="cuda", dtype=dtype) * 4.0).requires_grad_()
    up = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    return [gate, up]


CASES = [
    # Verification (the interpreter runs the forward and the backward of each, with every config
    # of both kernels): one element, odd sizes, a size just past the largest block (8192), and a
    # 3-D (tokens, hidden) shape to check the flattening.
    *[
        {"shape": shape, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for shape in ((1,), (127,), (4097,), (8193,), (3, 100, 7))
    ],
    # Benchmark: 8 MiB to 256 MiB per bf16 tensor, well past the 50 MB L2 at the top.
    {"purpose": "bench", "shape": (2**22,), "dtype": torch.bfloat16},
    {"purpose": "bench", "shape": (2**24,), "dtype": torch.bfloat16},
    {"purpose": "bench", "shape": (2**26,), "dtype": torch.bfloat16},
    {"purpose": "bench", "shape": (2**27,), "dtype": torch.bfloat16},
]

MODES = ("fwd", "bwd", "full")


def flops(gate, up, mode="full"):
    """fwd: negate, exp (counted as one), plus one, divide, multiply. bwd: the sigmoid again (4), then
    silu, d_up, 1 - sig, times gate, plus one, and three multiplies for d_gate (8). full: both."""
    if mode not in MODES:
        raise ValueError(f"silu_mul: mode must be one of {MODES}, got {mode!r}")
    per_element = {"fwd": 5, "bwd": 12, "full": 17}[mode]
    return per_element * gate.numel()


def bytes_moved(gate, up, mode="full"):
    """The least each pass must move: fwd reads gate and up and writes out; bwd reads gate, up and dy
    and writes d_gate and d_up."""
    if mode not in MODES:
        raise ValueError(f"silu_mul: mode must be one of {MODES}, got {mode!r}")
    tensors = {"fwd": 3, "bwd": 5, "full": 8}[mode]
    return tensors * gate.numel() * gate.element_size()
