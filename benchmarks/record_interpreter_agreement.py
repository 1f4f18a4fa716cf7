"""Record what the interpreter-agreement kernels compute: on a GPU, the fixtures the CPU tests
compare the Triton interpreter against; under the interpreter (--interpret), what they compare.

On a GPU machine, from the repository root:

    python benchmarks/record_interpreter_agreement.py --out tests/fixtures/interpreter_agreement

runs every kernel of tests/interpreter_agreement_kernels.py (bf16 and fp16 elementwise ops, casts,
comparisons, tl.where, reductions, tl.dot, float32 math, SwiGLU, RMSNorm, softmax) on its small
deterministic inputs and writes OUT/gpu.json: each output's raw bits (hex), dtype and shape, a
digest of its inputs, and the GPU, torch, triton and Python versions. With --interpret it runs the
same kernels under the Triton interpreter with the workbench's fixes and writes
OUT/interpreter.json instead (tests/test_interpreter_agreement.py does this).

It checks itself: every output against the float32-compute-then-round reference (one line per
kernel: how many units in the last place apart, and the allowance), then the file it wrote, read
back. A kernel that fails to run is recorded with its error and the others go on. Exit 0 when the
file was written and read back (kernels outside their allowance are listed, not fatal: they are
what the GPU does), 1 when it could not be, 3 without a GPU and without --interpret.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu.json (interpreter.json)")
    parser.add_argument("--interpret", action="store_true", help="run under the Triton interpreter, on the CPU")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: @triton.jit reads it
        warnings.filterwarnings("ignore", category=RuntimeWarning)  # numpy on the inputs' Inf and NaN, on purpose
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import torch
    import triton

    if args.interpret:
        from workbench.core.verify.interpreter.fixes import apply

        fixes = apply()
        device, device_name = "cpu", "CPU (Triton interpreter; fixes: " + ", ".join(fixes) + ")"
    elif torch.cuda.is_available():
        device, device_name = "cuda", torch.cuda.get_device_name()
    else:
        print("no CUDA GPU visible to torch: run this on a GPU machine, or pass --interpret", file=sys.stderr)
        return 3
    import interpreter_agreement_kernels as agreement

    say = (lambda *a: None) if args.quiet else print
    record = {"device": device_name, "mode": "interpreter" if args.interpret else "gpu",
              "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
              "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cases": {}}
    outside, failed = [], []
    say(f"{device_name}; torch {torch.__version__}, triton {triton.__version__}")
    say(f"{'kernel':28} {'dtype':9} {'shape':10} ulps vs float32-then-round (allowed)")
    for case in agreement.CASES:
        inputs = case.make_inputs()
        try:
            output = case.run(*[t.to(device) for t in inputs])
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - one kernel's failure is that kernel's record
            record["cases"][case.name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            failed.append(case.name)
            say(f"{case.name:28} ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}")
            continue
        entry = agreement.encode(output, inputs)
        record["cases"][case.name] = entry
        ulps, where = agreement.ulps_apart(output.cpu(), case.reference(*inputs))
        mark = "" if ulps <= case.ulps else f"  OUTSIDE (worst at flat index {where})"
        if mark:
            outside.append(f"{case.name} ({ulps} ulps)")
        say(f"{case.name:28} {entry['dtype']:9} {'x'.join(map(str, entry['shape'])):10} "
            f"{ulps if ulps < 1 << 40 else 'mismatch'} ({case.ulps}){mark}")

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{record['mode']}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    read_back = json.loads(path.read_text())["cases"]
    unreadable = [name for name, entry in record["cases"].items() if "bits" in entry and not
                  agreement.decode(read_back[name]).view(-1).view(torch.uint8).equal(
                      agreement.decode(entry).view(-1).view(torch.uint8))]
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB): {len(record['cases'])} kernels, "
          f"{len(failed)} failed to run, {len(outside)} outside their allowance, read back "
          + ("intact" if not unreadable else f"WRONG for {', '.join(unreadable)}"))
    for name in failed:
        print(f"  failed: {name}: {record['cases'][name]['error'].splitlines()[0][:200]}")
    for name in outside:
        print(f"  outside the float32-then-round allowance: {name}")
    return 1 if unreadable else 0


if __name__ == "__main__":
    sys.exit(main())
