"""rmsnorm: RMSNorm for training, y = x / sqrt(mean(x**2) + eps) * weight, with its backward.

A torch.autograd.Function: the forward launches a Triton kernel that writes y and saves the per-row
rstd = 1 / sqrt(mean(x**2) + eps) in fp32; the backward launches Triton kernels for dx and dweight.
With xhat = x * rstd and g = dy * weight (N columns):
    dx = rstd * (g - xhat * mean(xhat * g))          (per row)
    dweight = sum over rows of dy * xhat             (per column)
Everything is memory-bound; statistics and sums are fp32. Bytes per element (e = element size):
- Forward: read x, write y: 2e (the forward scaffold's kernels, plus 4 bytes of rstd per row). Rows
  of up to 64 KiB sit in registers (short rows packed several to a program); wider rows stream
  twice in column tiles, the second read mostly from L2 (see the forward-only RMSNorm scaffold for its limits).
- Backward, rows of up to 8192 columns (rmsnorm_bwd_kernel): read x and dy, write dx: 3e, the
  minimum. A grid of about one program per SM, each looping over a contiguous group of rows: dx is
  finished row by row (the row's dot product needs only the row), dweight accumulates in fp32
  registers across the group and is written once as a [programs, N] fp32 partial: 8 bytes per
  column per program (written, read back), about 2% of the traffic at 8192 rows. The limit is
  registers, not the forward's 64 KiB: a program holds x, dy and the dweight accumulator in fp32
  (12 bytes a column) plus the weight, so 8192 columns already fill a 16-warp program (ptxas for
  sm_90: 101-126 registers a thread, no spills: one program per SM).
- Backward, wider rows (the tiled path): the dweight accumulator cannot hold a whole row, so the
  work is split by columns. rmsnorm_bwd_rowdot_kernel reads x and dy once, one program per row, for
  each row's mean(xhat * g); then rmsnorm_bwd_kernel runs on a 2D grid of (column chunk, row group)
  programs, each finishing dx for its chunk of its rows and accumulating that chunk's dweight in
  registers. 5e per element: x and dy are read twice (the second read is from DRAM: the tensors
  are far larger than L2 at the bench shapes, 1024 x 32768 and 1024 x 65536 bf16), i.e. 5/3 of the
  fused path's bytes. Each row group is a contiguous block of rows, so the partials stay small
  (a few MB). Holding whole rows in one program instead would spill, or need the per-program
  dweight partial re-read and re-written for every row.
- Partials are summed by rmsnorm_bwd_dw_kernel rather than torch.sum: one launch that writes
  dweight in its dtype directly (torch needs a sum and a cast: two launches, an fp32 intermediate),
  the partial read once. At 8192 x 2048 the whole backward is ~35 us at an H100's copy rate, so a
  launch saved is a few percent.
Dtypes: float32, float16, bfloat16; x and weight share a dtype. x must be contiguous.
"""

import torch
import triton
import triton.language as tl

# Forward (as the forward-only RMSNorm scaffold): rows up to this many bytes fit in one program's registers.
MAX_FUSED_BYTES = 65536
# Short rows are packed until a forward program moves about this many bytes.
PACK_BYTES = 8192
# Forward rows wider than MAX_FUSED_BYTES stream in tiles of this size.
WIDE_ROW_BLOCK_SIZE = 8192
WIDE_ROW_NUM_WARPS = 32

# Backward: rows of up to this many columns take the fused path (x, dy and the dweight accumulator in
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
def rmsnorm_fwd_kernel(
    x_ptr, weight_ptr, y_ptr, rstd_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements on large activations.
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    row_mask = rows < n_rows
    mask = row_mask[:, None] & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)
    # Every program reads the same weight: keep it in L2.
    w = tl.load(weight_ptr + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
    y = x * rstd[:, None] * w.to(tl.float32)[None, :]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_fwd_wide_kernel(
    x_ptr, weight_ptr, y_ptr, rstd_ptr,
    x_row_stride, y_row_stride,
    n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Per-lane partial sums, reduced once after the loop.
    sum_sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        # evict_last: the normalising pass reads this row again.
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0,
                    eviction_policy="evict_last").to(tl.float32)
        sum_sq += x * x
    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(weight_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        y = x.to(tl.float32) * rstd * w.to(tl.float32)
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_bwd_rowdot_kernel(
    dy_ptr, x_ptr, weight_ptr, rstd_ptr, dot_ptr,
    row_stride, n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    # The tiled path's first pass: dot[row] = mean(xhat * dy * weight), one program per row.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_ptr + row * row_stride + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * row_stride + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(weight_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * dy * w
    rstd = tl.load(rstd_ptr + row)
    tl.store(dot_ptr + row, tl.sum(acc, axis=0) * rstd / n_cols)


@triton.jit
def rmsnorm_bwd_kernel(
    dy_ptr, x_ptr, weight_ptr, rstd_ptr, dot_ptr, dx_ptr, dw_partial_ptr,
    row_stride, n_rows, n_cols, rows_per_program,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_BLOCK: tl.constexpr,
    WHOLE_ROW: tl.constexpr,
):
    # Program (chunk, group): columns [chunk * BLOCK_SIZE, +BLOCK_SIZE) of the rows
    # [group * rows_per_program, +rows_per_program), ROWS_PER_BLOCK rows per iteration.
    # WHOLE_ROW: the chunk is the whole row (one chunk), so each row's dot product is computed here
    # from the tile; otherwise rmsnorm_bwd_rowdot_kernel wrote it to dot_ptr.
    chunk = tl.program_id(0)
    group = tl.program_id(1)
    cols = chunk * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    # Every program reads the same weight: keep it in L2.
    w = tl.load(weight_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    # Per-row dweight partials, reduced over the rows once after the loop.
    dw_acc = tl.zeros([ROWS_PER_BLOCK, BLOCK_SIZE], dtype=tl.float32)
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
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        xhat = x * rstd[:, None]
        g = dy * w[None, :]
        if WHOLE_ROW:
            # Padding lanes hold x = dy = 0: they add nothing.
            dot = tl.sum(xhat * g, axis=1) / n_cols
        else:
            dot = tl.load(dot_ptr + rows, mask=row_mask, other=0.0)
        dx = (g - xhat * dot[:, None]) * rstd[:, None]
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
    tl.store(dw_partial_ptr + group * n_cols + cols, tl.sum(dw_acc, axis=0), mask=col_mask)


@triton.jit
def rmsnorm_bwd_dw_kernel(
    dw_partial_ptr, dw_ptr,
    n_partials, n_cols,
    BLOCK_P: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # dweight[cols] = the sum of the partials' rows, in fp32, stored in dweight's dtype.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_partials, BLOCK_P):
        parts = start + tl.arange(0, BLOCK_P)
        mask = (parts[:, None] < n_partials) & col_mask[None, :]
        acc += tl.load(dw_partial_ptr + parts[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(acc, axis=0).to(dw_ptr.dtype.element_ty), mask=col_mask)


def _num_warps(elements, most=32):
    # About 16 elements per thread: enough loads in flight, few enough registers not to spill.
    return min(max(elements // 512, 4), most)


def _backward_programs(device):
    # About one program per SM (each loops over a group of rows); the interpreter gets a few.
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count * BWD_PROGRAMS_PER_SM
    return INTERPRETER_PROGRAMS


def _launch_forward(x_2d, weight, eps):
    n_rows, n_cols = x_2d.shape
    y = torch.empty_like(x_2d)
    rstd = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
    if n_rows == 0:
        return y, rstd
    if n_cols * x_2d.element_size() > MAX_FUSED_BYTES:
        rmsnorm_fwd_wide_kernel[(n_rows,)](
            x_2d, weight, y, rstd,
            x_2d.stride(0), y.stride(0),
            n_cols, eps,
            BLOCK_SIZE=WIDE_ROW_BLOCK_SIZE,
            num_warps=WIDE_ROW_NUM_WARPS,
        )
        return y, rstd
    block_size = triton.next_power_of_2(n_cols)
    rows_per_program = min(max(PACK_BYTES // (block_size * x_2d.element_size()), 1), triton.next_power_of_2(n_rows))
    rmsnorm_fwd_kernel[(triton.cdiv(n_rows, rows_per_program),)](
        x_2d, weight, y, rstd,
        x_2d.stride(0), y.stride(0),
        n_rows, n_cols, eps,
        BLOCK_SIZE=block_size, ROWS_PER_PROGRAM=rows_per_program,
        num_warps=_num_warps(block_size * rows_per_program),
    )
    return y, rstd


def _launch_backward(dy_2d, x_2d, weight, rstd, weight_grad):
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
        dot = rstd  # not read: the kernel computes each row's dot product itself
    else:
        dot = torch.empty(n_rows, device=x_2d.device, dtype=torch.float32)
        rmsnorm_bwd_rowdot_kernel[(n_rows,)](
            dy_2d, x_2d, weight, rstd, dot,
            x_2d.stride(0), n_cols,
            BLOCK_SIZE=BWD_TILE, num_warps=_num_warps(BWD_TILE, 16),
        )
    dw_partial = torch.empty(n_groups, n_cols, device=x_2d.device, dtype=torch.float32)
    rmsnorm_bwd_kernel[(n_chunks, n_groups)](
        dy_2d, x_2d, weight, rstd, dot, dx, dw_partial,
        x_2d.stride(0), n_rows, n_cols, rows_per_program,
        BLOCK_SIZE=block_size, ROWS_PER_BLOCK=rows_per_block, WHOLE_ROW=whole_row,
        num_warps=_num_warps(block_size * rows_per_block, 16),
    )
    if not weight_grad:
        return dx, None
    dw = torch.empty_like(weight)
    block_p = min(triton.next_power_of_2(n_groups), 256)
    block_n = min(max(BWD_TILE // block_p, 32), triton.next_power_of_2(n_cols))
    rmsnorm_bwd_dw_kernel[(triton.cdiv(n_cols, block_n),)](
        dw_partial, dw, n_groups, n_cols,
        BLOCK_P=block_p, BLOCK_N=block_n, num_warps=_num_warps(block_p * block_n, 8),
    )
    return dx, dw


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        n_cols = x.shape[-1]
        x_2d = x.view(-1, n_cols)
        y, rstd = _launch_forward(x_2d, weight, eps)
        ctx.save_for_backward(x_2d, weight, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x_2d, weight, rstd = ctx.saved_tensors
        n_rows, n_cols = x_2d.shape
        # The upstream gradient may come non-contiguous (an expand, a transpose): one copy then.
        dy_2d = dy.reshape(n_rows, n_cols).contiguous()
        if n_rows == 0:
            return torch.empty_like(dy), torch.zeros_like(weight), None
        dx, dw = _launch_backward(dy_2d, x_2d, weight, rstd, ctx.needs_input_grad[1])
        return dx.view(dy.shape), dw, None


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of x over its last dimension, scaled by weight (shape [x.shape[-1]]); differentiable."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"rmsnorm: x must be float32, float16 or bfloat16, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"rmsnorm: x needs a non-empty last dimension, got shape {tuple(x.shape)}")
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,):
        raise ValueError(f"rmsnorm: weight must have shape ({n_cols},), got {tuple(weight.shape)}")
    if weight.dtype != x.dtype:
        raise ValueError(f"rmsnorm: weight dtype {weight.dtype} differs from x dtype {x.dtype}")
    if weight.device != x.device:
        raise ValueError(f"rmsnorm: weight is on {weight.device}, x on {x.device}")
    if not x.is_contiguous() or not weight.is_contiguous():
        raise ValueError("rmsnorm: x and weight must be contiguous (call .contiguous())")
    return RMSNormFunction.apply(x, weight, eps)


kernel_fn = rmsnorm


def reference_fn(x, weight, eps=1e-6):
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight


def get_inputs(rows=8192, cols=8192, dtype=torch.bfloat16):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype, requires_grad=True)
    weight = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
    return [x, weight]


CASES = [
    # Verification: odd widths, a single row, one column (many rows packed per iteration, a program's
    # last rows past the end), a width just past the backward's fused limit (8192 columns: the tiled
    # backward, two row groups under the interpreter), and widths just past the forward's 64 KiB
    # limit (16384 fp32 / 32768 fp16 columns: forward and backward both tiled).
    *[
        {"rows": rows, "cols": cols, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for rows, cols in ((1, 1), (3, 127), (37, 1000))
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


def flops(x, weight, eps=1e-6, mode="full"):
    # Forward: square, sum, scale by rstd, scale by weight. Backward: xhat, g = dy * weight, the
    # row's dot (multiply, add), xhat * dot, subtract, scale by rstd, dweight (multiply, add).
    per_element = {"fwd": 4, "bwd": 9, "full": 13}[mode]
    return per_element * x.numel()


def bytes_moved(x, weight, eps=1e-6, mode="full"):
    # The minimum each pass must move. Forward: read x and weight, write y and the fp32 rstd.
    # Backward: read x, dy, weight and rstd; write dx and dweight.
    tensor = x.numel() * x.element_size()
    param = weight.numel() * weight.element_size()
    stats = 4 * (x.numel() // max(x.shape[-1], 1))
    forward = 2 * tensor + param + stats
    backward = 3 * tensor + 2 * param + stats
    return {"fwd": forward, "bwd": backward, "full": forward + backward}[mode]
