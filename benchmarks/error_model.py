"""What factor of the dtype's own error (torch's, or one more rounding of the inputs') separates correct kernels
from broken ones (verify/error_model.py).

Verifies every correct and every broken fixture of the test suite (tests/kernels_numerics.py,
kernels_libraries.py, kernels_training.py, kernels_zoo.py) in one `workbench verify --json`, and prints, per
fixture, its verdict and the worst multiple of the dtype's own error that any output of any case reached. A correct
kernel's worst multiple must stay under the factor (2) and a broken kernel must fail. Runs on a GPU or, under
the interpreter, on the CPU.

    python benchmarks/error_model.py [--out DIR] [--only NAME ...] [--seeds N]
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
                  "train_rmsnorm_wrong_dx": (training.WRONG_DX, False),
                  "train_layernorm_fma": (training.LAYERNORM_TRAIN_FMA, True),
                  "train_layernorm_fma_wrong_dx": (training.LAYERNORM_TRAIN_FMA_WRONG_DX, False)})
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


def verify_all(chosen: dict[str, tuple[str, bool]], seed: int | None) -> tuple[dict, float]:
    """Every chosen fixture in one `workbench verify --json` (its inputs drawn from `seed`, else a new one):
    (the record, seconds)."""
    with tempfile.TemporaryDirectory(prefix="error-model-") as scratch:
        tomls = {f"num_{k.lower()}": v for k, v in num.WORKBENCH_TOML.items()}
        for name, (source, _) in chosen.items():
            (Path(scratch) / name).mkdir()
            (Path(scratch) / name / "kernel.py").write_text(source)
            if name in tomls:
                (Path(scratch) / name / "workbench.toml").write_text(tomls[name])
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "workbench.cli", "verify", "--json",
                               *(["--seed", str(seed)] if seed is not None else []),
                               *sorted(str(p) for p in Path(scratch).iterdir())],
                              capture_output=True, text=True, cwd=ROOT)
        return json.loads(done.stdout), time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the JSON records here")
    parser.add_argument("--only", nargs="*", default=[], help="fixture names (default: all)")
    parser.add_argument("--seeds", type=int, default=0, metavar="N",
                        help="verify the set N times, on the inputs of seeds 1 to N (default: once, on a new seed); "
                             "a fixture's verdict and worst multiple are then its worst over the seeds")
    args = parser.parse_args()
    chosen = {k: v for k, v in fixtures().items() if not args.only or k in args.only}
    seeds: list[int | None] = list(range(1, args.seeds + 1)) if args.seeds > 0 else [None]
    records, took = [], 0.0
    for seed in seeds:
        record, seconds = verify_all(chosen, seed)
        records.append(record)
        took += seconds
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"error_model-seed-{record['projects'][0].get('seed')}.json").write_text(
                json.dumps(record, indent=1))
    wrong = 0
    drawn = ", ".join(str(r["projects"][0].get("seed")) for r in records)
    print(f"inputs drawn from seed{'s' if len(records) > 1 else ''} {drawn}")
    print(f"{'fixture':34} {'expect':7} {'got':5} worst multiple of the dtype's own error (output/dtype)")
    by_name: dict[str, list[dict]] = {}
    for record in records:
        for project in record["projects"]:
            by_name.setdefault(project["project"], []).append(project)
    correct_worst = 0.0
    for name, runs in by_name.items():
        correct = chosen[name][1]
        # a correct fixture must verify on every seed, a broken one fail on every seed
        odd = [r for r in runs if (r["exit_code"] == 0) != correct]
        wrong += bool(odd)
        worst: dict[str, float] = {}
        for run in runs:
            for key, value in worst_multiples(run).items():
                worst[key] = max(worst.get(key, 0.0), value)
        if correct:
            correct_worst = max([correct_worst, *worst.values()])
        shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(worst.items(), key=lambda kv: -kv[1])[:4])
        got = ("pass" if correct else "FAIL") if not odd else ("FAIL" if correct else "pass")
        seen_on = f"(seed {', '.join(str(r.get('seed')) for r in odd)}) " if odd and len(runs) > 1 else ""
        print(f"{name:34} {'pass' if correct else 'fail':7} {got:5} "
              f"{'<< UNEXPECTED ' + seen_on if odd else ''}{shown}")
        if odd or not correct:
            project = (odd or runs)[0]
            for case in project["cases"]:
                if case["status"] in ("failed", "error"):
                    print(f"{'':44}case {case['label']} {case['config']}: {case['messages'][0][:150]}")
                    break
            for problem in project.get("problems", [])[:1]:
                print(f"{'':44}problem: {problem['message'][:150]}")
    print(f"\n{len(chosen)} fixtures x {len(records)} seed{'s' if len(records) > 1 else ''} in {took:.0f} s; {wrong} "
          f"not as expected; the largest multiple any correct fixture reached: {correct_worst:.2f}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
