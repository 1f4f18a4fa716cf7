"""What the guard margins cost a case (issue "a verdict users can take at face value, part 2", item 1).

    python benchmarks/guard_overhead.py --out /tmp/guards [--rounds 3] [--projects rmsnorm add matmul softmax]

Each project is scaffolded fresh and verified with `workbench verify --json` in a fresh process, with
`guard_regions = true` and `= false` in turn (on, off, on, off, ...: drift in clocks or caches falls on both),
the torch.compile and CUDA-graph checks off (they are seconds of Dynamo and Inductor that the margins do
not touch, and would drown the difference). A case's time is its CaseResult.duration_s: get_inputs, the
reference, both calls of kernel_fn, the repeat calls and the layouts, the hand-off to the judge; not its
forced autotune configs. The first case of each dtype compiles and autotunes; those are reported apart.

Printed: per project, the median over rounds of each case's time with and without margins, then the
median of the per-case ratios (warm cases only) and the largest. JSON with every sample in --out.

`--micro`: the margins' own work, timed alone on this machine's device (wall clock, synchronised): for an
rmsnorm-shaped case (x of rows x cols, a weight of cols, one output kernel_fn allocates), the inputs
guarded, then two calls' allocation and read-back, as verify_case does; the median of 200 such cases.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from child_env import repo_env

ROOT = Path(__file__).resolve().parents[1]
TOML = """[verify]
torch_compile = "off"
cuda_graph = "off"
guard_regions = {guards}
"""


def verify(project: Path, guards: bool) -> dict:
    (project / "workbench.toml").write_text(TOML.format(guards=str(guards).lower()))
    done = subprocess.run([sys.executable, "-m", "workbench.cli", "verify", str(project), "--json"],
                          capture_output=True, text=True, cwd=ROOT, env=repo_env())
    record = json.loads(done.stdout)["projects"][0]
    if record["exit_code"] != 0:
        raise SystemExit(f"{project.name} (guard_regions = {guards}) did not verify: {record['verdict']}\n"
                         + done.stdout[-2000:])
    return {c["case_index"]: {"label": c["label"], "s": c["duration_s"]}
            for c in record["cases"] if not c["config"] and not c["phase"] and c["status"] == "passed"}


def micro(sizes: list[tuple[int, int]]) -> list[dict]:
    """The margins' own cost per case, by size (see --micro)."""
    import time

    import torch

    sys.path.insert(0, str(ROOT))
    from workbench.core.verify.guards import Guards
    from workbench.core.verify.tensors import synchronize
    from workbench.core.verify.torchmodes import PrefillEmpty

    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows_out = []
    for rows, cols in sizes:
        x, w = torch.randn(rows, cols, device=device), torch.randn(cols, device=device)

        def case() -> None:
            guards = Guards()
            gx, _ = guards.guard_inputs([x, w])
            for _ in range(2):
                with PrefillEmpty("nan", guards):
                    out = torch.empty_like(gx)
                out.copy_(gx)
                guards.check([out], [""])
            guards.close()
            synchronize()

        for _ in range(20):
            case()
        samples = []
        for _ in range(200):
            start = time.perf_counter()
            case()
            samples.append(time.perf_counter() - start)
        rows_out.append({"rows": rows, "cols": cols, "device": device,
                         "median_ms": statistics.median(samples) * 1e3,
                         "p90_ms": sorted(samples)[int(0.9 * len(samples))] * 1e3})
        print(f"  margins of a {rows}x{cols} case on {device}: median {rows_out[-1]['median_ms']:.3f} ms, "
              f"p90 {rows_out[-1]['p90_ms']:.3f} ms")
    return rows_out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--projects", nargs="*", default=["rmsnorm", "add", "softmax", "matmul"])
    parser.add_argument("--micro", action="store_true", help="time the margins' own work alone first")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.micro:
        (args.out / "guard_micro.json").write_text(json.dumps(micro([(38, 65), (37, 1000), (2, 40000),
                                                                     (4096, 4096)]), indent=1))
    work = Path(tempfile.mkdtemp())
    results = {}
    for name in args.projects:
        subprocess.run([sys.executable, "-m", "workbench.cli", "new", name, "--dir", str(work)], check=True,
                       capture_output=True, cwd=ROOT, env=repo_env())
        samples: dict[str, list[dict]] = {"on": [], "off": []}
        for _ in range(args.rounds):
            for mode in ("on", "off"):
                samples[mode].append(verify(work / name, mode == "on"))
        cases = sorted(set.intersection(*(set(s) for mode in samples.values() for s in mode)))
        rows = []
        for index in cases:
            on = statistics.median(s[index]["s"] for s in samples["on"])
            off = statistics.median(s[index]["s"] for s in samples["off"])
            rows.append({"case": index, "label": samples["on"][0][index]["label"], "on_s": on, "off_s": off,
                         "ratio": on / off if off else None})
        first_of_dtype = {r["case"] for r in rows[:1]}  # the first case compiles and autotunes
        warm = [r for r in rows if r["case"] not in first_of_dtype and r["ratio"] is not None]
        ratios = [r["ratio"] for r in warm]
        results[name] = {"rows": rows, "samples": samples,
                         "median_ratio": statistics.median(ratios) if ratios else None,
                         "max_ratio": max(ratios) if ratios else None,
                         "sum_on_s": sum(r["on_s"] for r in warm), "sum_off_s": sum(r["off_s"] for r in warm)}
        print(f"\n{name}: {len(rows)} cases, {args.rounds} rounds each way")
        print(f"  {'case':<44} {'on ms':>9} {'off ms':>9} {'ratio':>7}")
        for r in rows:
            print(f"  {(str(r['case']) + ' ' + r['label'])[:44]:<44} {r['on_s'] * 1e3:9.2f} {r['off_s'] * 1e3:9.2f} "
                  f"{r['ratio']:7.3f}")
        if ratios:
            print(f"  warm cases: median ratio {statistics.median(ratios):.3f}, largest {max(ratios):.3f}; "
                  f"sum {results[name]['sum_on_s'] * 1e3:.1f} ms with margins, {results[name]['sum_off_s'] * 1e3:.1f} "
                  "without")
    (args.out / "guard_overhead.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
