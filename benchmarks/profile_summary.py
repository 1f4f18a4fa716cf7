"""Where the workers' time goes: a summary of the cProfile files a run leaves in WORKBENCH_PROFILE_DIR.

    WORKBENCH_PROFILE_DIR=/tmp/prof workbench verify projects/rmsnorm
    python benchmarks/profile_summary.py /tmp/prof [--top 30]

Files are grouped by the job's stages (`<pid>-<stages>.prof`, one per job); each group's figures are
per job (summed over its files, divided by their number). Listed: the functions of the workbench, of
kernel.py and of Triton's compiler and launcher with the most cumulative time, then Triton's compile
time on its own. cProfile slows Python-heavy code, so read the shares, not the absolute seconds.
"""

from __future__ import annotations

import argparse
import pstats
from collections import defaultdict
from pathlib import Path

KEEP = ("workbench/", "kernel.py", "triton/compiler/", "triton/runtime/", "torch/_dynamo/")


def _loads(path: Path) -> bool:
    try:
        pstats.Stats(str(path))
    except (TypeError, EOFError, ValueError):
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    groups: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(args.folder.glob("*.prof")):
        groups[path.stem.split("-", 1)[-1]].append(path)
    if not groups:
        raise SystemExit(f"no .prof files in {args.folder}")
    for stages, all_paths in sorted(groups.items()):
        paths = [path for path in all_paths if _loads(path)]  # an empty profile (a job that ran nothing) is skipped
        if not paths:
            continue
        stats = pstats.Stats(*map(str, paths))
        n = len(paths)
        print(f"\n== {stages}: {n} job(s), {stats.total_tt / n:.3f} s profiled per job")
        rows = []
        for (filename, line, name), (_, calls, tottime, cumtime, _) in stats.stats.items():
            if any(k in filename for k in KEEP):
                short = filename.split("site-packages/")[-1].split("/work/")[-1]
                rows.append((cumtime / n, tottime / n, calls / n, f"{short}:{line} {name}"))
        rows.sort(reverse=True)
        print(f"  {'cum s':>8} {'own s':>8} {'calls':>8}  function")
        for cum, own, calls, where in rows[:args.top]:
            print(f"  {cum:8.3f} {own:8.3f} {calls:8.1f}  {where}")
        compiles = [(ct / n, nc / n) for (f, _, name), (_, nc, _, ct, _) in stats.stats.items()
                    if name == "compile" and "triton/compiler/compiler.py" in f]
        if compiles:
            print(f"  triton.compiler.compile: {sum(c for c, _ in compiles):.3f} s in {sum(k for _, k in compiles):.1f} "
                  "calls per job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
