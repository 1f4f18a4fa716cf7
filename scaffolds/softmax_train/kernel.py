"""softmax for training: y = exp(x - max) / sum(exp(x - max)) over the last dimension, with its backward.

kernel_fn is a torch.autograd.Function: the forward launches a Triton kernel and saves y (the
output, not x); the backward launches a Triton kernel for dx = y * (dy - sum(dy * y)), the sum over
the row. fp32 math in both passes, whatever the input dtype.

Memory-bound in both directions: the forward reads x and writes y, the backward reads y and dy and
writes dx. Two kernels for each pass, by row width:
- Rows of up to 64 KiB (16384 fp32 or 32768 fp16/bf16 columns) are held whole in registers: one
  read of each input, one write. Short rows are packed several to a program so that a program
  still has about PACK_BYTES of each tensor in flight.
- Wider rows (a vocabulary) stream through column tiles, one program per row, reading the row
  twice: the forward keeps an online max and sum, then writes; the backward sums dy * y, then
  writes dx. The second read is partly served from L2 (see softmax_bwd_wide_kernel).
Dtypes: float32, float16, bfloat16. x must be contiguous (dy may be anything: it is made
contiguous). A row of all -inf gives NaN, as in PyTorch. The inputs need not require grad: then
only the forward runs.
"""

import torch
import triton
import triton.language as tl

# Rows up to this many bytes are held whole in one program's registers.
MAX_FUSED_BYTES = 65536
# Short rows are packed until a program holds about this many bytes of each tensor it reads
# (measured for the forward on an H100: 8192 x 1024-2048 bf16 runs as fast as a copy).
PACK_BYTES = 8192
# Rows wider than MAX_FUSED_BYTES stream in tiles of this many columns, 32 warps a program: big
# tiles and few resident programs keep more of each row in L2 for its second read.
WIDE_ROW_BLOCK_SIZE = 8192
WIDE_ROW_NUM_WARPS = 32


@triton.jit
def softmax_fwd_kernel(
    x_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements on large activations.
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    # -inf padding drops out of both the max and the sum (exp(-inf) == 0).
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_fwd_wide_kernel(
    x_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # First read: a running max and sum per lane, the sum rescaled whenever the max grows. The
    # first tile is full (the row is wider than a tile), so every lane's max is finite after it
    # and exp(running_max - new_max) never meets -inf - -inf.
    running_max = tl.full([BLOCK_SIZE], -float("inf"), dtype=tl.float32)
    running_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        # evict_last: the second read wants this row still in L2.
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        new_max = tl.maximum(running_max, x)
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.exp(x - new_max)
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    inv_sum = 1.0 / tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)
    # Second read: write exp(x - max) / sum.
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - row_max) * inv_sum).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_kernel(
    y_ptr, dy_ptr, dx_ptr,
    y_row_stride, dy_row_stride, dx_row_stride,
    n_rows, n_cols,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    # One pass: y and dy are read once each and dx written once, 3 * element_size bytes per
    # element, the least the backward can move.
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    # Zero padding adds nothing to the sum.
    y = tl.load(y_ptr + rows[:, None] * y_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + rows[:, None] * dy_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=1)
    dx = y * (dy - dot[:, None])
    tl.store(dx_ptr + rows[:, None] * dx_row_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_wide_kernel(
    y_ptr, dy_ptr, dx_ptr,
    y_row_stride, dy_row_stride, dx_row_stride,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    # A row too wide for registers is read twice: once for sum(dy * y), once more to write dx.
    # From DRAM that is 5 * element_size bytes per element against the 3 of a single pass; the
    # second read is served from L2 as far as the rows in flight fit there (one row of y and dy
    # per program, two 32-warp programs per SM: 264 rows in flight on an H100, 35 MB just past
    # 32768 bf16 columns, under the 50 MB L2, but 138 MB at 131072, so most of that shape's
    # second read comes from DRAM). Splitting a row over several programs would need a second launch
    # (or a grid-wide wait) for their partial sums, and reads y and dy twice from DRAM anyway.
    row = tl.program_id(0).to(tl.int64)
    y_row = y_ptr + row * y_row_stride
    dy_row = dy_ptr + row * dy_row_stride
    dx_row = dx_ptr + row * dx_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Per-lane partial sums, added up once after the loop.
    partial = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        # evict_last: the second read wants these tiles still in L2.
        y = tl.load(y_row + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        dy = tl.load(dy_row + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        partial += y * dy
    dot = tl.sum(partial, axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        # evict_first: the last use of this row.
        y = tl.load(y_row + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dy = tl.load(dy_row + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(dx_row + offs, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)


def _num_warps(elements):
    # About 16 elements of each tensor per thread: enough loads in flight, few enough registers
    # not to spill.
    return min(max(elements // 512, 4), 32)


def _row_layout(n_rows, n_cols, element_size):
    """(BLOCK_SIZE, ROWS_PER_PROGRAM, programs, num_warps) of the register-resident kernels."""
    block_size = triton.next_power_of_2(n_cols)
    rows_per_program = min(max(PACK_BYTES // (block_size * element_size), 1), triton.next_power_of_2(n_rows))
    return block_size, rows_per_program, triton.cdiv(n_rows, rows_per_program), _num_warps(block_size * rows_per_program)


def softmax_fwd(x: torch.Tensor) -> torch.Tensor:
    """The forward: softmax of x over its last dimension."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"softmax: x must be float32, float16 or bfloat16, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"softmax: x needs a non-empty last dimension, got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError("softmax: x must be contiguous (call .contiguous())")

    n_cols = x.shape[-1]
    x_2d = x.view(-1, n_cols)
    y = torch.empty_like(x)
    y_2d = y.view(-1, n_cols)
    n_rows = x_2d.shape[0]
    if n_rows == 0:
        return y
    if n_cols * x.element_size() > MAX_FUSED_BYTES:
        softmax_fwd_wide_kernel[(n_rows,)](
            x_2d, y_2d, x_2d.stride(0), y_2d.stride(0), n_cols,
            BLOCK_SIZE=WIDE_ROW_BLOCK_SIZE, num_warps=WIDE_ROW_NUM_WARPS,
        )
        return y
    block_size, rows_per_program, programs, num_warps = _row_layout(n_rows, n_cols, x.element_size())
    softmax_fwd_kernel[(programs,)](
        x_2d, y_2d, x_2d.stride(0), y_2d.stride(0), n_rows, n_cols,
        BLOCK_SIZE=block_size, ROWS_PER_PROGRAM=rows_per_program, num_warps=num_warps,
    )
    return y


def softmax_bwd(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """The backward: dx = y * (dy - sum(dy * y)) over the last dimension, y the forward's output."""
    if dy.shape != y.shape:
        raise ValueError(f"softmax: dy shape {tuple(dy.shape)} differs from y shape {tuple(y.shape)}")
    # The upstream gradient may come expanded (the backward of a .sum()) or strided: one copy.
    dy = dy.to(y.dtype).contiguous()
    n_cols = y.shape[-1]
    y_2d = y.view(-1, n_cols)
    dy_2d = dy.view(-1, n_cols)
    dx = torch.empty_like(y)
    dx_2d = dx.view(-1, n_cols)
    n_rows = y_2d.shape[0]
    if n_rows == 0:
        return dx
    if n_cols * y.element_size() > MAX_FUSED_BYTES:
        softmax_bwd_wide_kernel[(n_rows,)](
            y_2d, dy_2d, dx_2d, y_2d.stride(0), dy_2d.stride(0), dx_2d.stride(0), n_cols,
            BLOCK_SIZE=WIDE_ROW_BLOCK_SIZE, num_warps=WIDE_ROW_NUM_WARPS,
        )
        return dx
    block_size, rows_per_program, programs, num_warps = _row_layout(n_rows, n_cols, y.element_size())
    softmax_bwd_kernel[(programs,)](
        y_2d, dy_2d, dx_2d, y_2d.stride(0), dy_2d.stride(0), dx_2d.stride(0), n_rows, n_cols,
        BLOCK_SIZE=block_size, ROWS_PER_PROGRAM=rows_per_program, num_warps=num_warps,
    )
    return dx


class SoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = softmax_fwd(x)
        # The backward needs only y: saving it rather than x spares recomputing the max and sum.
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return softmax_bwd(y, dy)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax of x over its last dimension, differentiable."""
    return SoftmaxFunction.apply(x)


kernel_fn = softmax


def reference_fn(x):
    # Written out rather than calling PyTorch's built-in: renaming this scaffold replaces its
    # name as a word everywhere in the file, and would rename that call too.
    numerator = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return numerator / numerator.sum(dim=-1, keepdim=True)


def get_inputs(rows=8192, cols=8192, dtype=torch.bfloat16):
    # Scaled so that rows are peaked, as attention scores are, and the max subtraction matters.
    return [(torch.randn(rows, cols, device="cuda", dtype=dtype) * 4.0).requires_grad_()]


CASES = [
    # Verification, kept small: the interpreter runs the forward and the backward of each. Odd
    # widths, one column (its gradient is zero in every dtype: float32 only), many short rows
    # packed per program with a program's last rows past the end, and widths just past the 64 KiB
    # register limit (16384 fp32 / 32768 fp16|bf16 columns) so that both wide kernels run, over
    # more than one tile.
    {"rows": 3, "cols": 1, "dtype": torch.float32},
    *[
        {"rows": rows, "cols": cols, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for rows, cols in ((37, 127), (5, 1000))
    ],
    {"rows": 2, "cols": 16385, "dtype": torch.float32},
    {"rows": 1, "cols": 32769, "dtype": torch.float16},
    {"rows": 2, "cols": 40000, "dtype": torch.bfloat16},
    # Benchmark: sequence-sized rows at 8192 rows, and few wide rows (the wide kernels past
    # 32768 columns).
    {"purpose": "bench", "rows": 8192, "cols": 1024, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 2048, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 8192, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 1024, "cols": 32768, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 1024, "cols": 131072, "dtype": torch.bfloat16},
]

MODES = ("fwd", "bwd", "full")


def flops(x, mode="full"):
    """fwd: subtract the max, exp, sum, scale; bwd: multiply, sum, subtract, multiply; full: both."""
    if mode not in MODES:
        raise ValueError(f"softmax: mode must be one of {MODES}, got {mode!r}")
    per_element = {"fwd": 4, "bwd": 4, "full": 8}[mode]
    return per_element * x.numel()


def bytes_moved(x, mode="full"):
    """The least each pass must move: fwd reads x and writes y; bwd reads y and dy and writes dx."""
    if mode not in MODES:
        raise ValueError(f"softmax: mode must be one of {MODES}, got {mode!r}")
    tensors = {"fwd": 2, "bwd": 3, "full": 5}[mode]
    return tensors * x.numel() * x.element_size()
