"""matmul: C = A @ B for 2-D A (M, K) and B (K, N), fp32 accumulation, output in A's dtype.

Compute-bound: at 2048^3 and up the tensor cores, not memory, set the pace, so the art is
keeping them fed. Two kernels, picked by what the operands allow:

- matmul_tma_kernel, fp16/bf16 operands whose rows are 16-byte aligned (the usual case): a
  persistent kernel. One program per SM walks the output tiles in grouped order (neighbouring
  tiles share A and B tiles in L2); the tensor memory accelerator (TMA) copies each A and B
  tile into shared memory, num_stages tiles ahead, and the loop over K feeds Hopper's wgmma.
  Persistence overlaps one tile's epilogue with the next tile's loads (H100, bf16 and fp16:
  0.98x cuBLAS at 2048^3, 1.07-1.1x at 4096^3, 0.99x at 8192^3, against 0.92-0.98x for the
  pointer kernel).
- matmul_kernel, anything else (fp32 operands, odd strides such as K = 97 in fp16, any GPU):
  the Triton tutorial's tiled GEMM with pointer loads, one program per output tile.
Both accept B stored transposed (an nn.Linear weight seen as (K, N)).
Limits: small problems leave SMs idle with large tiles (1024^3: 32 tiles of 128 x 256 on 132
SMs), so under 2048^2 outputs the pointer kernel runs with 64 x 128 tiles; at 1024^3 that is
0.86x cuBLAS: each SM computes one tile over a 16-step K loop, and the pipeline's fill and the
epilogue are a large part of 8 µs. fp32 operands use TF32 (tl.dot's default, as torch.mm on
Ampere and later): expect ~1e-3 relative error, not 1e-6.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


# The TMA kernel's one config (H100, bf16 and fp16, 2048^3 to 8192^3: 0.98-1.1x cuBLAS):
# 128 x 256 tiles for two warpgroups (8 warps); 3 stages of A + B tiles (48 KiB each) fit in
# shared memory beside the epilogue's C tile (4 do not: 256 KiB). One config, not a search:
# every config costs a compile on the first call, and the live loop recompiles on every save.
TMA_BLOCK_M, TMA_BLOCK_N, TMA_BLOCK_K = 128, 256, 64
TMA_NUM_STAGES, TMA_NUM_WARPS = 3, 8
# Below this many output elements, 128 x 256 tiles leave SMs idle (1024^2: 32 tiles on 132 SMs):
# the pointer kernel's small tiles do better (1024^3: 0.86x cuBLAS against 0.50x).
TMA_MIN_OUTPUT = 2048 * 2048


def _keep_configs_for_size(configs, named_args, **kwargs):
    # Compile only the config meant for this problem size: each config costs a compile (about a
    # second) on the first call, and the live loop recompiles on every save.
    large = named_args["M"] * named_args["N"] >= TMA_MIN_OUTPUT
    kept = [c for c in configs if (c.kwargs["BLOCK_M"] == 128) == large]
    return kept or configs


@triton.jit
def matmul_tma_kernel(
    a_desc, b_desc, c_desc,
    M, N, K,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, B_TRANSPOSED: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # flatten: the loop over tiles and the loop over K become one software pipeline, so the
    # next tile's first loads are in flight during this tile's last products and its store.
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        # Grouped ordering: GROUP_SIZE_M tile-rows swept column by column share B tiles in L2.
        group_id = tile // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile % group_size_m)
        pid_n = (tile % num_pid_in_group) // group_size_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            # Out-of-bounds parts of a block arrive as zeros: no masks on M, N or the K tail.
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            if B_TRANSPOSED:
                b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T
            else:
                b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        # The TMA store writes only the part of the tile inside C.
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


# Pointer-kernel configs, one per problem size (pruned, so each shape compiles one). fp32 tiles
# halve their K step in the kernel so that the pipeline still fits in shared memory.
@triton.autotune(
    configs=[
        # Large problems (H100 bf16, 2048^3 to 8192^3: 0.94-0.98x cuBLAS; the TMA kernel does better
        # where it can run).
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        # Small problems: 64 x 128 tiles give every SM one (1024^3: 128 tiles; 0.86x cuBLAS, the best
        # of 10 tile shapes tried).
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
    ],
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": _keep_configs_for_size},
)
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Grouped ordering, as in the TMA kernel.
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


def _tma_ready(t):
    """A row-major 2-D tensor the TMA can copy from: unit column stride, 16-byte aligned rows."""
    return t.stride(1) == 1 and t.stride(0) * t.element_size() % 16 == 0 and t.data_ptr() % 16 == 0


def _tma_usable(a, b_rows, c):
    if a.dtype not in (torch.float16, torch.bfloat16):
        return False
    if a.is_cuda and torch.cuda.get_device_capability(a.device)[0] < 9:
        return False  # the TMA arrived with Hopper
    return all(_tma_ready(t) for t in (a, b_rows, c))


def _sm_count(device):
    if device.type != "cuda":
        return 4  # the Triton interpreter on the CPU: a few programs, each walking several tiles
    return torch.cuda.get_device_properties(device).multi_processor_count


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
    # B stored transposed (unit stride down its columns) is copied as the row-major (N, K) it is.
    b_transposed = b.stride(0) == 1 and b.stride(1) != 1
    b_rows = b.t() if b_transposed else b
    # The interpreter (no GPU) takes the TMA kernel whenever it can, so that verification on the
    # CPU covers it on small cases too.
    if (M * N >= TMA_MIN_OUTPUT or not a.is_cuda) and _tma_usable(a, b_rows, c):
        num_sms = _sm_count(a.device)
        # A descriptor says which tensor, and the shape of the block each TMA copy moves.
        a_desc = TensorDescriptor.from_tensor(a, [TMA_BLOCK_M, TMA_BLOCK_K])
        b_block = [TMA_BLOCK_N, TMA_BLOCK_K] if b_transposed else [TMA_BLOCK_K, TMA_BLOCK_N]
        b_desc = TensorDescriptor.from_tensor(b_rows, b_block)
        c_desc = TensorDescriptor.from_tensor(c, [TMA_BLOCK_M, TMA_BLOCK_N])
        tiles = triton.cdiv(M, TMA_BLOCK_M) * triton.cdiv(N, TMA_BLOCK_N)
        matmul_tma_kernel[(min(num_sms, tiles),)](
            a_desc, b_desc, c_desc, M, N, K,
            NUM_SMS=num_sms, BLOCK_M=TMA_BLOCK_M, BLOCK_N=TMA_BLOCK_N, BLOCK_K=TMA_BLOCK_K, GROUP_SIZE_M=8,
            B_TRANSPOSED=b_transposed, num_stages=TMA_NUM_STAGES, num_warps=TMA_NUM_WARPS,
        )
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
    # every dtype on the first two, and B stored transposed (an nn.Linear weight). Under the
    # interpreter, aligned fp16/bf16 shapes (multiples of 8) take the TMA kernel and the others
    # the pointer kernel; on a GPU, small problems take the pointer kernel, and the TMA kernel is
    # checked on the benchmark shapes (before and after timing).
    *[
        {"m": m, "n": n, "k": k, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for m, n, k in ((1, 1, 1), (65, 129, 97))
    ],
    {"m": 127, "n": 257, "k": 65, "dtype": torch.bfloat16},
    {"m": 127, "n": 257, "k": 65, "dtype": torch.float32},
    {"m": 260, "n": 33, "k": 130, "dtype": torch.float16},
    {"m": 65, "n": 129, "k": 97, "dtype": torch.bfloat16, "b_transposed": True},
    {"m": 72, "n": 136, "k": 40, "dtype": torch.bfloat16},
    {"m": 40, "n": 72, "k": 136, "dtype": torch.float16, "b_transposed": True},
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
