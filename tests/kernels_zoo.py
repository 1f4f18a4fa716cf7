"""Correct kernels in the style of the Triton tutorials and of public fused-op libraries (norms,
SwiGLU, RoPE, cross entropy, an autotuned matmul): every check must let them pass unchanged.
Shapes are small and odd so the interpreter runs them in seconds."""

HEADER = '''
import torch
import triton
import triton.language as tl
'''

RMSNORM = HEADER + '''
@triton.jit
def _rms_norm_fwd(X, W, Y, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def rms_norm(x, w, eps=1e-6):
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    y = torch.empty_like(x2)
    _rms_norm_fwd[(x2.shape[0],)](x2, w, y, x2.stride(0), x2.shape[1], eps,
                                   BLOCK_SIZE=triton.next_power_of_2(x2.shape[1]))
    return y.view_as(x)


kernel_fn = rms_norm


def reference_fn(x, w, eps=1e-6):
    xf = x.float() if x.dtype != torch.float64 else x
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)


def get_inputs(rows=7, cols=100, dtype=torch.float32):
    return [torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(cols, device="cuda", dtype=dtype)]


CASES = [dict(rows=7, cols=100), dict(rows=3, cols=33, dtype=torch.float16)]
'''

SWIGLU = HEADER + '''
@triton.jit
def _swiglu_fwd(A, B, C, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0)
    c = (a * tl.sigmoid(a)).to(b.dtype) * b
    tl.store(C + offs, c, mask=mask)


def swiglu(a, b):
    c = torch.empty_like(a)
    n = a.numel()
    _swiglu_fwd[(triton.cdiv(n, 256),)](a, b, c, n, BLOCK=256)
    return c


kernel_fn = swiglu


def reference_fn(a, b):
    return torch.nn.functional.silu(a) * b


def get_inputs(tokens=5, hidden=300, dtype=torch.float32):
    return [torch.randn(tokens, hidden, device="cuda", dtype=dtype),
            torch.randn(tokens, hidden, device="cuda", dtype=dtype)]


CASES = [dict(tokens=5, hidden=300), dict(tokens=3, hidden=77, dtype=torch.float16)]
'''

ROPE = HEADER + '''
@triton.jit
def _rope_fwd(X, COS, SIN, Y, stride_x, HALF: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    d = tl.arange(0, BLOCK)
    mask = d < HALF
    x1 = tl.load(X + row * stride_x + d, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(X + row * stride_x + HALF + d, mask=mask, other=0.0).to(tl.float32)
    cos = tl.load(COS + row * HALF + d, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(SIN + row * HALF + d, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_x + d, (x1 * cos - x2 * sin).to(Y.dtype.element_ty), mask=mask)
    tl.store(Y + row * stride_x + HALF + d, (x2 * cos + x1 * sin).to(Y.dtype.element_ty), mask=mask)


def rope(x, cos, sin):
    seq, head_dim = x.shape
    assert head_dim % 2 == 0, "head_dim must be even"
    y = torch.empty_like(x)
    half = head_dim // 2
    _rope_fwd[(seq,)](x, cos, sin, y, x.stride(0), HALF=half, BLOCK=triton.next_power_of_2(half))
    return y


kernel_fn = rope


def reference_fn(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def get_inputs(seq=9, head_dim=64, dtype=torch.float32):
    angles = torch.rand(seq, head_dim // 2, device="cuda") * 6.28
    return [torch.randn(seq, head_dim, device="cuda", dtype=dtype), angles.cos().to(dtype), angles.sin().to(dtype)]


CASES = [dict(seq=9, head_dim=64), dict(seq=5, head_dim=24, dtype=torch.float16)]
'''

CROSS_ENTROPY = HEADER + '''
@triton.jit
def _cross_entropy_fwd(LOGITS, TARGET, LOSS, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    logits = tl.load(LOGITS + row * stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(logits, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(logits - m), axis=0))
    target = tl.load(TARGET + row)
    picked = tl.load(LOGITS + row * stride + target).to(tl.float32)
    tl.store(LOSS + row, lse - picked)


def cross_entropy(logits, target):
    rows, cols = logits.shape
    loss = torch.empty(rows, device=logits.device, dtype=torch.float32)
    _cross_entropy_fwd[(rows,)](logits, target, loss, logits.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return loss


kernel_fn = cross_entropy


def reference_fn(logits, target):
    return torch.nn.functional.cross_entropy(logits.float() if logits.dtype != torch.float64 else logits, target,
                                             reduction="none")


def get_inputs(rows=6, vocab=500, dtype=torch.float32):
    return [torch.randn(rows, vocab, device="cuda", dtype=dtype),
            torch.randint(0, vocab, (rows,), device="cuda")]


CASES = [dict(rows=6, vocab=500), dict(rows=4, vocab=129, dtype=torch.float16)]
'''

MATMUL = HEADER + '''
@triton.autotune(
    configs=[triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}, num_warps=4),
             triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 4}, num_warps=4)],
    key=["M", "N", "K"])
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                         c.stride(1))
    return c


kernel_fn = matmul


def reference_fn(a, b):
    return a @ b


def get_inputs(M=33, N=40, K=19, dtype=torch.float32):
    return [torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)]


CASES = [dict(M=33, N=40, K=19), dict(M=20, N=17, K=32, dtype=torch.float16)]
'''

LAYERNORM = HEADER + '''
@triton.jit
def _layer_norm_fwd(X, Y, W, B, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    b = tl.load(B + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=mask)


def layer_norm(x, weight, bias, eps=1e-5):
    y = torch.empty_like(x)
    M, N = x.shape
    _layer_norm_fwd[(M,)](x, y, weight, bias, x.stride(0), N, eps, BLOCK_SIZE=triton.next_power_of_2(N))
    return y


kernel_fn = layer_norm


def reference_fn(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def get_inputs(M=6, N=200, dtype=torch.float32):
    return [torch.randn(M, N, device="cuda", dtype=dtype), torch.rand(N, device="cuda", dtype=dtype) + 0.5,
            torch.randn(N, device="cuda", dtype=dtype)]


CASES = [dict(M=6, N=200), dict(M=3, N=65, dtype=torch.float16)]
'''

ZOO = {"rmsnorm": RMSNORM, "swiglu": SWIGLU, "rope": ROPE, "cross_entropy": CROSS_ENTROPY, "matmul": MATMUL,
       "layernorm": LAYERNORM}
