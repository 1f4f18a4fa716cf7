"""The RMSNorm scaffold timed three ways: as shipped, on a side stream it forks and joins, and on a side stream
it never joins back (the launcher returns with its kernel still running there). `bytes_moved()` is removed, so
the rates are on the inputs-read-once bound. Run on a GPU:

    python benchmarks/timing_escapes.py --workbench PATH --out DIR

PATH: the checkout whose `workbench` runs the benchmarks (to compare two versions, run it once with each).
Prints one line per variant (median, GB/s, fraction of the copy ceiling, speed-up, what was withheld) and writes
the JSON records to DIR. docs/TIMING.md; benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from child_env import repo_env

SIDE = '''

_side = []


def side_stream_rmsnorm(x, weight, eps=1e-6):
    if not _side:
        _side.append(torch.cuda.Stream())
    side, caller = _side[0], torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        y = rmsnorm(x, weight, eps)
    {join}
    return y


kernel_fn = side_stream_rmsnorm
'''
JOIN = "caller.wait_stream(side); y.record_stream(caller)"
ONE_CASE = '''
del bytes_moved
CASES = [c for c in CASES if c.get("purpose") != "bench" or (c["rows"], c["cols"]) == (8192, 4096)]
'''
TOML = "[bench]\ncompare_torch_compile = false\n[verify]\ntorch_compile = false\ncuda_graph = false\n"
VARIANTS = {"as shipped": "", "side stream, joined": SIDE.format(join=JOIN),
            "side stream, not joined": SIDE.format(join="pass")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workbench", type=Path, required=True, help="checkout whose workbench is run")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.workbench.resolve()
    env = repo_env(root=root)
    tag = root.name
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "workbench", "new", "rmsnorm", "--dir", tmp], env=env, check=True,
                       capture_output=True, cwd=root)  # cwd: `python -m` puts it first on sys.path
        shipped = (Path(tmp) / "rmsnorm" / "kernel.py").read_text()
        for n, (label, launcher) in enumerate(VARIANTS.items()):
            project = Path(tmp) / f"v{n}"
            project.mkdir()
            (project / "kernel.py").write_text(shipped + ONE_CASE + launcher)
            (project / "workbench.toml").write_text(TOML)
            done = subprocess.run([sys.executable, "-m", "workbench", "bench", str(project), "--json", "--no-plot"],
                                  env=env, capture_output=True, text=True, cwd=root)
            (args.out / f"{tag}-v{n}.json").write_text(done.stdout)
            try:
                record = json.loads(done.stdout)["projects"][0]
                row = record["bench"][0]
            except (ValueError, KeyError, IndexError):
                print(f"{tag} | {label}: exit {done.returncode}, no bench row: {done.stdout[-400:]} {done.stderr[-400:]}")
                continue
            median, gbps, frac, speedup = (row.get(k) for k in ("median_ms", "gbps", "bandwidth_fraction",
                                                                 "speedup_vs_reference"))
            print(f"{tag} | {label}: median {'-' if median is None else f'{median * 1e3:.2f} us'}, "
                  f"{'-' if gbps is None else f'{gbps:.0f} GB/s ({frac:.0%} of copy)'}, "
                  f"{'-' if speedup is None else f'{speedup:.2f}x torch'}, withheld {row['withheld']!r}; "
                  f"summary: {record.get('bench_summary', '')[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
