"""attention: fused scaled-dot-product attention forward, softmax(q @ k^T / sqrt(D)) @ v.

Flash-attention v2 forward in the style of the Triton fused-attention tutorial: one program
owns BLOCK_M query rows of one (batch, head) and streams K and V in BLOCK_N blocks, keeping an
online softmax (running max and sum, rescaled as the max grows) so the S x S score matrix
never reaches memory. Causal masking (query i sees keys j <= i) is a compile-time flag; key
blocks wholly below the diagonal skip the mask arithmetic, and the longest query blocks are
launched first so that the short ones fill the tail.
Two kernels run that algorithm, picked by what the tensors allow:
- attention_tma_kernel, fp16/bf16 head_dim 128 q, k, v contiguous as (batch, heads, seq_len,
  head_dim) on a Hopper GPU: the tensor memory accelerator (TMA) copies K and V blocks into
  shared memory ahead of use, and out-of-range rows arrive as zeros (H100, 4096 tokens,
  non-causal: 508 TFLOP/s, 1.45x PyTorch's flash backend; 8% faster than the pointer kernel).
- attention_kernel, anything else (other head dims, any strides, fp32, any GPU): pointer loads.
Shapes: q, k, v of one shape (batch, heads, seq_len, head_dim), any seq_len, head_dim in
{16, 32, 64, 128}. Forward only (no backward, no logsumexp output).
Dtypes: float16, bfloat16, float32 (its products in full fp32, input_precision="ieee": TF32's
10-bit inputs would turn a near-tie between two large scores the other way; fp32 runs on the CUDA
cores, several times slower than the 16-bit types).
Limits: one config per kernel and shape class (each costs a compile of about 1.5-2 s on the
first call). PyTorch's default backend on an H100 (not the flash one) is faster still: 616
against 508 TFLOP/s at head_dim 128, 4096 tokens, non-causal.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def attention_kv_loop(
    acc, row_sum, row_max, q,
    k_ptrs, v_ptrs, stride_kn, stride_vn,
    offs_m, kv_start, kv_end, seq_len, qk_scale,
    KV_BLOCK: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    # fp32 products in fp32 ("ieee"); tl.dot's default would round fp32 inputs to TF32
    DOT_PRECISION: tl.constexpr = "ieee" if q.dtype == tl.float32 else "tf32"
    offs_n = tl.arange(0, KV_BLOCK)
    k_ptrs += kv_start * stride_kn
    v_ptrs += kv_start * stride_vn
    for start_n in range(kv_start, kv_end, KV_BLOCK):
        start_n = tl.multiple_of(start_n, KV_BLOCK)
        cols = start_n + offs_n
        if MASKED:
            k = tl.load(k_ptrs, mask=cols[None, :] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        qk = tl.dot(q, k, input_precision=DOT_PRECISION)
        # Scores in log2 units (qk_scale folds in log2(e)) so that exp2 does the softmax.
        if MASKED:
            valid = cols[None, :] < seq_len
            if IS_CAUSAL:
                valid = valid & (offs_m[:, None] >= cols[None, :])
            # The first key block a row meets always holds a valid key for it, so row_max is
            # finite before any fully masked row shows up: exp2(-inf - row_max) is 0, not NaN.
            qk = tl.where(valid, qk * qk_scale, -float("inf"))
            new_max = tl.maximum(row_max, tl.max(qk, 1))
            qk = qk - new_max[:, None]
        else:
            # max before scaling (qk_scale > 0), so the scale and the shift fuse into one FMA.
            new_max = tl.maximum(row_max, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - new_max[:, None]
        p = tl.math.exp2(qk)
        correction = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        # p in the input dtype: the second product runs on the tensor cores at full rate.
        acc = tl.dot(p.to(v.dtype), v, acc * correction[:, None], input_precision=DOT_PRECISION)
        row_max = new_max
        k_ptrs += KV_BLOCK * stride_kn
        v_ptrs += KV_BLOCK * stride_vn
    return acc, row_sum, row_max


def _keep_configs_for_length(configs, named_args, **kwargs):
    # One config per shape class: each costs a compile on the first call, and the live loop
    # recompiles on every save.
    short = named_args["seq_len"] <= 1024
    kept = [c for c in configs if (c.kwargs["BLOCK_M"] == 64) == short]
    return kept or configs


# Pointer kernel (H100, bf16): 128 x 64 with 8 warps won at head_dim 64 and 128 from 4096 tokens
# up; 64 x 64 with 4 warps at 1024 tokens, where 128-row blocks leave SMs idle. fp32 operands
# halve BLOCK_N in the kernel to fit in shared memory.
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_stages=3, num_warps=4),
    ],
    key=["seq_len", "HEAD_DIM", "IS_CAUSAL"],
    prune_configs_by={"early_config_prune": _keep_configs_for_length},
)
@triton.jit
def attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    # fp32 K and V blocks take twice the shared memory: halve them so every config still fits.
    KV_BLOCK: tl.constexpr = BLOCK_N // 2 if q_ptr.dtype.element_ty == tl.float32 else BLOCK_N
    tl.static_assert(BLOCK_M % KV_BLOCK == 0, "the causal split needs the K/V block to divide BLOCK_M")
    start_m = tl.program_id(0)
    if IS_CAUSAL:
        # Later query blocks see more keys: launch them first so the short ones fill the tail.
        start_m = tl.num_programs(0) - 1 - start_m
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    # int64: batch * stride passes 2**31 elements on long sequences and many heads.
    q_base = q_ptr + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    k_base = k_ptr + batch.to(tl.int64) * stride_kb + head.to(tl.int64) * stride_kh
    v_base = v_ptr + batch.to(tl.int64) * stride_vb + head.to(tl.int64) * stride_vh
    o_base = out_ptr + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, KV_BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    row_valid = offs_m[:, None] < seq_len
    # q stays in registers for the whole sweep over K and V. Rows past seq_len load as 0:
    # their scores are finite, and their output is never stored.
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=row_valid, other=0.0)
    k_ptrs = k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd  # K^T tile
    v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd

    row_max = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # fp32 whoever launches: Triton types a float argument fp32, torch.compile's Inductor fp64, and an fp64
    # scale would carry the scores, and the accumulator tl.dot must keep in fp32, to fp64.
    qk_scale = (sm_scale * 1.4426950408889634).to(tl.float32)  # log2(e)

    # Key blocks that need no mask: below the diagonal (causal) or inside seq_len.
    if IS_CAUSAL:
        unmasked_end = start_m * BLOCK_M
        masked_end = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    else:
        unmasked_end = (seq_len // KV_BLOCK) * KV_BLOCK
        masked_end = seq_len
    acc, row_sum, row_max = attention_kv_loop(
        acc, row_sum, row_max, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
        offs_m, 0, unmasked_end, seq_len, qk_scale,
        KV_BLOCK, False, IS_CAUSAL,
    )
    # The diagonal blocks (causal) or the ragged last block: masked.
    acc, row_sum, row_max = attention_kv_loop(
        acc, row_sum, row_max, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
        offs_m, unmasked_end, masked_end, seq_len, qk_scale,
        KV_BLOCK, True, IS_CAUSAL,
    )

    out = acc / row_sum[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=row_valid)


@triton.jit
def attention_tma_kv_loop(
    acc, row_sum, row_max, q, k_desc, v_desc, batch_head,
    offs_m, kv_start, kv_end, seq_len, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    # attention_kv_loop with K and V blocks copied by the TMA: (1, BLOCK_N, HEAD_DIM) boxes of the
    # (batch * heads, seq_len, head_dim) view, zeros past seq_len.
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(kv_start, kv_end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([batch_head, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        qk = tl.dot(q, k.T)
        if MASKED:
            cols = start_n + offs_n
            valid = cols[None, :] < seq_len
            if IS_CAUSAL:
                valid = valid & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(valid, qk * qk_scale, -float("inf"))
            new_max = tl.maximum(row_max, tl.max(qk, 1))
            qk = qk - new_max[:, None]
        else:
            new_max = tl.maximum(row_max, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - new_max[:, None]
        p = tl.math.exp2(qk)
        correction = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p, 1)
        v = v_desc.load([batch_head, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * correction[:, None])
        row_max = new_max
    return acc, row_sum, row_max


# The TMA kernel's one config (H100, bf16, head_dim 128, 1024 to 16384 tokens): 128 x 128 blocks,
# 8 warps, K and V 3 blocks ahead (508 TFLOP/s non-causal at 4096 tokens, against 470 for the
# pointer kernel's best). One config, not a search: each costs a compile of about 1.5-2 s on
# the first call, and the live loop recompiles on every save.
TMA_BLOCK_M, TMA_BLOCK_N, TMA_NUM_STAGES, TMA_NUM_WARPS = 128, 128, 3, 8


@triton.jit
def attention_tma_kernel(
    q_desc, k_desc, v_desc, out_desc,
    seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0, "the causal split needs the K/V block to divide BLOCK_M")
    start_m = tl.program_id(0)
    if IS_CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m
    batch_head = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = q_desc.load([batch_head, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    row_max = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = (sm_scale * 1.4426950408889634).to(tl.float32)  # log2(e); fp32 as in attention_kernel
    if IS_CAUSAL:
        unmasked_end = start_m * BLOCK_M
        masked_end = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    else:
        unmasked_end = (seq_len // BLOCK_N) * BLOCK_N
        masked_end = seq_len
    acc, row_sum, row_max = attention_tma_kv_loop(
        acc, row_sum, row_max, q, k_desc, v_desc, batch_head,
        offs_m, 0, unmasked_end, seq_len, qk_scale,
        HEAD_DIM, BLOCK_N, False, IS_CAUSAL,
    )
    acc, row_sum, row_max = attention_tma_kv_loop(
        acc, row_sum, row_max, q, k_desc, v_desc, batch_head,
        offs_m, unmasked_end, masked_end, seq_len, qk_scale,
        HEAD_DIM, BLOCK_N, True, IS_CAUSAL,
    )
    out = acc / row_sum[:, None]
    # The TMA store drops the rows past seq_len.
    out_desc.store([batch_head, start_m * BLOCK_M, 0], out.to(out_desc.dtype).reshape(1, BLOCK_M, HEAD_DIM))


def _tma_usable(q, k, v):
    # head_dim 64 stays with the pointer kernel: there it was 3-5% faster than the TMA kernel.
    if q.dtype not in (torch.float16, torch.bfloat16) or q.shape[-1] != 128:
        return False
    if q.is_cuda and torch.cuda.get_device_capability(q.device)[0] < 9:
        return False  # the TMA arrived with Hopper
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(head_dim)) @ v for (batch, heads, seq_len, head_dim) tensors."""
    if q.dim() != 4:
        raise ValueError(f"attention: q must be (batch, heads, seq_len, head_dim), got shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"attention: q, k, v must share one shape, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"attention: q must be float32, float16 or bfloat16, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"attention: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"attention: q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    batch, heads, seq_len, head_dim = q.shape
    if head_dim not in (16, 32, 64, 128):
        raise ValueError(f"attention: head_dim must be 16, 32, 64 or 128, got {head_dim}")

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if out.numel() == 0:
        return out
    grid = lambda meta: (triton.cdiv(seq_len, meta["BLOCK_M"]), batch * heads)
    if _tma_usable(q, k, v):
        # A descriptor says which tensor, and the box each TMA copy moves: (1, rows, head_dim) of
        # the (batch * heads, seq_len, head_dim) view, so no copy crosses into the next head.
        q_desc, k_desc, v_desc, out_desc = (
            TensorDescriptor.from_tensor(t.view(batch * heads, seq_len, head_dim), [1, rows, head_dim])
            for t, rows in ((q, TMA_BLOCK_M), (k, TMA_BLOCK_N), (v, TMA_BLOCK_N), (out, TMA_BLOCK_M)))
        attention_tma_kernel[(triton.cdiv(seq_len, TMA_BLOCK_M), batch * heads)](
            q_desc, k_desc, v_desc, out_desc, seq_len, head_dim ** -0.5,
            HEAD_DIM=head_dim, BLOCK_M=TMA_BLOCK_M, BLOCK_N=TMA_BLOCK_N, IS_CAUSAL=bool(causal),
            num_stages=TMA_NUM_STAGES, num_warps=TMA_NUM_WARPS,
        )
        return out
    attention_kernel[grid](
        q, k, v, out,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        heads, seq_len, head_dim ** -0.5,
        HEAD_DIM=head_dim, IS_CAUSAL=bool(causal),
    )
    return out


kernel_fn = attention


def reference_fn(q, k, v, causal=False):
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        seq_len = q.shape[-2]
        future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def get_inputs(batch=4, heads=32, seq_len=4096, head_dim=128, causal=True, dtype=torch.bfloat16):
    shape = (batch, heads, seq_len, head_dim)
    q = torch.randn(shape, device="cuda", dtype=dtype)
    k = torch.randn(shape, device="cuda", dtype=dtype)
    v = torch.randn(shape, device="cuda", dtype=dtype)
    return [q, k, v, causal]


CASES = [
    # Verification: a single token, sequences just past the block sizes (65, 130), both mask
    # modes, every dtype; several batches and heads; then the other head dims once each.
    *[
        {"batch": b, "heads": h, "seq_len": s, "head_dim": 64, "causal": causal, "dtype": dtype}
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for b, h, s, causal in ((1, 1, 1, True), (1, 2, 65, False), (1, 1, 130, True))
    ],
    {"batch": 1, "heads": 1, "seq_len": 130, "head_dim": 64, "causal": False, "dtype": torch.bfloat16},
    {"batch": 2, "heads": 3, "seq_len": 40, "head_dim": 64, "causal": False, "dtype": torch.bfloat16},
    {"batch": 1, "heads": 1, "seq_len": 77, "head_dim": 128, "causal": True, "dtype": torch.bfloat16},
    {"batch": 1, "heads": 1, "seq_len": 100, "head_dim": 16, "causal": False, "dtype": torch.float16},
    {"batch": 1, "heads": 1, "seq_len": 97, "head_dim": 32, "causal": True, "dtype": torch.float32},
    # Benchmark: LLM prefill shapes, bf16, causal and not, at 1k to 16k tokens.
    {"purpose": "bench", "batch": 4, "heads": 32, "seq_len": 1024, "head_dim": 128, "causal": True},
    {"purpose": "bench", "batch": 4, "heads": 32, "seq_len": 2048, "head_dim": 128, "causal": True},
    {"purpose": "bench", "batch": 4, "heads": 32, "seq_len": 4096, "head_dim": 128, "causal": True},
    {"purpose": "bench", "batch": 4, "heads": 32, "seq_len": 4096, "head_dim": 128, "causal": False},
    {"purpose": "bench", "batch": 4, "heads": 16, "seq_len": 4096, "head_dim": 64, "causal": True},
    {"purpose": "bench", "batch": 4, "heads": 16, "seq_len": 4096, "head_dim": 64, "causal": False},
    {"purpose": "bench", "batch": 1, "heads": 32, "seq_len": 16384, "head_dim": 128, "causal": True},
]


def flops(q, k, v, causal=False):
    batch, heads, seq_len, head_dim = q.shape
    # two products (q @ k^T and p @ v) of 2 * seq_len**2 * head_dim each; causal skips half
    total = 4 * batch * heads * seq_len * seq_len * head_dim
    return total // 2 if causal else total


def bytes_moved(q, k, v, causal=False):
    return 4 * q.numel() * q.element_size()
