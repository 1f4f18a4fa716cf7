"""A candidate for few wide rows: RMSNorm with each row split over several programs, against the scaffold.

    PYTHONPATH=. python3 benchmarks/row_split.py --out $OUT        # on a GPU: check, time, compare
    PYTHONPATH=. python3 benchmarks/row_split.py --check           # anywhere (the interpreter on a CPU)

The rmsnorm scaffold runs one program per row. With few wide rows (1024 x 65536 bf16 on an H100:
1024 programs of 32 warps, one per SM at a time) that program keeps one 16 KiB tile in flight and
reads nothing from DRAM while it normalises: about 80% of the copy ceiling, where a copy of the
same bytes reaches 93% (RESULTS.md, section 6). The first split tried, where the last program of a
row normalised the whole row, was slower still: one program's serial pass over the row became
the tail.

The candidate here splits the work in two phases of CHUNK_BYTES pieces, both spread over all
programs. Each program claims the next piece of work from an atomic counter (claim order, not
program-id order), then
  1. reduces piece c of row r, publishes its partial sum of squares and counts it in (release);
  2. normalises piece c of row r - lag: it waits (acquire) until that row's partials are all in,
     which they almost always are, since `lag` rows of work were claimed in between, and reads
     the piece again from L2, where phase 1 left it `lag` rows ago.
A program only ever waits for work claimed before its own, by programs already running, so
every wait ends; under the interpreter the programs run in claim order and never wait.
Measured on an H200 (RESULTS.md 7d): slower than the scaffold at every shape and setting (0.78-0.98x its
speed), so the scaffold keeps one program per row.

The next candidates keep the scaffold's one program per row and put more bytes in flight in each (WIDE): its
own wide-row kernel at larger tiles and other warp counts, and a copy of it whose two loops are software-
pipelined (tl.range(num_stages=...)): the loads of the next tiles issued while this one is reduced or written.
Not yet measured on a GPU.

It prints, for each shape, the scaffold, the wide-kernel variants, the split candidate at a few piece sizes and
lags, and a Triton copy of the same bytes, all timed by `timers.measure` with the case's bytes (the write-back
rule applies), and writes $OUT/row_split.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
INTERPRET = "--check" in sys.argv or not torch.cuda.is_available()
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: @triton.jit reads it

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

SHAPES = ((1024, 32768), (1024, 65536), (512, 131072))
VARIANTS = ((16384, 4, 8 << 20), (32768, 8, 8 << 20), (16384, 4, 2 << 20), (16384, 4, 32 << 20))
# The scaffold's own wide-row kernel (one program per row, two passes over the row in tiles) at other tile sizes
# and warp counts, then with its loops software-pipelined: more bytes in flight per program (block, warps, stages).
WIDE = ((8192, 32, 1), (16384, 32, 1), (32768, 32, 1), (8192, 16, 1), (8192, 32, 2), (8192, 32, 3), (16384, 32, 2))


@triton.jit
def rmsnorm_wide_pipelined_kernel(
    x_ptr, weight_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_cols, eps,
    BLOCK_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """The scaffold's rmsnorm_wide_kernel with both loops as tl.range(num_stages=NUM_STAGES): the next tiles'
    loads are issued while this one is reduced or written."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    sum_sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in tl.range(0, n_cols, BLOCK_SIZE, num_stages=NUM_STAGES):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
        sum_sq += x * x
    inv_rms = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    for start in tl.range(0, n_cols, BLOCK_SIZE, num_stages=NUM_STAGES):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(weight_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        y = x.to(tl.float32) * inv_rms * w.to(tl.float32)
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_wide(x, weight, eps=1e-6, block=8192, num_warps=32, stages=1, scaffold=None):
    """One program per row in tiles of `block` elements: the scaffold's kernel (`scaffold`, its module) when
    `stages` is 1, else the pipelined copy above."""
    n_cols = x.shape[-1]
    x_2d = x.view(-1, n_cols)
    y = torch.empty_like(x)
    y_2d = y.view(-1, n_cols)
    args = (x_2d, weight, y_2d, x_2d.stride(0), y_2d.stride(0), n_cols, eps)
    if stages == 1:
        scaffold.rmsnorm_wide_kernel[(x_2d.shape[0],)](*args, BLOCK_SIZE=block, num_warps=num_warps)
    else:
        rmsnorm_wide_pipelined_kernel[(x_2d.shape[0],)](*args, BLOCK_SIZE=block, NUM_STAGES=stages,
                                                       num_warps=num_warps)
    return y


def wide_label(block, warps, stages):
    return f"wide {block // 1024}K tiles, {warps} warps" + (f", {stages} stages" if stages > 1 else "")


@triton.jit
def rmsnorm_split_kernel(
    x_ptr, weight_ptr, y_ptr, partial_ptr, sync_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols, eps, lag,
    CHUNK: tl.constexpr, MAX_CHUNKS: tl.constexpr,
):
    n_chunks = tl.cdiv(n_cols, CHUNK)
    work = tl.atomic_add(sync_ptr, 1)  # claim order: waits only ever point backwards
    step = work // n_chunks
    chunk = work % n_chunks
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n_cols
    done_ptr = sync_ptr + 1  # per row: pieces whose partial is published
    if step < n_rows:
        stat_row = step.to(tl.int64)
        x = tl.load(x_ptr + stat_row * x_row_stride + cols, mask=mask, other=0.0,
                    eviction_policy="evict_last").to(tl.float32)
        tl.store(partial_ptr + stat_row * n_chunks + chunk, tl.sum(x * x, axis=0))
        tl.debug_barrier()
        tl.atomic_add(done_ptr + stat_row, 1, sem="release")
    if step >= lag:
        out_row = (step - lag).to(tl.int64)
        done = tl.atomic_add(done_ptr + out_row, 0, sem="acquire")
        while done < n_chunks:
            done = tl.atomic_add(done_ptr + out_row, 0, sem="acquire")
        pieces = tl.arange(0, MAX_CHUNKS)
        # .cg reads from L2: another program on this SM may hold a stale copy in L1.
        partials = tl.load(partial_ptr + out_row * n_chunks + pieces, mask=pieces < n_chunks, other=0.0,
                           cache_modifier=".cg")
        inv_rms = tl.rsqrt(tl.sum(partials, axis=0) / n_cols + eps)
        x_piece = tl.load(x_ptr + out_row * x_row_stride + cols, mask=mask, other=0.0,
                          eviction_policy="evict_first")
        w = tl.load(weight_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last")
        y = x_piece.to(tl.float32) * inv_rms * w.to(tl.float32)
        tl.store(y_ptr + out_row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_split(x, weight, eps=1e-6, chunk_bytes=16384, num_warps=4, lag_bytes=8 << 20):
    n_cols = x.shape[-1]
    x_2d = x.view(-1, n_cols)
    y = torch.empty_like(x)
    y_2d = y.view(-1, n_cols)
    n_rows = x_2d.shape[0]
    chunk = chunk_bytes // x.element_size()
    n_chunks = triton.cdiv(n_cols, chunk)
    lag = min(n_rows, max(1, lag_bytes // (n_cols * x.element_size())))
    partials = torch.empty((n_rows, n_chunks), device=x.device, dtype=torch.float32)
    sync = torch.zeros(n_rows + 1, device=x.device, dtype=torch.int32)  # work claimed, then done per row
    rmsnorm_split_kernel[(n_chunks * (n_rows + lag),)](
        x_2d, weight, y_2d, partials, sync, x_2d.stride(0), y_2d.stride(0), n_rows, n_cols, eps, lag,
        CHUNK=chunk, MAX_CHUNKS=triton.next_power_of_2(n_chunks), num_warps=num_warps)
    return y


def reference(x, weight, eps=1e-6):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()


def relative_error(out, ref):
    return float(torch.linalg.vector_norm(out.double() - ref.double()) / torch.linalg.vector_norm(ref.double()))


def check(device):
    """Fresh random inputs, odd widths and lags, against the fp32 reference: (shape, variant, error) rows."""
    from workbench.core.project.contract import load_kernel

    scaffold = load_kernel(ROOT / "scaffolds" / "rmsnorm" / "kernel.py").module
    rows = []
    for n_rows, n_cols, lag_bytes in ((3, 40000, 1), (7, 20001, 1 << 20), (5, 70000, 8 << 20)):
        x = torch.randn(n_rows, n_cols, device=device, dtype=torch.bfloat16)
        w = torch.randn(n_cols, device=device, dtype=torch.bfloat16)
        ref = reference(x, w)
        out = rmsnorm_split(x, w, lag_bytes=lag_bytes)
        rows.append((f"{n_rows}x{n_cols}", f"lag {lag_bytes} B", relative_error(out, ref)))
        for block, warps, stages in WIDE:
            out = rmsnorm_wide(x, w, block=block, num_warps=warps, stages=stages, scaffold=scaffold)
            rows.append((f"{n_rows}x{n_cols}", wide_label(block, warps, stages), relative_error(out, ref)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/row-split")))
    parser.add_argument("--check", action="store_true", help="correctness only (runs under the interpreter too)")
    args = parser.parse_args()
    if INTERPRET:
        from workbench.core.verify.interpreter import fixes as interpreter_fixes

        interpreter_fixes.apply()
        bad = [r for r in check("cpu") if not r[2] < 1e-2]
        print("check:", "passed" if not bad else f"FAILED {bad}")
        return 1 if bad else 0

    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import load_kernel
    from workbench.core.timing.compilewatch import CompileWatch
    from workbench.core.timing.copy_kernels import triton_copy
    from workbench.core.timing.device import l2_cache_bytes
    from workbench.core.timing.timers import L2Flusher, measure

    failures = [r for r in check("cuda") if not r[2] < 1e-2]
    if failures:
        print("check FAILED:", failures)
        return 1
    scaffold = load_kernel(ROOT / "scaffolds" / "rmsnorm" / "kernel.py")
    config, watch = BenchConfig(warmup_ms=100, rep_ms=500), CompileWatch()
    flusher = L2Flusher(l2_cache_bytes())
    table = []
    for n_rows, n_cols in SHAPES:
        x, w = scaffold.get_inputs(rows=n_rows, cols=n_cols)
        nbytes = scaffold.bytes_moved(x, w)
        ref = reference(x, w)
        calls = [("scaffold", lambda: scaffold.kernel_fn(x, w))]
        for block, warps, stages in WIDE:
            calls.append((wide_label(block, warps, stages),
                          lambda b=block, nw=warps, st=stages: rmsnorm_wide(x, w, block=b, num_warps=nw, stages=st,
                                                                           scaffold=scaffold.module)))
        for chunk, warps, lag in VARIANTS:
            calls.append((f"split {chunk // 1024} KiB, {warps} warps, lag {lag >> 20} MiB",
                          lambda c=chunk, nw=warps, lg=lag: rmsnorm_split(x, w, chunk_bytes=c, num_warps=nw,
                                                                          lag_bytes=lg)))
        src = torch.randint(-2 ** 31, 2 ** 31 - 1, (nbytes // 8,), dtype=torch.int32, device="cuda")
        calls.append(("same-size copy", triton_copy(src, torch.empty_like(src), 8192, 8)))
        for name, call in calls:
            out = call()
            error = relative_error(out, ref) if name != "same-size copy" else 0.0
            timing = measure(call, config, flusher, watch, name, nbytes).timing
            table.append({"shape": f"{n_rows}x{n_cols}", "variant": name, "median_us": timing.median_ms * 1e3,
                          "GB/s": nbytes / timing.median_ms / 1e6, "method": timing.method, "rel_error": error})
            print(f"{n_rows}x{n_cols:<7} {name:<36} {timing.median_ms * 1e3:8.1f} µs "
                  f"{nbytes / timing.median_ms / 1e6:6.0f} GB/s  err {error:.1e}", flush=True)
        del x, w, ref, src
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "row_split.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": table},
                                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
