"""rmsnorm: RMSNorm over the last dimension, y = x / sqrt(mean(x**2) + eps) * weight.

Memory-bound: x is read once and y written once; the arithmetic is nearly free, so speed is
bytes in flight on every SM. Statistics are fp32. Two kernels, by row width:
- Rows of up to 64 KiB (16384 fp32 or 32768 fp16/bf16 columns): rmsnorm_kernel holds whole
  rows in registers (read once, reduce, scale, write). Short rows are packed several to a
  program, so that each program still moves about PACK_BYTES: a 2 KiB row per program leaves
  too few bytes in flight.
- Wider rows: rmsnorm_wide_kernel streams the row twice in column tiles (sum of squares, then
  normalise), one program per row, its second read mostly served from L2.
Limits (H200, benchmarks/RESULTS.md 7d, 7g): a 64 KiB row is held in registers, one 32-warp program
per SM, and DRAM reads stop while it is reduced and written: 0.92x a copy of the same bytes. Wider
rows are read twice and 264 in flight overflow the 50 MB L2: 1.46x the bytes cross DRAM, 0.73-0.88x a
copy. A row split and a persistent kernel measured no better; reading each byte once at full rate
needs a row shared by an SM cluster (distributed shared memory), which Triton does not expose.
Dtypes: float32, float16, bfloat16; x and weight share a dtype. x must be contiguous.
"""

import torch
import triton
import triton.language as tl

# Rows up to this many bytes fit in one program's registers without spilling.
MAX_FUSED_BYTES = 65536
# Short rows are packed until a program moves about this many bytes. H100, 8192 x 1024-2048
# bf16: as fast as a copy of the same bytes; one row per program was up to 2% slower (softmax,
# layernorm), 16 KiB per program up to 10% slower.
PACK_BYTES = 8192
# Rows wider than that stream in tiles. Big tiles and many warps per program leave fewer
# programs resident, so each row's second read still finds it in L2 (H100, 1024 x 65536 bf16:
# 20-35% faster than 4096-column tiles with 8 warps).
WIDE_ROW_BLOCK_SIZE = 8192
WIDE_ROW_NUM_WARPS = 32


@triton.jit
def rmsnorm_kernel(
    x_ptr, weight_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements on large activations.
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    # Every program reads the same weight: keep it in L2.
    w = tl.load(weight_ptr + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
    y = x * inv_rms[:, None] * w.to(tl.float32)[None, :]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_wide_kernel(
    x_ptr, weight_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements on large activations.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Per-lane partial sums, reduced once after the loop: one tree reduction, not one per tile.
    sum_sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        # evict_last: the normalising pass reads this row again.
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0,
                    eviction_policy="evict_last").to(tl.float32)
        sum_sq += x * x
    inv_rms = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(weight_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        y = x.to(tl.float32) * inv_rms * w.to(tl.float32)
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(elements):
    # About 16 elements per thread: enough loads in flight, few enough registers not to spill.
    return min(max(elements // 512, 4), 32)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of x over its last dimension, scaled by weight (shape [x.shape[-1]])."""
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

    x_2d = x.view(-1, n_cols)
    y = torch.empty_like(x)
    y_2d = y.view(-1, n_cols)
    n_rows = x_2d.shape[0]
    if n_rows == 0:
        return y

    if n_cols * x.element_size() > MAX_FUSED_BYTES:
        rmsnorm_wide_kernel[(n_rows,)](
            x_2d, weight, y_2d,
            x_2d.stride(0), y_2d.stride(0),
            n_cols, eps,
            BLOCK_SIZE=WIDE_ROW_BLOCK_SIZE,
            num_warps=WIDE_ROW_NUM_WARPS,
        )
        return y

    block_size = triton.next_power_of_2(n_cols)
    rows_per_program = min(max(PACK_BYTES // (block_size * x.element_size()), 1), triton.next_power_of_2(n_rows))
    rmsnorm_kernel[(triton.cdiv(n_rows, rows_per_program),)](
        x_2d, weight, y_2d,
        x_2d.stride(0), y_2d.stride(0),
        n_rows, n_cols, eps,
        BLOCK_SIZE=block_size, ROWS_PER_PROGRAM=rows_per_program,
        num_warps=_num_warps(block_size * rows_per_program),
    )
    return y


kernel_fn = rmsnorm


def reference_fn(x, weight, eps=1e-6):
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight


def get_inputs(rows=8192, cols=8192, dtype=torch.bfloat16):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    weight = torch.randn(cols, device="cuda", dtype=dtype)
    return [x, weight]


CASES = [
    # Verification: odd widths, a single row, one column (many rows packed per program, and a
    # program's last rows past the end), and widths just past the 64 KiB single-program limit
    # (16384 fp32 / 32768 fp16|bf16 columns) so the wide kernel runs.
    *[
        {"rows": rows, "cols": cols, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for rows, cols in ((1, 1), (3, 127), (37, 1000), (5, 4097))
    ],
    {"rows": 2, "cols": 16385, "dtype": torch.float32},
    {"rows": 2, "cols": 32769, "dtype": torch.float16},
    {"rows": 2, "cols": 40000, "dtype": torch.bfloat16},
    # Benchmark: LLM hidden sizes at 8192 tokens, and few wide rows (the wide kernel past
    # 32768 columns).
    {"purpose": "bench", "rows": 8192, "cols": 2048, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 4096, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 8192, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "cols": 16384, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 1024, "cols": 32768, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 1024, "cols": 65536, "dtype": torch.bfloat16},
]


def flops(x, weight, eps=1e-6):
    # square, sum, scale by 1/rms, scale by weight
    return 4 * x.numel()


def bytes_moved(x, weight, eps=1e-6):
    return 2 * x.numel() * x.element_size() + weight.numel() * weight.element_size()
