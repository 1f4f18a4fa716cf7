"""The attention scaffold's TMA kernel under other launch settings, against SDPA's cuDNN and flash backends, in
one run (issue: attention forward at cuDNN's speed):

    python3 benchmarks/attention_variants.py --json $OUT/attention_variants.json
    python3 benchmarks/attention_variants.py --ncu --json $OUT/attention_ncu.json   # the kernel beside cuDNN, under ncu

Each variant is the scaffold's own kernel.py (scaffolds/attention) with its TMA block sizes, stages and warps set,
and its key/value loop as it is, as `tl.range(..., warp_specialize=True)` (the producer/consumer split Triton
makes for that loop where the GPU and this Triton allow it) or software-pipelined by hand (PIPELINED); a variant
that does not compile says why. Each is
checked against SDPA before it is timed; times are medians from the workbench's own timer (timers.measure, as
`workbench bench` and benchmarks/scaffolds.py time: CUDA events per call, L2 flushed), TFLOP/s by the scaffold's own
flops(). A sweep to choose from; the table RESULTS.md keeps comes from benchmarks/scaffolds.py.

--ncu: one call of the scaffold's kernel and one of SDPA's cuDNN backend on the first shape, each warmed up, under
Nsight Compute (speed of light, compute workload, warp states, occupancy, and the tensor pipe's share of the active
cycles where ncu knows the metric): the two side by side, what a floor is explained by.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
import tempfile
import textwrap
from pathlib import Path

from child_env import repo_env

ROOT = Path(__file__).resolve().parents[1]
SCAFFOLD = ROOT / "scaffolds" / "attention" / "kernel.py"
LOOP = ("    for start_n in range(kv_start, kv_end, BLOCK_N):\n"
        "        start_n = tl.multiple_of(start_n, BLOCK_N)\n        k = k_desc")
LOOP_WS = ("    for start_n in tl.range(kv_start, kv_end, BLOCK_N, warp_specialize=True):\n"
           "        start_n = tl.multiple_of(start_n, BLOCK_N)\n        k = k_desc")
# The unmasked key/value loop software-pipelined by hand, as FlashAttention-3 does within a warpgroup: the scores of
# block j+1 (an asynchronous wgmma) are asked for before block j's softmax, so the tensor cores work while the
# exponentials are computed. The masked blocks (the diagonal, the ragged end) keep the scaffold's loop
# (pipelined_source).
PIPELINED_UNMASKED = """        if kv_start < kv_end:
            k = k_desc.load([batch_head, kv_start, 0]).reshape(BLOCK_N, HEAD_DIM)
            qk = tl.dot(q, k.T)
            for start_n in range(kv_start, kv_end - BLOCK_N, BLOCK_N):
                start_n = tl.multiple_of(start_n, BLOCK_N)
                k_next = k_desc.load([batch_head, start_n + BLOCK_N, 0]).reshape(BLOCK_N, HEAD_DIM)
                qk_next = tl.dot(q, k_next.T)
                new_max = tl.maximum(row_max, tl.max(qk, 1) * qk_scale)
                p = tl.math.exp2(qk * qk_scale - new_max[:, None])
                correction = tl.math.exp2(row_max - new_max)
                row_sum = row_sum * correction + tl.sum(p, 1)
                v = v_desc.load([batch_head, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
                acc = tl.dot(p.to(v.dtype), v, acc * correction[:, None])
                row_max = new_max
                qk = qk_next
            new_max = tl.maximum(row_max, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - new_max[:, None])
            correction = tl.math.exp2(row_max - new_max)
            row_sum = row_sum * correction + tl.sum(p, 1)
            v = v_desc.load([batch_head, kv_end - BLOCK_N, 0]).reshape(BLOCK_N, HEAD_DIM)
            acc = tl.dot(p.to(v.dtype), v, acc * correction[:, None])
            row_max = new_max
"""
# (BLOCK_M, BLOCK_N, stages, warps, loop: "" the scaffold's, "WS" warp-specialized, "P" pipelined by hand)
VARIANTS = [(128, 128, 3, 8, ""), (128, 128, 2, 8, ""), (128, 64, 3, 8, ""), (128, 64, 4, 4, ""),
            (256, 64, 3, 16, ""), (128, 128, 3, 8, "WS"), (128, 128, 2, 8, "WS"), (256, 128, 2, 8, "WS"),
            (128, 128, 3, 8, "P"), (128, 128, 2, 8, "P"), (128, 64, 3, 8, "P"), (128, 64, 4, 8, "P")]
SHAPES = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (1, 32, 16384, 128, False)]


def pipelined_source(source: str) -> str:
    """The scaffold's source with its TMA key/value loop kept for the masked blocks and PIPELINED_UNMASKED for
    the others."""
    start = source.index("@triton.jit\ndef attention_tma_kv_loop(")
    end = source.index("# The TMA kernel's one config")
    function = source[start:end]
    loop_at, return_at = function.index(LOOP), function.index("    return acc, row_sum, row_max")
    loop = textwrap.indent(function[loop_at:return_at], "    ")
    function = (function[:loop_at] + "    if MASKED:\n" + loop + "    else:\n" + PIPELINED_UNMASKED
                + function[return_at:])
    return source[:start] + function + source[end:]


def load_variant(folder: Path, loop: str):
    source = SCAFFOLD.read_text()
    if LOOP not in source:
        raise SystemExit("the scaffold's TMA loop changed: update LOOP")
    if loop == "WS":
        source = source.replace(LOOP, LOOP_WS)
    elif loop == "P":
        source = pipelined_source(source)
    path = folder / f"kernel_{loop or 'plain'}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NCU_SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "WarpStateStats", "Occupancy", "LaunchStats")
# What the sections print only as totals: each pipe's share of the active cycles (the tensor pipe, the FMA and ALU
# pipes, XU, where MUFU's exp2 runs) and the reasons a warp stalled, per instruction issued. A name this ncu does not
# know reads n/a.
PIPES = ("tensor", "tensor_op_gmma", "fma", "alu", "xu", "fp16")
STALLS = ("long_scoreboard", "short_scoreboard", "wait", "barrier", "membar", "math_pipe_throttle", "mio_throttle",
          "lg_throttle", "not_selected", "selected", "dispatch_stall", "no_instruction", "branch_resolving", "sleeping")
EXTRA_METRICS = ",".join([f"sm__pipe_{pipe}_cycles_active.avg.pct_of_peak_sustained_active" for pipe in PIPES]
                         + [f"smsp__average_warps_issue_stalled_{why}_per_issue_active.ratio" for why in STALLS]
                         + ["sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed.sum"])


def ncu_child() -> None:
    """Under ncu: the scaffold's kernel and SDPA's cuDNN backend on SHAPES[0], each warmed up, then one call of
    each profiled."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    module = load_variant(Path(tempfile.mkdtemp(prefix="attention-ncu-")), "")
    batch, heads, seq, dim, causal = SHAPES[0]
    q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    calls = [functools.partial(module.attention, q, k, v, causal)]
    cudnn = getattr(SDPBackend, "CUDNN_ATTENTION", None)
    if cudnn is not None:
        def sdpa_cudnn():
            with sdpa_kernel([cudnn]):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        calls.append(sdpa_cudnn)
    for call in calls:
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for call in calls:
        call()
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def ncu_compare(timeout: float = 400.0) -> list[dict]:
    """Each profiled launch's metrics ({"kernel", "id", metric: "value unit"}), the kernel's first."""
    import csv
    import shutil
    import subprocess

    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("ncu is not on PATH")
    base = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv"]
    for section in NCU_SECTIONS:
        base += ["--section", section]
    for extra in (["--metrics", EXTRA_METRICS], []):  # an ncu that does not know the metric: without it
        done = subprocess.run([*base, *extra, sys.executable, __file__, "--ncu-child"], capture_output=True,
                              text=True, timeout=timeout, env=repo_env())
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith('"')]
        if done.returncode == 0 and lines:
            break
    else:
        raise SystemExit(f"ncu exited {done.returncode}: {(done.stderr or done.stdout)[-1500:]}")
    launches: dict[str, dict] = {}
    for rec in csv.DictReader(lines):
        launch = launches.setdefault(rec["ID"], {"id": int(rec["ID"]), "kernel": rec.get("Kernel Name", "")})
        launch[rec["Metric Name"]] = f"{rec['Metric Value']} {rec.get('Metric Unit', '')}".strip()
    return sorted(launches.values(), key=lambda launch: launch["id"])


def print_side_by_side(launches: list[dict]) -> None:
    names = [m for m in launches[0] if m not in ("id", "kernel")] if launches else []
    print(" | ".join(["metric"] + [launch["kernel"][:40] for launch in launches]))
    for name in names:
        print(" | ".join([name] + [launch.get(name, "-") for launch in launches]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--loops", default="plain,WS,P", help="which loops to time (default: plain,WS,P)")
    parser.add_argument("--ncu", action="store_true", help="the kernel and cuDNN side by side under Nsight Compute")
    parser.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ncu_child:
        ncu_child()
        return 0
    if args.ncu:
        launches = ncu_compare()
        print_side_by_side(launches)
        if args.json:
            args.json.write_text(json.dumps(launches, indent=1))
        return 0
    loops = {"" if name == "plain" else name for name in args.loops.split(",")}
    import torch
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sys.path.insert(0, str(ROOT))
    from workbench.core.project.config import BenchConfig
    from workbench.core.timing.compilewatch import CompileWatch, jit_functions
    from workbench.core.timing.device import l2_cache_bytes
    from workbench.core.timing.timers import L2Flusher, measure

    config, flusher = BenchConfig(warmup_ms=100.0, rep_ms=500.0), L2Flusher(l2_cache_bytes())

    def median_ms(call, module=None) -> float:
        watch = CompileWatch(jit_functions(module) if module is not None else [])
        timing = measure(call, config, flusher, watch, "variant").timing
        if timing is None:
            raise RuntimeError("it compiled on every call: no steady-state time")
        return timing.median_ms

    folder = Path(tempfile.mkdtemp(prefix="attention-variants-"))
    modules = {loop: load_variant(folder, loop) for loop in ("", "WS", "P")}
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    for batch, heads, seq, dim, causal in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(3))
        flop = modules[""].flops(q, k, v, causal)
        shape = f"B{batch} H{heads} S{seq} D{dim} {'causal' if causal else 'full'}"
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        for name, backend in (("SDPA cuDNN", getattr(SDPBackend, "CUDNN_ATTENTION", None)),
                              ("SDPA flash", SDPBackend.FLASH_ATTENTION)):
            if backend is None:
                continue
            call = functools.partial(torch.nn.functional.scaled_dot_product_attention, q, k, v, is_causal=causal)
            try:
                with sdpa_kernel([backend]):
                    ms = median_ms(call)
            except RuntimeError as exc:
                print(f"{shape}  {name}: refused ({str(exc).splitlines()[0][:100]})", flush=True)
                continue
            rows.append({"shape": shape, "variant": name, "ms": ms, "tflops": flop / ms / 1e9})
            print(f"{shape}  {name:<28} {ms * 1e3:9.1f} us  {flop / ms / 1e9:6.0f} TFLOP/s", flush=True)
        for block_m, block_n, stages, warps, loop in VARIANTS:
            if loop not in loops:
                continue
            module = modules[loop]
            module.TMA_BLOCK_M, module.TMA_BLOCK_N, module.TMA_NUM_STAGES, module.TMA_NUM_WARPS = \
                block_m, block_n, stages, warps
            name = f"{block_m}x{block_n} s{stages} w{warps} {loop}".strip()
            try:
                out = module.attention(q, k, v, causal)
                torch.cuda.synchronize()
                err = (out.float() - expected.float()).abs().max().item()
                if not err < 0.05:
                    raise RuntimeError(f"wrong: max abs error {err:.3g} against SDPA")
                ms = median_ms(functools.partial(module.attention, q, k, v, causal), module)
            except Exception as exc:  # noqa: BLE001 - a variant this GPU or Triton refuses: said, and the next
                text = str(exc).strip().splitlines()
                print(f"{shape}  {name:<28} failed: {type(exc).__name__}: {(text[0] if text else '')[:120]}",
                      flush=True)
                rows.append({"shape": shape, "variant": name, "error": f"{type(exc).__name__}: {text[:1]}"})
                continue
            rows.append({"shape": shape, "variant": name, "ms": ms, "tflops": flop / ms / 1e9, "err": err})
            print(f"{shape}  {name:<28} {ms * 1e3:9.1f} us  {flop / ms / 1e9:6.0f} TFLOP/s  err {err:.1e}",
                  flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
