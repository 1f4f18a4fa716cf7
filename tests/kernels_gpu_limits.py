"""Kernels at the edge of what a GPU can run or how precisely it multiplies: autotune configs that need more
shared memory than the GPU has (the autotuner skips them), and float32 matmuls that tl.dot runs in TF32 by
default. Written for tests/test_gpu_limits.py; the matmuls follow the Triton tutorial's layout (a grouped
program order, a K loop, an fp32 accumulator) and are small enough for the interpreter."""

import kernels

# A config this GPU cannot launch, made to raise what Triton raises when it loads one (the interpreter has no
# shared memory to run out of): its pre_hook runs where Triton would load the compiled kernel, before launching.
TOO_BIG = '''
from triton.runtime.errors import OutOfResources


def _load_on_a_small_gpu(nargs):
    raise OutOfResources(262144, 232448, "shared memory")

''' + kernels.KERNEL.replace('triton.Config({"BLOCK": 128})], key=["n"])',
                             'triton.Config({"BLOCK": 128}),\n                          '
                             'triton.Config({"BLOCK": 1024}, pre_hook=_load_on_a_small_gpu)], key=["n"])')

ONE_CONFIG_TOO_BIG = kernels.kernel_source(kernel=TOO_BIG)
# ... and another config that launches and is wrong
ONE_TOO_BIG_ONE_WRONG = kernels.kernel_source(kernel=TOO_BIG.replace("y = x * 2.0",
                                                                     "y = x * 2.0 if BLOCK != 128 else x * 3.0"))

# The tutorial's configs and one more: six stages of two 128x128 fp16 tiles, ~320 KB of shared memory where a
# Hopper GPU has 228 KB
TUTORIAL_CONFIGS = '''CONFIGS = [
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_stages=3, num_warps=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=6, num_warps=8),
]'''
ONE_CONFIG = '''CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=3, num_warps=4),
]'''

MATMUL_TEMPLATE = '''
import torch
import triton
import triton.language as tl

CONFIGS


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    programs_m = tl.cdiv(M, BLOCK_M)
    programs_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * programs_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_m = min(programs_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % per_group) % group_m)
    pid_n = (pid % per_group) // group_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b):
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1))
    return c


kernel_fn = matmul


def reference_fn(a, b):
    return a @ b


def get_inputs(M=127, N=97, K=200, dtype="float16"):
    dt = getattr(torch, dtype)
    return [torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)]


CASES = [dict(M=127, N=97, K=200), dict(M=256, N=256, K=512)]
'''

# fp16, with a config that needs more shared memory than an H100 has
MATMUL_TUTORIAL = MATMUL_TEMPLATE.replace("CONFIGS\n", TUTORIAL_CONFIGS + "\n", 1)
# float32 inputs, one config: tl.dot multiplies them in TF32 unless told otherwise. K = 32: TF32's errors (rounded
# or truncated to 10 bits) then stay inside TF32's tolerance on every seed tried, and far outside float32's
MATMUL_FP32 = MATMUL_TEMPLATE.replace("CONFIGS\n", ONE_CONFIG + "\n", 1).replace(
    'dtype="float16"', 'dtype="float32"').replace(
    "CASES = [dict(M=127, N=97, K=200), dict(M=256, N=256, K=512)]", "CASES = [dict(M=127, N=100, K=32)]")
# ... asked to multiply in IEEE float32
MATMUL_FP32_IEEE = MATMUL_FP32.replace("acc = tl.dot(a, b, acc)", 'acc = tl.dot(a, b, acc, input_precision="ieee")')
