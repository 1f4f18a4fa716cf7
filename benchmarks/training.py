"""The training scaffolds on their hard shapes, forward, backward and both, in one command on a GPU machine:

    python3 benchmarks/training.py --out $OUT                       # the whole table
    python3 benchmarks/training.py --out $OUT --only rmsnorm_train  # some scaffolds
    python3 benchmarks/training.py --markdown-from training.json    # the RESULTS.md section again, timing nothing

Each case is timed in the three modes `workbench bench --mode` has (core/timing/modes.py), by the same
wrappers: "fwd" the training forward (autograd recording), "bwd" the backward alone (each input set's
forward run once, untimed; `torch.autograd.grad(..., retain_graph=True)` timed), "full" both. The kernel,
the eager reference and torch.compile(reference_fn) are wrapped alike, so each comparison is like for like;
torch.compile compiles once per shape (its forward and its AOTAutograd backward), and each mode calls it.

Times come from `timers.measure` (CUDA events per call with the L2 flushed before each call), as
`workbench bench` takes them; the copy ceiling from `device.load_or_measure`, measured afresh. Before
timing, each case's forward and gradients are compared with the reference's run in float32 (relative
error norm per output). Peak memory: one call's peak allocation beyond what was allocated before it
(memory.peak_memory). Bytes for the roofline: the scaffold's bytes_moved(mode=...).

Writes $OUT/training.json and $OUT/training.md and puts the section into benchmarks/RESULTS.md. The bar
(issue 28): the backward at >= 0.9x torch.compile's backward.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.core.project.config import BENCH_MODES as MODES  # noqa: E402 - the modes `workbench bench` has

SECTION_TITLE = "## 10. The training scaffolds: forward, backward and both (`training.py`)"
TIMING = {"warmup_ms": 100.0, "rep_ms": 400.0}
BACKWARD_BAR = 0.9
NORM_SHAPES = [{"rows": 8192, "cols": 2048}, {"rows": 8192, "cols": 8192}, {"rows": 1024, "cols": 65536}]
TABLE = {
    "rmsnorm_train": NORM_SHAPES,
    "layernorm_train": NORM_SHAPES,
    "softmax_train": [{"rows": 8192, "cols": 1024}, {"rows": 8192, "cols": 8192}, {"rows": 1024, "cols": 131072}],
    "silu_mul_train": [{"shape": (1 << 24,)}, {"shape": (1 << 27,)}],
    "cross_entropy_train": [{"rows": 4096, "vocab": 32768}, {"rows": 8192, "vocab": 128256}],
}


@functools.lru_cache(maxsize=None)
def _sibling(name: str):
    """benchmarks/<name>.py as a module (the folder is not a package; `scaffolds` is also a top-level folder)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def label_of(params: dict) -> str:
    if "vocab" in params:
        return f"{params['rows']}x{params['vocab']}"
    return _sibling("scaffolds").label_of(params)


def errors(out: dict | object, ref: dict | object) -> dict[str, float]:
    """Relative error norm of each output and gradient against the float32 reference."""
    import torch

    from workbench.core.verify.tensors import flatten_outputs

    got, want = flatten_outputs(out), flatten_outputs(ref)
    found = {}
    for name, a, b in zip(got.names, got.tensors, want.tensors):
        a, b = a.detach().double(), b.detach().double()
        norm = torch.linalg.vector_norm(b)
        found[(name or "out").strip("[]'")] = float(torch.linalg.vector_norm(a - b) / norm) if norm > 0 else float(
            torch.linalg.vector_norm(a - b))
    return found


def bench_case(scaffold: str, km, params: dict, config, flusher, ceilings) -> dict:
    import torch
    import torch._functorch.config

    from workbench.core.timing.memory import peak_memory
    from workbench.core.timing.compilewatch import CompileWatch, jit_functions
    from workbench.core.timing.modes import TimedMode, timed_mode
    from workbench.core.timing.timers import measure
    from workbench.core.verify.tensors import cast_floats

    scaffolds = _sibling("scaffolds")
    watch = CompileWatch(jit_functions(km.module))
    inputs = scaffolds.inputs_for(km, {**params, "dtype": "bfloat16"})
    row = {"scaffold": scaffold, "case": label_of(params), "modes": {}}
    base = timed_mode(km, inputs, "full", backward=False)
    # correctness first: forward and every gradient against the reference run in float32
    full = TimedMode("full", base.indices, base.names)
    out = full.wrap(km.kernel_fn, True)(*inputs)
    ref = full.wrap(km.reference_fn, False)(*cast_floats(inputs, torch.float32))
    row["rel_error"] = errors(out, ref)
    del out, ref
    started = time.perf_counter()
    torch._functorch.config.donated_buffer = False  # bwd calls the backward again on one graph (retain_graph)
    torch._dynamo.reset()  # each shape compiles afresh: no recompile limit, no shape-generic fallback
    compiled = torch.compile(km.reference_fn, dynamic=False)
    for _ in range(3):
        full.wrap(compiled, False)(*inputs)  # its forward and its backward compiled here, not in a timed region
    torch.cuda.synchronize()
    row["compile_s"] = time.perf_counter() - started
    for name in MODES:
        mode = TimedMode(name, base.indices, base.names)
        fns = {"kernel": mode.wrap(km.kernel_fn, True), "eager": mode.wrap(km.reference_fn, False),
               "torch.compile": mode.wrap(compiled, False)}
        nbytes = int(km.bytes_moved(*inputs, mode=name))
        entry = {"bytes": nbytes}
        for what, fn in fns.items():
            fn(*inputs)  # bwd: the input set's forward, untimed
            timed = measure(lambda fn=fn: fn(*inputs), config, flusher, watch, what, nbytes).timing
            entry[what] = None if timed is None else {
                "median_us": timed.median_ms * 1e3, "q25_us": timed.q25_ms * 1e3, "q75_us": timed.q75_ms * 1e3,
                "samples": timed.samples, "peak_mib": (peak_memory(lambda fn=fn: fn(*inputs)) or 0) / (1 << 20)}
        mode.clear()
        kernel = entry["kernel"]
        if kernel:
            entry["GB/s"] = nbytes / (kernel["median_us"] * 1e-6) / 1e9
            entry["% copy"] = 100 * entry["GB/s"] / ceilings.copy_gbps
            for what in ("eager", "torch.compile"):
                if entry[what]:
                    entry[f"x {what}"] = entry[what]["median_us"] / kernel["median_us"]
        row["modes"][name] = entry
        torch.cuda.empty_cache()
    bwd = row["modes"]["bwd"].get("x torch.compile")
    row["backward_bar"] = {"bar": BACKWARD_BAR, "value": bwd, "met": bwd is not None and bwd >= BACKWARD_BAR}
    del compiled
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return row


def fmt(value, spec=".2f"):
    return "—" if value is None else format(value, spec)


def markdown(run: dict) -> str:
    lines = [SECTION_TITLE, "",
             f"{run['gpu']}, torch {run['torch']}, triton {run['triton']}, {run['date']} UTC; "
             f"copy ceiling {run['ceilings']['copy_gbps']:.0f} GB/s. Method: `benchmarks/training.py` (its docstring): "
             "CUDA events per call, L2 flushed before each call, medians (IQR in training.json); bf16; the kernel, "
             "the eager reference and torch.compile(reference_fn) each wrapped by the bench's modes "
             "(core/timing/modes.py). Bar: bwd >= 0.9x torch.compile.", "",
             "| scaffold | case | mode | kernel µs | % copy | x eager | x torch.compile | peak MiB (kernel / compile) |"
             " max rel err |", "|---|---|---|---|---|---|---|---|---|"]
    for row in run["rows"]:
        if "error" in row:
            lines.append(f"| {row['scaffold']} | {row['case']} | | {row['error'][:80]} | | | | | |")
            continue
        worst = max(row["rel_error"].values()) if row["rel_error"] else None
        for name in MODES:
            m = row["modes"].get(name, {})
            k, c = m.get("kernel"), m.get("torch.compile")
            mark = " ✓" if name == "bwd" and row["backward_bar"]["met"] else " ✗" if name == "bwd" else ""
            lines.append(f"| {row['scaffold']} | {row['case']} | {name} | {fmt(k and k['median_us'], '.1f')} | "
                         f"{fmt(m.get('% copy'), '.0f')} | {fmt(m.get('x eager'))} | "
                         f"{fmt(m.get('x torch.compile'))}{mark} | "
                         f"{fmt(k and k['peak_mib'], '.0f')} / {fmt(c and c['peak_mib'], '.0f')} | "
                         f"{fmt(worst, '.1e') if name == 'full' else ''} |")
    met = [r for r in run["rows"] if r.get("backward_bar", {}).get("met")]
    lines += ["", f"Backward at >= {BACKWARD_BAR}x torch.compile: {len(met)} of {len(run['rows'])} cases. "
                  f"Wall time of the run: {run.get('wall_s', 0):.0f} s."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/training")))
    parser.add_argument("--only", nargs="*", choices=sorted(TABLE))
    parser.add_argument("--no-results", action="store_true", help="leave benchmarks/RESULTS.md alone")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no case past this many seconds")
    parser.add_argument("--markdown-from", type=Path, metavar="JSON")
    args = parser.parse_args()
    scaffolds = _sibling("scaffolds")
    if args.markdown_from:
        section = markdown(json.loads(args.markdown_from.read_text()))
        if not args.no_results:
            scaffolds.put_section(ROOT / "benchmarks" / "RESULTS.md", section)
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
    run = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rows": []}
    os.environ["WORKBENCH_CACHE_DIR"] = tempfile.mkdtemp()
    ceilings, _ = load_or_measure(BenchConfig(), force=True)
    run["ceilings"] = vars(ceilings)
    print(f"{run['gpu']} | torch {run['torch']} | triton {run['triton']} | copy {ceilings.copy_gbps:.0f} GB/s",
          flush=True)
    config, flusher = BenchConfig(**TIMING), L2Flusher(l2_cache_bytes())
    for scaffold in args.only or list(TABLE):
        km = load_kernel(ROOT / "scaffolds" / scaffold / "kernel.py")
        for params in TABLE[scaffold]:
            if time.time() - started > args.budget_s:
                row = {"scaffold": scaffold, "case": label_of(params), "error": "not run: past --budget-s"}
            else:
                try:
                    row = bench_case(scaffold, km, params, config, flusher, ceilings)
                except Exception as exc:  # noqa: BLE001 - one broken case must not sink the table
                    row = {"scaffold": scaffold, "case": label_of(params), "error": f"{type(exc).__name__}: {exc}"}
                    torch.cuda.empty_cache()
            run["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "modes"}, default=str), flush=True)
            for name, m in row.get("modes", {}).items():
                print(f"   {name:<4} kernel {fmt((m.get('kernel') or {}).get('median_us'), '.1f')} us  "
                      f"{fmt(m.get('% copy'), '.0f')}% copy  x eager {fmt(m.get('x eager'))}  "
                      f"x compile {fmt(m.get('x torch.compile'))}", flush=True)
            (args.out / "training.json").write_text(json.dumps(run, indent=1, default=str))
    run["wall_s"] = time.time() - started
    (args.out / "training.json").write_text(json.dumps(run, indent=1, default=str))
    section = markdown(run)
    (args.out / "training.md").write_text(section)
    if not args.no_results:
        scaffolds.put_section(ROOT / "benchmarks" / "RESULTS.md", section)
    print("\n" + section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
