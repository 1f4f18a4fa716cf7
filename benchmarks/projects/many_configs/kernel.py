"""layer_norm: LayerNorm for training with autotuned Triton kernels, written the way a kernel library ships one.

    y = (x - mean) / sqrt(var + eps) * weight + bias        (over the last dimension, var biased)

A torch.autograd.Function launches four autotuned kernels:
- _layer_norm_fwd_kernel: BLOCK_M rows per program, streamed in BLOCK_N-column tiles three times (mean,
  centred variance, normalise), saving each row's mean and rstd in fp32;
- _layer_norm_bwd_dx_kernel: BLOCK_M rows per program, two passes (each row's sums c1 = mean(xhat * g) and
  c2 = mean(g) with g = dy * weight, then dx = rstd * (g - xhat * c1 - c2));
- _layer_norm_bwd_dwdb_partial_kernel: a (column block, row group) grid, each program summing dy * xhat and
  dy over its group's rows in BLOCK_M x BLOCK_N tiles into one fp32 row of the partials;
- _layer_norm_bwd_dwdb_reduce_kernel: the partials summed per column, stored in the weight's dtype.

Every kernel tunes over the full cross product of its tile sizes, warps and pipeline stages (488 configs in
all: 144 + 144 + 128 + 72). The lists are kept whole; `prune_configs_by` narrows what the autotuner times for
a given row width (no tile much wider than the row, no more threads than elements, no tiny tiles on very wide
rows, no tile that would hold too many elements per thread), and every kernel masks and loops so that any
config, pruned or not, computes the right result on any shape.
Dtypes: float32, float16, bfloat16 (x, weight and bias share one); all statistics and sums are fp32.
"""

import logging

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)

# The search space of the row kernels (forward and dx): BLOCK_M rows per program, BLOCK_N columns per step.
# Largest tiles first, here and below.
ROW_BLOCK_M = (8, 1)
ROW_BLOCK_N = (2048, 512, 128)
ROW_NUM_WARPS = (1, 2, 4, 8, 16, 32)
ROW_NUM_STAGES = (1, 2, 3, 4)
# The dweight / dbias partial sums: BLOCK_M rows x BLOCK_N columns per step.
PARTIAL_BLOCK_M = (32, 16, 8, 4)
PARTIAL_BLOCK_N = (256, 128, 64, 32)
PARTIAL_NUM_WARPS = (1, 2, 4, 8)
PARTIAL_NUM_STAGES = (1, 2)
# The reduction of the partials: BLOCK_G partial rows x BLOCK_N columns per step.
REDUCE_BLOCK_G = (32, 16, 8)
REDUCE_BLOCK_N = (256, 128, 64, 32)
REDUCE_NUM_WARPS = (1, 2, 4)
REDUCE_NUM_STAGES = (1, 2)

# Pruning: rows this wide skip the small tiles (a 128-column tile loops 64 times over 8192 columns).
WIDE_ROW = 8192
MIN_WIDE_ROW_BLOCK = 512
# A thread holding more than this many fp32 elements of one tile spills on sm_80 / sm_90.
MAX_ELEMENTS_PER_THREAD = 64

# Row groups of the partial sums: about this many per SM, and no more than one per MIN_ROWS_PER_GROUP rows.
GROUPS_PER_SM = 2
MIN_ROWS_PER_GROUP = 8
# Row groups without a GPU (the interpreter runs the programs one after another).
INTERPRETER_GROUPS = 4

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _row_configs():
    return [
        triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_warps=num_warps, num_stages=num_stages)
        for block_m in ROW_BLOCK_M
        for block_n in ROW_BLOCK_N
        for num_warps in ROW_NUM_WARPS
        for num_stages in ROW_NUM_STAGES
    ]


def _partial_configs():
    return [
        triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_warps=num_warps, num_stages=num_stages)
        for block_m in PARTIAL_BLOCK_M
        for block_n in PARTIAL_BLOCK_N
        for num_warps in PARTIAL_NUM_WARPS
        for num_stages in PARTIAL_NUM_STAGES
    ]


def _reduce_configs():
    return [
        triton.Config({"BLOCK_G": block_g, "BLOCK_N": block_n}, num_warps=num_warps, num_stages=num_stages)
        for block_g in REDUCE_BLOCK_G
        for block_n in REDUCE_BLOCK_N
        for num_warps in REDUCE_NUM_WARPS
        for num_stages in REDUCE_NUM_STAGES
    ]


def _prune_row_configs(configs, named_args, **kwargs):
    n_cols = named_args["N"]
    # The narrowest tile that holds a whole row (the widest one when none does): wider ones only mask.
    widest = min([b for b in ROW_BLOCK_N if b >= n_cols] or [max(ROW_BLOCK_N)])
    kept = []
    for config in configs:
        block_m, block_n = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
        threads = 32 * config.num_warps
        if block_n > widest or threads > block_m * block_n:
            continue
        # Rows are packed only when a whole row fits in one tile.
        if block_m > 1 and block_n < n_cols:
            continue
        if block_m * block_n // threads > MAX_ELEMENTS_PER_THREAD:
            continue
        if n_cols >= WIDE_ROW and block_n < MIN_WIDE_ROW_BLOCK:
            continue
        kept.append(config)
    return kept or configs  # the autotuner refuses an empty list


def _prune_tile_configs(configs, named_args, **kwargs):
    n_cols = named_args["N"]
    widest = max(triton.next_power_of_2(n_cols), min(PARTIAL_BLOCK_N + REDUCE_BLOCK_N))
    kept = []
    for config in configs:
        block_n = config.kwargs["BLOCK_N"]
        rows = config.kwargs.get("BLOCK_M", config.kwargs.get("BLOCK_G"))
        threads = 32 * config.num_warps
        if block_n > widest or threads > rows * block_n:
            continue
        if rows * block_n // threads > MAX_ELEMENTS_PER_THREAD:
            continue
        kept.append(config)
    return kept or configs  # the autotuner refuses an empty list


@triton.autotune(configs=_row_configs(), key=["N"], prune_configs_by={"early_config_prune": _prune_row_configs})
@triton.jit
def _layer_norm_fwd_kernel(
    X, Y, W, B, Mean, Rstd,
    stride_x_row, stride_y_row,
    M, N, eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # BLOCK_M rows per program, each streamed in BLOCK_N-column tiles.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    x_rows = X + rows[:, None] * stride_x_row
    y_rows = Y + rows[:, None] * stride_y_row
    offs = tl.arange(0, BLOCK_N)

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_mask[:, None] & (cols < N)[None, :]
        acc += tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=1) / N

    # The variance of the centred values: sum(x**2) / N - mean**2 loses the digits a large mean carries.
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = row_mask[:, None] & (cols < N)[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        centred = tl.where(mask, x - mean[:, None], 0.0)
        acc += centred * centred
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / N + eps)
    tl.store(Mean + rows, mean, mask=row_mask)
    tl.store(Rstd + rows, rstd, mask=row_mask)

    for start in range(0, N, BLOCK_N):
        cols = start + offs
        col_mask = cols < N
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_rows + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.autotune(configs=_row_configs(), key=["N"], prune_configs_by={"early_config_prune": _prune_row_configs})
@triton.jit
def _layer_norm_bwd_dx_kernel(
    X, DY, DX, W, Mean, Rstd,
    stride_x_row, stride_dy_row, stride_dx_row,
    M, N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    x_rows = X + rows[:, None] * stride_x_row
    dy_rows = DY + rows[:, None] * stride_dy_row
    dx_rows = DX + rows[:, None] * stride_dx_row
    offs = tl.arange(0, BLOCK_N)
    mean = tl.load(Mean + rows, mask=row_mask, other=0.0)
    rstd = tl.load(Rstd + rows, mask=row_mask, other=0.0)

    acc_xg = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        col_mask = cols < N
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
        g = dy * w[None, :]
        # Masked lanes hold g = 0: they add nothing to either sum.
        acc_xg += (x - mean[:, None]) * rstd[:, None] * g
        acc_g += g
    c1 = tl.sum(acc_xg, axis=1) / N
    c2 = tl.sum(acc_g, axis=1) / N

    for start in range(0, N, BLOCK_N):
        cols = start + offs
        col_mask = cols < N
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
        xhat = (x - mean[:, None]) * rstd[:, None]
        dx = (dy * w[None, :] - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
        tl.store(dx_rows + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)


@triton.autotune(configs=_partial_configs(), key=["N"], prune_configs_by={"early_config_prune": _prune_tile_configs})
@triton.jit
def _layer_norm_bwd_dwdb_partial_kernel(
    X, DY, Mean, Rstd, DW_PARTIAL, DB_PARTIAL,
    stride_x_row, stride_dy_row,
    M, N, rows_per_group,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # Program (column block, group): columns [pid_n * BLOCK_N, +BLOCK_N) summed over the group's rows.
    pid_n = tl.program_id(0)
    group = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    first_row = group.to(tl.int64) * rows_per_group
    last_row = tl.minimum(first_row + rows_per_group, M)

    dw = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, rows_per_group, BLOCK_M):
        rows = first_row + start + tl.arange(0, BLOCK_M)
        row_mask = rows < last_row
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(X + rows[:, None] * stride_x_row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows[:, None] * stride_dy_row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(Mean + rows, mask=row_mask, other=0.0)
        rstd = tl.load(Rstd + rows, mask=row_mask, other=0.0)
        # Masked lanes hold dy = 0: they add nothing to either sum.
        dw += dy * (x - mean[:, None]) * rstd[:, None]
        db += dy
    out = group.to(tl.int64) * N + cols
    tl.store(DW_PARTIAL + out, tl.sum(dw, axis=0), mask=col_mask)
    tl.store(DB_PARTIAL + out, tl.sum(db, axis=0), mask=col_mask)


@triton.autotune(configs=_reduce_configs(), key=["N", "n_groups"],
                 prune_configs_by={"early_config_prune": _prune_tile_configs})
@triton.jit
def _layer_norm_bwd_dwdb_reduce_kernel(
    DW_PARTIAL, DB_PARTIAL, DW, DB,
    n_groups, N,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_groups, BLOCK_G):
        groups = start + tl.arange(0, BLOCK_G)
        mask = (groups[:, None] < n_groups) & col_mask[None, :]
        offs = groups[:, None].to(tl.int64) * N + cols[None, :]
        dw += tl.load(DW_PARTIAL + offs, mask=mask, other=0.0)
        db += tl.load(DB_PARTIAL + offs, mask=mask, other=0.0)
    tl.store(DW + cols, tl.sum(dw, axis=0).to(DW.dtype.element_ty), mask=col_mask)
    tl.store(DB + cols, tl.sum(db, axis=0).to(DB.dtype.element_ty), mask=col_mask)


def _as_rows(t, n_cols):
    # A [rows, N] view with unit column stride; a strided last dimension costs one copy.
    rows = t.reshape(-1, n_cols)
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def _num_row_groups(n_rows, device):
    if device.type == "cuda":
        target = torch.cuda.get_device_properties(device).multi_processor_count * GROUPS_PER_SM
    else:
        target = INTERPRETER_GROUPS
    return max(min(target, triton.cdiv(n_rows, MIN_ROWS_PER_GROUP)), 1)


def _layer_norm_forward(x_2d, weight, bias, eps):
    n_rows, n_cols = x_2d.shape
    y = torch.empty((n_rows, n_cols), device=x_2d.device, dtype=x_2d.dtype)
    mean = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
    rstd = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
    if n_rows == 0:
        return y, mean, rstd
    _layer_norm_fwd_kernel[lambda meta: (triton.cdiv(n_rows, meta["BLOCK_M"]),)](
        x_2d, y, weight, bias, mean, rstd,
        x_2d.stride(0), y.stride(0),
        n_rows, n_cols, eps,
    )
    return y, mean, rstd


def _layer_norm_backward(dy_2d, x_2d, weight, mean, rstd):
    n_rows, n_cols = x_2d.shape
    dx = torch.empty((n_rows, n_cols), device=x_2d.device, dtype=x_2d.dtype)
    _layer_norm_bwd_dx_kernel[lambda meta: (triton.cdiv(n_rows, meta["BLOCK_M"]),)](
        x_2d, dy_2d, dx, weight, mean, rstd,
        x_2d.stride(0), dy_2d.stride(0), dx.stride(0),
        n_rows, n_cols,
    )

    # Contiguous row groups, each summed into one fp32 row of the partials, then one reduction launch.
    n_groups = _num_row_groups(n_rows, x_2d.device)
    rows_per_group = triton.cdiv(n_rows, n_groups)
    n_groups = triton.cdiv(n_rows, rows_per_group)
    dw_partial = torch.empty((n_groups, n_cols), device=x_2d.device, dtype=torch.float32)
    db_partial = torch.empty((n_groups, n_cols), device=x_2d.device, dtype=torch.float32)
    _layer_norm_bwd_dwdb_partial_kernel[lambda meta: (triton.cdiv(n_cols, meta["BLOCK_N"]), n_groups)](
        x_2d, dy_2d, mean, rstd, dw_partial, db_partial,
        x_2d.stride(0), dy_2d.stride(0),
        n_rows, n_cols, rows_per_group,
    )
    dw = torch.empty_like(weight)
    db = torch.empty_like(weight)
    _layer_norm_bwd_dwdb_reduce_kernel[lambda meta: (triton.cdiv(n_cols, meta["BLOCK_N"]),)](
        dw_partial, db_partial, dw, db,
        n_groups, n_cols,
    )
    return dx, dw, db


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        n_cols = x.shape[-1]
        x_2d = _as_rows(x, n_cols)
        if not torch.compiler.is_compiling():
            logger.debug("layer_norm forward: %d rows x %d columns, %s", x_2d.shape[0], n_cols, x.dtype)
        y, mean, rstd = _layer_norm_forward(x_2d, weight, bias, eps)
        ctx.save_for_backward(x_2d, weight, mean, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x_2d, weight, mean, rstd = ctx.saved_tensors
        n_rows, n_cols = x_2d.shape
        if n_rows == 0:
            return torch.zeros_like(dy), torch.zeros_like(weight), torch.zeros_like(weight), None
        dy_2d = _as_rows(dy, n_cols)
        if not torch.compiler.is_compiling():
            logger.debug("layer_norm backward: %d rows x %d columns, %s", n_rows, n_cols, dy.dtype)
        dx, dw, db = _layer_norm_backward(dy_2d, x_2d, weight, mean, rstd)
        return dx.view(dy.shape), dw, db, None


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm of x over its last dimension with affine weight and bias (shape [x.shape[-1]]); differentiable."""
    if x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"layer_norm: x must be float32, float16 or bfloat16, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"layer_norm: x needs a non-empty last dimension, got shape {tuple(x.shape)}")
    n_cols = x.shape[-1]
    for name, param in (("weight", weight), ("bias", bias)):
        if param.shape != (n_cols,):
            raise ValueError(f"layer_norm: {name} must have shape ({n_cols},), got {tuple(param.shape)}")
        if param.dtype != x.dtype:
            raise ValueError(f"layer_norm: {name} dtype {param.dtype} differs from x dtype {x.dtype}")
        if param.device != x.device:
            raise ValueError(f"layer_norm: {name} is on {param.device}, x on {x.device}")
    return LayerNormFunction.apply(x, weight.contiguous(), bias.contiguous(), eps)


kernel_fn = layer_norm


def reference_fn(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


def get_inputs(rows=4096, cols=4096, dtype=torch.bfloat16):
    # Shifted and scaled: a dropped "- mean" or a variance taken about zero shows.
    x = (torch.randn(rows, cols, device="cuda", dtype=dtype) * 2.0 + 0.5).requires_grad_()
    weight = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
    bias = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
    return [x, weight, bias]


CASES = [
    # Verification: every config of every autotuned kernel is forced on each case, so there are two, and small.
    # 64 columns sit inside every row tile; 300 columns loop over the 128-column tile with a partial last step.
    # 9 rows give the partial sums two row groups (5 and 4 rows).
    {"rows": 9, "cols": 64, "dtype": torch.float32},
    {"rows": 3, "cols": 300, "dtype": torch.bfloat16},
    # Benchmark: hidden sizes of transformer models at 8192 tokens.
    {"purpose": "bench", "rows": 8192, "cols": 1024, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 4096, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 8192, "dtype": torch.float16},
]


def flops(x, weight, bias, eps=1e-5, mode="full"):
    # Forward: sum, centre, square, sum, scale by rstd, by weight, add bias. Backward: xhat (2), g (1), the
    # row's two sums (3), dx (4), dweight (2), dbias (1).
    per_element = {"fwd": 7, "bwd": 13, "full": 20}[mode]
    return per_element * x.numel()


def bytes_moved(x, weight, bias, eps=1e-5, mode="full"):
    # The minimum: the forward reads x, weight and bias and writes y, mean and rstd; the backward reads x, dy,
    # weight, mean and rstd and writes dx, dweight and dbias.
    tensor = x.numel() * x.element_size()
    param = weight.numel() * weight.element_size()
    stats = 8 * (x.numel() // max(x.shape[-1], 1))
    forward = 2 * tensor + 2 * param + stats
    backward = 3 * tensor + 3 * param + stats
    return {"fwd": forward, "bwd": backward, "full": forward + backward}[mode]
