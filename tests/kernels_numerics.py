"""Kernels for the error model (tests/test_error_model.py, and on a GPU tests/test_verify_gpu.py): correct
kernels whose error is torch's own in their dtype, written as the libraries that ship such kernels write them,
and broken ones whose error is truly larger than the dtype allows. Written for this project.

Correct:
- HF_ADD_RMSNORM: a fused residual add + RMSNorm as Hugging Face models run it (the residual kept in the
  16-bit dtype, rstd in float32 from that rounded residual, the weight applied after the cast back).
- LAYERNORM_16BIT_STATS: a training LayerNorm whose forward saves mean and rstd in the input's 16-bit dtype
  and whose backward reads them back (a production library's choice), dw/db from per-program partial sums. Its
  domain is narrower than the value stress: a mean of rows offset by 64 saved in float16 loses the digits the
  backward needs (grad weight 109x torch's own error on an H200), so it declares `value_stress = false`
  (WORKBENCH_TOML).
- INT8_QUANT: a per-token int8 quantiser equal to reference_fn at the inputs' own precision (ties at .5
  round as torch rounds them there, not as the float64 reference does).
- DICT_OUTPUTS: a kernel returning a dict built in another key order than the reference's.

Broken:
- RMSNORM_16BIT_PARTIALS: the sum of squares of a long row accumulated in the input's 16-bit dtype.
- INT8_QUANT_TRUNCATES: q = int(x / scale), truncated toward zero rather than rounded.
- DICT_WRONG_KEY, TUPLE_FOR_TENSOR: the output structure not the reference's.
"""

HEADER = '''
import torch
import triton
import triton.language as tl
'''

HF_ADD_RMSNORM = HEADER + '''
EPS = 1e-6


@triton.jit
def _add_rms_norm(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    res = tl.load(res_ptr + row * stride + cols, mask=mask, other=0.0)
    hidden = x + res  # rounded to the 16-bit dtype, as the model keeps its residual stream
    tl.store(res_out_ptr + row * stride + cols, hidden, mask=mask)
    h = hidden.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    normed = (h * rstd).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + row * stride + cols, w * normed, mask=mask)


def add_rms_norm(x, residual, weight):
    shape = x.shape
    x2, r2 = x.reshape(-1, shape[-1]), residual.reshape(-1, shape[-1])
    y, res_out = torch.empty_like(x2), torch.empty_like(x2)
    _add_rms_norm[(x2.shape[0],)](x2, r2, weight, y, res_out, x2.stride(0), shape[-1], EPS,
                                  BLOCK=triton.next_power_of_2(shape[-1]))
    return y.view(shape), res_out.view(shape)


kernel_fn = add_rms_norm


def reference_fn(x, residual, weight):
    hidden = x + residual
    h = hidden.to(torch.float32) if hidden.dtype != torch.float64 else hidden
    variance = h.pow(2).mean(-1, keepdim=True)
    normed = h * torch.rsqrt(variance + EPS)
    return weight * normed.to(x.dtype), hidden


def get_inputs(rows=8, cols=512, dtype="bfloat16"):
    dt = getattr(torch, dtype)
    return [torch.randn(rows, cols, device="cuda", dtype=dt), torch.randn(rows, cols, device="cuda", dtype=dt),
            torch.rand(cols, device="cuda", dtype=dt) + 0.5]


CASES = [{"rows": r, "cols": c, "dtype": d}
         for r, c in ((1, 8), (7, 127), (16, 512), (5, 1000))
         for d in ("bfloat16", "float16", "float32")]
'''

LAYERNORM_16BIT_STATS = HEADER + '''
import logging

logger = logging.getLogger(__name__)
EPS = 1e-5
ROWS_PER_PROGRAM = 4


@triton.jit
def _ln_forward(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centered * centered, axis=0) / n_cols + eps)
    # the statistics are saved in the input's dtype, and the backward reads them back rounded
    tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
    tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (centered * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ln_backward(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride, n_rows, n_cols,
                 ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    db = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(ROWS):
        row = pid * ROWS + i
        if row < n_rows:
            x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
            mean = tl.load(mean_ptr + row).to(tl.float32)
            rstd = tl.load(rstd_ptr + row).to(tl.float32)
            xhat = tl.where(mask, (x - mean) * rstd, 0.0)
            wdy = tl.where(mask, w * dy, 0.0)
            c1 = tl.sum(xhat * wdy, axis=0) / n_cols
            c2 = tl.sum(wdy, axis=0) / n_cols
            dx = (wdy - (xhat * c1 + c2)) * rstd
            tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * xhat
            db += dy
    tl.store(dw_ptr + pid * n_cols + cols, dw, mask=mask)
    tl.store(db_ptr + pid * n_cols + cols, db, mask=mask)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        mean = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        rstd = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        _ln_forward[(n_rows,)](x2, weight, bias, y, mean, rstd, x2.stride(0), n_cols, EPS,
                               BLOCK=triton.next_power_of_2(n_cols))
        logger.debug("layer norm forward: %d rows of %d", n_rows, n_cols)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, mean, rstd = ctx.saved_tensors
        n_rows, n_cols = x2.shape
        dy2 = dy.reshape(-1, n_cols).contiguous()
        dx = torch.empty_like(x2)
        programs = triton.cdiv(n_rows, ROWS_PER_PROGRAM)
        dw = torch.empty(programs, n_cols, device=x2.device, dtype=torch.float32)
        db = torch.empty(programs, n_cols, device=x2.device, dtype=torch.float32)
        _ln_backward[(programs,)](dy2, x2, weight, mean, rstd, dx, dw, db, x2.stride(0), n_rows, n_cols,
                                  ROWS=ROWS_PER_PROGRAM, BLOCK=triton.next_power_of_2(n_cols))
        return dx.view(ctx.shape), dw.sum(0).to(weight.dtype), db.sum(0).to(weight.dtype)


def layer_norm(x, weight, bias):
    return LayerNormFunction.apply(x, weight, bias)


kernel_fn = layer_norm


def reference_fn(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def get_inputs(rows=16, cols=256, dtype="bfloat16"):
    dt = getattr(torch, dtype)
    x = torch.randn(rows, cols, device="cuda", dtype=dt, requires_grad=True)
    w = (torch.rand(cols, device="cuda", dtype=dt) + 0.5).requires_grad_(True)
    b = torch.randn(cols, device="cuda", dtype=dt, requires_grad=True)
    return [x, w, b]


CASES = [{"rows": r, "cols": c, "dtype": d}
         for r, c in ((3, 4), (16, 256), (33, 300))
         for d in ("bfloat16", "float16", "float32")]
'''

INT8_QUANT = HEADER + '''
@triton.jit
def _per_token_quant(x_ptr, q_ptr, scale_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    absmax = tl.max(tl.abs(x), axis=0).to(tl.float32)
    # every step rounded to the input's dtype, as torch computes it there
    scale = tl.maximum(absmax / 127.0, 1e-6).to(x.dtype)
    tl.store(scale_ptr + row, scale)
    quotient = tl.math.div_rn(x.to(tl.float32), scale.to(tl.float32)).to(x.dtype).to(tl.float32)
    # round half to even, as torch.round: the nearest integer, then ties moved to the even one
    nearest = tl.floor(quotient + 0.5)
    tie = (nearest - quotient) == 0.5
    odd = (nearest - 2.0 * tl.floor(nearest * 0.5)) == 1.0
    rounded = tl.where(tie & odd, nearest - 1.0, nearest)
    tl.store(q_ptr + row * stride + cols, rounded.to(tl.int8), mask=mask)


def per_token_quant(x):
    rows, cols = x.shape
    q = torch.empty(rows, cols, device=x.device, dtype=torch.int8)
    scale = torch.empty(rows, 1, device=x.device, dtype=x.dtype)
    _per_token_quant[(rows,)](x, q, scale, x.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return q, scale


kernel_fn = per_token_quant


def reference_fn(x):
    scale = (x.abs().amax(-1, keepdim=True) / 127.0).clamp_min(1e-6)
    return torch.round(x / scale).to(torch.int8), scale


def get_inputs(rows=64, cols=1000, dtype="float16"):
    return [torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype))]


CASES = [{"rows": r, "cols": c, "dtype": d} for r, c in ((32, 512), (5, 127)) for d in ("float16", "float32")]
'''

INT8_QUANT_TRUNCATES = INT8_QUANT.replace("tl.store(q_ptr + row * stride + cols, rounded.to(tl.int8), mask=mask)",
                                          "tl.store(q_ptr + row * stride + cols, quotient.to(tl.int8), mask=mask)")

RMSNORM_16BIT_PARTIALS = HEADER + '''
EPS = 1e-6
CHUNK = 32


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, stride, n_cols, eps, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    # the bug: the running sum of squares kept in the input's 16-bit dtype, rounded at every chunk
    total = tl.zeros((1,), dtype=x_ptr.dtype.element_ty)
    for start in range(0, n_cols, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        total += tl.sum(x * x, axis=0).to(x_ptr.dtype.element_ty)
    rstd = tl.rsqrt(tl.sum(total.to(tl.float32), axis=0) / n_cols + eps)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight):
    y = torch.empty_like(x)
    _rms_norm[(x.shape[0],)](x, weight, y, x.stride(0), x.shape[1], EPS, CHUNK=CHUNK,
                             BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


kernel_fn = rms_norm


def reference_fn(x, weight):
    xf = x.float() if x.dtype != torch.float64 else x
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * weight.to(xf.dtype)).to(x.dtype)


def get_inputs(rows=2, cols=16384, dtype="bfloat16"):
    dt = getattr(torch, dtype)
    return [torch.randn(rows, cols, device="cuda", dtype=dt), torch.rand(cols, device="cuda", dtype=dt) + 0.5]


CASES = [{"rows": 2, "cols": 16384, "dtype": "bfloat16"}, {"rows": 2, "cols": 16384, "dtype": "float16"}]
'''

DICT_OUTPUTS = HEADER + '''
@triton.jit
def _gate_and_scale(x_ptr, gate_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    gate = tl.sigmoid(x)
    tl.store(gate_ptr + offs, gate.to(gate_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + offs, (x * gate).to(y_ptr.dtype.element_ty), mask=mask)


def gate_and_scale(x):
    gate, y = torch.empty_like(x), torch.empty_like(x)
    n = x.numel()
    _gate_and_scale[(triton.cdiv(n, 256),)](x, gate, y, n, BLOCK=256)
    return {"gate": gate, "y": y}


kernel_fn = gate_and_scale


def reference_fn(x):
    gate = torch.sigmoid(x)
    return {"y": x * gate, "gate": gate}


def get_inputs(n=1000, dtype="float32"):
    return [torch.randn(n, device="cuda", dtype=getattr(torch, dtype))]


CASES = [{"n": 1000}, {"n": 77, "dtype": "float16"}]
'''

DICT_WRONG_KEY = DICT_OUTPUTS.replace('return {"gate": gate, "y": y}', 'return {"gate": gate, "out": y}')

TUPLE_FOR_TENSOR = DICT_OUTPUTS.replace('return {"gate": gate, "y": y}', 'return (y,)').replace(
    'return {"y": x * gate, "gate": gate}', 'return x * gate')

# -- value stress (verify/value_stress.py): right on randn inputs, wrong at other scales --------------------------

SOFTMAX_STABLE = HEADER + '''
@triton.jit
def _softmax(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    _softmax[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


kernel_fn = softmax


def reference_fn(x):
    return torch.softmax(x, dim=-1)


def get_inputs(rows=8, cols=300, dtype="float32"):
    return [torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype))]


CASES = [{"rows": 8, "cols": 300}, {"rows": 5, "cols": 1000, "dtype": "float16"}]
'''

# the row max never subtracted: exp overflows once logits pass ~88
SOFTMAX_NO_MAX = SOFTMAX_STABLE.replace("z = x - tl.max(x, axis=0)", "z = x")

LAYERNORM_TWO_PASS = HEADER + '''
@triton.jit
def _layer_norm(x_ptr, w_ptr, b_ptr, y_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = centered * tl.rsqrt(var + eps) * w + b
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x, weight, bias, eps=1e-5):
    y = torch.empty_like(x)
    _layer_norm[(x.shape[0],)](x, weight, bias, y, x.stride(0), x.shape[1], eps,
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


kernel_fn = layer_norm


def reference_fn(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def get_inputs(rows=8, cols=256, dtype="float32"):
    dt = getattr(torch, dtype)
    return [torch.randn(rows, cols, device="cuda", dtype=dt), torch.rand(cols, device="cuda", dtype=dt) + 0.5,
            torch.randn(cols, device="cuda", dtype=dt)]


CASES = [{"rows": 8, "cols": 256}, {"rows": 4, "cols": 1000, "dtype": "bfloat16"}]
'''

# the variance as E[x^2] - E[x]^2: cancels to noise once the row carries a common offset
LAYERNORM_ONE_PASS_VARIANCE = LAYERNORM_TWO_PASS.replace(
    "var = tl.sum(centered * centered, axis=0) / n_cols",
    "var = tl.sum(x * x, axis=0) / n_cols - mean * mean")

# The workbench.toml a fixture declares (the others have none).
WORKBENCH_TOML = {
    "LAYERNORM_16BIT_STATS": "[verify]\n# the mean is saved in the 16-bit dtype: rows far from zero lose digits by design\n"
                             "value_stress = false\n",
}

# -- large index (verify/large_index.py): right below 2^31 elements, wrong past it --------------------------------

ROW_SCALE_INT64 = HEADER + '''
import logging

logger = logging.getLogger(__name__)
MAX_COLS = 4096  # one row per program, the whole row in one block


@triton.jit
def _row_scale(x_ptr, w_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # row * stride passes 2^31 on large activations
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + cols, x * w, mask=mask)


def row_scale(x, weight):
    if x.shape[-1] > MAX_COLS:
        raise ValueError(f"row_scale: at most {MAX_COLS} columns, got {x.shape[-1]}")
    x2 = x.reshape(-1, x.shape[-1])
    y = torch.empty_like(x2)
    logger.debug("row_scale %s", tuple(x2.shape))
    _row_scale[(x2.shape[0],)](x2, weight, y, x2.stride(0), x2.shape[1], BLOCK=triton.next_power_of_2(x2.shape[1]))
    return y.view(x.shape)


kernel_fn = row_scale


def reference_fn(x, weight):
    return x * weight


def get_inputs(rows=8, cols=300, dtype="float32"):
    dt = getattr(torch, dtype)
    return [torch.randn(rows, cols, device="cuda", dtype=dt), torch.randn(cols, device="cuda", dtype=dt)]


CASES = [{"rows": 8, "cols": 300}, {"rows": 5, "cols": 1000, "dtype": "bfloat16"}]
'''

# the row index left 32 bits wide: row * stride wraps once x passes 2^31 elements
ROW_SCALE_INT32 = ROW_SCALE_INT64.replace("row = tl.program_id(0).to(tl.int64)", "row = tl.program_id(0)")

SILU_TRAIN_INT64 = HEADER + '''
BLOCK = 1024


@triton.jit
def _silu_fwd(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * tl.sigmoid(x)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(x)
    tl.store(dx_ptr + offs, (dy * s * (1 + x * (1 - s))).to(dx_ptr.dtype.element_ty), mask=mask)


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)
        _silu_fwd[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        dx = torch.empty_like(x)
        _silu_bwd[(triton.cdiv(x.numel(), BLOCK),)](x, dy.contiguous(), dx, x.numel(), BLOCK=BLOCK)
        return dx


def silu(x):
    return SiLU.apply(x.contiguous())


kernel_fn = silu


def reference_fn(x):
    return torch.nn.functional.silu(x)


def get_inputs(n=1000, dtype="bfloat16"):
    return [torch.randn(n, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)]


CASES = [{"n": 1000}, {"n": 777}]
'''

# the backward's block offset left 32 bits wide: the gradient past 2^31 elements is another block's
SILU_TRAIN_BWD_INT32 = SILU_TRAIN_INT64.replace(
    "def _silu_bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.program_id(0).to(tl.int64) * BLOCK",
    "def _silu_bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.program_id(0) * BLOCK")
