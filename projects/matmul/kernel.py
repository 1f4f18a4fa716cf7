"""matmul: C = A @ B for 2-D A (M, K) and B (K, N), fp32 accumulation, output in A's dtype.

Tiled GEMM in the style of the Triton matmul tutorial: each program computes one
BLOCK_M x BLOCK_N tile of C, walking K in BLOCK_K steps; programs are ordered in groups of
GROUP_SIZE_M tile-rows so that neighbouring programs share A and B tiles in L2.
Any M, N, K and any strides (a transposed view of B is fine).
Dtypes: float16, bfloat16 (tensor cores), float32 (tl.dot rounds fp32 operands to TF32, as
torch.mm does by default on Ampere and later: expect ~1e-3 relative error, not 1e-6).
"""

import torch
import triton
import triton.language as tl


# fp16/bf16 tiles for Hopper (H100): 128 x 256 x 64 reached 92% of cuBLAS at 8192^3 bf16; the
# smaller tiles keep enough programs in flight when M or N is small. Each config's pipeline
# (num_stages copies of an A and a B tile) stays under 160 KiB of shared memory; fp32 operands
# halve the K step in the kernel to stay there too.
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Grouped ordering: GROUP_SIZE_M tile-rows are swept column by column, so the B tiles a
    # wave of programs loads are reused from L2 instead of being fetched once per tile-row.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows and columns past the edge wrap round to valid ones, so the loads in the loop need
    # no M/N mask; the results they produce are dropped by the masked store.
    # int64: row * stride passes 2**31 on matrices of 2**31 elements and more.
    offs_am = ((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M).to(tl.int64)
    offs_bn = ((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N).to(tl.int64)
    # fp32 tiles take twice the shared memory: a halved K step keeps every config's pipeline
    # inside the SM (128 x 256 x 64 in fp32, three stages deep, would not fit).
    K_STEP: tl.constexpr = BLOCK_K // 2 if a_ptr.dtype.element_ty == tl.float32 else BLOCK_K
    offs_k = tl.arange(0, K_STEP)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, K_STEP)):
        k_remaining = K - k * K_STEP
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += K_STEP * stride_ak
        b_ptrs += K_STEP * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm.to(tl.int64)[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for 2-D a (M, K) and b (K, N) of one dtype; returns (M, N) in that dtype."""
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"matmul: a and b must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"matmul: a must be float32, float16 or bfloat16, got {a.dtype}")
    if b.dtype != a.dtype:
        raise ValueError(f"matmul: b dtype {b.dtype} differs from a dtype {a.dtype}")
    if b.device != a.device:
        raise ValueError(f"matmul: b is on {b.device}, a on {a.device}")

    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    matmul_kernel[grid](
        a, b, c,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        M, N, K,
    )
    return c


kernel_fn = matmul


def reference_fn(a, b):
    return a @ b


def get_inputs(m=8192, n=8192, k=8192, dtype=torch.bfloat16, b_transposed=False):
    # a scaled by 1/sqrt(k) keeps outputs near unit scale whatever k is, as in a network layer;
    # plain randn would give outputs (and TF32 rounding errors) that grow like sqrt(k), and an
    # absolute tolerance would then judge k rather than the kernel.
    a = torch.randn(m, k, device="cuda", dtype=dtype) * k ** -0.5
    if b_transposed:
        # (N, K) storage seen as (K, N): the layout of an nn.Linear weight.
        b = torch.randn(n, k, device="cuda", dtype=dtype).t()
    else:
        b = torch.randn(k, n, device="cuda", dtype=dtype)
    return [a, b]


CASES = [
    # Verification: 1x1x1, sizes just past tile sizes (65, 129, 257) and K tails (97, 65, 130),
    # every dtype on the first two, and B stored transposed (an nn.Linear weight).
    *[
        {"m": m, "n": n, "k": k, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for m, n, k in ((1, 1, 1), (65, 129, 97))
    ],
    {"m": 127, "n": 257, "k": 65, "dtype": torch.bfloat16},
    {"m": 127, "n": 257, "k": 65, "dtype": torch.float32},
    {"m": 260, "n": 33, "k": 130, "dtype": torch.float16},
    {"m": 65, "n": 129, "k": 97, "dtype": torch.bfloat16, "b_transposed": True},
    # Benchmark: square bf16 problems from launch-bound to compute-bound.
    {"purpose": "bench", "m": 1024, "n": 1024, "k": 1024, "dtype": torch.bfloat16},
    {"purpose": "bench", "m": 2048, "n": 2048, "k": 2048, "dtype": torch.bfloat16},
    {"purpose": "bench", "m": 4096, "n": 4096, "k": 4096, "dtype": torch.bfloat16},
    {"purpose": "bench", "m": 8192, "n": 8192, "k": 8192, "dtype": torch.bfloat16},
]


def flops(a, b):
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def bytes_moved(a, b):
    M, K = a.shape
    N = b.shape[1]
    return (M * K + K * N + M * N) * a.element_size()
