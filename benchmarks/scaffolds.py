"""The scaffolds on their hard shapes, in one command on a GPU machine:

    python3 benchmarks/scaffolds.py --out $OUT                    # the whole table
    python3 benchmarks/scaffolds.py --out $OUT --only rmsnorm gemm  # some scaffolds
    python3 benchmarks/scaffolds.py --out $OUT --ncu misses         # + Nsight Compute on the misses
    python3 benchmarks/scaffolds.py --out $OUT --ncu-from scaffolds.json --ncu misses  # ncu alone, on a run's misses
    python3 benchmarks/scaffolds.py --markdown-from scaffolds.json   # the RESULTS.md section again, timing nothing

Every number comes from the workbench's own machinery: the ceilings from `device.load_or_measure`
(measured afresh: the best of several streaming copies, an 8192³ bf16 matmul), every time from
`timers.measure` (CUDA events per call with the L2 flushed before each call, or CUDA-graph replay
under 20 µs, as `workbench bench` does), torch.compile through `baselines.compile_reference`.
Each kernel is checked against its reference before it is timed. Comparisons, measured in the
same run: memory-bound scaffolds against the eager reference and torch.compile of it, and against
a Triton copy of the same bytes (what the footprint allows: small cases cannot reach the 1 GiB
ceiling); the GEMM against cuBLAS (torch.mm); attention against PyTorch's
scaled_dot_product_attention restricted to its flash backend. attention_train (forward and backward
kernels) in the three modes of `workbench bench --mode` (core/timing/modes.py: fwd, the training
forward; bwd, the backward alone; full, both), one row each, against scaled_dot_product_attention
restricted to its flash backend and to its cuDNN backend (where this torch has one), wrapped alike.

Cold compile: per scaffold, a fresh process with a warm compiler (as the live loop's workers
have) times each case's first call with an empty Triton cache and a freshly imported kernel.py:
every autotune config compiled and timed. Its cubins' resource usage (registers, stack, local
memory = spills) comes from cuobjdump.

Nsight Compute runs once for all the chosen rows (one Python start, one CUDA context): each case warmed
up, then one call profiled; the launches are told apart by the count of Triton launches each call made.

Writes $OUT/scaffolds.json (every number), $OUT/scaffolds.md (the RESULTS.md section), puts that
section into benchmarks/RESULTS.md (replacing an earlier one, up to the next level-2 heading) and
copies the file to $OUT. The timings come first, then the cold compiles while --budget-s allows.
Targets (issue 11) are checked per row and printed last. silu_mul's two cases took 36 s on an
H100, most of it torch.compile of the reference; the whole table should fit in one 10-minute
command. It needs torch and triton, not textual (PYTHONPATH=. from the repository root).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from child_env import repo_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECTION_TITLE = "## 7. The scaffolds on their hard shapes (`scaffolds.py`)"
TIMING = {"warmup_ms": 100.0, "rep_ms": 500.0}
COMPILE_TARGET_S = 3.0
H128, H64 = {"heads": 32, "head_dim": 128}, {"heads": 16, "head_dim": 64}


def attention_cases():
    cases = []
    for shape in (H128, H64):
        for seq_len, batch in ((1024, 16), (4096, 4), (16384, 1)):
            for causal in (False, True):
                cases.append({"batch": batch, "seq_len": seq_len, "causal": causal, **shape})
    return cases


TRAINING_MODES = ("fwd", "bwd", "full")  # core/project/config.BENCH_MODES, timed as `workbench bench --mode`
TRAINING = ("attention_train",)  # scaffolds timed in each mode: one row per (case, mode)


def attention_train_cases():
    cases = [{"batch": batch, "seq_len": seq_len, "causal": causal, **H128}
             for seq_len, batch in ((4096, 4), (16384, 1)) for causal in (False, True)]
    cases += [{"batch": 4, "seq_len": 4096, "causal": causal, **H64} for causal in (False, True)]
    return [{**case, "mode": mode} for case in cases for mode in TRAINING_MODES]


# scaffold folder -> the cases of the table (get_inputs keyword arguments; bf16 unless said)
TABLE = {
    "rmsnorm": [{"rows": 8192, "cols": 2048}, {"rows": 8192, "cols": 8192}, {"rows": 1024, "cols": 32768},
                {"rows": 1024, "cols": 65536}],
    "layernorm": [{"rows": 8192, "cols": 2048}, {"rows": 8192, "cols": 8192}, {"rows": 1024, "cols": 32768},
                  {"rows": 1024, "cols": 65536}],
    "softmax": [{"rows": 8192, "cols": 1024}, {"rows": 8192, "cols": 2048}, {"rows": 8192, "cols": 8192},
                {"rows": 1024, "cols": 32768}, {"rows": 1024, "cols": 131072}],
    "silu_mul": [{"shape": (1 << 24,)}, {"shape": (1 << 27,)}],
    "gemm": [{"m": s, "n": s, "k": s, "dtype": d} for d in ("bfloat16", "float16") for s in (1024, 2048, 4096, 8192)],
    "attention": attention_cases(),
    "attention_train": attention_train_cases(),
}
MEMORY_BOUND = ("rmsnorm", "layernorm", "softmax", "silu_mul")


def targets(scaffold: str, params: dict) -> dict[str, float]:
    """Issue 11's bars for one row: {what: the least acceptable value}."""
    if scaffold in ("rmsnorm", "layernorm", "softmax"):
        cols, rows = params["cols"], params["rows"]
        if rows <= 1024 and cols >= 32768:
            return {"% copy": 90.0}
        if cols <= 2048:
            return {"% copy": 85.0}
        return {}
    if scaffold == "gemm":
        return {"x cuBLAS": 0.9 if params["m"] <= 1024 else 0.95}
    if scaffold == "attention":
        # issue 46: at least SDPA's cuDNN backend, timed in the same run (where this torch has it)
        bars = {"x SDPA flash": 1.0, "x SDPA cuDNN": 1.0}
        if params["head_dim"] == 128 and params["seq_len"] == 4096 and not params["causal"]:
            bars["TFLOP/s"] = 500.0
        return bars
    if scaffold == "attention_train" and params["mode"] == "bwd":
        return {"x SDPA flash": 0.9}  # issue 46: the backward at >= 0.9x SDPA's, measured in the same run
    return {}


def inputs_for(km, params):
    import torch

    params = dict(params)
    params.pop("mode", None)  # a training row's mode: how it is timed, not an input
    if isinstance(params.get("dtype"), str):
        params["dtype"] = getattr(torch, params["dtype"])
    return km.get_inputs(**params)


def call_once(km, inputs):
    """One call of the kernel as the cold compile and ncu take it: a training scaffold's forward and backward
    (every kernel compiled), else kernel_fn."""
    import torch

    out = km.kernel_fn(*inputs)
    leaves = [x for x in inputs if torch.is_tensor(x) and x.requires_grad]
    if leaves and torch.is_tensor(out) and out.requires_grad:
        torch.autograd.grad(out, leaves, torch.ones_like(out))
    return out


def label_of(params: dict) -> str:
    if "rows" in params:
        return f"{params['rows']}x{params['cols']}"
    if "shape" in params:
        return "2^%d" % (params["shape"][0].bit_length() - 1)
    if "m" in params:
        return f"{params['m']}^3 {params.get('dtype', 'bfloat16').replace('float', 'fp').replace('bfp', 'bf')}"
    return (f"B{params['batch']} H{params['heads']} S{params['seq_len']} D{params['head_dim']} "
            f"{'causal' if params['causal'] else 'full'}" + (f" {params['mode']}" if "mode" in params else ""))


# -- timing one case ----------------------------------------------------------------------------

def relative_error(out, ref) -> float:
    import torch

    out, ref = out.double(), ref.double()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def timing_dict(t) -> dict | None:
    if t is None:
        return None
    return {"median_us": t.median_ms * 1e3, "q25_us": t.q25_ms * 1e3, "q75_us": t.q75_ms * 1e3,
            "samples": t.samples, "method": t.method}


def sdpa_backends() -> dict[str, object]:
    """PyTorch's scaled_dot_product_attention backends to compare a training kernel with: flash, and cuDNN
    where this torch has it."""
    from torch.nn.attention import SDPBackend

    found = {"SDPA flash": SDPBackend.FLASH_ATTENTION}
    cudnn = getattr(SDPBackend, "CUDNN_ATTENTION", None)
    if cudnn is not None:
        found["SDPA cuDNN"] = cudnn
    return found


def sdpa_with(backend):
    """scaled_dot_product_attention(q, k, v, is_causal=causal) restricted to one backend (its backward is the
    backend's own: the forward's op decides it)."""
    import torch
    from torch.nn.attention import sdpa_kernel

    def sdpa(q, k, v, causal=False):
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return sdpa


def bench_training_case(scaffold, km, params, config, flusher, ceilings, backends=None) -> dict:
    """One (case, mode) row of a training scaffold: the kernel and each SDPA backend wrapped by the mode as
    `workbench bench --mode` wraps kernel_fn and reference_fn (core/timing/modes.py), timed alike."""
    import torch

    from workbench.core.timing.compilewatch import CompileWatch, jit_functions
    from workbench.core.timing.modes import TimedMode, timed_mode
    from workbench.core.timing.timers import measure

    name = params["mode"]
    watch = CompileWatch(jit_functions(km.module))
    inputs = inputs_for(km, params)
    row = {"scaffold": scaffold, "case": label_of(params), "params": {k: str(v) for k, v in params.items()},
           "mode": name, "notes": []}
    base = timed_mode(km, inputs, "full", backward=False)
    backends = sdpa_backends() if backends is None else backends
    # Correctness first, in full (outputs and every gradient; compiles and autotunes outside every timed
    # region): against SDPA's flash backend, the float32 reference's scores would not fit at 16384 tokens.
    full = TimedMode("full", base.indices, base.names)
    out = full.wrap(km.kernel_fn, True)(*inputs)
    ref = full.wrap(sdpa_with(next(iter(backends.values()))), False)(*inputs)
    row["rel_error"] = max(relative_error(out[key], ref[key]) for key in out)
    del out, ref
    full.clear()
    torch.cuda.empty_cache()
    mode = TimedMode(name, base.indices, base.names)
    nbytes = int(km.bytes_moved(*inputs, mode=name))
    fns = {"kernel": mode.wrap(km.kernel_fn, True)}
    for label, backend in backends.items():
        fns[label] = mode.wrap(sdpa_with(backend), False)
    timings = {}
    for what, fn in fns.items():
        try:
            fn(*inputs)  # bwd: the input set's forward, untimed; any backend's refusal shows here
        except RuntimeError as exc:
            if what == "kernel":
                raise
            row["notes"].append(f"{what}: {str(exc).splitlines()[0][:160]}")
            continue
        measured = measure(lambda fn=fn: fn(*inputs), config, flusher, watch, what, nbytes)
        timings[what] = measured.timing
        if what == "kernel":
            row["notes"] += list(measured.notes)
            row["per_call_events"] = timing_dict(measured.per_call or measured.timing)
    mode.clear()
    kernel = timings.get("kernel")
    row["kernel"] = timing_dict(kernel)
    row["comparisons"] = {what: timing_dict(t) for what, t in timings.items() if what != "kernel"}
    if kernel is not None:
        row["flops"] = km.flops(*inputs, mode=name)
        row["TFLOP/s"] = row["flops"] / (kernel.median_ms * 1e-3) / 1e12
        row["% matmul"] = 100 * row["TFLOP/s"] / ceilings.matmul_tflops
        for what, t in timings.items():
            if what != "kernel" and t is not None:
                row[f"x {what}"] = t.median_ms / kernel.median_ms
    row["targets"] = {what: {"bar": bar, "value": row.get(what), "met": row.get(what) is not None and
                             row[what] >= bar} for what, bar in targets(scaffold, params).items()}
    del inputs
    torch.cuda.empty_cache()
    return row


def bench_case(scaffold, km, params, config, flusher, ceilings) -> dict:
    import torch

    if scaffold in TRAINING:
        return bench_training_case(scaffold, km, params, config, flusher, ceilings)

    from workbench.core.timing.baselines import compile_reference
    from workbench.core.timing.compilewatch import CompileWatch, jit_functions
    from workbench.core.timing.copy_kernels import triton_copy
    from workbench.core.timing.timers import measure

    watch = CompileWatch(jit_functions(km.module))
    inputs = inputs_for(km, params)
    row = {"scaffold": scaffold, "case": label_of(params), "params": {k: str(v) for k, v in params.items()}}
    out = km.kernel_fn(*inputs)  # compiles and autotunes, outside every timed region
    if scaffold == "attention":
        q, k, v, causal = inputs
        sdpa = {label: functools.partial(sdpa_with(backend), q, k, v, causal)
                for label, backend in sdpa_backends().items()}
        ref = sdpa["SDPA flash"]()
    elif scaffold == "gemm":
        ref = torch.mm(inputs[0].float(), inputs[1].float())
    else:
        ref = km.reference_fn(*[x.float() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs])
    row["rel_error"] = relative_error(out, ref)
    del out, ref
    torch.cuda.empty_cache()
    nbytes = km.bytes_moved(*inputs)
    kernel = measure(lambda: km.kernel_fn(*inputs), config, flusher, watch, "kernel", nbytes)
    row["kernel"], row["notes"] = timing_dict(kernel.timing), list(kernel.notes)
    row["per_call_events"] = timing_dict(kernel.per_call or kernel.timing)
    median_s = kernel.timing.median_ms * 1e-3
    comparisons = {}
    if scaffold == "attention":
        for label, fn in sdpa.items():
            try:
                comparisons[label] = measure(fn, config, flusher, watch, label, nbytes).timing
            except RuntimeError as exc:  # cuDNN refuses some shapes and dtypes: said, not a crash of the run
                row["notes"].append(f"{label} not timed: {str(exc).splitlines()[0][:160]}")
    else:
        comparisons["cuBLAS" if scaffold == "gemm" else "eager"] = measure(
            lambda: km.reference_fn(*inputs), config, flusher, watch, "reference", nbytes).timing
    if scaffold in MEMORY_BOUND:
        compiled, why = compile_reference(km.reference_fn, inputs)
        if compiled is not None:
            comparisons["torch.compile"] = measure(lambda: compiled(*inputs), config, flusher, watch,
                                                   "torch.compile", nbytes).timing
        else:
            row["notes"].append(why)
        words = nbytes // 8  # int32 words each way: the same bytes read + written as the kernel
        src = torch.randint(-2 ** 31, 2 ** 31 - 1, (words,), dtype=torch.int32, device="cuda")
        dst = torch.empty_like(src)
        copy = triton_copy(src, dst, 8192, 8)
        copy()
        comparisons["same-size copy"] = measure(copy, config, flusher, watch, "copy", nbytes).timing
        del src, dst
        row["bytes"] = nbytes
        row["GB/s"] = nbytes / median_s / 1e9
        row["% copy"] = 100 * row["GB/s"] / ceilings.copy_gbps
    if scaffold in ("gemm", "attention"):
        row["flops"] = km.flops(*inputs)
        row["TFLOP/s"] = row["flops"] / median_s / 1e12
        row["% matmul"] = 100 * row["TFLOP/s"] / ceilings.matmul_tflops
    row["comparisons"] = {name: timing_dict(t) for name, t in comparisons.items()}
    for name, t in comparisons.items():
        if t is not None:
            row[f"x {name}"] = t.median_ms / kernel.timing.median_ms
    row["targets"] = {what: {"bar": bar, "value": row.get(what), "met": row.get(what) is not None and
                             row[what] >= bar} for what, bar in targets(scaffold, params).items()}
    del inputs
    torch.cuda.empty_cache()
    return row


# -- cold compile, in a fresh process per scaffold ---------------------------------------------

COLD_CHILD = r"""
import json, os, re, subprocess, sys, tempfile, time
sys.path.insert(0, os.environ["WORKBENCH_ROOT"])
import torch
from workbench.core.run.child.compiler_warmup import warm_compiler
from workbench.core.project.contract import load_kernel
sys.path.insert(0, os.path.join(os.environ["WORKBENCH_ROOT"], "benchmarks"))
from scaffolds import call_once, inputs_for, label_of, resource_usage
warm_compiler(torch)
for params in json.loads(sys.argv[2]):
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        km = load_kernel(__import__("pathlib").Path(sys.argv[1]))
        inputs = inputs_for(km, params)
        torch.cuda.synchronize()
        start = time.perf_counter(); call_once(km, inputs); torch.cuda.synchronize()
        first = time.perf_counter() - start
        start = time.perf_counter(); call_once(km, inputs); torch.cuda.synchronize()
        row = {"case": label_of(params), "first_call_s": first, "warm_call_s": time.perf_counter() - start,
               "kernels": resource_usage(cache)}
        print("ROW " + json.dumps(row), flush=True)
        del inputs, km
"""


def resource_usage(cache_dir: str) -> list[dict]:
    """Registers, stack and local memory (spills) of every cubin under a Triton cache, by cuobjdump."""
    found = []
    for cubin in sorted(Path(cache_dir).rglob("*.cubin")):
        meta = {}
        for candidate in cubin.parent.glob("*.json"):
            try:
                data = json.loads(candidate.read_text())
            except ValueError:
                continue
            if isinstance(data, dict) and "num_warps" in data:
                meta = data
        try:
            text = subprocess.run(["cuobjdump", "--dump-resource-usage", str(cubin)], capture_output=True,
                                  text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        for name, usage in re.findall(r"Function (\S+):\s*\n\s*(REG:.*)", text):
            fields = dict(re.findall(r"(\w+(?:\[\d+\])?):(\d+)", usage))
            found.append({"kernel": name, "regs": int(fields.get("REG", 0)), "stack": int(fields.get("STACK", 0)),
                          "local": int(fields.get("LOCAL", 0)), "shared": meta.get("shared"),
                          "num_warps": meta.get("num_warps"), "num_stages": meta.get("num_stages")})
    return found


def cold_compile(scaffold: str, cases: list[dict], timeout: float = 600.0) -> list[dict]:
    env = {**os.environ, "WORKBENCH_ROOT": str(ROOT), "WORKBENCH_CACHE_DIR": tempfile.mkdtemp()}
    try:
        done = subprocess.run([sys.executable, "-c", COLD_CHILD, str(ROOT / "scaffolds" / scaffold / "kernel.py"),
                               json.dumps(cases)], capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        partial = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rows = [json.loads(line[4:]) for line in partial.splitlines() if line.startswith("ROW ")]
        return rows + [{"error": f"timed out after {timeout:.0f} s (the time left)"}]
    rows = [json.loads(line[4:]) for line in done.stdout.splitlines() if line.startswith("ROW ")]
    if len(rows) == len(cases):
        return rows
    return rows + [{"error": (done.stderr or done.stdout)[-500:]}]


# -- Nsight Compute speed-of-light, in a child process under ncu --------------------------------

NCU_METRICS = ("Duration", "DRAM Throughput", "Memory Throughput", "Compute (SM) Throughput", "Registers Per Thread",
               "Achieved Occupancy", "Theoretical Occupancy", "Dynamic Shared Memory Per Block")


def ncu_child(cases: list) -> None:
    """Under ncu: each [scaffold, params] case warmed up, then one call profiled; says on stderr how many
    Triton launches each profiled call made ("NCU_CASE <n> <launches>"), so the parent can tell them apart."""
    import torch

    from workbench.core.project.contract import load_kernel
    from workbench.core.verify.launches import LaunchCounter

    counter = LaunchCounter.install()
    modules = {}
    for n, (scaffold, params) in enumerate(cases):
        km = modules.get(scaffold) or modules.setdefault(scaffold, load_kernel(ROOT / "scaffolds" / scaffold / "kernel.py"))
        inputs = inputs_for(km, params)
        for _ in range(3):
            call_once(km, inputs)
        torch.cuda.synchronize()
        counter.reset()
        torch.cuda.profiler.start()
        call_once(km, inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"NCU_CASE {n} {counter.count}", file=sys.stderr, flush=True)
        del inputs
        torch.cuda.empty_cache()


def speed_of_light(cases: list, timeout: float = 300.0) -> list[list[dict]]:
    """Per case ([scaffold, params]), per launch of its one profiled call: ncu's SpeedOfLight, LaunchStats
    and Occupancy figures. One ncu session for all of them (one Python start, one CUDA context)."""
    import csv
    import shutil

    ncu = shutil.which("ncu")
    if ncu is None:
        return [[{"error": "ncu is not on PATH"}] for _ in cases]
    command = [ncu, "--clock-control", "none", "--cache-control", "all", "--profile-from-start", "off",
               "--section", "SpeedOfLight", "--section", "LaunchStats", "--section", "Occupancy", "--csv",
               sys.executable, __file__, "--ncu-child", json.dumps(cases)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=repo_env())
    except subprocess.TimeoutExpired:
        return [[{"error": f"ncu timed out after {timeout:.0f} s"}] for _ in cases]
    launches: dict[str, dict] = {}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith('"')]
    for rec in csv.DictReader(lines):
        if rec.get("Metric Name") in NCU_METRICS:
            key = f"{rec.get('ID')} {rec.get('Kernel Name', '')[:60]}"
            launches.setdefault(key, {})[rec["Metric Name"]] = f"{rec['Metric Value']} {rec.get('Metric Unit', '')}"
    counts = [int(c) for _, c in re.findall(r"NCU_CASE (\d+) (\d+)", done.stderr)]
    if not launches or len(counts) != len(cases) or sum(counts) != len(launches):
        error = {"error": f"ncu exited {done.returncode}, {len(launches)} launches for {counts} per case: "
                          f"{(done.stderr or done.stdout)[-300:]}"}
        return [[error] for _ in cases]
    ordered = sorted(launches.items(), key=lambda item: int(item[0].split()[0]))
    per_case, at = [], 0
    for count in counts:
        per_case.append([{"launch": key, **values} for key, values in ordered[at:at + count]])
        at += count
    return per_case


def ncu_misses(run: dict, which: str, timeout: float = 300.0) -> None:
    """Nsight Compute on the rows that missed a target (or on every row), into run["ncu"]."""
    chosen = [r for r in run["rows"] if "kernel" in r and r["kernel"] is not None and
              (which == "all" or any(not t["met"] for t in r.get("targets", {}).values()))]
    cases = [[r["scaffold"], next(p for p in TABLE[r["scaffold"]] if label_of(p) == r["case"])] for r in chosen]
    for row, launches in zip(chosen, speed_of_light(cases, timeout)):
        run["ncu"][f"{row['scaffold']} {row['case']}"] = launches


# -- the report ---------------------------------------------------------------------------------

def fmt(value, spec=".0f", unit=""):
    return "-" if value is None else f"{value:{spec}}{unit}"


def markdown(run: dict) -> str:
    c = run["ceilings"]
    lines = [SECTION_TITLE, "",
             f"{run['gpu']}, driver {c['driver']}, torch {run['torch']}, triton {run['triton']}; {run['date']} UTC; "
             f"`python3 benchmarks/scaffolds.py` ({run['wall_s']:.0f} s).", "",
             f"- Ceilings, measured in this run: copy {c['copy_gbps']:.0f} GB/s, set by {c.get('copy_method')} "
             f"({c['method'].split(': ', 1)[1].split('; matmul')[0]}), bf16 matmul {c['matmul_tflops']:.0f} TFLOP/s.",
             "- Times: the workbench's own (`timers.measure`), L2 flushed (read) before each call: CUDA-graph replay "
             "(flush-only replay subtracted, so writing back what the call leaves in L2 counts) for calls under 20 µs "
             "or moving under 16 L2s of data, else the median of per-call CUDA events; warm-up "
             f"{TIMING['warmup_ms']:.0f} ms, {TIMING['rep_ms']:.0f} ms of samples per series. \"per call\" is the "
             "per-call events median, which ends when the last store reaches L2. Spread = (q75 - q25) / median. "
             "Every kernel checked against its reference first (rel. error = ||out - ref|| / ||ref||).",
             "- median: G = graph replay, E = per-call events. "
             "x = the comparison's median over the scaffold's (above 1: the scaffold is faster). "
             "\"same-size copy\" is a Triton copy of the case's bytes, timed the same way.",
             "- Cold compile: a fresh process, warm compiler, empty Triton cache, freshly imported kernel.py: "
             "the first call (every autotune config compiled and timed).", ""]
    lines += ["| scaffold | case | median | per call | spread | GB/s or TFLOP/s | % ceiling | comparisons (x) | "
              "cold compile | targets |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in run["rows"]:
        if "kernel" not in r or r["kernel"] is None:
            lines.append(f"| {r['scaffold']} | {r['case']} | error: {r.get('error', '?')[:80]} | | | | | | | |")
            continue
        k = r["kernel"]
        rate = f"{r['GB/s']:.0f} GB/s" if "GB/s" in r else f"{r['TFLOP/s']:.0f} TFLOP/s"
        share = f"{r['% copy']:.1f}% copy" if "% copy" in r else f"{r['% matmul']:.0f}% mm"
        comps = ", ".join(f"{name} {r['x ' + name]:.2f} ({t['median_us']:.1f} µs)"
                          for name, t in r["comparisons"].items() if t)
        bars = ", ".join(f"{what} {'≤' if t.get('at_most') else '≥'} {t['bar']:g}: {'met' if t['met'] else 'MISSED'}"
                         for what, t in r["targets"].items())
        per_call = r.get("per_call_events") or k
        lines.append(f"| {r['scaffold']} | {r['case']} | {k['median_us']:.1f} µs {'G' if k['method'].startswith('cuda graph') else 'E'} | "
                     f"{per_call['median_us']:.1f} µs | "
                     f"{100 * (k['q75_us'] - k['q25_us']) / k['median_us']:.1f}% | {rate} | {share} | {comps} | "
                     f"{fmt(r.get('cold_compile_s'), '.2f', ' s')} | {bars or '-'} |")
    compiled: dict[tuple, list[str]] = {}
    for s, cases in run["cold"].items():
        for case in cases:
            for kern in case.get("kernels", []):
                key = (s, kern["kernel"][:40], kern["regs"], kern["stack"], kern["local"], kern["shared"],
                       kern["num_warps"], kern["num_stages"])
                compiled.setdefault(key, []).append(case["case"])
    if compiled:
        lines += ["", "Compiled kernels of the cold compiles (cuobjdump; stack and local = bytes per thread "
                  "spilled to local memory; shared = dynamic shared memory in bytes):", "",
                  "| scaffold | kernel | regs | stack | local | shared | warps | stages | cases |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for key, cases in compiled.items():
            lines.append("| " + " | ".join(str(v) for v in key) + f" | {', '.join(cases)} |")
    if run.get("ncu"):
        lines += ["", "Nsight Compute (SpeedOfLight, one call, caches flushed, clocks as found):", ""]
        for key, launches in run["ncu"].items():
            for launch in launches:
                lines.append(f"- {key}: " + ", ".join(f"{k} {v}" for k, v in launch.items()))
    return "\n".join(lines) + "\n"


def put_section(results: Path, section: str) -> None:
    """Replace in `results` the section whose title is `section`'s first line (up to the next "## " title), or
    add it at the end. Each script's section is found by its own title: training.py's once replaced this
    script's section 7, whose title this function used to look for whatever it was given."""
    title = section.split("\n", 1)[0]
    if not title.startswith("## "):
        raise ValueError(f"a RESULTS.md section starts with its '## ' title, not {title[:60]!r}")
    text = results.read_text(encoding="utf-8") if results.exists() else "# Benchmark results\n"
    start = text.find(title + "\n")
    if start >= 0:
        following = text.find("\n## ", start + len(title))
        text = text[:start] + section.rstrip("\n") + "\n" + ("" if following < 0 else text[following:])
    else:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    temp = results.with_name(f".{results.name}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/scaffolds")))
    parser.add_argument("--only", nargs="*", choices=sorted(TABLE), help="these scaffolds only")
    parser.add_argument("--ncu", choices=("none", "misses", "all"), default="none")
    parser.add_argument("--no-results", action="store_true", help="leave benchmarks/RESULTS.md alone")
    parser.add_argument("--budget-s", type=float, default=520.0,
                        help="start no case and no cold compile past this many seconds; the table says what was left")
    parser.add_argument("--markdown-from", type=Path, metavar="JSON",
                        help="write the RESULTS.md section again from an earlier run's scaffolds.json; time nothing")
    parser.add_argument("--ncu-from", type=Path, metavar="JSON",
                        help="Nsight Compute only (--ncu misses or all), on the rows of an earlier run's scaffolds.json; "
                             "writes the run with its ncu figures to --out")
    parser.add_argument("--ncu-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ncu_child:
        ncu_child(json.loads(args.ncu_child))
        return 0
    if args.ncu_from:
        run = json.loads(args.ncu_from.read_text())
        run["ncu"] = {}
        ncu_misses(run, "all" if args.ncu == "all" else "misses", args.budget_s)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "scaffolds.json").write_text(json.dumps(run, indent=1, default=str))
        print(markdown({**run, "wall_s": run.get("wall_s", 0.0)}).split("Nsight Compute", 1)[-1])
        return 0
    if args.markdown_from:
        run = json.loads(args.markdown_from.read_text())
        run.setdefault("wall_s", 0.0)
        section = markdown(run)
        if not args.no_results:
            put_section(ROOT / "benchmarks" / "RESULTS.md", section)
        print(section)
        return 0
    import torch
    import triton

    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import load_kernel
    from workbench.core.timing.device import l2_cache_bytes, load_or_measure
    from workbench.core.timing.timers import L2Flusher

    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to time")
        return 3
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    scaffolds = args.only or list(TABLE)
    run = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rows": [], "cold": {}, "ncu": {}}
    print(f"{run['gpu']} | torch {run['torch']} | triton {run['triton']}", flush=True)
    deadline = started + args.budget_s

    def out_of_time() -> bool:
        return time.time() > deadline

    os.environ["WORKBENCH_CACHE_DIR"] = tempfile.mkdtemp()  # measured afresh, never an old cached value
    config = BenchConfig(**TIMING)
    ceilings, _ = load_or_measure(BenchConfig(), force=True)
    run["ceilings"] = vars(ceilings)
    print(f"ceilings: copy {ceilings.copy_gbps} GB/s by {ceilings.copy_method}; matmul {ceilings.matmul_tflops}",
          flush=True)
    flusher = L2Flusher(l2_cache_bytes())
    for scaffold in scaffolds:
        km = load_kernel(ROOT / "scaffolds" / scaffold / "kernel.py")
        for params in TABLE[scaffold]:
            if out_of_time():
                row = {"scaffold": scaffold, "case": label_of(params), "error": f"not run: past --budget-s {args.budget_s:.0f}"}
            else:
                try:
                    row = bench_case(scaffold, km, params, config, flusher, ceilings)
                except Exception as exc:  # noqa: BLE001 - one broken case must not sink the table
                    row = {"scaffold": scaffold, "case": label_of(params), "error": f"{type(exc).__name__}: {exc}"}
                    torch.cuda.empty_cache()
            run["rows"].append(row)
            print(summary_line(row), flush=True)
            (args.out / "scaffolds.json").write_text(json.dumps(run, indent=1, default=str))
    # Cold compiles last, each scaffold in a fresh process, while time is left: the timings above are the table.
    for scaffold in scaffolds:
        left = deadline - time.time()
        if left < 20:
            run["cold"][scaffold] = [{"error": f"not run: past --budget-s {args.budget_s:.0f}"}]
            continue
        cases = [p for p in TABLE[scaffold] if p.get("mode", "full") == "full"]  # a training case once
        run["cold"][scaffold] = cold_compile(scaffold, cases, timeout=left)
        print(f"cold compile {scaffold}: " + ", ".join(f"{c.get('case')} {c.get('first_call_s', float('nan')):.2f} s"
                                                     for c in run["cold"][scaffold]), flush=True)
    for row in run["rows"]:
        cold = {c.get("case"): c.get("first_call_s") for c in run["cold"].get(row["scaffold"], [])}
        row["cold_compile_s"] = cold.get(row["case"])
        # the live loop recompiles on every save: every config's cold compile, at most 3 s (a training case's
        # compile is measured once, forward and backward, and judged on its full row)
        if "targets" in row and row.get("mode", "full") == "full":
            seconds = row["cold_compile_s"]
            row["targets"]["cold compile s"] = {"bar": COMPILE_TARGET_S, "value": seconds, "at_most": True,
                                                "met": seconds is not None and seconds <= COMPILE_TARGET_S}
    (args.out / "scaffolds.json").write_text(json.dumps(run, indent=1, default=str))
    if args.ncu != "none":
        ncu_misses(run, args.ncu, max(60.0, deadline + 120 - time.time()))
    run["wall_s"] = time.time() - started
    (args.out / "scaffolds.json").write_text(json.dumps(run, indent=1, default=str))
    section = markdown(run)
    (args.out / "scaffolds.md").write_text(section)
    if not args.no_results:
        results = ROOT / "benchmarks" / "RESULTS.md"
        put_section(results, section)
        (args.out / "RESULTS.md").write_text(results.read_text())
    print("\n" + section)
    return 0


def summary_line(row: dict) -> str:
    if row.get("kernel") is None:
        return f"{row['scaffold']:<10} {row['case']:<28} ERROR {row.get('error', '')[:100]}"
    share = f"{row['% copy']:5.1f}% copy" if "% copy" in row else f"{row['TFLOP/s']:5.0f} TF/s"
    comps = " ".join(f"{k[2:]}={v:.2f}" for k, v in row.items() if k.startswith("x "))
    bars = " ".join(f"{w}:{'ok' if t['met'] else 'MISS'}" for w, t in row["targets"].items())
    per_call = (row.get("per_call_events") or row["kernel"])["median_us"]
    return (f"{row['scaffold']:<10} {row['case']:<28} {row['kernel']['median_us']:9.1f} us ({per_call:.1f}) {share} "
            f"{comps} err {row['rel_error']:.1e} {bars}")


if __name__ == "__main__":
    sys.exit(main())
