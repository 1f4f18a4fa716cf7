"""Training kernels (issue 28) for tests/test_training.py: an RMSNorm written the way training-kernel
libraries write one (a torch.autograd.Function; the backward computes dx per row and per-program partial
sums of dw that torch adds up), and broken variants of it. Written for this project."""

RMSNORM_TRAIN = '''"""RMSNorm for training, written as training-kernel libraries write it: a torch.autograd.Function whose
forward saves the per-row inverse RMS, and whose backward computes dx per row and per-program partial
sums of dw, summed by torch at the end."""
import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rms_fwd(x_ptr, w_ptr, y_ptr, rstd_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_bwd(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_ptr, stride, n_rows, n_cols,
             ROWS_PER_PROGRAM: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        if row < n_rows:
            x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
            rstd = tl.load(rstd_ptr + row)
            xhat = x * rstd
            wdy = w * dy
            c = tl.sum(xhat * wdy, axis=0) / n_cols
            dx = (wdy - xhat * c) * rstd
            tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * xhat
    tl.store(dw_ptr + pid * n_cols + cols, dw, mask=mask)


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        rstd = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        block = triton.next_power_of_2(n_cols)
        _rms_fwd[(n_rows,)](x2, w, y, rstd, x2.stride(0), n_cols, EPS, BLOCK=block)
        ctx.save_for_backward(x2, w, rstd)
        ctx.shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, rstd = ctx.saved_tensors
        n_rows, n_cols = x2.shape
        dy2 = dy.reshape(-1, n_cols).contiguous()
        dx = torch.empty_like(x2)
        rows_per_program = 4
        programs = triton.cdiv(n_rows, rows_per_program)
        partial = torch.empty(programs, n_cols, device=x2.device, dtype=torch.float32)
        _rms_bwd[(programs,)](dy2, x2, w, rstd, dx, partial, x2.stride(0), n_rows, n_cols,
                              ROWS_PER_PROGRAM=rows_per_program, BLOCK=triton.next_power_of_2(n_cols))
        return dx.view(ctx.shape), partial.sum(0).to(w.dtype)


def rmsnorm(x, w):
    return RMSNormFunction.apply(x, w)


kernel_fn = rmsnorm


def reference_fn(x, weight):
    xf = x.float() if x.dtype != torch.float64 else x
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * weight.to(xf.dtype)
    return y.to(x.dtype)


CASES = [{"rows": r, "cols": c, "dtype": d} for r, c, d in ((1, 1, "float32"), (9, 127, "float32"), (9, 127, "bfloat16"))]


def get_inputs(rows=7, cols=127, dtype="float32"):
    dt = getattr(torch, dtype)
    x = torch.randn(rows, cols, device="cuda", dtype=dt, requires_grad=True)
    w = torch.randn(cols, device="cuda", dtype=dt, requires_grad=True)
    return [x, w]
'''

# dx without the term through the row's RMS: wrong everywhere
WRONG_DX = RMSNORM_TRAIN.replace("dx = (wdy - xhat * c) * rstd", "dx = wdy * rstd")
# the weight's gradient missing
NO_DW = RMSNORM_TRAIN.replace("return dx.view(ctx.shape), partial.sum(0).to(w.dtype)", "return dx.view(ctx.shape), None")
BROKEN_BACKWARD = '''    @staticmethod
    def backward(ctx, dy):
        x2, w, rstd = ctx.saved_tensors
        xhat = x2 * rstd[:, None]
        dy2 = dy.reshape(x2.shape)
        wdy = w * dy2
        c = (xhat * wdy).mean(-1, keepdim=True)
        return ((wdy - xhat * c) * rstd[:, None]).view(ctx.shape), (dy2 * xhat).sum(0)


'''
# the backward in torch, from the rstd the forward's kernel wrote: torch finishing a Triton kernel's data (passes)
TORCH_BACKWARD = RMSNORM_TRAIN.replace(RMSNORM_TRAIN[RMSNORM_TRAIN.index("    @staticmethod\n    def backward"):
                                                     RMSNORM_TRAIN.index("def rmsnorm(x, w)")], BROKEN_BACKWARD)
# the backward in torch from the inputs alone, rstd recomputed: torch autograd's work, not a Triton kernel's
TORCH_BACKWARD_FROM_INPUTS = TORCH_BACKWARD.replace("ctx.save_for_backward(x2, w, rstd)",
                                                    "ctx.save_for_backward(x2, w)").replace(
    "        x2, w, rstd = ctx.saved_tensors\n",
    "        x2, w = ctx.saved_tensors\n        rstd = torch.rsqrt(x2.float().pow(2).mean(-1) + EPS)\n")

# A fused cross-entropy loss as loss libraries write one: the forward's kernel writes the loss per row and the
# gradient of the mean loss, which the forward saves; torch adds the rows' losses up; the backward hands the
# saved gradient back as it is when the upstream gradient is 1.0, else scales it with a second kernel.
CROSS_ENTROPY = '''import torch
import triton
import triton.language as tl


@triton.jit
def _ce_fwd(logits_ptr, grad_ptr, target_ptr, loss_ptr, stride, n_cols, n_rows, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(logits_ptr + row * stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    target = tl.load(target_ptr + row)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    lse = m + tl.log(s)
    x_t = tl.load(logits_ptr + row * stride + target).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_t)
    p = e / s
    g = tl.where(cols == target, p - 1.0, p) / n_rows
    tl.store(grad_ptr + row * stride + cols, g.to(grad_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _scale(grad_ptr, scale_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    scale = tl.load(scale_ptr)
    g = tl.load(grad_ptr + offs, mask=mask).to(tl.float32)
    tl.store(grad_ptr + offs, (g * scale).to(grad_ptr.dtype.element_ty), mask=mask)


class CrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        n_rows, n_cols = logits.shape
        grad = torch.empty_like(logits)
        loss_rows = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
        _ce_fwd[(n_rows,)](logits, grad, target, loss_rows, logits.stride(0), n_cols, n_rows,
                           BLOCK=triton.next_power_of_2(n_cols))
        ctx.save_for_backward(grad)
        return loss_rows.sum() / n_rows

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        if torch.equal(grad_output, torch.tensor(1.0, device=grad_output.device)):
            return grad, None
        n = grad.numel()
        _scale[(triton.cdiv(n, 1024),)](grad, grad_output.float().reshape(1), n, BLOCK=1024)
        return grad, None


kernel_fn = CrossEntropyFunction.apply


def reference_fn(logits, target):
    return torch.nn.functional.cross_entropy(logits.float() if logits.dtype != torch.float64 else logits, target)


CASES = [{"rows": 8, "cols": 100, "dtype": "float32"}, {"rows": 31, "cols": 1000, "dtype": "bfloat16"}]


def get_inputs(rows=8, cols=100, dtype="float32"):
    logits = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
    target = torch.randint(0, cols, (rows,), device="cuda")
    return [logits, target]
'''

# A fused cross-entropy as loss libraries write one (issue 39): the forward's kernel computes each row's loss and,
# in the same pass, the loss's gradient with respect to the logits, which the forward saves; the backward launches
# nothing, it scales that gradient by the upstream gradient in torch. REDUCTION "mean" or "none".
FUSED_CROSS_ENTROPY = '''"""Cross-entropy whose forward kernel writes the gradient too: the backward only scales it."""
import torch
import triton
import triton.language as tl

REDUCTION = "mean"


@triton.jit
def _loss_and_grad(logits_ptr, logits_stride, grad_ptr, grad_stride, target_ptr, loss_ptr, n_cols, scale,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    x = tl.load(logits_ptr + row * logits_stride + cols, mask=inside, other=float("-inf")).to(tl.float32)
    target = tl.load(target_ptr + row)
    peak = tl.max(x, axis=0)
    e = tl.exp(x - peak)
    total = tl.sum(e, axis=0)
    picked = tl.sum(tl.where(cols == target, x, 0.0), axis=0)
    tl.store(loss_ptr + row, (peak + tl.log(total) - picked) * scale)
    grad = (e / total - tl.where(cols == target, 1.0, 0.0)) * scale
    tl.store(grad_ptr + row * grad_stride + cols, grad.to(grad_ptr.dtype.element_ty), mask=inside)


class FusedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        n_rows, n_cols = logits.shape
        scale = 1.0 / n_rows if REDUCTION == "mean" else 1.0
        loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
        grad = torch.empty_like(logits)
        _loss_and_grad[(n_rows,)](logits, logits.stride(0), grad, grad.stride(0), target, loss, n_cols, scale,
                                  BLOCK=triton.next_power_of_2(n_cols))
        ctx.save_for_backward(grad)
        return loss.sum() if REDUCTION == "mean" else loss

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        if REDUCTION == "none":
            grad_output = grad_output[:, None]
        return grad * grad_output.to(grad.dtype), None


def cross_entropy(logits, target):
    return FusedCrossEntropy.apply(logits, target)


kernel_fn = cross_entropy


def reference_fn(logits, target):
    upcast = logits if logits.dtype == torch.float64 else logits.float()
    return torch.nn.functional.cross_entropy(upcast, target, reduction=REDUCTION)


CASES = [{"rows": 8, "cols": 100, "dtype": "float32"}, {"rows": 13, "cols": 257, "dtype": "bfloat16"}]


def get_inputs(rows=8, cols=100, dtype="float32"):
    logits = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
    target = torch.randint(0, cols, (rows,), device="cuda")
    return [logits, target]
'''
FUSED_CROSS_ENTROPY_NONE = FUSED_CROSS_ENTROPY.replace('REDUCTION = "mean"', 'REDUCTION = "none"')
# The upstream gradient forgotten: right only when it is 1.0 (verification's never is)
FUSED_CROSS_ENTROPY_UNSCALED = FUSED_CROSS_ENTROPY.replace("return grad * grad_output.to(grad.dtype), None",
                                                           "return grad, None")
# The forward's kernel computes the loss only; the backward recomputes the softmax from the saved logits in torch
RECOMPUTED_IN_TORCH = FUSED_CROSS_ENTROPY.replace(
    "        ctx.save_for_backward(grad)\n", "        ctx.save_for_backward(logits, target)\n").replace(
    '''        (grad,) = ctx.saved_tensors
        if REDUCTION == "none":''', '''        logits, target = ctx.saved_tensors
        probs = torch.softmax(logits.float(), dim=-1)
        probs[torch.arange(logits.shape[0], device=logits.device), target] -= 1.0
        grad = (probs / (logits.shape[0] if REDUCTION == "mean" else 1)).to(logits.dtype)
        if REDUCTION == "none":''')
# The loss's values from the Triton kernel, its gradient from torch autograd of a torch cross-entropy
STRAIGHT_THROUGH = FUSED_CROSS_ENTROPY.replace('''def cross_entropy(logits, target):
    return FusedCrossEntropy.apply(logits, target)''', '''def cross_entropy(logits, target):
    with torch.no_grad():
        values = FusedCrossEntropy.apply(logits, target)
    in_torch = torch.nn.functional.cross_entropy(logits.float(), target, reduction=REDUCTION)
    return in_torch + (values - in_torch).detach()''')

# A LayerNorm for training whose backward rounds as a GPU compiler has it round: g = dy * w - mean(g) - xhat * dot
# contracted, the product kept exact in one FMA while the row's sums use it rounded (the fp-contract LLVM applies
# to every Triton kernel; written out here with tl.fma so that the interpreter rounds the same way). Over a
# single column dx is exactly 0 in exact arithmetic, and torch's own float32 autograd, which rounds the product
# once everywhere, gets exactly 0 too; this kernel gets the product's rounding error times rstd = 1/sqrt(eps).
LAYERNORM_TRAIN_FMA = '''"""LayerNorm for training: mean and rstd saved by the forward, dx per row by the backward (the
difference g - mean(g) - xhat * dot in one FMA, as the compiler contracts it), dw and db as per-row partial sums
torch adds."""
import torch
import triton
import triton.language as tl

EPS = 1e-5
SEED = 4  # inputs on which the old floor-only budget failed this correct kernel (dx off by 3.3e-5)


@triton.jit
def _ln_fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centered * centered, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    tl.store(y_ptr + row * stride + cols, centered * rstd * w + b, mask=mask)


@triton.jit
def _ln_bwd(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    g = dy * w
    dot = tl.sum(xhat * g, axis=0) / n_cols
    g_mean = tl.sum(g, axis=0) / n_cols
    dx = tl.fma(dy, w, -(g_mean + xhat * dot)) * rstd
    tl.store(dx_ptr + row * stride + cols, dx, mask=mask)
    tl.store(dw_ptr + row * n_cols + cols, dy * xhat, mask=mask)
    tl.store(db_ptr + row * n_cols + cols, dy, mask=mask)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        mean = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        rstd = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        _ln_fwd[(n_rows,)](x2, w, b, y, mean, rstd, x2.stride(0), n_cols, EPS, BLOCK=triton.next_power_of_2(n_cols))
        ctx.save_for_backward(x2, w, mean, rstd)
        ctx.shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, mean, rstd = ctx.saved_tensors
        n_rows, n_cols = x2.shape
        dy2 = dy.reshape(-1, n_cols).contiguous()
        dx = torch.empty_like(x2)
        dw = torch.empty(n_rows, n_cols, device=x2.device, dtype=torch.float32)
        db = torch.empty(n_rows, n_cols, device=x2.device, dtype=torch.float32)
        _ln_bwd[(n_rows,)](dy2, x2, w, mean, rstd, dx, dw, db, x2.stride(0), n_cols,
                           BLOCK=triton.next_power_of_2(n_cols))
        return dx.view(ctx.shape), dw.sum(0), db.sum(0)


def layernorm(x, w, b):
    return LayerNormFunction.apply(x, w, b)


kernel_fn = layernorm


def reference_fn(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + EPS) * weight + bias


# 64 rows of one column: 64 draws of the product's rounding (the upstream gradients differ), times rstd = 316
CASES = [{"rows": 64, "cols": 1}, {"rows": 9, "cols": 127}]


def get_inputs(rows=9, cols=127):
    # drawn from a seeded generator: the same inputs on every run
    generator = torch.Generator().manual_seed(SEED)
    x, w, b = (torch.randn(shape, generator=generator) for shape in ((rows, cols), (cols,), (cols,)))
    return [t.to("cuda").requires_grad_() for t in (x, w, b)]
'''
# dx without the term through the row's variance: wrong wherever a row has more than one column
LAYERNORM_TRAIN_FMA_WRONG_DX = LAYERNORM_TRAIN_FMA.replace("tl.fma(dy, w, -(g_mean + xhat * dot))",
                                                           "tl.fma(dy, w, -g_mean)")
