"""cross_entropy for training: the mean over rows of logsumexp(logits[row]) - logits[row, target[row]],
rows whose target is ignore_index left out, with its backward.

The forward keeps one float32 per row, the row's log-sum-exp (lse), and saves the logits themselves (no
copy); the backward recomputes the softmax from them and writes d(loss)/d(logits) =
(exp(x - lse) - onehot(target)) * grad_output / n_valid in the same pass (0 for ignored rows): the
bytes torch.compile of the reference moves. fp32 math throughout.

Kernels, all launched by the autograd.Function below:
- cross_entropy_fwd_kernel (one program per row): ONE online pass over the row in column tiles: each
  lane keeps a running max and a running sum of exp, rescaled when its max grows; the lanes are
  combined once after the loop. Writes the row's loss lse - logits[target] and its lse. An ignored row
  gets a loss of 0 and is never read.
- cross_entropy_mean_kernel (1 program): n_valid, the rows whose target is not ignore_index, and the
  sum of the rows' losses over it (NaN when every row is ignored, 0 / 0, as in PyTorch). Both stay on
  the device: no host sync anywhere. Deterministic: no atomics.
- cross_entropy_bwd_kernel (one program per column tile of a row): reads the upstream gradient (a
  0-dim tensor) and n_valid from device memory, one tile of logits, and writes that tile's gradient.

Bytes, per logit of e bytes (e = 2 for bf16), N logits:
- Forward: N*e (each logit read once; per row a target, an lse and a loss: noise).
- Backward: N*e read + N*e written = 2*N*e, whatever the upstream gradient. 3*N*e in all, as
  torch.compile of the reference (which saves the logits and recomputes the softmax in its backward).
- The alternative, Liger-Kernel's: the gradient is known in the forward (a loss ends the graph), so
  the forward writes (softmax - onehot) / n_valid: it must have the row's lse before it can, so it
  reads each row twice (the second mostly from L2 at a 32k vocabulary, partly from DRAM at 128k) and
  writes the gradient (>= 2*N*e); then a backward whose upstream is not exactly 1.0 (a loss scaled
  for gradient accumulation or by a GradScaler, the workbench's benchmark) reads it and writes the
  scaled one: >= 4*N*e in all, a third more than here. It moves less (2*N*e) only at exactly 1.0, and
  knowing that costs a host sync in every backward. Libraries compute the gradient in the forward to
  save memory, not time: they write it over the logits in place (dead once the loss is known), so no
  logits-sized buffer is kept between forward and backward (at 8192 tokens x 128256 bf16, 2 GiB).
  Here the saved logits stay alive until the backward, which allocates the gradient beside them.

Grid of the backward: a flat grid of (row, column tile) programs, one BWD_BLOCK_SIZE tile each (1-D, so
that the rows are not bounded by the grid's 65535 second dimension), rather than one program per row
looping over its tiles. A streaming kernel is as fast as the bytes it keeps in flight: about 3.35 TB/s
x ~1 us of loaded latency = ~25 KiB of reads per H100 SM. Here each program issues its whole tile's
loads at once (two 16-byte loads per thread in bf16); at 29 registers 8 programs of 8 warps fit an SM,
up to 64 KiB per SM, and a finished program is replaced at once from 32k-256k waiting ones, so the
SMs stay full until the last few tiles. A row loop keeps no more per warp (each iteration's load is
issued after the previous tile's arithmetic, which waited for its load; only a hand-written prefetch
would double it) and balances by rows: 4096 rows over ~1000 resident row programs leave a last wave
partly empty. The flat grid's price: each program reads four scalars (the row's target and lse,
n_valid, the upstream; L2 hits), and its logits load waits for the target (an ignored row's logits
are not read). Rows are taken from the last: the forward read those last, so the backward's first
tiles may still be in L2. The forward has no such choice without a second kernel to combine partial
rows (a row's lse needs all of it); 4 programs of 8 warps per SM (57 registers) keep 32 KiB in flight.

Dtypes: float32, float16, bfloat16 logits of shape (rows, vocab), any strides; target int64 of shape
(rows,). A row whose target is outside [0, vocab) and not ignore_index gets a NaN loss (PyTorch raises;
checking would cost a host sync). Logits that do not require grad get the loss alone (the same forward).
No class weights, label smoothing or soft targets.
"""

import torch
import triton
import triton.language as tl

# The forward's column tile for wide rows (narrower rows are one tile) and its warps: 16 logits per
# thread, two (bf16) or four (fp32) 16-byte loads in flight per thread and iteration; one exp per logit
# (the online update below), so that the SFU stays well under the bf16 load rate.
FWD_BLOCK_SIZE = 4096
FWD_NUM_WARPS = 8
# The backward's tile (one program each) and its warps: 16 logits per thread as well.
BWD_BLOCK_SIZE = 4096
BWD_NUM_WARPS = 8
# The mean reads one loss and one target per row, in one program.
ROWS_BLOCK_SIZE = 1024


@triton.jit
def cross_entropy_fwd_kernel(
    logits_ptr, target_ptr, loss_rows_ptr, lse_ptr,
    logits_row_stride, logits_col_stride, target_stride,
    n_cols, ignore_index,
    BLOCK_SIZE: tl.constexpr,
):
    # int64: row * stride passes 2**31 elements at 8192 x 262144 logits.
    row = tl.program_id(0).to(tl.int64)
    logits_row = logits_ptr + row * logits_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    target = tl.load(target_ptr + row * target_stride)

    if target == ignore_index:
        # No loss; the row's logits are never read, and the backward never reads its lse.
        tl.store(loss_rows_ptr + row, 0.0)
        tl.store(lse_ptr + row, 0.0)
    else:
        # One read: each lane keeps a running max m and a running sum s of exp(x - m). A new x with
        # d = x - m needs one exp, e = exp(-|d|): if it grows the max, s = s * exp(m - x) + 1 = s * e + 1,
        # else s = s + exp(x - m) = s + e. m starts at the lowest finite float32, not -inf: a lane that
        # only ever sees -inf (past the end of a row narrower than the tile, or a -inf logit) gets
        # d = -inf, e = 0 and keeps s = 0, never exp(-inf - -inf) = NaN. A NaN logit makes s NaN.
        running_max = tl.full([BLOCK_SIZE], -3.4028234663852886e38, dtype=tl.float32)
        running_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            offs = start + cols
            # Column offsets in int64: a transposed (column-strided) input passes 2**31 elements.
            x = tl.load(logits_row + offs.to(tl.int64) * logits_col_stride, mask=offs < n_cols,
                        other=-float("inf")).to(tl.float32)
            d = x - running_max
            e = tl.exp(-tl.abs(d))
            grew = d > 0.0
            running_sum = tl.where(grew, running_sum * e + 1.0, running_sum + e)
            running_max = tl.where(grew, x, running_max)
        # The lanes combined, once per row.
        row_max = tl.max(running_max, axis=0)
        row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)
        lse = row_max + tl.log(row_sum)
        # The target's logit: one more element of the row, most likely still in L2. A target outside
        # the row reads nothing and makes the loss NaN.
        in_row = (target >= 0) & (target < n_cols)
        target_logit = tl.load(logits_row + target * logits_col_stride, mask=in_row,
                               other=float("nan")).to(tl.float32)
        tl.store(loss_rows_ptr + row, lse - target_logit)
        tl.store(lse_ptr + row, lse)


@triton.jit
def cross_entropy_mean_kernel(
    loss_rows_ptr, target_ptr, loss_ptr, n_valid_ptr,
    target_stride, n_rows, ignore_index,
    BLOCK_SIZE: tl.constexpr,
):
    offs = tl.arange(0, BLOCK_SIZE)
    total = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    count = tl.zeros([BLOCK_SIZE], dtype=tl.int32)
    for start in range(0, n_rows, BLOCK_SIZE):
        rows = start + offs
        mask = rows < n_rows
        total += tl.load(loss_rows_ptr + rows, mask=mask, other=0.0)
        target = tl.load(target_ptr + rows.to(tl.int64) * target_stride, mask=mask, other=ignore_index)
        count += (target != ignore_index).to(tl.int32)
    n_valid = tl.sum(count, axis=0)
    # Kept on the device for the backward, which divides by it.
    tl.store(n_valid_ptr, n_valid)
    # n_valid == 0 (every row ignored): 0 / 0 = NaN, as PyTorch's mean over no rows.
    tl.store(loss_ptr, tl.sum(total, axis=0) / n_valid.to(tl.float32))


@triton.jit
def cross_entropy_bwd_kernel(
    logits_ptr, target_ptr, lse_ptr, n_valid_ptr, grad_output_ptr, grad_ptr,
    logits_row_stride, logits_col_stride, target_stride, grad_row_stride,
    n_rows, n_cols, n_tiles, ignore_index,
    BLOCK_SIZE: tl.constexpr,
):
    # One tile of one row per program, rows from the last (see the header), int64 for row * stride.
    pid = tl.program_id(0)
    row = (n_rows - 1 - pid // n_tiles).to(tl.int64)
    offs = (pid % n_tiles) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_row = offs < n_cols
    target = tl.load(target_ptr + row * target_stride)
    valid = target != ignore_index
    lse = tl.load(lse_ptr + row)
    # d(mean loss)/d(logits) times the upstream: one scale per program, read on the device.
    scale = tl.load(grad_output_ptr).to(tl.float32) / tl.load(n_valid_ptr).to(tl.float32)
    # An ignored row's logits are not read (none of its columns is below 0), its gradient written as
    # zeros. evict_first: each logit is read once here.
    cols_read = tl.where(valid, n_cols, 0)
    x = tl.load(logits_ptr + row * logits_row_stride + offs.to(tl.int64) * logits_col_stride,
                mask=offs < cols_read, other=0.0, eviction_policy="evict_first").to(tl.float32)
    p = tl.exp(x - lse)
    grad = tl.where(offs == target, p - 1.0, p) * scale
    # where, not a product with valid: with every row ignored the scale is x / 0 = inf.
    grad = tl.where(valid, grad, 0.0)
    tl.store(grad_ptr + row * grad_row_stride + offs, grad.to(grad_ptr.dtype.element_ty), mask=in_row)


def _num_warps(elements):
    # About 16 elements per thread: enough loads in flight, few enough registers not to spill.
    return min(max(elements // 512, 4), 32)


def _tile(n_cols, block_size, num_warps):
    """(tile width, warps) for rows of n_cols: the whole row when it fits in one tile."""
    if n_cols > block_size:
        return block_size, num_warps
    tile = triton.next_power_of_2(n_cols)
    return tile, _num_warps(tile)


class CrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, ignore_index):
        n_rows, n_cols = logits.shape
        device = logits.device
        loss_rows = torch.empty(n_rows, device=device, dtype=torch.float32)
        lse = torch.empty(n_rows, device=device, dtype=torch.float32)
        n_valid = torch.empty((), device=device, dtype=torch.int32)
        loss = torch.empty((), device=device, dtype=torch.float32)

        if n_rows > 0:
            block_size, num_warps = _tile(n_cols, FWD_BLOCK_SIZE, FWD_NUM_WARPS)
            cross_entropy_fwd_kernel[(n_rows,)](
                logits, target, loss_rows, lse,
                logits.stride(0), logits.stride(1), target.stride(0),
                n_cols, ignore_index,
                BLOCK_SIZE=block_size, num_warps=num_warps,
            )
        cross_entropy_mean_kernel[(1,)](
            loss_rows, target, loss, n_valid,
            target.stride(0), n_rows, ignore_index,
            BLOCK_SIZE=ROWS_BLOCK_SIZE,
        )
        # The logits themselves, not a copy (changing them in place before the backward is an error
        # autograd reports); lse and n_valid are one float per row and one int.
        ctx.save_for_backward(logits, target, lse, n_valid)
        ctx.ignore_index = ignore_index
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        logits, target, lse, n_valid = ctx.saved_tensors
        n_rows, n_cols = logits.shape
        grad = torch.empty((n_rows, n_cols), device=logits.device, dtype=logits.dtype)
        if grad.numel() > 0:
            block_size, num_warps = _tile(n_cols, BWD_BLOCK_SIZE, BWD_NUM_WARPS)
            n_tiles = triton.cdiv(n_cols, block_size)
            cross_entropy_bwd_kernel[(n_rows * n_tiles,)](
                logits, target, lse, n_valid, grad_output, grad,
                logits.stride(0), logits.stride(1), target.stride(0), grad.stride(0),
                n_rows, n_cols, n_tiles, ctx.ignore_index,
                BLOCK_SIZE=block_size, num_warps=num_warps,
            )
        return grad, None, None


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """The mean cross-entropy loss over the rows whose target is not ignore_index (a float32 scalar)."""
    if not isinstance(logits, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise ValueError("cross_entropy: logits and target must be tensors")
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"cross_entropy: logits must be float32, float16 or bfloat16, got {logits.dtype}")
    if logits.dim() != 2 or logits.shape[1] == 0:
        raise ValueError("cross_entropy: logits must be (rows, vocab) with vocab >= 1, got shape "
                         f"{tuple(logits.shape)} (flatten the batch and sequence dimensions first)")
    if target.dtype != torch.int64:
        raise ValueError(f"cross_entropy: target must be int64 class indices, got {target.dtype}")
    if target.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy: target must be ({logits.shape[0]},), one class index per row of "
                         f"logits, got shape {tuple(target.shape)}")
    if target.device != logits.device:
        raise ValueError(f"cross_entropy: logits and target must be on the same device, got {logits.device} "
                         f"and {target.device}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int) or not -2**31 <= ignore_index < 2**31:
        raise ValueError(f"cross_entropy: ignore_index must be an int32-range int, got {ignore_index!r}")
    return CrossEntropyFunction.apply(logits, target, ignore_index)


kernel_fn = cross_entropy


def reference_fn(logits, target, ignore_index=-100):
    # PyTorch's built-in cross-entropy is exactly this (log_softmax, then nll_loss), written out:
    # renaming this scaffold replaces its name as a word everywhere in the file, and would rename
    # a call to the built-in too. float64 stays float64 (the verifier's precise reference).
    x = logits if logits.dtype == torch.float64 else logits.float()
    return torch.nn.functional.nll_loss(torch.log_softmax(x, dim=-1), target, ignore_index=ignore_index)


def get_inputs(rows=4096, vocab=32768, dtype=torch.bfloat16, ignore_fraction=0.05):
    # Scaled as a language model's logits are (a few units of spread, a peaked softmax); about
    # ignore_fraction of the rows are padding (target -100).
    logits = (torch.randn(rows, vocab, device="cuda", dtype=dtype) * 3.0).requires_grad_(True)
    target = torch.randint(0, vocab, (rows,), device="cuda", dtype=torch.int64)
    target[torch.rand(rows, device="cuda") < ignore_fraction] = -100
    return [logits, target]


CASES = [
    # Verification: one row of one class (loss and gradient 0), then for each dtype one row of a
    # vocabulary, odd vocabularies in one tile, and a vocabulary over FWD_BLOCK_SIZE / BWD_BLOCK_SIZE so
    # that the forward's online loop runs five tiles and the backward five programs a row, the last
    # partial. ignore_fraction 0.1: a few rows of the larger cases are ignored (none of the single
    # rows, so that they test a loss).
    {"rows": 1, "vocab": 1, "dtype": torch.float32, "ignore_fraction": 0.0},
    *[
        {"rows": rows, "vocab": vocab, "dtype": dtype, "ignore_fraction": 0.0 if rows == 1 else 0.1}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for rows, vocab in ((1, 5000), (3, 127), (37, 1000), (2, 20000))
    ],
    # Every row ignored: the loss is NaN (0 / 0, as in PyTorch), the gradient all zeros.
    {"rows": 5, "vocab": 300, "dtype": torch.float32, "ignore_fraction": 1.0},
    # Benchmark: language-model shapes (tokens x vocabulary): 32k vocabularies, and Llama 3's 128256.
    {"purpose": "bench", "rows": 4096, "vocab": 32768, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "vocab": 32000, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 4096, "vocab": 128256, "dtype": torch.bfloat16},
    {"purpose": "bench", "rows": 8192, "vocab": 128256, "dtype": torch.bfloat16},
]


def _pass_sizes(logits, target, mode):
    """(whether a backward runs, logits, bytes per logit, rows) for bytes_moved and flops."""
    if mode not in ("fwd", "bwd", "full"):
        raise ValueError(f"cross_entropy: mode must be 'fwd', 'bwd' or 'full', got {mode!r}")
    return logits.requires_grad, logits.numel(), logits.element_size(), logits.shape[0]


def bytes_moved(logits, target, ignore_index=-100, mode="full"):
    # fwd: the logits read once; per row the target read twice (the row kernel and the mean), the
    #      loss written and read back by the mean, the lse written.
    # bwd: the logits read and the gradient written; per row the target and the lse read. (Ignored
    #      rows' logits are not read: not counted, the minimum is that of every row.)
    # Logits that do not require grad have no backward.
    with_grad, n, size, rows = _pass_sizes(logits, target, mode)
    per_row = target.element_size()
    fwd = n * size + rows * (2 * per_row + 3 * 4)
    bwd = (2 * n * size + rows * (per_row + 4)) if with_grad else 0
    return {"fwd": fwd, "bwd": bwd, "full": fwd + bwd}[mode]


def flops(logits, target, ignore_index=-100, mode="full"):
    # Per logit, nominal (an exp counts one): the forward's subtract, exp, compare and rescale-or-add
    # (4); the backward's subtract, exp, one-hot subtract and scale (4).
    with_grad, n, _, _ = _pass_sizes(logits, target, mode)
    fwd = 4 * n
    bwd = 4 * n if with_grad else 0
    return {"fwd": fwd, "bwd": bwd, "full": fwd + bwd}[mode]
