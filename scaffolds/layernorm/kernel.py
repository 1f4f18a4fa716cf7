"""layernorm: LayerNorm over the last dimension, y = (x - mean) / sqrt(var + eps) * weight + bias.

var is the biased variance, as in torch.nn.LayerNorm; statistics are fp32. Memory-bound: x is
read once and y written once, so speed is bytes in flight on every SM. Two kernels, by width:
- Rows of up to 64 KiB (16384 fp32 or 32768 fp16/bf16 columns): layernorm_kernel holds whole
  rows in registers (read once, mean, centred sum of squares, normalise, write). Short rows
  are packed several to a program, so that each program still moves about PACK_BYTES.
- Wider rows: layernorm_wide_kernel streams the row twice in column tiles, one program per
  row: the first pass merges per-tile mean and sum of squared deviations (Chan's parallel
  update, no E[x^2] - E[x]^2 cancellation), the second normalises, mostly from L2.
Limits: with few wide rows (1024 x 65536 bf16 on an H100: 1024 programs of 16 warps, 56
registers, so 50% occupancy) the wide kernel has few bytes in flight per SM and its second pass
finds only part of its row in L2: 74% of the copy ceiling, 0.80x a copy of the same bytes (DRAM at
76% of peak by Nsight Compute). For RMSNorm a row split over programs measured slower and a
persistent kernel 2-3% either way (benchmarks/RESULTS.md 7d, 7g): reading each byte once at full rate
needs a row shared by a cluster of SMs, which Triton's language does not expose.
Dtypes: float32, float16, bfloat16; x, weight and bias share a dtype. x must be contiguous.
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
WIDE_ROW_BLOCK_SIZE = 16384
WIDE_ROW_NUM_WARPS = 16


@triton.jit
def layernorm_kernel(
    x_ptr, weight_ptr, bias_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements on large activations.
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    mask = (rows[:, None] < n_rows) & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    # Padding lanes would contribute mean**2 each: zero them.
    centered = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
    # Every program reads the same weight and bias: keep them in L2.
    w = tl.load(weight_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(bias_ptr + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = centered * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_wide_kernel(
    x_ptr, weight_ptr, bias_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements on large activations.
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
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(weight_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        b = tl.load(bias_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        y = (x.to(tl.float32) - mean) * rstd * w.to(tl.float32) + b.to(tl.float32)
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(elements):
    # About 16 elements per thread: enough loads in flight, few enough registers not to spill.
    # Capped at 16: with weight, bias and the centred row live, 32 warps spill (H100: 25% slower
    # at 16384 columns).
    return min(max(elements // 512, 4), 16)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
              eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm of x over its last dimension with affine weight and bias (shape [x.shape[-1]])."""
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

    x_2d = x.view(-1, n_cols)
    y = torch.empty_like(x)
    y_2d = y.view(-1, n_cols)
    n_rows = x_2d.shape[0]
    if n_rows == 0:
        return y

    if n_cols * x.element_size() > MAX_FUSED_BYTES:
        layernorm_wide_kernel[(n_rows,)](
            x_2d, weight, bias, y_2d,
            x_2d.stride(0), y_2d.stride(0),
            n_cols, eps,
            BLOCK_SIZE=WIDE_ROW_BLOCK_SIZE,
            num_warps=WIDE_ROW_NUM_WARPS,
        )
        return y

    block_size = triton.next_power_of_2(n_cols)
    rows_per_program = min(max(PACK_BYTES // (block_size * x.element_size()), 1), triton.next_power_of_2(n_rows))
    layernorm_kernel[(triton.cdiv(n_rows, rows_per_program),)](
        x_2d, weight, bias, y_2d,
        x_2d.stride(0), y_2d.stride(0),
        n_rows, n_cols, eps,
        BLOCK_SIZE=block_size, ROWS_PER_PROGRAM=rows_per_program,
        num_warps=_num_warps(block_size * rows_per_program),
    )
    return y


kernel_fn = layernorm


def reference_fn(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


def get_inputs(rows=8192, cols=8192, dtype=torch.bfloat16):
    # A non-zero mean exercises the centring; a plain randn row would hide a dropped "- mean".
    x = torch.randn(rows, cols, device="cuda", dtype=dtype) * 2.0 + 0.5
    weight = torch.randn(cols, device="cuda", dtype=dtype)
    bias = torch.randn(cols, device="cuda", dtype=dtype)
    return [x, weight, bias]


CASES = [
    # Verification: odd widths, a single row, two columns (many rows packed per program, and a
    # program's last rows past the end), and widths just past the 64 KiB single-program limit
    # (16384 fp32 / 32768 fp16|bf16 columns) so the wide kernel runs.
    *[
        {"rows": rows, "cols": cols, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for rows, cols in ((1, 2), (3, 127), (37, 1000), (5, 4097))
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


def flops(x, weight, bias, eps=1e-5):
    # sum, subtract mean, square, sum, scale by rstd, scale by weight, plus bias
    return 7 * x.numel()


def bytes_moved(x, weight, bias, eps=1e-5):
    return (2 * x.numel() * x.element_size()
            + (weight.numel() + bias.numel()) * weight.element_size())
