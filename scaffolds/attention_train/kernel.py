"""attention: softmax(q @ k^T / sqrt(D)) @ v for training, with its backward (dq, dk, dv).

kernel_fn is a torch.autograd.Function in the FlashAttention-2 design; no S x S matrix reaches memory
in either pass. Scores are kept in log2 units (times sm_scale * log2(e)) so that every exponential is
an exp2.
- Forward (attention_fwd_kernel): the forward scaffold's algorithm. One program owns BLOCK_M query
  rows of one (batch, head) and streams K and V in BLOCK_N blocks with an online softmax; causal key
  blocks wholly below the diagonal skip the mask arithmetic, and the longest query blocks start first.
  Beside the output it writes one fp32 per query row, the row's log-sum-exp in log2 units
  (lse = max + log2(sum)), and the output's rounding residual (below); saved with q, k, v and the
  output for the backward.
- Backward, three kernels (four launches):
  - attention_bwd_preprocess_kernel: delta = rowsum(dO * O) in fp32, one per query row.
  - attention_bwd_dkdv_kernel: one program owns BLOCK_N key/value rows (k, v and the fp32 dk, dv
    accumulators stay on chip) and loops over the query blocks that see them (causal: from the
    diagonal on), recomputing P^T = exp2(k q^T * scale - lse) from the saved lse:
        dv += P^T dO,   dS^T = P^T * (v dO^T - delta),   dk += dS^T q
  - attention_bwd_dq_kernel: one program owns BLOCK_M query rows and loops over the key blocks they
    see: dq += dS k. Its own recompute of P and dP costs two more products (7 in all against the
    5 of a backward that adds dq with atomics), in exchange for a deterministic dq with no fp32
    atomic traffic and no extra buffer.
  P and dS are rounded to the input dtype for the products (tensor cores at full rate), as
  FlashAttention does; every product accumulates in fp32. sm_scale is applied to dk and dq once,
  at the end. Diagonal (causal) blocks and the ragged last block are the only masked iterations.
Precision: dS = P * (dP - delta) is a difference of near-equal terms of size |dO| |v|, and dq sums dS
times keys that may share a large mean, so an error in delta or in dS comes out multiplied. Plain
FlashAttention-2 (delta from the rounded output) breaks the verifier's float16 budget on randn inputs
here, and its value stresses (x64, an offset, outliers), the offset by far. Four things keep it within, each
measured against that budget:
  1. The forward's row sum adds the weights as rounded for P @ V, so the output is a weighted mean of
     v whose weights sum to 1: its error scales with the spread of v, not with its size.
  2. The forward also writes the output's rounding residual (its dtype, 2 bytes an element: a saved
     tensor the size of q); delta takes O as output + residual, nearly fp32.
  3. delta is a tensor-core product (the diagonal of dO O^T), as dP is: a row whose softmax is a
     single key has O = v_j, and its dP - delta is the same product subtracted from itself, 0.
  4. dS sums to 0 over a row, so dq = sum_j dS_j (k_j - c) for any c: the dq kernel adds up its rounded
     dS and takes off that sum times c, the mean of the head's first key block (in fp32; one tile
     load a program and a row sum a step).
Programs run on a 1-D grid, block index fastest, so the programs of one (batch, head) run together
and share its K and V (or Q and dO) in L2; batch * heads is not bounded by the grid's 65535 second
dimension. The (batch, head) offsets are int64.
Shapes: q, k, v of one shape (batch, heads, seq_len, head_dim), any strides, any seq_len, head_dim in
{16, 32, 64, 128}. Dtypes: float16, bfloat16 (float32 is refused: its products would run in TF32).
Block sizes by sequence length and head dim: up to 1024 tokens 64-row programs with 4 warps (more
programs), beyond that FlashAttention-2's backward blocks (128 key rows a program, 64 query rows a step,
8 warps), one config a kernel at head_dim 128 and a 128-row step left to the tuner at head_dim <= 64.
Each config costs a compile on the first call (forward and backward cold: 6-9 s on an H200).
Measured on an H200 (bf16, benchmarks/scaffolds.py): 245-412 TFLOP/s; the backward 1.03-1.24x the speed of
PyTorch's SDPA flash backend and 0.64-0.69x its cuDNN backend, the forward 0.98-1.23x and 0.63-0.71x.
The inputs need not require grad: then only the forward runs.
FLOPs are counted as FlashAttention counts them (the forward's two products, 2.5x that for the
backward's five), so TFLOP/s compare with PyTorch's scaled-dot-product kernels.
"""

import torch
import triton
import triton.language as tl

# Up to this many tokens the 64-row configs (more programs to fill the GPU), beyond it the 128-row ones.
SHORT_SEQ_LEN = 1024
# The delta kernel's rows per program.
PREPROCESS_BLOCK_M = 64


def _keep_configs_for_length(owned):
    """An early_config_prune keeping the configs of this shape class: the programs' own block (`owned`:
    BLOCK_M of query rows, BLOCK_N of key rows) is 64 rows up to SHORT_SEQ_LEN tokens, 128 beyond; a
    128-row loop step only at head_dim <= 64 (at 128 its fp32 tiles would spill)."""
    def prune(configs, named_args, **kwargs):
        short = named_args["seq_len"] <= SHORT_SEQ_LEN
        step = "BLOCK_N" if owned == "BLOCK_M" else "BLOCK_M"
        kept = [c for c in configs if (c.kwargs[owned] == 64) == short
                and (c.kwargs[step] < 128 or kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM", 128)) <= 64)]
        return kept or configs
    return prune


# -- forward ----------------------------------------------------------------------------------------------

@triton.jit
def attention_fwd_kv_loop(
    acc, row_sum, row_max, q,
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, kv_start, kv_end, seq_len, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(kv_start, kv_end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd  # K^T tile
        v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        if MASKED:
            k = tl.load(k_ptrs, mask=offs_n[None, :] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        qk = tl.dot(q, k)
        if MASKED:
            valid = offs_n[None, :] < seq_len
            if IS_CAUSAL:
                valid = valid & (offs_m[:, None] >= offs_n[None, :])
            # The first key block a row meets holds a valid key for it, so row_max is finite before
            # a fully masked row shows up: exp2(-inf - row_max) is 0, not NaN.
            qk = tl.where(valid, qk * qk_scale, -float("inf"))
            new_max = tl.maximum(row_max, tl.max(qk, 1))
            qk = qk - new_max[:, None]
        else:
            # max before scaling (qk_scale > 0): the scale and the shift fuse into one FMA.
            new_max = tl.maximum(row_max, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - new_max[:, None]
        if MASKED:
            v = tl.load(v_ptrs, mask=offs_n[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        # P in the input dtype: the product runs on the tensor cores at full rate. The row sum is of those
        # rounded weights, so that the output is their weighted mean: its error then scales with the
        # spread of v, not with its size (see attention_bwd_preprocess_kernel).
        p = tl.math.exp2(qk).to(v.dtype)
        correction = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p.to(tl.float32), 1)
        acc = tl.dot(p, v, acc * correction[:, None])
        row_max = new_max
    return acc, row_sum, row_max


# H100 (the forward scaffold's measurements, bf16): 128 x 64 with 8 warps from 4096 tokens up,
# 64 x 64 with 4 warps at 1024 tokens.
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_stages=3, num_warps=4),
    ],
    key=["seq_len", "HEAD_DIM", "IS_CAUSAL"],
    prune_configs_by={"early_config_prune": _keep_configs_for_length("BLOCK_M")},
)
@triton.jit
def attention_fwd_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, res_ptr, lse_ptr,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0, "the causal split needs BLOCK_N to divide BLOCK_M")
    pid = tl.program_id(0)
    n_blocks = tl.cdiv(seq_len, BLOCK_M)
    batch_head = pid // n_blocks
    start_m = pid % n_blocks
    if IS_CAUSAL:
        # Later query blocks see more keys: launch them first so that the short ones fill the tail.
        start_m = n_blocks - 1 - start_m
    batch = batch_head // num_heads
    head = batch_head % num_heads
    # int64: batch * stride passes 2**31 elements on long sequences and many heads.
    q_base = q_ptr + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    k_base = k_ptr + batch.to(tl.int64) * stride_kb + head.to(tl.int64) * stride_kh
    v_base = v_ptr + batch.to(tl.int64) * stride_vb + head.to(tl.int64) * stride_vh
    o_base = out_ptr + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_valid = offs_m < seq_len
    # Rows past seq_len load as 0: their scores are finite, and nothing of theirs is stored.
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=row_valid[:, None], other=0.0)
    row_max = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # fp32 whoever launches (torch.compile's Inductor passes a float as fp64).
    qk_scale = (sm_scale * 1.4426950408889634).to(tl.float32)  # log2(e)

    if IS_CAUSAL:
        unmasked_end = start_m * BLOCK_M
        masked_end = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    else:
        unmasked_end = (seq_len // BLOCK_N) * BLOCK_N
        masked_end = seq_len
    acc, row_sum, row_max = attention_fwd_kv_loop(
        acc, row_sum, row_max, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, 0, unmasked_end, seq_len, qk_scale, HEAD_DIM, BLOCK_N, False, IS_CAUSAL,
    )
    acc, row_sum, row_max = attention_fwd_kv_loop(
        acc, row_sum, row_max, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, unmasked_end, masked_end, seq_len, qk_scale, HEAD_DIM, BLOCK_N, True, IS_CAUSAL,
    )

    out = acc / row_sum[:, None]
    out_rounded = out.to(out_ptr.dtype.element_ty)
    o_offs = offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_base + o_offs, out_rounded, mask=row_valid[:, None])
    # What rounding took off the output, in its dtype: the backward's delta = rowsum(dO * O) takes O as
    # out + res, nearly fp32. From the rounded output alone, delta is off by up to half an ulp of O times
    # |dO|, and every dS by as much: at O ~ 64 in fp16 (an ulp of 1/16) dq and dk come out wrong.
    res = (out - out_rounded.to(tl.float32)).to(res_ptr.dtype.element_ty)
    tl.store(res_ptr + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh + o_offs, res,
             mask=row_valid[:, None])
    # The backward's P = exp2(score * qk_scale - lse): lse in the same log2 units.
    tl.store(lse_ptr + batch_head.to(tl.int64) * seq_len + offs_m, row_max + tl.math.log2(row_sum),
             mask=row_valid)


# -- backward ---------------------------------------------------------------------------------------------

@triton.jit
def attention_bwd_preprocess_kernel(
    o_ptr, res_ptr, do_ptr, delta_ptr,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_dob, stride_doh, stride_dom, stride_dod,
    num_heads, seq_len,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
):
    # delta = rowsum(dO * O), fp32: the sum over keys of P * dP, which every dS needs. O is taken as the
    # output plus the forward's rounding residual (the same strides).
    pid = tl.program_id(0)
    n_blocks = tl.cdiv(seq_len, BLOCK_M)
    batch_head = pid // n_blocks
    batch = batch_head // num_heads
    head = batch_head % num_heads
    offs_m = (pid % n_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < seq_len
    o_offs = (batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh
              + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od)
    o = tl.load(o_ptr + o_offs, mask=rows[:, None], other=0.0)
    res = tl.load(res_ptr + o_offs, mask=rows[:, None], other=0.0)
    do = tl.load(do_ptr + batch.to(tl.int64) * stride_dob + head.to(tl.int64) * stride_doh
                 + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod, mask=rows[:, None], other=0.0)
    # Row i of dO times row i of O, by the tensor cores: the diagonal of dO O^T (and of dO res^T). A row whose
    # softmax is one key j (large scores) has O = v_j exactly, and then delta is bit for bit the dP_ij the
    # other kernels compute by the same product, so that its dS = P * (dP - delta) is exactly 0, not the
    # difference of two sums added in different orders (|dP| ~ |dO| |v|).
    products = tl.dot(do, tl.trans(o), tl.dot(do, tl.trans(res)))
    diagonal = tl.arange(0, BLOCK_M)[:, None] == tl.arange(0, BLOCK_M)[None, :]
    delta = tl.sum(tl.where(diagonal, products, 0.0), axis=1)
    tl.store(delta_ptr + batch_head.to(tl.int64) * seq_len + offs_m, delta, mask=rows)


@triton.jit
def attention_bwd_dkdv_loop(
    dk, dv, k, v,
    q_base, do_base, lse_base, delta_base,
    stride_qm, stride_qd, stride_dom, stride_dod,
    offs_n, q_start, q_end, seq_len, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(q_start, q_end, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q_ptrs = q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
        do_ptrs = do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod
        if MASKED:
            # Query rows past seq_len: q, dO and delta 0 and lse +inf, so that their P and dS are 0
            # and they add nothing to dk or dv.
            rows = offs_m < seq_len
            q = tl.load(q_ptrs, mask=rows[:, None], other=0.0)
            lse = tl.load(lse_base + offs_m, mask=rows, other=float("inf"))
        else:
            q = tl.load(q_ptrs)
            lse = tl.load(lse_base + offs_m)
        # P^T, (keys, queries): recomputed from the scores and the forward's lse, no running max.
        p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        if MASKED:
            if IS_CAUSAL:
                p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
            do = tl.load(do_ptrs, mask=rows[:, None], other=0.0)
            delta = tl.load(delta_base + offs_m, mask=rows, other=0.0)
        else:
            do = tl.load(do_ptrs)
            delta = tl.load(delta_base + offs_m)
        dv = tl.dot(p_t.to(do.dtype), do, dv)
        # dS^T = P^T * (dP^T - delta), dP^T = v dO^T; the softmax's scale is applied to dk at the end.
        ds_t = p_t * (tl.dot(v, tl.trans(do)) - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk)
    return dk, dv


# Hopper design: FlashAttention-2's backward blocks at head_dim 128 (128 key rows a program,
# 64 query rows a step, 8 warps; dk and dv take 128 fp32 registers a thread). Compiled for sm_90 (triton
# 3.9, head_dim 128): 255 registers, no spills, 161 KiB of shared memory (k and v 64 KiB, each of 3 stages
# of q and dO 32 KiB), one program per SM. A 128-row step only at head_dim <= 64 (97 KiB). Up to 1024
# tokens: 64 key rows, 4 warps, 2 stages (97 KiB at head_dim 128: two programs per SM).
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 128, "BLOCK_M": 64}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_N": 128, "BLOCK_M": 128}, num_stages=2, num_warps=8),  # head_dim <= 64
        triton.Config({"BLOCK_N": 64, "BLOCK_M": 64}, num_stages=2, num_warps=4),
    ],
    key=["seq_len", "HEAD_DIM", "IS_CAUSAL"],
    prune_configs_by={"early_config_prune": _keep_configs_for_length("BLOCK_N")},
)
@triton.jit
def attention_bwd_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,
    stride_dvb, stride_dvh, stride_dvn, stride_dvd,
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    tl.static_assert(BLOCK_N % BLOCK_M == 0, "the causal split needs BLOCK_M to divide BLOCK_N")
    pid = tl.program_id(0)
    n_blocks = tl.cdiv(seq_len, BLOCK_N)
    batch_head = pid // n_blocks
    # Causal: the first key blocks are seen by the most queries, and they already start first.
    start_n = (pid % n_blocks) * BLOCK_N
    batch = batch_head // num_heads
    head = batch_head % num_heads
    q_base = q_ptr + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    k_base = k_ptr + batch.to(tl.int64) * stride_kb + head.to(tl.int64) * stride_kh
    v_base = v_ptr + batch.to(tl.int64) * stride_vb + head.to(tl.int64) * stride_vh
    do_base = do_ptr + batch.to(tl.int64) * stride_dob + head.to(tl.int64) * stride_doh
    lse_base = lse_ptr + batch_head.to(tl.int64) * seq_len
    delta_base = delta_ptr + batch_head.to(tl.int64) * seq_len

    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    cols = offs_n[:, None] < seq_len
    # Key rows past seq_len load as 0; their dk and dv rows are never stored, and rows do not mix.
    k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=cols, other=0.0)
    v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=cols, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = (sm_scale * 1.4426950408889634).to(tl.float32)  # log2(e)

    # Query blocks: the diagonal ones (causal: queries start_n .. start_n + BLOCK_N, masked), the full
    # blocks after them (no mask), the ragged last one (masked).
    if IS_CAUSAL:
        q_lo = start_n
        diag_end = tl.minimum(start_n + BLOCK_N, seq_len)
    else:
        q_lo = 0
        diag_end = 0
    full_end = tl.maximum(diag_end, (seq_len // BLOCK_M) * BLOCK_M)
    dk, dv = attention_bwd_dkdv_loop(
        dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_qd, stride_dom, stride_dod,
        offs_n, q_lo, diag_end, seq_len, qk_scale, HEAD_DIM, BLOCK_M, True, IS_CAUSAL,
    )
    dk, dv = attention_bwd_dkdv_loop(
        dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_qd, stride_dom, stride_dod,
        offs_n, diag_end, full_end, seq_len, qk_scale, HEAD_DIM, BLOCK_M, False, IS_CAUSAL,
    )
    dk, dv = attention_bwd_dkdv_loop(
        dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_qd, stride_dom, stride_dod,
        offs_n, full_end, seq_len, seq_len, qk_scale, HEAD_DIM, BLOCK_M, True, IS_CAUSAL,
    )

    dk = dk * sm_scale
    tl.store(dk_ptr + batch.to(tl.int64) * stride_dkb + head.to(tl.int64) * stride_dkh
             + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd, dk.to(dk_ptr.dtype.element_ty), mask=cols)
    tl.store(dv_ptr + batch.to(tl.int64) * stride_dvb + head.to(tl.int64) * stride_dvh
             + offs_n[:, None] * stride_dvn + offs_d[None, :] * stride_dvd, dv.to(dv_ptr.dtype.element_ty), mask=cols)


@triton.jit
def attention_bwd_dq_loop(
    dq, ds_sum, q, do, lse, delta,
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, kv_start, kv_end, seq_len, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(kv_start, kv_end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        if MASKED:
            k = tl.load(k_ptrs, mask=offs_n[:, None] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
        if MASKED:
            # Keys past seq_len (loaded as 0) would get exp2(-lse), not 0: masked out with the future.
            valid = offs_n[None, :] < seq_len
            if IS_CAUSAL:
                valid = valid & (offs_m[:, None] >= offs_n[None, :])
            p = tl.where(valid, p, 0.0)
            v = tl.load(v_ptrs, mask=offs_n[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        ds = (p * (tl.dot(do, tl.trans(v)) - delta[:, None])).to(k.dtype)
        ds_sum += tl.sum(ds.to(tl.float32), 1)
        dq = tl.dot(ds, k, dq)
    return dq, ds_sum


# Hopper design: 128 query rows a program (dq 64 fp32 registers a thread with 8 warps), 64
# key rows a step. sm_90, head_dim 128: 255 registers, no spills, 160 KiB (q and dO 64 KiB, 3 stages of k
# and v). A 128-row step only at head_dim <= 64; up to 1024 tokens 64 rows, 4 warps, 2 stages (96 KiB).
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_stages=2, num_warps=8),  # head_dim <= 64
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_stages=2, num_warps=4),
    ],
    key=["seq_len", "HEAD_DIM", "IS_CAUSAL"],
    prune_configs_by={"early_config_prune": _keep_configs_for_length("BLOCK_M")},
)
@triton.jit
def attention_bwd_dq_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dqb, stride_dqh, stride_dqm, stride_dqd,
    num_heads, seq_len, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0, "the causal split needs BLOCK_N to divide BLOCK_M")
    pid = tl.program_id(0)
    n_blocks = tl.cdiv(seq_len, BLOCK_M)
    batch_head = pid // n_blocks
    start_m = pid % n_blocks
    if IS_CAUSAL:
        start_m = n_blocks - 1 - start_m  # the longest first, as in the forward
    batch = batch_head // num_heads
    head = batch_head % num_heads
    q_base = q_ptr + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    k_base = k_ptr + batch.to(tl.int64) * stride_kb + head.to(tl.int64) * stride_kh
    v_base = v_ptr + batch.to(tl.int64) * stride_vb + head.to(tl.int64) * stride_vh
    do_base = do_ptr + batch.to(tl.int64) * stride_dob + head.to(tl.int64) * stride_doh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < seq_len
    # Query rows past seq_len: q, dO, delta 0 and lse +inf (P = 0); their dq is never stored.
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=rows[:, None], other=0.0)
    do = tl.load(do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
                 mask=rows[:, None], other=0.0)
    lse = tl.load(lse_ptr + batch_head.to(tl.int64) * seq_len + offs_m, mask=rows, other=float("inf"))
    delta = tl.load(delta_ptr + batch_head.to(tl.int64) * seq_len + offs_m, mask=rows, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    ds_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    qk_scale = (sm_scale * 1.4426950408889634).to(tl.float32)  # log2(e)

    if IS_CAUSAL:
        unmasked_end = start_m * BLOCK_M
        masked_end = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    else:
        unmasked_end = (seq_len // BLOCK_N) * BLOCK_N
        masked_end = seq_len
    dq, ds_sum = attention_bwd_dq_loop(
        dq, ds_sum, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, 0, unmasked_end, seq_len, qk_scale, HEAD_DIM, BLOCK_N, False, IS_CAUSAL,
    )
    dq, ds_sum = attention_bwd_dq_loop(
        dq, ds_sum, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, unmasked_end, masked_end, seq_len, qk_scale, HEAD_DIM, BLOCK_N, True, IS_CAUSAL,
    )
    # A row's dS sums to 0 in exact arithmetic, so dq = sum_j dS_j (k_j - c) for any fixed vector c: the
    # rounded dS's own sum times c, taken off in fp32, keeps what the keys share (an offset, a large mean)
    # from multiplying every rounding of dS and of delta. c: the mean of the head's first BLOCK_N keys.
    offs_first = tl.arange(0, BLOCK_N)
    first_keys = tl.load(k_base + offs_first[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                         mask=offs_first[:, None] < seq_len, other=0.0)
    k_mean = tl.sum(first_keys.to(tl.float32), 0) / tl.minimum(seq_len, BLOCK_N)
    dq = (dq - ds_sum[:, None] * k_mean[None, :]) * sm_scale
    tl.store(dq_ptr + batch.to(tl.int64) * stride_dqb + head.to(tl.int64) * stride_dqh
             + offs_m[:, None] * stride_dqm + offs_d[None, :] * stride_dqd, dq.to(dq_ptr.dtype.element_ty),
             mask=rows[:, None])


# -- launchers --------------------------------------------------------------------------------------------

def attention_fwd(q, k, v, causal):
    """(out, res, lse): the output, what rounding took off it (its dtype, the same strides), and each query
    row's log-sum-exp in log2 units, fp32 (batch * heads, seq_len)."""
    batch, heads, seq_len, head_dim = q.shape
    out = torch.empty(q.shape, device=q.device, dtype=q.dtype)
    res = torch.empty_like(out)
    lse = torch.empty((batch * heads, seq_len), device=q.device, dtype=torch.float32)
    if out.numel() == 0:
        return out, res, lse
    grid = lambda meta: (triton.cdiv(seq_len, meta["BLOCK_M"]) * batch * heads,)
    attention_fwd_kernel[grid](
        q, k, v, out, res, lse,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        heads, seq_len, head_dim ** -0.5,
        HEAD_DIM=head_dim, IS_CAUSAL=bool(causal),
    )
    return out, res, lse


def attention_bwd(q, k, v, out, res, lse, do, causal, needs_dq=True, needs_dkdv=True):
    """(dq, dk, dv) from the forward's inputs, output, residual and lse and the upstream gradient dO (any
    strides)."""
    batch, heads, seq_len, head_dim = q.shape
    do = do.to(q.dtype)
    dq = torch.empty(q.shape, device=q.device, dtype=q.dtype) if needs_dq else None
    dk = torch.empty(q.shape, device=q.device, dtype=q.dtype) if needs_dkdv else None
    dv = torch.empty(q.shape, device=q.device, dtype=q.dtype) if needs_dkdv else None
    if q.numel() == 0:
        return dq, dk, dv
    delta = torch.empty_like(lse)
    attention_bwd_preprocess_kernel[(triton.cdiv(seq_len, PREPROCESS_BLOCK_M) * batch * heads,)](
        out, res, do, delta, *out.stride(), *do.stride(), heads, seq_len,
        HEAD_DIM=head_dim, BLOCK_M=PREPROCESS_BLOCK_M, num_warps=4,
    )
    sm_scale = head_dim ** -0.5
    if needs_dkdv:
        attention_bwd_dkdv_kernel[lambda meta: (triton.cdiv(seq_len, meta["BLOCK_N"]) * batch * heads,)](
            q, k, v, do, lse, delta, dk, dv,
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(),
            heads, seq_len, sm_scale,
            HEAD_DIM=head_dim, IS_CAUSAL=bool(causal),
        )
    if needs_dq:
        attention_bwd_dq_kernel[lambda meta: (triton.cdiv(seq_len, meta["BLOCK_M"]) * batch * heads,)](
            q, k, v, do, lse, delta, dq,
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq.stride(),
            heads, seq_len, sm_scale,
            HEAD_DIM=head_dim, IS_CAUSAL=bool(causal),
        )
    return dq, dk, dv


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        out, res, lse = attention_fwd(q, k, v, causal)
        # The backward recomputes P from q, k and the lse: 4 bytes a query row, no S x S matrix.
        ctx.save_for_backward(q, k, v, out, res, lse)
        ctx.causal = bool(causal)
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, out, res, lse = ctx.saved_tensors
        dq, dk, dv = attention_bwd(q, k, v, out, res, lse, do, ctx.causal, needs_dq=ctx.needs_input_grad[0],
                                   needs_dkdv=ctx.needs_input_grad[1] or ctx.needs_input_grad[2])
        return dq, dk, dv, None


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(head_dim)) @ v for (batch, heads, seq_len, head_dim) tensors; differentiable."""
    if q.dim() != 4:
        raise ValueError(f"attention: q must be (batch, heads, seq_len, head_dim), got shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"attention: q, k, v must share one shape, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"attention: q must be float16 or bfloat16, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"attention: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"attention: q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if q.shape[-1] not in (16, 32, 64, 128):
        raise ValueError(f"attention: head_dim must be 16, 32, 64 or 128, got {q.shape[-1]}")
    return AttentionFunction.apply(q, k, v, causal)


kernel_fn = attention


def reference_fn(q, k, v, causal=False):
    # The scale split over q and k before the product, as PyTorch's math backend does: q @ k^T of float16
    # inputs near 64 (64 * 64 * head_dim) would pass float16's 65504 before it was scaled.
    root_scale = q.shape[-1] ** -0.25
    scores = (q * root_scale) @ (k * root_scale).transpose(-2, -1)
    if causal:
        seq_len = q.shape[-2]
        future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def get_inputs(batch=4, heads=32, seq_len=4096, head_dim=128, causal=True, dtype=torch.bfloat16):
    shape = (batch, heads, seq_len, head_dim)
    q = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    return [q, k, v, causal]


CASES = [
    # Verification, kept small: the interpreter runs the forward and the four backward launches of each
    # case once per autotune config (10). Several batches and heads, both dtypes, causal; 150 tokens
    # both ways: full 64-row blocks, diagonal blocks and a ragged last block, and 128-row programs with
    # a partial block; head_dim 128, a single token, and the small head dims once.
    {"batch": 2, "heads": 2, "seq_len": 40, "head_dim": 64, "causal": True, "dtype": torch.float16},
    {"batch": 2, "heads": 2, "seq_len": 40, "head_dim": 64, "causal": True, "dtype": torch.bfloat16},
    {"batch": 1, "heads": 1, "seq_len": 150, "head_dim": 64, "causal": False, "dtype": torch.bfloat16},
    {"batch": 1, "heads": 1, "seq_len": 150, "head_dim": 64, "causal": True, "dtype": torch.bfloat16},
    {"batch": 1, "heads": 2, "seq_len": 70, "head_dim": 128, "causal": True, "dtype": torch.bfloat16},
    {"batch": 1, "heads": 1, "seq_len": 1, "head_dim": 64, "causal": True, "dtype": torch.bfloat16},
    {"batch": 1, "heads": 1, "seq_len": 33, "head_dim": 32, "causal": False, "dtype": torch.float16},
    {"batch": 1, "heads": 1, "seq_len": 20, "head_dim": 16, "causal": True, "dtype": torch.bfloat16},
    # Benchmark: LLM prefill shapes, bf16, causal and not.
    {"purpose": "bench", "batch": 4, "heads": 32, "seq_len": 4096, "head_dim": 128, "causal": True},
    {"purpose": "bench", "batch": 4, "heads": 32, "seq_len": 4096, "head_dim": 128, "causal": False},
    {"purpose": "bench", "batch": 1, "heads": 32, "seq_len": 16384, "head_dim": 128, "causal": True},
    {"purpose": "bench", "batch": 1, "heads": 32, "seq_len": 16384, "head_dim": 128, "causal": False},
    {"purpose": "bench", "batch": 4, "heads": 16, "seq_len": 4096, "head_dim": 64, "causal": True},
    {"purpose": "bench", "batch": 4, "heads": 16, "seq_len": 4096, "head_dim": 64, "causal": False},
]

MODES = ("fwd", "bwd", "full")


def flops(q, k, v, causal=False, mode="full"):
    """FlashAttention's count: fwd the two products q k^T and P v (2 * S^2 * D each), bwd 2.5x that (the five
    products dV, dP, S, dK, dQ; this backward runs seven, the two of its dq kernel's recompute not counted);
    causal halves each."""
    if mode not in MODES:
        raise ValueError(f"attention: mode must be one of {MODES}, got {mode!r}")
    batch, heads, seq_len, head_dim = q.shape
    forward = 4 * batch * heads * seq_len * seq_len * head_dim
    if causal:
        forward //= 2
    return {"fwd": forward, "bwd": forward * 5 // 2, "full": forward * 7 // 2}[mode]


def bytes_moved(q, k, v, causal=False, mode="full"):
    """The least each pass moves: fwd reads q, k, v and writes the output, its residual and the lse (4 bytes a
    row); bwd reads q, k, v, the output, the residual, dO and the lse and writes dq, dk, dv, and delta (4 bytes
    a row, written and read)."""
    if mode not in MODES:
        raise ValueError(f"attention: mode must be one of {MODES}, got {mode!r}")
    tensor = q.numel() * q.element_size()
    rows = q.numel() // max(q.shape[-1], 1)
    forward = 5 * tensor + 4 * rows
    backward = 9 * tensor + 12 * rows
    return {"fwd": forward, "bwd": backward, "full": forward + backward}[mode]
