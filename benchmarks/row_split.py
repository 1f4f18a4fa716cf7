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

Then persistent copies of the scaffold's kernels (PERSISTENT): a few programs per SM, each taking every n-th row;
rows up to 64 KiB whole in registers with the row loop software-pipelined, wider rows in two passes with only as
many rows in flight as SMs (they fit in L2). Measured on an H200 (RESULTS.md 7g): 0.96-1.03x the scaffold's speed at
best. The scaffold's own wide kernel at other tiles and with pipelined loops (WIDE) runs with --all; not measured.
`--profile-once` runs one call each of PROFILE_ONCE for Nsight Compute (7g's DRAM bytes).

It prints, for each shape, the scaffold, the persistent variants, with --all the wide-kernel variants and the split
candidate at a few piece sizes and lags, and a Triton copy of the same bytes, all timed by `timers.measure` with the
case's bytes (the write-back rule applies), and writes $OUT/row_split.json.
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
from triton.runtime.errors import OutOfResources  # noqa: E402

# Rows up to this many bytes are held whole by one program (the scaffold's MAX_FUSED_BYTES), wider ones go in tiles
MAX_FUSED_BYTES = 65536
SHAPES = ((8192, 2048), (1024, 32768), (1024, 65536), (512, 131072), (1024, 131072))
VARIANTS = ((16384, 4, 8 << 20), (32768, 8, 8 << 20), (16384, 4, 2 << 20), (16384, 4, 32 << 20))
# The scaffold's own wide-row kernel (one program per row, two passes over the row in tiles) at other tile sizes
# and warp counts, then with its loops software-pipelined: more bytes in flight per program (block, warps, stages).
WIDE = ((8192, 32, 1), (16384, 32, 1), (32768, 32, 1), (8192, 16, 1), (8192, 32, 2), (8192, 32, 3), (16384, 32, 2))


def as_rows(x):
    """x as rows of its last dimension, the output to fill (and as rows), the row count and width."""
    n_cols = x.shape[-1]
    x_2d = x.view(-1, n_cols)
    y = torch.empty_like(x)
    return x_2d, y, y.view(-1, n_cols), x_2d.shape[0], n_cols


def rmsnorm_wide(x, weight, eps=1e-6, block=8192, num_warps=32, stages=1, scaffold=None):
    """One program per row in tiles of `block` elements: the scaffold's kernel (`scaffold`, its module) when
    `stages` is 1, else rmsnorm_wide_persistent_kernel with a program per row (its row loop then runs once), its
    tile loops software-pipelined."""
    x_2d, y, y_2d, n_rows, n_cols = as_rows(x)
    if stages == 1:
        scaffold.rmsnorm_wide_kernel[(n_rows,)](x_2d, weight, y_2d, x_2d.stride(0), y_2d.stride(0), n_cols, eps,
                                                BLOCK_SIZE=block, num_warps=num_warps)
    else:
        rmsnorm_wide_persistent_kernel[(n_rows,)](x_2d, weight, y_2d, x_2d.stride(0), y_2d.stride(0), n_rows, n_cols,
                                                  eps, BLOCK_SIZE=block, NUM_STAGES=stages, num_warps=num_warps)
    return y


@triton.jit
def rmsnorm_persistent_kernel(
    x_ptr, weight_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols, eps,
    BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """The scaffold's rmsnorm_kernel (whole rows in registers, ROWS_PER_PROGRAM of them at a time), persistent: a
    few programs per SM, each taking every `programs`-th group of rows, the loop software-pipelined: the next rows'
    load is issued while these are reduced and written, where the scaffold's program reads nothing meanwhile."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    groups = tl.cdiv(n_rows, ROWS_PER_PROGRAM)
    for group in tl.range(pid, groups, programs, num_stages=NUM_STAGES):
        rows = tl.cast(group, tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        w = tl.load(weight_ptr + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        y = x * inv_rms[:, None] * w.to(tl.float32)[None, :]
        tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_wide_persistent_kernel(
    x_ptr, weight_ptr, y_ptr,
    x_row_stride, y_row_stride,
    n_rows, n_cols, eps,
    BLOCK_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """The scaffold's rmsnorm_wide_kernel (two passes over the row in tiles), persistent: with as many programs as
    SMs (or a few per SM), fewer rows are in flight than with one program per row, so each row's second pass finds
    it in L2 (132 rows of 256 KiB are 33 MB, against 67 MB for the 264 rows two programs per SM keep)."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    for row in range(pid, n_rows, programs):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_row_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_row_stride
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


def sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if str(device) != "cpu" else 4


def rmsnorm_persistent(x, weight, eps=1e-6, per_sm=1, num_warps=32, stages=2, pack_bytes=0, block=8192):
    """Persistent programs (`per_sm` per SM): whole rows (rows up to 64 KiB, `pack_bytes` of rows at a time as
    the scaffold packs them) or, for wider rows, two passes over each row in `block`-element tiles."""
    x_2d, y, y_2d, n_rows, n_cols = as_rows(x)
    args = (x_2d, weight, y_2d, x_2d.stride(0), y_2d.stride(0), n_rows, n_cols, eps)
    if fused(n_cols, x.element_size()):
        whole = triton.next_power_of_2(n_cols)
        rows = min(max(pack_bytes // (whole * x.element_size()), 1), triton.next_power_of_2(n_rows))
        grid = (min(triton.cdiv(n_rows, rows), per_sm * sm_count(x.device)),)
        rmsnorm_persistent_kernel[grid](*args, BLOCK_SIZE=whole, ROWS_PER_PROGRAM=rows, NUM_STAGES=stages,
                                        num_warps=num_warps)
    else:
        grid = (min(n_rows, per_sm * sm_count(x.device)),)
        rmsnorm_wide_persistent_kernel[grid](*args, BLOCK_SIZE=block, NUM_STAGES=stages, num_warps=num_warps)
    return y


# Persistent variants (programs per SM, warps, stages, bytes of rows per iteration), by row width
PERSISTENT = {"fused": ((1, 32, 2, 0), (1, 32, 3, 0), (1, 16, 2, 0), (2, 16, 2, 0), (4, 8, 3, 8192), (8, 4, 3, 8192)),
              "wide": ((1, 32, 1, 8192), (1, 32, 2, 8192), (1, 32, 3, 8192), (1, 16, 2, 8192), (2, 16, 2, 8192),
                       (1, 32, 1, 16384), (1, 32, 1, 32768), (1, 16, 1, 16384))}


def fused(n_cols, element_size):
    """Whether one program holds a whole row (the scaffold's rmsnorm_kernel), else the row goes in tiles."""
    return n_cols * element_size <= MAX_FUSED_BYTES


def persistent_variants(n_cols, element_size):
    if fused(n_cols, element_size):
        return [dict(per_sm=p, num_warps=w, stages=s, pack_bytes=b) for p, w, s, b in PERSISTENT["fused"]]
    return [dict(per_sm=p, num_warps=w, stages=s, block=b) for p, w, s, b in PERSISTENT["wide"]]


def persistent_label(v):
    extra = f", {v['pack_bytes'] // 1024} KiB of rows" if v.get("pack_bytes") else ""
    extra += f", {v['block'] // 1024}K tiles" if v.get("block", 8192) != 8192 else ""
    return f"persistent {v['per_sm']}/SM, {v['num_warps']} warps, {v['stages']} stages{extra}"


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
    x_2d, y, y_2d, n_rows, n_cols = as_rows(x)
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
        # Under the interpreter warps and stages change nothing: one run per tile and kernel
        wide = list({(b, s > 1): (b, nw, s) for b, nw, s in WIDE}.values()) if INTERPRET else WIDE
        for block, warps, stages in wide:
            out = rmsnorm_wide(x, w, block=block, num_warps=warps, stages=stages, scaffold=scaffold)
            rows.append((f"{n_rows}x{n_cols}", wide_label(block, warps, stages), relative_error(out, ref)))
    # Persistent programs: more rows than programs, both kernels (rows up to 64 KiB whole, wider ones in tiles)
    for n_rows, n_cols in ((37, 3000), (29, 20000), (11, 33000)):
        x = torch.randn(n_rows, n_cols, device=device, dtype=torch.bfloat16)
        w = torch.randn(n_cols, device=device, dtype=torch.bfloat16)
        ref = reference(x, w)
        variants = persistent_variants(n_cols, x.element_size())
        if INTERPRET:  # likewise: one variant per row grouping and tile
            variants = list({(v.get("pack_bytes"), v.get("block")): v for v in variants}.values())
        for v in variants:
            try:
                out = rmsnorm_persistent(x, w, **{**v, "per_sm": 1})
            except OutOfResources:
                continue  # its pipeline's buffers do not fit this GPU's shared memory: not timed either
            rows.append((f"{n_rows}x{n_cols}", persistent_label(v), relative_error(out, ref)))
    return rows


# (shape, label, variant or None for the scaffold, or "copy") profiled by --profile-once, in this order
PROFILE_ONCE = (((1024, 32768), "scaffold", None), ((1024, 32768), "persistent 2/SM, 16 warps, 2 stages",
                                                     dict(per_sm=2, num_warps=16, stages=2)),
                ((1024, 131072), "scaffold", None), ((1024, 131072), "persistent 1/SM, 32 warps, 1 stages",
                                                      dict(per_sm=1, num_warps=32, stages=1)),
                ((1024, 131072), "same-size copy", "copy"))


def profile_once() -> int:
    """Under `ncu --profile-from-start off`: each of PROFILE_ONCE warmed up, then one call between
    cudaProfilerStart and Stop; its label on stderr, in launch order."""
    from workbench.core.project.contract import load_kernel
    from workbench.core.timing.copy_kernels import triton_copy

    scaffold = load_kernel(ROOT / "scaffolds" / "rmsnorm" / "kernel.py")
    for (n_rows, n_cols), label, variant in PROFILE_ONCE:
        x, w = scaffold.get_inputs(rows=n_rows, cols=n_cols)
        if variant == "copy":
            src = torch.randint(-2 ** 31, 2 ** 31 - 1, (scaffold.bytes_moved(x, w) // 8,), dtype=torch.int32,
                                device="cuda")
            call = triton_copy(src, torch.empty_like(src), 8192, 8)
        elif variant is None:
            call = lambda: scaffold.kernel_fn(x, w)  # noqa: E731
        else:
            call = lambda v=variant: rmsnorm_persistent(x, w, **v)  # noqa: E731
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        call()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"profiled: {n_rows}x{n_cols} {label}", file=sys.stderr, flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/row-split")))
    parser.add_argument("--check", action="store_true", help="correctness only (runs under the interpreter too)")
    parser.add_argument("--all", action="store_true", help="also the wide kernel's tile variants and the split")
    parser.add_argument("--shapes", nargs="*", metavar="ROWSxCOLS", help="these shapes only (default SHAPES)")
    parser.add_argument("--profile-once", action="store_true",
                        help="one call each of the scaffold, its best persistent variants and a copy, for ncu "
                             "--profile-from-start off (PROFILE_ONCE)")
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

    if args.profile_once:
        return profile_once()
    failures = [r for r in check("cuda") if not r[2] < 1e-2]
    if failures:
        print("check FAILED:", failures)
        return 1
    scaffold = load_kernel(ROOT / "scaffolds" / "rmsnorm" / "kernel.py")
    config, watch = BenchConfig(warmup_ms=100, rep_ms=500), CompileWatch()
    flusher = L2Flusher(l2_cache_bytes())
    table = []
    for n_rows, n_cols in [tuple(map(int, s.split("x"))) for s in args.shapes] if args.shapes else SHAPES:
        x, w = scaffold.get_inputs(rows=n_rows, cols=n_cols)
        nbytes = scaffold.bytes_moved(x, w)
        ref = reference(x, w)
        calls = [("scaffold", lambda: scaffold.kernel_fn(x, w))]
        for v in persistent_variants(n_cols, x.element_size()):
            calls.append((persistent_label(v), lambda v=v: rmsnorm_persistent(x, w, **v)))
        wide = not fused(n_cols, x.element_size())
        for block, warps, stages in WIDE if wide and args.all else ():
            calls.append((wide_label(block, warps, stages),
                          lambda b=block, nw=warps, st=stages: rmsnorm_wide(x, w, block=b, num_warps=nw, stages=st,
                                                                           scaffold=scaffold.module)))
        for chunk, warps, lag in VARIANTS if wide and args.all else ():
            calls.append((f"split {chunk // 1024} KiB, {warps} warps, lag {lag >> 20} MiB",
                          lambda c=chunk, nw=warps, lg=lag: rmsnorm_split(x, w, chunk_bytes=c, num_warps=nw,
                                                                          lag_bytes=lg)))
        src = torch.randint(-2 ** 31, 2 ** 31 - 1, (nbytes // 8,), dtype=torch.int32, device="cuda")
        calls.append(("same-size copy", triton_copy(src, torch.empty_like(src), 8192, 8)))
        for name, call in calls:
            try:
                out = call()
            except OutOfResources as exc:
                print(f"{n_rows}x{n_cols:<7} {name:<36} does not fit: {str(exc)[:90]}", flush=True)
                table.append({"shape": f"{n_rows}x{n_cols}", "variant": name, "refused": str(exc)})
                continue
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
