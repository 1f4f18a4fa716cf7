"""Correct kernels written the way well-known Triton code is written, each wrapped in the contract, and
the broken kernels that must still fail beside them (issue #23: no false alarms, no new misses).

The styles: the Triton tutorials (a module-level DEVICE from the active driver, a kernel compiled with
`warmup` and launched as a CompiledKernel, occupancy from the device's properties), Liger-Kernel (module-level
constexpr constants, a `logger`, `.item()` in a loss launcher, online softmax, launchers returning the
statistics the backward needs), Unsloth (libdevice tanh / erf in GEGLU), FlagGems (a dtype handed to a
@triton.jit helper, `prune_configs_by`, a float `eps` used as a tensor). Written for these tests; shapes are
small and odd so the interpreter runs each in seconds.
"""

HEADER = '''
import logging

import torch
import triton
import triton.language as tl
'''

# -- the tutorials: DEVICE from the driver; compiled with warmup, launched as a CompiledKernel ------------------

TUTORIAL_SOFTMAX = HEADER + '''
DEVICE = triton.runtime.driver.active.get_active_torch_device()
PROPERTIES = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)
SM_COUNT = PROPERTIES["multiprocessor_count"]
REGISTERS_PER_SM = PROPERTIES["max_num_regs"]
SHARED_PER_SM = PROPERTIES["max_shared_mem"]
WARP_SIZE = PROPERTIES["warpSize"]


@triton.jit
def _softmax_rows(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                  num_stages: tl.constexpr):
    first, step = tl.program_id(0), tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    for row in tl.range(first, n_rows, step, num_stages=num_stages):
        values = tl.load(in_ptr + row * in_stride + cols, mask=inside, other=-float("inf"))
        shifted = values - tl.max(values, axis=0)
        numerator = tl.exp(shifted)
        tl.store(out_ptr + row * out_stride + cols, numerator / tl.sum(numerator, axis=0), mask=inside)


def softmax(x):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    num_warps = 8 if block >= 2048 else 4
    num_stages = 2
    y = torch.empty_like(x)
    # Compiled ahead to read its register and shared-memory use: how many programs fit on the GPU.
    kernel = _softmax_rows.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=block,
                                  num_stages=num_stages, num_warps=num_warps, grid=(1,))
    kernel._init_handles()
    per_sm = REGISTERS_PER_SM // (max(kernel.n_regs, 1) * WARP_SIZE * num_warps)
    if kernel.metadata.shared:
        per_sm = min(per_sm, SHARED_PER_SM // kernel.metadata.shared)
    programs = min(SM_COUNT * max(per_sm, 1), n_rows)
    kernel[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, block, num_stages)
    return y


kernel_fn = softmax


def reference_fn(x):
    return torch.softmax(x, dim=-1)


def get_inputs(rows=9, cols=300, dtype=torch.float32):
    return [torch.randn(rows, cols, device=DEVICE, dtype=dtype)]


CASES = [dict(rows=9, cols=300), dict(rows=4, cols=1000, dtype=torch.float16)]
'''

# -- Liger-Kernel: module-level constexprs, a logger, .item() in a loss launcher, online softmax ----------------

LIGER_CROSS_ENTROPY = HEADER + '''
logger = logging.getLogger(__name__)

_REDUCTION_MODE_MEAN: tl.constexpr = tl.constexpr("mean")
_REDUCTION_MODE_SUM: tl.constexpr = tl.constexpr("sum")
MAX_FUSED_SIZE = 65536 // 4


@triton.jit
def _cross_entropy_forward(X_ptr, X_stride, Y_ptr, loss_ptr, n_cols, n_non_ignore, ignore_index,
                           reduction: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    y = tl.load(Y_ptr + row)
    if y == ignore_index:
        tl.store(loss_ptr + row, 0.0)
        return
    X_ptr += row * X_stride
    m = float("-inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + tl.arange(0, BLOCK_SIZE)
        block = tl.load(X_ptr + offsets, mask=offsets < n_cols, other=float("-inf")).to(tl.float32)
        block_max = tl.max(block)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(block - m_new))
        m = m_new
    loss = tl.log(d) + m - tl.load(X_ptr + y).to(tl.float32)
    if reduction == _REDUCTION_MODE_MEAN:
        loss = loss / n_non_ignore
    tl.store(loss_ptr + row, loss)


def liger_cross_entropy(logits, target, ignore_index=-100, reduction="mean"):
    n_rows, n_cols = logits.shape
    block = min(MAX_FUSED_SIZE, triton.next_power_of_2(n_cols))
    loss_1d = torch.zeros(n_rows, dtype=torch.float32, device=logits.device)
    n_non_ignore = (target != ignore_index).sum().item()
    logger.debug("cross entropy over %d rows of %d classes, %d counted", n_rows, n_cols, n_non_ignore)
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    _cross_entropy_forward[(n_rows,)](logits, logits.stride(0), target, loss_1d, n_cols, n_non_ignore,
                                      ignore_index, reduction=reduction, BLOCK_SIZE=block, num_warps=8)
    return torch.sum(loss_1d)


kernel_fn = liger_cross_entropy


def reference_fn(logits, target):
    wide = logits if logits.dtype == torch.float64 else logits.float()
    return torch.nn.functional.cross_entropy(wide, target, ignore_index=-100, reduction="mean")


def get_inputs(rows=7, vocab=1000, dtype=torch.float32):
    logits = torch.randn(rows, vocab, device="cuda", dtype=dtype)
    target = torch.randint(0, vocab, (rows,), device="cuda")
    target[1::3] = -100  # some rows ignored, never all of them
    return [logits, target]


CASES = [dict(rows=7, vocab=1000), dict(rows=5, vocab=4099, dtype=torch.bfloat16)]
'''

# A fused residual add + RMSNorm (the Liger / vLLM shape of it): the residual is stored in the inputs' 16-bit
# dtype and the normalisation reads it back rounded; the launcher returns rstd (float32) for the backward.
FUSED_ADD_RMSNORM = HEADER + '''
@triton.jit
def _fused_add_rms_norm(X, R, W, Y, R_OUT, RSTD, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
    r = tl.load(R + row * stride + cols, mask=mask, other=0.0)
    summed = x + r
    tl.store(R_OUT + row * stride + cols, summed, mask=mask)
    s = summed.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / n_cols + eps)
    tl.store(RSTD + row, rstd)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride + cols, (s * rstd * w).to(Y.dtype.element_ty), mask=mask)


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    rows, cols = x.shape
    y, r_out = torch.empty_like(x), torch.empty_like(x)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    _fused_add_rms_norm[(rows,)](x, residual, weight, y, r_out, rstd, x.stride(0), cols, eps,
                                 BLOCK_SIZE=triton.next_power_of_2(cols))
    return y, r_out, rstd


kernel_fn = fused_add_rms_norm


def reference_fn(x, residual, weight, eps=1e-6):
    summed = x + residual
    s = summed if summed.dtype == torch.float64 else summed.float()
    rstd = torch.rsqrt(s.pow(2).mean(-1) + eps)
    return (s * rstd[:, None] * weight.to(s.dtype)).to(x.dtype), summed, rstd


def get_inputs(rows=6, cols=300, dtype=torch.bfloat16):
    return [torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(rows, cols, device="cuda", dtype=dtype),
            torch.randn(cols, device="cuda", dtype=dtype)]


CASES = [dict(rows=6, cols=300), dict(rows=3, cols=1000, dtype=torch.float16), dict(rows=5, cols=77, dtype=torch.float32)]
'''

# The same op with a real bug: rstd is taken over the un-rounded sum but divides by n_cols + 1.
FUSED_ADD_RMSNORM_WRONG = FUSED_ADD_RMSNORM.replace("tl.sum(s * s, axis=0) / n_cols + eps",
                                                    "tl.sum(s * s, axis=0) / (n_cols + 1) + eps")

# -- Unsloth: GEGLU through libdevice's tanh and erf ---------------------------------------------------------

UNSLOTH_GEGLU = HEADER + '''
from triton.language.extra import libdevice


@triton.jit
def _geglu_tanh_forward(e, g, h, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    e_row = tl.load(e + offsets, mask=mask, other=0).to(tl.float32)
    g_row = tl.load(g + offsets, mask=mask, other=0)
    s = 0.7978845608028654  # sqrt(2 / pi)
    f_row = 0.5 * e_row * (libdevice.tanh(s * e_row * (1.0 + 0.044715 * e_row * e_row)) + 1.0)
    tl.store(h + offsets, f_row.to(g_row.dtype) * g_row, mask=mask)


@triton.jit
def _geglu_exact_forward(e, g, h, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    e_row = tl.load(e + offsets, mask=mask, other=0).to(tl.float32)
    g_row = tl.load(g + offsets, mask=mask, other=0)
    f_row = 0.5 * e_row * (libdevice.erf(e_row * 0.7071067811865476) + 1.0)
    tl.store(h + offsets, f_row.to(g_row.dtype) * g_row, mask=mask)


def geglu(gate, up):
    n = gate.numel()
    tanh_out, exact_out = torch.empty_like(gate), torch.empty_like(gate)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    _geglu_tanh_forward[grid](gate, up, tanh_out, n, BLOCK_SIZE=1024)
    _geglu_exact_forward[grid](gate, up, exact_out, n, BLOCK_SIZE=1024)
    return tanh_out, exact_out


kernel_fn = geglu


def reference_fn(gate, up):
    wide = gate if gate.dtype == torch.float64 else gate.float()
    tanh = torch.nn.functional.gelu(wide, approximate="tanh").to(gate.dtype) * up
    exact = torch.nn.functional.gelu(wide).to(gate.dtype) * up
    return tanh, exact


def get_inputs(tokens=5, hidden=301, dtype=torch.float32):
    return [torch.randn(tokens, hidden, device="cuda", dtype=dtype), torch.randn(tokens, hidden, device="cuda", dtype=dtype)]


CASES = [dict(tokens=5, hidden=301), dict(tokens=3, hidden=700, dtype=torch.bfloat16)]
'''

# The tanh approximation with the wrong constant (0.0447 for 0.044715): values off in the fourth digit.
UNSLOTH_GEGLU_WRONG = UNSLOTH_GEGLU.replace("(1.0 + 0.044715 * e_row * e_row)", "(1.0 + 0.0447 * e_row * e_row)")

# -- FlagGems: a float eps used as a tensor, a dtype handed to a @jit helper, prune_configs_by ------------------

FLAGGEMS_LAYER_NORM = HEADER + '''
def _prune_configs(configs, named_args, **kwargs):
    n = named_args["N"]
    return [c for c in configs if c.kwargs["BLOCK_N"] <= max(64, triton.next_power_of_2(n))] or configs[:1]


@triton.jit
def _store_as(ptr, value, mask, dtype: tl.constexpr):
    tl.store(ptr, value.to(dtype.value), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK_N": 64}, num_warps=2), triton.Config({"BLOCK_N": 256}, num_warps=4)],
                 key=["N"], prune_configs_by={"early_config_prune": _prune_configs})
@triton.jit
def layer_norm_kernel(X, Y, W, B, M, N, eps, OUT_DTYPE: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    X += row * N
    Y += row * N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        centred = tl.where(cols < N, x - mean, 0.0)
        acc += centred * centred
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps.to(tl.float32))
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        _store_as(Y + cols, (x - mean) * rstd * w + b, mask, OUT_DTYPE)


TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


def layer_norm(x, weight, bias, eps=1e-5):
    M, N = x.shape
    y = torch.empty_like(x)
    layer_norm_kernel[(M,)](x.contiguous(), y, weight, bias, M, N, eps, OUT_DTYPE=TL_DTYPES[x.dtype])
    return y


kernel_fn = layer_norm


def reference_fn(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def get_inputs(M=5, N=300, dtype=torch.float32):
    return [torch.randn(M, N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype),
            torch.randn(N, device="cuda", dtype=dtype)]


CASES = [dict(M=5, N=300), dict(M=3, N=1000, dtype=torch.bfloat16)]
'''

# -- sizes the generator must vary: K of a matmul, a shape tuple ---------------------------------------------

MATMUL_HEADER = HEADER + '''
@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & (k + rk[None, :] < K)
        b_mask = (k + rk[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk[None, :]) * stride_ak, mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k + rk[:, None]) * stride_bk + rn[None, :] * stride_bn, mask=b_mask, other=0.0)
        acc += tl.dot(a, b)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    return c


kernel_fn = matmul


def reference_fn(a, b):
    return a @ b


def get_inputs(M=33, N=40, K=64, dtype=torch.float16):
    return [torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)]


CASES = [dict(M=33, N=40, K=64), dict(M=20, N=17, K=32)]
'''
MATMUL_MASKED_K = MATMUL_HEADER
# b's strides passed as if b were contiguous: right on every case of CASES, wrong on a transposed b.
MATMUL_B_STRIDES_ASSUMED = MATMUL_HEADER.replace("b.stride(0), b.stride(1)", "N, 1")
# K unmasked: right whenever K is a multiple of BLOCK_K, as every case in CASES is.
MATMUL_UNMASKED_K = MATMUL_HEADER.replace("a_mask = (rm[:, None] < M) & (k + rk[None, :] < K)",
                                          "a_mask = rm[:, None] < M").replace(
    "b_mask = (k + rk[:, None] < K) & (rn[None, :] < N)", "b_mask = rn[None, :] < N")

SHAPES_HEADER = HEADER + '''
@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def scale(x):
    y = torch.empty_like(x)
    n = x.numel()
    _scale[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
    return y


kernel_fn = scale


def reference_fn(x):
    return x * 3.0


def get_inputs(shape=(1024,), dtype=torch.float32):
    return [torch.randn(shape, device="cuda", dtype=dtype)]


CASES = [dict(shape=(1024,)), dict(shape=(8, 256), dtype=torch.float16)]
'''
SHAPES_MASKED = SHAPES_HEADER
# No mask: right whenever the element count is a multiple of 256, as every case in CASES is.
SHAPES_UNMASKED = SHAPES_HEADER.replace("    mask = offs < n\n    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)",
                                        "    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 3.0)")

# -- refusals and crashes on generated shapes ---------------------------------------------------------------

VECTOR_HEADER = HEADER + '''
@triton.jit
def _add_vec4(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y):
    n = x.numel()
    if n % 4:
        raise ValueError(f"add: {n} elements; this kernel takes multiples of 4 (16-byte vectors)")
    out = torch.empty_like(x)
    _add_vec4[(triton.cdiv(n, 512),)](x, y, out, n, BLOCK=512)
    return out


kernel_fn = add


def reference_fn(x, y):
    return x + y


def get_inputs(n=4096, dtype=torch.float32):
    return [torch.randn(n, device="cuda", dtype=dtype), torch.randn(n, device="cuda", dtype=dtype)]


CASES = [dict(n=4096), dict(n=1000, dtype=torch.float16)]
'''
# An explicit refusal before any launch: generated shapes that are no multiple of 4 are dropped.
REFUSES_ODD_SIZES = VECTOR_HEADER
# A launcher that crashes on small shapes (n // 64 is 0): the case fails, it is no refusal.
CRASHES_ON_SMALL_SIZES = VECTOR_HEADER.replace(
    '''    if n % 4:
        raise ValueError(f"add: {n} elements; this kernel takes multiples of 4 (16-byte vectors)")
    out = torch.empty_like(x)
    _add_vec4[(triton.cdiv(n, 512),)](x, y, out, n, BLOCK=512)''',
    '''    per_program = n // 64
    out = torch.empty_like(x)
    _add_vec4[(triton.cdiv(n, per_program),)](x, y, out, n, BLOCK=triton.next_power_of_2(per_program))''')

# -- an argmax (integer output) -----------------------------------------------------------------------------

ARGMAX = HEADER + '''
@triton.jit
def _argmax_rows(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.argmax(x, axis=0).to(tl.int64))


def argmax(x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=torch.int64, device=x.device)
    _argmax_rows[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
    return out


kernel_fn = argmax


def reference_fn(x):
    return torch.argmax(x, dim=-1)


def get_inputs(rows=6, cols=500, dtype=torch.float32):
    return [torch.randn(rows, cols, device="cuda", dtype=dtype)]


CASES = [dict(rows=6, cols=500), dict(rows=3, cols=129, dtype=torch.float16)]
'''

CORRECT = {"tutorial_softmax": TUTORIAL_SOFTMAX, "liger_cross_entropy": LIGER_CROSS_ENTROPY,
           "fused_add_rmsnorm": FUSED_ADD_RMSNORM, "unsloth_geglu": UNSLOTH_GEGLU,
           "flaggems_layer_norm": FLAGGEMS_LAYER_NORM, "matmul_masked_k": MATMUL_MASKED_K,
           "shapes_masked": SHAPES_MASKED, "refuses_odd_sizes": REFUSES_ODD_SIZES, "argmax": ARGMAX}
BROKEN = {"fused_add_rmsnorm_wrong": FUSED_ADD_RMSNORM_WRONG, "unsloth_geglu_wrong": UNSLOTH_GEGLU_WRONG,
          "matmul_unmasked_k": MATMUL_UNMASKED_K, "shapes_unmasked": SHAPES_UNMASKED,
          "crashes_on_small_sizes": CRASHES_ON_SMALL_SIZES}

# -- what the interpreter cannot run: a verdict on a GPU only ---------------------------------------------------

INLINE_PTX = HEADER + '''
@triton.jit
def _abs_bits(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    # clear the sign bit in PTX, as quantization kernels do their bit work
    y = tl.inline_asm_elementwise("and.b32 $0, $1, 0x7fffffff;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                  pack=1)
    tl.store(y_ptr + offs, y, mask=mask)


def abs_bits(x):
    y = torch.empty_like(x)
    _abs_bits[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


kernel_fn = abs_bits


def reference_fn(x):
    return x.abs()


def get_inputs(n=1000):
    return [torch.randn(n, device="cuda")]


CASES = [dict(n=1000), dict(n=77)]
'''

BESSEL_JN = HEADER + '''
from triton.language.extra import libdevice


@triton.jit
def _bessel_j2(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    tl.store(y_ptr + offs, libdevice.jn(2, x), mask=mask)


def bessel_j2(x):
    y = torch.empty_like(x)
    _bessel_j2[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


kernel_fn = bessel_j2


def reference_fn(x):
    return 2 / x * torch.special.bessel_j1(x) - torch.special.bessel_j0(x)


def get_inputs(n=500):
    return [torch.rand(n, device="cuda") * 4 + 1]


CASES = [dict(n=500)]
'''

GPU_ONLY = {"inline_ptx": INLINE_PTX, "bessel_jn": BESSEL_JN}
