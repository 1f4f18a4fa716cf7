"""What factor of the dtype's own error (torch's, or one more rounding of the inputs') separates correct kernels
from broken ones (verify/error_model.py).

Verifies every correct and every broken fixture of the test suite (tests/kernels_numerics.py,
kernels_libraries.py, kernels_training.py, kernels_zoo.py) in one `workbench verify --json`, and prints, per
fixture, its verdict and the worst multiple of the dtype's own error that any output of any case reached. A correct
kernel's worst multiple must stay under the factor (2) and a broken kernel must fail. Runs on a GPU or, under
the interpreter, on the CPU.

    python benchmarks/error_model.py [--out DIR] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import kernels_libraries as lib  # noqa: E402
import kernels_numerics as num  # noqa: E402
import kernels_training as training  # noqa: E402
import kernels_zoo as zoo  # noqa: E402


def fixtures() -> dict[str, tuple[str, bool]]:
    """name -> (kernel.py source, correct?); a fixture's workbench.toml is num.WORKBENCH_TOML's"""
    found = {f"lib_{k}": (v, True) for k, v in lib.CORRECT.items()}
    found.update({f"lib_{k}": (v, False) for k, v in lib.BROKEN.items()})
    found.update({f"zoo_{k}": (v, True) for k, v in zoo.ZOO.items()})
    found.update({"train_rmsnorm": (training.RMSNORM_TRAIN, True), "train_cross_entropy": (training.CROSS_ENTROPY, True),
                  "train_rmsnorm_wrong_dx": (training.WRONG_DX, False)})
    for name in ("HF_ADD_RMSNORM", "LAYERNORM_16BIT_STATS", "INT8_QUANT", "DICT_OUTPUTS", "SOFTMAX_STABLE",
                 "LAYERNORM_TWO_PASS"):
        found[f"num_{name.lower()}"] = (getattr(num, name), True)
    for name in ("RMSNORM_16BIT_PARTIALS", "INT8_QUANT_TRUNCATES", "DICT_WRONG_KEY", "TUPLE_FOR_TENSOR",
                 "SOFTMAX_NO_MAX", "LAYERNORM_ONE_PASS_VARIANCE"):
        found[f"num_{name.lower()}"] = (getattr(num, name), False)
    return found


def worst_multiples(project: dict) -> dict[str, float]:
    worst: dict[str, float] = {}
    for case in project["cases"]:
        for entry in case.get("compared", []):
            if entry["multiple"] is not None:
                key = f"{entry['output']}/{entry['torch_dtype']}"
                worst[key] = max(worst.get(key, 0.0), entry["multiple"])
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the JSON record here")
    parser.add_argument("--only", nargs="*", default=[], help="fixture names (default: all)")
    args = parser.parse_args()
    chosen = {k: v for k, v in fixtures().items() if not args.only or k in args.only}
    with tempfile.TemporaryDirectory(prefix="error-model-") as scratch:
        tomls = {f"num_{k.lower()}": v for k, v in num.WORKBENCH_TOML.items()}
        for name, (source, _) in chosen.items():
            (Path(scratch) / name).mkdir()
            (Path(scratch) / name / "kernel.py").write_text(source)
            if name in tomls:
                (Path(scratch) / name / "workbench.toml").write_text(tomls[name])
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "workbench.cli", "verify", "--json",
                               *sorted(str(p) for p in Path(scratch).iterdir())],
                              capture_output=True, text=True, cwd=ROOT)
        took = time.perf_counter() - start
    record = json.loads(done.stdout)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "error_model.json").write_text(json.dumps(record, indent=1))
    wrong = 0
    print(f"{'fixture':34} {'expect':7} {'got':5} worst multiple of the dtype's own error (output/dtype)")
    for project in record["projects"]:
        name = project["project"]
        correct = chosen[name][1]
        verified = project["exit_code"] == 0
        as_expected = verified == correct
        wrong += not as_expected
        worst = worst_multiples(project)
        shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(worst.items(), key=lambda kv: -kv[1])[:4])
        print(f"{name:34} {'pass' if correct else 'fail':7} {'pass' if verified else 'FAIL':5} "
              f"{'' if as_expected else '<< UNEXPECTED '}{shown}")
        if not as_expected or not correct:
            for case in project["cases"]:
                if case["status"] in ("failed", "error"):
                    print(f"{'':44}case {case['label']} {case['config']}: {case['messages'][0][:150]}")
                    break
            for problem in project.get("problems", [])[:1]:
                print(f"{'':44}problem: {problem['message'][:150]}")
    correct_worst = max((v for p in record["projects"] if chosen[p["project"]][1]
                         for v in worst_multiples(p).values()), default=0.0)
    print(f"\n{len(chosen)} fixtures in {took:.0f} s; {wrong} not as expected; the largest multiple any correct "
          f"fixture reached: {correct_worst:.2f}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
