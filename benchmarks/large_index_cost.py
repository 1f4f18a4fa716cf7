"""Where a large-index case's second goes: each step's wall time, and the torch ops that take it.

    PYTHONPATH=. python3 benchmarks/large_index_cost.py --out $OUT                 # on a GPU: about a minute
    PYTHONPATH=. python3 benchmarks/large_index_cost.py --scaffolds add softmax --profile add

A cold `workbench verify` of every scaffold and template spends most of its tail in large-index cases: they take
turns on the GPU (verify/large_index.taking_turns), 0.6-2.0 s each, 36 of them, 38.7 s of a 64.8 s run on an H200
(RESULTS.md 3y). Count first: the largest, an fp32 add of 2.28e9 elements, reads two 9.1 GB inputs and writes 9.1
GB; its float64 reference reads 36 GB and writes 18 GB; about 100 GB in all, 25 ms at the H200's copy rate. That
count left out the error model's reference, whose every float64 intermediate is moved once more: this script found
it moving about 1 TB (3y). A case's first run compiles kernel_fn's kernels again (an integer argument past 2^31
specializes them as int64), with this script's own empty Triton cache, as a cold run does; each case runs twice
("first", "again"). For each scaffold's large-index cases (the worker's own Verifier, as `workbench verify` runs
them, the judge in this process), this prints each step's wall time, the GPU synchronized around it: the plan
(sizing), get_inputs, the references (float64, native, and rounded once more for the error model, the last two also
said on their own), kernel_fn, the judge, and the allocator's release (torch.cuda.empty_cache); and, for the
scaffolds named by --profile, the top torch ops of one case by self CPU time and by self CUDA time (torch.profiler).
The same numbers go to $OUT/large_index_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCAFFOLDS = ["add", "gelu", "softmax", "rmsnorm", "layernorm", "gemm"]


class StepClock:
    """Wall seconds per named step, the GPU synchronized on both sides of each."""

    def __init__(self):
        self.steps: dict[str, float] = {}

    @contextmanager
    def step(self, name: str):
        import torch

        torch.cuda.synchronize()
        started = time.perf_counter()
        try:
            yield
        finally:
            torch.cuda.synchronize()
            self.steps[name] = self.steps.get(name, 0.0) + time.perf_counter() - started

    def wrap(self, owner, attribute: str, name: str):
        """owner.attribute, timed as step `name` on each call; returns a function that puts it back."""
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            with self.step(name):
                return original(*args, **kwargs)

        setattr(owner, attribute, timed)
        return lambda: setattr(owner, attribute, original)


def scaffolded(name: str, where: Path) -> Path:
    """`workbench new NAME` in `where`: its kernel.py."""
    from workbench.core.project.scaffold import Catalog, builtin_scaffolds, create_project

    return create_project(name, where, Catalog(builtin_scaffolds()).choose(name, None)) / "kernel.py"


def large_cases(name: str, where: Path):
    """(the Verifier, the project's large-index cases), the smallest case of each dtype run first (compiled)."""
    from workbench.core.project.config import load_config
    from workbench.core.project.contract import load_kernel
    from workbench.core.verify.battery import Verifier
    from workbench.core.verify.large_index import large_index_cases

    kernel = scaffolded(name, where)
    km = load_kernel(kernel, f"large_index_cost_{name}")
    config = load_config(kernel.parent / "workbench.toml").verify
    large = large_index_cases(km.cases, config, len(km.cases), True)
    said: list = []
    verifier = Verifier(km, config, said.append, interpret=False)
    return verifier, large


def tuned(verifier):
    """The autotuner's quick timing, as a verification runs its cases (verify/quick_tuning.py)."""
    from workbench.core.verify.battery import verification_timer

    return verification_timer(verifier.autotuners, False)


def profile_table(run, sort_by: str, rows: int = 12) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by=sort_by, row_limit=rows, max_name_column_width=60)


def measure(name: str, where: Path, profiled: bool) -> dict:
    import torch

    import workbench.core.verify.battery as battery
    import workbench.core.verify.calls as calls
    import workbench.core.verify.references as references

    verifier, large = large_cases(name, where)
    result = {"scaffold": name, "cases": []}
    for case, attempt in [(case, attempt) for case in large for attempt in ("first", "again")]:
        clock = StepClock()
        restore = [clock.wrap(battery, "plan_large_index", "plan (sizing)"),
                   clock.wrap(verifier.km, "get_inputs", "get_inputs"),
                   clock.wrap(calls, "upcast_reference", "references (float64, native, rounded)"),
                   clock.wrap(references, "native_reference", "  of which native"),
                   clock.wrap(references, "rounded_reference", "  of which rounded once more (the error model)"),
                   clock.wrap(verifier, "_call_kernel", "kernel_fn (outputs prefilled with NaN)"),
                   clock.wrap(calls, "sampled_case", "sampled for the judge"),
                   clock.wrap(verifier, "deliver", "judged"),
                   clock.wrap(torch.cuda, "empty_cache", "allocator's release (empty_cache)")]
        try:
            with clock.step("whole case"), tuned(verifier):
                delivered = verifier.large_index_case(case)
        finally:
            for undo in restore:
                undo()
        status = delivered[0].status if delivered else "dropped"
        row = {"case": case.label, "attempt": attempt, "status": status, "steps_s": clock.steps}
        taken = ", ".join(f"{k} {v:.3f}" for k, v in clock.steps.items())
        print(f"{name} {case.label} ({attempt}): {status}; {taken} s", flush=True)
        result["cases"].append(row)
    if profiled and large:
        for sort_by in ("self_cpu_time_total", "self_cuda_time_total"):
            with tuned(verifier):
                table = profile_table(lambda: verifier.large_index_case(large[0]), sort_by)
            print(f"--- {name} {large[0].label}: torch.profiler by {sort_by}\n{table}", flush=True)
            result[f"profile_{sort_by}"] = table
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/large-index-cost")))
    parser.add_argument("--scaffolds", nargs="+", default=SCAFFOLDS)
    parser.add_argument("--profile", nargs="*", default=["add", "softmax"], help="scaffolds to profile one case of")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="large-index-cost-"))
    os.environ["TRITON_CACHE_DIR"] = str(where / "triton-cache")  # cold, as a fresh machine's
    import torch

    if not torch.cuda.is_available():
        print("large_index_cost.py times large-index cases: it needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    results = []
    try:
        for name in args.scaffolds:
            results.append(measure(name, where, name in args.profile))
            torch.cuda.empty_cache()
    finally:
        shutil.rmtree(where, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "large_index_cost.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(),
                                                                "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
