"""layernorm: LayerNorm for training, y = (x - mean) / sqrt(var + eps) * weight + bias, with its backward.

A torch.autograd.Function: the forward launches a Triton kernel that writes y and saves the per-row
mean and rstd = 1 / sqrt(var + eps) in fp32 (var biased, as torch.nn.LayerNorm's); the backward
launches Triton kernels for dx, dweight and dbias. With xhat = (x - mean) * rstd, g = dy * weight
(N columns):
    dx = rstd * (g - mean(g) - xhat * mean(xhat * g))   (per row)
    dweight = sum over rows of dy * xhat, dbias = sum over rows of dy   (per column)
Everything is memory-bound; statistics and sums are fp32. Bytes per element (e = element size):
- Forward: read x, write y: 2e (the forward scaffold's kernels, plus 8 bytes of mean and rstd per
  row). Rows of up to 64 KiB sit in registers (short rows packed several to a program); wider rows
  stream twice in column tiles (Chan's merge of per-tile mean and squared deviations, then
  normalise), the second read mostly from L2 (see the forward-only LayerNorm scaffold's limits).
- Backward, rows of up to 8192 columns (layernorm_bwd_kernel): read x and dy, write dx: 3e, the
  minimum. A grid of about one program per SM, each looping over a contiguous group of rows: dx is
  finished row by row (the row's two sums need only the row), dweight and dbias accumulate in fp32
  registers across the group and are written once as [programs, N] fp32 partials: 16 bytes per
  column per program (written, read back), about 4% of the traffic at 8192 rows. The limit is
  registers, not the forward's 64 KiB: a program holds x, dy and both accumulators in fp32 (16 bytes
  a column) plus the weight, so 8192 columns already fill a 16-warp program (ptxas for sm_90:
  109-128 registers a thread, no spills: one program per SM).
- Backward, wider rows (the tiled path): the accumulators cannot hold a whole row, so the work is
  split by columns. layernorm_bwd_rowdot_kernel reads x and dy once, one program per row, for each
  row's mean(g) and mean(xhat * g); then layernorm_bwd_kernel runs on a 2D grid of (column chunk,
  row group) programs, each finishing dx for its chunk of its rows and accumulating that chunk's
  dweight and dbias in registers. 5e per element: x and dy are read twice (the second read is from
  DRAM: the tensors are far larger than L2 at the bench shapes, 1024 x 32768 and 1024 x 65536
  bf16), i.e. 5/3 of the fused path's bytes. Each row group is a contiguous block of rows, so the
  partials stay small (a few MB). Holding whole rows in one program instead would spill, or need
  the per-program partials re-read and re-written for every row.
- Partials are summed by layernorm_bwd_dwdb_kernel rather than torch.sum: one launch that writes
  dweight and dbias in their dtype directly (torch needs two sums and two casts: four launches and
  fp32 intermediates), each partial read once. At 8192 x 2048 the whole backward is ~35 us at an
  H100's copy rate, so three launches saved are several percent.
Dtypes: float32, float16, bfloat16; x, weight and bias share a dtype. x must be contiguous.
"""

import torch
import triton
import triton.language as tl

# Forward (as the forward-only LayerNorm scaffold): rows up to this many bytes fit in registers.
MAX_FUSED_BYTES = 65536
# Short rows are packed until a forward program moves about this many bytes.
PACK_BYTES = 8192
# Forward rows wider than MAX_FUSED_BYTES stream in tiles of this size.
WIDE_ROW_BLOCK_SIZE = 16384
WIDE_ROW_NUM_WARPS = 16

# Backward: rows of up to this many columns take the fused path (x, dy and the two accumulators in
# fp32 registers, 16 warps at 8192 columns: about 16 of each per thread).
MAX_FUSED_BWD_COLS = 8192
# Each backward iteration handles a [rows, columns] tile of about this many elements: short rows are
# packed so that a program's loads in flight stay ~16 KiB of x and dy each (bf16) per iteration.
BWD_TILE = 8192
# The tiled path's column chunk (times BWD_TILE // chunk rows per iteration).
WIDE_BWD_BLOCK_SIZE = 4096
# Backward programs per SM on a GPU: one 16-warp program per SM is what the registers allow.
BWD_PROGRAMS_PER_SM = 1
# Backward programs without a GPU (the interpreter runs them one after another).
INTERPRETER_PROGRAMS = 8


@triton.jit
def layernorm_fwd_kernel(
    x_ptr, weight_ptr, bias_ptr, y_ptr, mean_ptr, rstd_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements on large activations.
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    row_mask = rows < n_rows
    mask = row_mask[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    # Padding lanes would contribute mean**2 each: zero them.
    centered = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
    tl.store(mean_ptr + rows, mean, mask=row_mask)
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)
    # Every program reads the same weight and bias: keep them in L2.
    w = tl.load(weight_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(bias_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = centered * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_fwd_wide_kernel(
    x_ptr, weight_ptr, bias_ptr, y_ptr, mean_ptr, rstd_ptr,
    x_row_stride, y_row_stride,
    n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    count = 0.0
    mean = 0.0
    sum_sq_dev = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        # evict_last: the normalising pass reads this row again.
        x = tl.load(x_row + offs, mask=mask, other=0.0,
                    eviction_policy="evict_last").to(tl.float32)
        tile_count = tl.minimum(n_cols - start, BLOCK_SIZE).to(tl.float32)
        tile_mean = tl.sum(x, axis=0) / tile_count
        tile_dev = tl.where(mask, x - tile_mean, 0.0)
        tile_sum_sq_dev = tl.sum(tile_dev * tile_dev, axis=0)
        # Merge (count, mean, sum_sq_dev) with the tile's (Chan et al.).
        new_count = count + tile_count
        delta = tile_mean - mean
        mean += delta * (tile_count / new_count)
        sum_sq_dev += tile_sum_sq_dev + delta * delta * (count * tile_count / new_count)
        count = new_count
    rstd = tl.rsqrt(sum_sq_dev / n_cols + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(weight_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        b = tl.load(bias_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        y = (x.to(tl.float32) - mean) * rstd * w.to(tl.float32) + b.to(tl.float32)
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_bwd_rowdot_kernel(
    dy_ptr, x_ptr, weight_ptr, mean_ptr, rstd_ptr, dot_ptr, g_mean_ptr,
    row_stride, n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    # The tiled path's first pass, one program per row: dot[row] = mean(xhat * g), g_mean[row] = mean(g).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    acc_xg = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    acc_g = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_ptr + row * row_stride + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * row_stride + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(weight_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        g = dy * w
        # Padding lanes: g = 0 there, so (x - mean) * g adds nothing.
        acc_xg += (x - mean) * g
        acc_g += g
    tl.store(dot_ptr + row, tl.sum(acc_xg, axis=0) * rstd / n_cols)
    tl.store(g_mean_ptr + row, tl.sum(acc_g, axis=0) / n_cols)


@triton.jit
def layernorm_bwd_kernel(
    dy_ptr, x_ptr, weight_ptr, mean_ptr, rstd_ptr, dot_ptr, g_mean_ptr,
    dx_ptr, dw_partial_ptr, db_partial_ptr,
    row_stride, n_rows, n_cols, rows_per_program,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_BLOCK: tl.constexpr,
    WHOLE_ROW: tl.constexpr,
):
    # Program (chunk, group): columns [chunk * BLOCK_SIZE, +BLOCK_SIZE) of the rows
    # [group * rows_per_program, +rows_per_program), ROWS_PER_BLOCK rows per iteration.
    # WHOLE_ROW: the chunk is the whole row (one chunk), so each row's two sums are computed here
    # from the tile; otherwise layernorm_bwd_rowdot_kernel wrote them to dot_ptr and g_mean_ptr.
    chunk = tl.program_id(0)
    group = tl.program_id(1)
    cols = chunk * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    # Every program reads the same weight: keep it in L2.
    w = tl.load(weight_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    # Per-row partials of dweight and dbias, reduced over the rows once after the loop.
    dw_acc = tl.zeros([ROWS_PER_BLOCK, BLOCK_SIZE], dtype=tl.float32)
    db_acc = tl.zeros([ROWS_PER_BLOCK, BLOCK_SIZE], dtype=tl.float32)
    # int64: row * stride passes 2**31 elements on large activations.
    first_row = group.to(tl.int64) * rows_per_program
    for start in range(0, rows_per_program, ROWS_PER_BLOCK):
        rows = first_row + start + tl.arange(0, ROWS_PER_BLOCK)
        row_mask = rows < n_rows
        mask = row_mask[:, None] & col_mask[None, :]
        offs = rows[:, None] * row_stride + cols[None, :]
        # x and dy are read once here: evict_first leaves L2 to the weight.
        x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        # Padding lanes hold xhat = -mean * rstd but dy = g = 0: they add nothing below.
        xhat = (x - mean[:, None]) * rstd[:, None]
        g = dy * w[None, :]
        if WHOLE_ROW:
            dot = tl.sum(xhat * g, axis=1) / n_cols
            g_mean = tl.sum(g, axis=1) / n_cols
        else:
            dot = tl.load(dot_ptr + rows, mask=row_mask, other=0.0)
            g_mean = tl.load(g_mean_ptr + rows, mask=row_mask, other=0.0)
        dx = (g - g_mean[:, None] - xhat * dot[:, None]) * rstd[:, None]
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
        db_acc += dy
    tl.store(dw_partial_ptr + group * n_cols + cols, tl.sum(dw_acc, axis=0), mask=col_mask)
    tl.store(db_partial_ptr + group * n_cols + cols, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def layernorm_bwd_dwdb_kernel(
    dw_partial_ptr, db_partial_ptr, dw_ptr, db_ptr,
    n_partials, n_cols,
    BLOCK_P: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # dweight and dbias[cols] = the sums of their partials' rows, in fp32, stored in their dtype.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    dw = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_partials, BLOCK_P):
        parts = start + tl.arange(0, BLOCK_P)
        mask = (parts[:, None] < n_partials) & col_mask[None, :]
        offs = parts[:, None] * n_cols + cols[None, :]
        dw += tl.load(dw_partial_ptr + offs, mask=mask, other=0.0)
        db += tl.load(db_partial_ptr + offs, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=col_mask)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=col_mask)


def _num_warps(elements, most=16):
    # About 16 elements per thread: enough loads in flight, few enough registers not to spill.
    # Capped at 16: with weight, bias and the centred row live, 32 warps spill in the forward.
    return min(max(elements // 512, 4), most)


def _backward_programs(device):
    # About one program per SM (each loops over a group of rows); the interpreter gets a few.
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count * BWD_PROGRAMS_PER_SM
    return INTERPRETER_PROGRAMS


def _launch_forward(x_2d, weight, bias, eps):
    n_rows, n_cols = x_2d.shape
    y = torch.empty_like(x_2d)
    mean = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
    rstd = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
    if n_rows == 0:
        return y, mean, rstd
    if n_cols * x_2d.element_size() > MAX_FUSED_BYTES:
        layernorm_fwd_wide_kernel[(n_rows,)](
            x_2d, weight, bias, y, mean, rstd,
            x_2d.stride(0), y.stride(0),
            n_cols, eps,
            BLOCK_SIZE=WIDE_ROW_BLOCK_SIZE,
            num_warps=WIDE_ROW_NUM_WARPS,
        )
        return y, mean, rstd
    block_size = triton.next_power_of_2(n_cols)
    rows_per_program = min(max(PACK_BYTES // (block_size * x_2d.element_size()), 1), triton.next_power_of_2(n_rows))
    layernorm_fwd_kernel[(triton.cdiv(n_rows, rows_per_program),)](
        x_2d, weight, bias, y, mean, rstd,
        x_2d.stride(0), y.stride(0),
        n_rows, n_cols, eps,
        BLOCK_SIZE=block_size, ROWS_PER_PROGRAM=rows_per_program,
        num_warps=_num_warps(block_size * rows_per_program),
    )
    return y, mean, rstd


def _launch_backward(dy_2d, x_2d, weight, bias, mean, rstd, param_grads):
    n_rows, n_cols = x_2d.shape
    dx = torch.empty_like(x_2d)
    whole_row = n_cols <= MAX_FUSED_BWD_COLS
    block_size = triton.next_power_of_2(n_cols) if whole_row else WIDE_BWD_BLOCK_SIZE
    n_chunks = triton.cdiv(n_cols, block_size)
    rows_per_block = min(max(BWD_TILE // block_size, 1), triton.next_power_of_2(n_rows))
    # Contiguous row groups, a multiple of rows_per_block each, about one program per SM in all.
    n_groups = max(_backward_programs(x_2d.device) // n_chunks, 1)
    rows_per_program = triton.cdiv(triton.cdiv(n_rows, n_groups), rows_per_block) * rows_per_block
    n_groups = triton.cdiv(n_rows, rows_per_program)
    if whole_row:
        dot = g_mean = rstd  # not read: the kernel computes each row's sums itself
    else:
        dot = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
        g_mean = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
        layernorm_bwd_rowdot_kernel[(n_rows,)](
            dy_2d, x_2d, weight, mean, rstd, dot, g_mean,
            x_2d.stride(0), n_cols,
            BLOCK_SIZE=BWD_TILE, num_warps=_num_warps(BWD_TILE),
        )
    dw_partial = torch.empty(n_groups, n_cols, device=x_2d.device, dtype=torch.float32)
    db_partial = torch.empty(n_groups, n_cols, device=x_2d.device, dtype=torch.float32)
    layernorm_bwd_kernel[(n_chunks, n_groups)](
        dy_2d, x_2d, weight, mean, rstd, dot, g_mean,
        dx, dw_partial, db_partial,
        x_2d.stride(0), n_rows, n_cols, rows_per_program,
        BLOCK_SIZE=block_size, ROWS_PER_BLOCK=rows_per_block, WHOLE_ROW=whole_row,
        num_warps=_num_warps(block_size * rows_per_block),
    )
    if not param_grads:
        return dx, None, None
    dw = torch.empty_like(weight)
    db = torch.empty_like(bias)
    block_p = min(triton.next_power_of_2(n_groups), 256)
    # Two accumulators: half the tile each keeps the registers of one.
    block_n = min(max(BWD_TILE // 2 // block_p, 32), triton.next_power_of_2(n_cols))
    layernorm_bwd_dwdb_kernel[(triton.cdiv(n_cols, block_n),)](
        dw_partial, db_partial, dw, db, n_groups, n_cols,
        BLOCK_P=block_p, BLOCK_N=block_n, num_warps=_num_warps(block_p * block_n, 8),
    )
    return dx, dw, db


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        n_cols = x.shape[-1]
        x_2d = x.view(-1, n_cols)
        y, mean, rstd = _launch_forward(x_2d, weight, bias, eps)
        ctx.save_for_backward(x_2d, weight, bias, mean, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x_2d, weight, bias, mean, rstd = ctx.saved_tensors
        n_rows, n_cols = x_2d.shape
        # The upstream gradient may come non-contiguous (an expand, a transpose): one copy then.
        dy_2d = dy.reshape(n_rows, n_cols).contiguous()
        if n_rows == 0:
            return torch.empty_like(dy), torch.zeros_like(weight), torch.zeros_like(bias), None
        dx, dw, db = _launch_backward(dy_2d, x_2d, weight, bias, mean, rstd,
                                         ctx.needs_input_grad[1] or ctx.needs_input_grad[2])
        return dx.view(dy.shape), dw, db, None


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
              eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm of x over its last dimension with affine weight and bias (shape [x.shape[-1]]);
    differentiable."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"layernorm: x must be float32, float16 or bfloat16, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"layernorm: x needs a non-empty last dimension, got shape {tuple(x.shape)}")
    n_cols = x.shape[-1]
    for name, param in (("weight", weight), ("bias", bias)):
        if param.shape != (n_cols,):
            raise ValueError(f"layernorm: {name} must have shape ({n_cols},), got {tuple(param.shape)}")
        if param.dtype != x.dtype:
            raise ValueError(f"layernorm: {name} dtype {param.dtype} differs from x dtype {x.dtype}")
        if param.device != x.device:
            raise ValueError(f"layernorm: {name} is on {param.device}, x on {x.device}")
        if not param.is_contiguous():
            raise ValueError(f"layernorm: {name} must be contiguous (call .contiguous())")
    if not x.is_contiguous():
        raise ValueError("layernorm: x must be contiguous (call .contiguous())")
    return LayerNormFunction.apply(x, weight, bias, eps)


kernel_fn = layernorm


def reference_fn(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


def get_inputs(rows=8192, cols=8192, dtype=torch.bfloat16):
    # A non-zero mean exercises the centring; a plain randn row would hide a dropped "- mean".
    x = (torch.randn(rows, cols, device="cuda", dtype=dtype) * 2.0 + 0.5).requires_grad_()
    weight = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
    bias = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
    return [x, weight, bias]


CASES = [
    # Verification: odd widths, a single row, four columns (many rows packed per iteration, a
    # program's last rows past the end; not two: over two columns the true dx is eps's alone, a
    # difference of near-equal terms that fp32 cannot resolve whatever the kernel), a width just past the backward's fused limit (8192 columns:
    # the tiled backward, two row groups under the interpreter), and widths just past the forward's
    # 64 KiB limit (16384 fp32 / 32768 fp16 columns: forward and backward both tiled).
    *[
        {"rows": rows, "cols": cols, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for rows, cols in ((5, 4), (3, 127), (37, 1000))
    ],
    {"rows": 3, "cols": 8200, "dtype": torch.bfloat16},
    {"rows": 2, "cols": 16385, "dtype": torch.float32},
    {"rows": 2, "cols": 32769, "dtype": torch.float16},
    # Benchmark: LLM hidden sizes at 8192 tokens, and few wide rows (the tiled backward).
    {"purpose": "bench", "rows": 8192, "cols": 2048, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 4096, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 8192, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 1024, "cols": 32768, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 1024, "cols": 65536, "dtype": torch.bfloat16},
]


def flops(x, weight, bias, eps=1e-5, mode="full"):
    # Forward: sum, subtract mean, square, sum, scale by rstd, scale by weight, plus bias. Backward:
    # xhat (2), g = dy * weight, the row's two sums (3), g - mean(g) - xhat * dot (3), scale by
    # rstd, dweight (2), dbias (1).
    per_element = {"fwd": 7, "bwd": 13, "full": 20}[mode]
    return per_element * x.numel()


def bytes_moved(x, weight, bias, eps=1e-5, mode="full"):
    # The minimum each pass must move. Forward: read x, weight and bias, write y and the fp32 mean
    # and rstd. Backward: read x, dy, weight, mean and rstd; write dx, dweight and dbias.
    tensor = x.numel() * x.element_size()
    param = weight.numel() * weight.element_size()
    stats = 8 * (x.numel() // max(x.shape[-1], 1))
    forward = 2 * tensor + 2 * param + stats
    backward = 3 * tensor + 3 * param + stats
    return {"fwd": forward, "bwd": backward, "full": forward + backward}[mode]
