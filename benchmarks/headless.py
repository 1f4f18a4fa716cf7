"""Headless speed: `workbench verify` and `workbench bench` against the plain script a user would write.

    python benchmarks/headless.py --out /tmp/headless            # the whole set (a GPU: ~4 minutes)
    python benchmarks/headless.py --out /tmp/headless --only small

Each measured command runs in a fresh process, as CI runs it: `python benchmarks/headless.py --driver ...`
runs the workbench's own CLI (`workbench.cli.main`) and writes, beside its output, when each of the run's
events arrived (seconds from the process's start), for the breakdown. Every check is on (workbench.toml as
scaffolded: torch.compile and CUDA-graph checks on a GPU, torch.compile as a benchmark baseline).

- small: the softmax scaffold (23 verification cases), `workbench verify --fresh-checks` (every check run) and
  `workbench verify` (the checks' passes kept from those runs: project/kept.py), --repeats times each; the same
  file with `torch_compile = "off"`; and the plain script (plain_scripts.PLAIN_VERIFY, the one loop_latency.py
  uses) in a fresh `python` with a fresh Triton cache.
- fresh: issue 43's first row as a fresh CI machine runs it (fresh_machine): each command with empty Triton,
  Inductor and workbench caches, `workbench verify` of the softmax scaffold beside the plain script, the plain
  script with the torch.compile check written plainly, that check alone, and the workbench with the check off.
- all: every scaffold and template (12 projects) in one `workbench verify`, then again with the checks' passes
  kept (WORKBENCH_PROJECTS_PER_GPU sets how many share the GPU at once: run/factory.verify_lanes_per_gpu).
- configs: benchmarks/projects/many_configs (a LayerNorm for training whose four kernels autotune over 488
  configs), one cold `workbench verify`: every config the pruning keeps for a case forced on it in turn and judged.
- bench: `workbench bench` of the rmsnorm scaffold: cold (nothing kept), then again (the baselines' times and the
  checks' passes kept from the first run: core/project/kept.py), then with --fresh-baselines --fresh-checks.

Breakdown of a verify run: start-up (to the first worker ready), the cases (plan to the last case's first
result), the torch.compile check's results where they come on their own (CaseResult.phase "torch.compile
check"; inline, the check is inside the first case of each dtype), verdict; for bench, the benchmark cases' phases summed (BenchResult.phases).
Targets (H100, issue "headless at the speed of the live loop"): small <= 5 s and <= 0.7x the plain script;
all 12 <= 60 s; bench of one scaffold <= 15 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from child_env import repo_env
from plain_scripts import COMPILE_CHECK_ALONE, COMPILE_CHECK_FLOOR, PLAIN_VERIFY, PLAIN_VERIFY_COMPILED

ROOT = Path(__file__).resolve().parents[1]
SCAFFOLDS = ["rmsnorm", "layernorm", "softmax", "gelu", "silu_mul", "add", "matmul", "attention"]
TEMPLATES = ["elementwise", "row", "gemm", "attention"]

def driver(argv: list[str]) -> int:
    """In the measured process: the CLI, with each event's arrival time written to $HEADLESS_TIMELINE."""
    started = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    import workbench.core.run.session as session

    timeline: list[dict] = []
    run_project = session.run_project
    log = open(os.environ["HEADLESS_TIMELINE"] + "l", "w")  # .jsonl, as the events come: a run cut short keeps them

    def timed_run_project(project, runner, spec, on_event=None, *args, **kwargs):
        def on(event):
            entry = {"t": time.perf_counter() - started, "type": event.type, "project": project.name}
            for key in ("case_index", "phase", "config", "stage", "duration_s", "phases", "warmup_phases"):
                if hasattr(event, key):
                    entry[key] = getattr(event, key)
            timeline.append(entry)
            log.write(json.dumps(entry) + "\n")
            log.flush()
            if on_event is not None:
                on_event(event)
        return run_project(project, runner, spec, on, *args, **kwargs)  # hooks, the seed: as the session passes them

    session.run_project = timed_run_project  # the session's lanes run each project through it
    from workbench.cli import main

    try:
        return main(argv)
    finally:
        Path(os.environ["HEADLESS_TIMELINE"]).write_text(json.dumps({"wall_s": time.perf_counter() - started,
                                                                     "events": timeline}))


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def timed(argv: list[str], out: Path, name: str, env: dict | None = None, limit_s: float | None = None) -> dict:
    """One command in a fresh process: its wall time (from outside), exit code and event timeline."""
    timeline = out / f"{name}.timeline.json"
    env = repo_env({**(env or {}), "HEADLESS_TIMELINE": str(timeline)})
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--driver", *argv], capture_output=True, text=True, env=env,
                              timeout=limit_s)
    except subprocess.TimeoutExpired as exc:
        proc = subprocess.CompletedProcess(exc.cmd, 124, _text(exc.stdout), _text(exc.stderr) + f"\ncut at {limit_s} s")
    wall = time.perf_counter() - started
    (out / f"{name}.txt").write_text(proc.stdout + proc.stderr)
    if timeline.exists():
        data = json.loads(timeline.read_text())
    else:  # cut short: the events that came
        lines = Path(str(timeline) + "l").read_text().splitlines() if Path(str(timeline) + "l").exists() else []
        data = {"events": [json.loads(line) for line in lines if line.strip()]}
    return {"name": name, "wall_s": wall, "exit": proc.returncode, "events": data["events"]}


def breakdown(run: dict) -> dict:
    events = run["events"]

    def first(kind, **match):
        return next((e["t"] for e in events if e["type"] == kind and all(e.get(k) == v for k, v in match.items())),
                    None)

    main_results = [e["t"] for e in events if e["type"] == "case_result" and not e.get("phase") and not e.get("config")]
    check = [e["t"] for e in events if e["type"] == "case_result" and e.get("phase") == "torch.compile check"]
    bench_phases: dict[str, float] = {}
    for e in events:
        for phase, seconds in (e.get("phases") or {}).items():
            bench_phases[phase] = bench_phases.get(phase, 0.0) + seconds
    ready = next((e for e in events if e["type"] == "worker_ready"), None)
    warmup = (ready or {}).get("warmup_phases") or {}
    return {
        "start-up (first worker ready)": first("worker_ready"),
        **({"  of which before the worker's warm-up (python, the CLI, torch imported in the template, fork)":
            round(ready["t"] - sum(warmup.values()), 3)} if warmup else {}),
        **{f"  worker warm-up: {k}": round(v, 3) for k, v in warmup.items()},
        "plan (run started)": first("run_started"),
        "first case": main_results[0] if main_results else None,
        "last case": main_results[-1] if main_results else None,
        "torch.compile check done": check[-1] if check else None,
        "verified": first("stage", stage="verified"),
        "finished": max((e["t"] for e in events if e["type"] == "run_finished"), default=None),
        **({f"bench: {k}": round(v, 3) for k, v in bench_phases.items()} if bench_phases else {}),
    }


SCRATCH: list[Path] = []  # the folder of the fresh caches, made on first use, removed at the end (main)


def fresh_caches() -> dict[str, str]:
    """What a fresh CI machine has kept: nothing. Empty Triton, Inductor and workbench caches for one command."""
    if not SCRATCH:
        SCRATCH.append(Path(tempfile.mkdtemp(prefix="headless-caches-")))
    return {"TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="triton-", dir=SCRATCH[0]),
            "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor-", dir=SCRATCH[0]),
            "WORKBENCH_CACHE_DIR": tempfile.mkdtemp(prefix="workbench-", dir=SCRATCH[0])}


def plain(kernel: Path, out: Path, source: str = PLAIN_VERIFY, name: str = "plain") -> float:
    """A plain script (plain_scripts.py) in a fresh `python` with fresh caches: its wall time."""
    script = out / f"{name}.py"
    script.write_text(source)
    env = {**os.environ, **fresh_caches()}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), str(kernel)], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    (out / f"{name}.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        print(f"  {name} script failed (exit {proc.returncode}): {proc.stderr[-300:]}")
    return wall


def plain_phases(text: str) -> dict[str, float]:
    """The plain script's own phase lines ("PHASE <name> <seconds from its start>"), by name."""
    found = {}
    for line in text.splitlines():
        if line.startswith("PHASE "):
            name, _, seconds = line[len("PHASE "):].rpartition(" ")
            found[name] = float(seconds)
    return found


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}-{max(values):.2f}]"


def fresh_machine(work: Path, out: Path, repeats: int, summary: dict) -> None:
    """Issue 43's first row, as a fresh CI machine runs it: each command in a fresh process with empty Triton,
    Inductor and workbench caches and a fresh copy of the project, interleaved so that they share the host's
    drift. Beside `workbench verify`: the plain script, the plain script with the torch.compile check written
    plainly, that check alone (with Inductor's default pool of compile processes, and compiling in the process
    as the workbench does: the least a process that runs only the check pays), the workbench with the check in a
    process of its own (WORKBENCH_COMPILE_CHECK_PROCESS=1, verify/compat_beside.py) and with the check off."""
    project = scaffold(work, "softmax")
    times: dict[str, list[float]] = {k: [] for k in (
        "plain", "plain + torch.compile check", "torch.compile check alone", "torch.compile check alone, in-process",
        "workbench verify", "workbench verify, the check in its own process", "workbench verify, torch_compile off")}
    breakdowns = []
    for n in range(repeats):
        times["plain"].append(plain(project / "kernel.py", out, PLAIN_VERIFY, f"fresh-plain-{n}"))
        times["plain + torch.compile check"].append(
            plain(project / "kernel.py", out, PLAIN_VERIFY_COMPILED, f"fresh-plain-compiled-{n}"))
        times["torch.compile check alone"].append(
            plain(project / "kernel.py", out, COMPILE_CHECK_ALONE, f"fresh-check-alone-{n}"))
        times["torch.compile check alone, in-process"].append(
            plain(project / "kernel.py", out, COMPILE_CHECK_FLOOR, f"fresh-check-floor-{n}"))
        variants = (("", "workbench verify", {}),
                    ("-process", "workbench verify, the check in its own process",
                     {"WORKBENCH_COMPILE_CHECK_PROCESS": "1"}),
                    ("-off", "workbench verify, torch_compile off", {}))
        for suffix, label, env in variants:
            copy = work / f"fresh-{n}{suffix}" / "softmax"
            shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".workbench"))
            if suffix == "-off":
                toml = copy / "workbench.toml"
                toml.write_text(toml.read_text().replace('# torch_compile = "check"', 'torch_compile = "off"', 1))
            run = timed(["verify", str(copy), "--json"], out, f"fresh-verify-{n}{suffix}",
                        env={**fresh_caches(), **env})
            times[label].append(run["wall_s"])
            breakdowns.append({"name": run["name"], "exit": run["exit"], **breakdown(run)})
    base = statistics.median(times["plain"])
    summary["fresh"] = {"times_s": times, "breakdown": breakdowns}
    for name, values in times.items():
        print(f"fresh machine, softmax: {name:<36} {spread(values)} ({statistics.median(values) / base:.2f}x the plain "
              "script)")


def scaffold(work: Path, name: str, template: str | None = None) -> Path:
    argv = ["new", name, "--dir", str(work)] + (["--template", template] if template else [])
    subprocess.run([sys.executable, "-m", "workbench.cli", *argv], check=True, capture_output=True,
                   env=repo_env())
    return work / name


def fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(runs: list[dict]) -> None:
    for run in runs:
        parts = ", ".join(f"{k} {fmt(v)}" for k, v in breakdown(run).items() if v is not None)
        print(f"  {run['name']}: wall {run['wall_s']:.2f} s, exit {run['exit']}; {parts}")


CHECKS_OFF = {"torch_compile": 'torch_compile = "off"', "cuda_graph": 'cuda_graph = "off"',
              "noncontiguous": 'noncontiguous = "off"', "storage_offset": 'storage_offset = "off"',
              "guard_regions": "guard_regions = false"}


def one(work: Path, name: str, out: Path, summary: dict) -> None:
    """One scaffold taken apart: cold, kept, then each check off in turn and all of them off; where its time goes."""
    project = scaffold(work, name)
    variants: list[tuple[str, Path, list[str]]] = [(f"{name}-cold", project, ["--fresh-checks"]), (f"{name}-kept", project, [])]
    for off in [*CHECKS_OFF, "all"]:
        copy = work / f"{name}_{off}_off"
        shutil.copytree(project, copy)
        toml = copy / "workbench.toml"
        text = toml.read_text()
        for key, line in CHECKS_OFF.items():
            if off in (key, "all"):
                text = text.replace("[verify]\n", f"[verify]\n{line}\n", 1)
        toml.write_text(text)
        variants.append((f"{name}-{off}-off", copy, ["--fresh-checks"]))
    summary["one"] = {}
    for label, path, extra in variants:
        run = timed(["verify", str(path), "--json", *extra], out, label)
        results = [e for e in run["events"] if e["type"] == "case_result"]
        tuned = [e for e in results if e.get("config")]
        main_ = [e for e in results if not e.get("config") and not e.get("phase")]
        row = {"wall_s": round(run["wall_s"], 2), "exit": run["exit"], "results": len(results),
               "forced-config results": len(tuned),
               "cases' own time (sum of duration_s)": round(sum(e.get("duration_s") or 0 for e in main_), 2),
               "forced configs' time (sum)": round(sum(e.get("duration_s") or 0 for e in tuned), 2),
               **{k: round(v, 2) for k, v in breakdown(run).items() if v is not None}}
        summary["one"][label] = row
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        return driver(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", choices=["small", "fresh", "all", "bench", "one", "configs"], action="append")
    parser.add_argument("--project", default="add", help="the scaffold --only one takes apart (default add)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--all-limit", type=float, default=None, help="cut the 12-project run after this many s")
    args = parser.parse_args()
    parts = args.only or ["small", "all", "bench"]
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="headless-"))
    summary: dict = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    try:
        import torch
        import triton

        summary["versions"] = f"torch {torch.__version__}, triton {triton.__version__}"
        summary["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (interpreter)"
        print(f"{summary['gpu']} | {summary['versions']} | {os.cpu_count()} cores | {summary['when']}")
        if "small" in parts:
            project = scaffold(work, "softmax")
            off = work / "softmax_nocompile"
            shutil.copytree(project, off)
            toml = off / "workbench.toml"
            toml.write_text(toml.read_text().replace('# torch_compile = "check"', 'torch_compile = "off"', 1))
            plains = [plain(project / "kernel.py", args.out, name=f"plain-{n}") for n in range(args.repeats)]
            # cold: the checks run (--fresh-checks); kept: their passes kept from the runs before (project/kept.py)
            runs = [timed(["verify", str(project), "--json", "--fresh-checks"], args.out, f"verify-softmax-cold-{n}")
                    for n in range(args.repeats)]
            runs += [timed(["verify", str(project), "--json"], args.out, f"verify-softmax-kept-{n}")
                     for n in range(args.repeats)]
            runs.append(timed(["verify", str(off), "--json"], args.out, "verify-softmax-torch_compile-off"))
            cold = [r["wall_s"] for r in runs[:args.repeats]]
            kept = [r["wall_s"] for r in runs[args.repeats:-1]]
            summary["small"] = {"verify_cold_s": cold, "verify_kept_s": kept, "plain_s": plains,
                                "torch_compile_off_s": runs[-1]["wall_s"], "breakdown": [breakdown(r) for r in runs]}
            plain_median = statistics.median(plains)
            print(f"small (softmax): plain script {plain_median:.2f} s [{min(plains):.2f}-{max(plains):.2f}]; verify "
                  f"with the checks run {statistics.median(cold):.2f} s [{min(cold):.2f}-{max(cold):.2f}] "
                  f"({statistics.median(cold) / plain_median:.2f}x), their passes kept {statistics.median(kept):.2f} s "
                  f"[{min(kept):.2f}-{max(kept):.2f}] ({statistics.median(kept) / plain_median:.2f}x); "
                  f"torch_compile off {runs[-1]['wall_s']:.2f} s")
            phases = [plain_phases((args.out / f"plain-{n}.txt").read_text()) for n in range(args.repeats)]
            summary["small"]["plain_phases"] = phases
            print("  plain script, seconds from its start: " + ", ".join(
                f"{name} {spread([p[name] for p in phases if name in p])}" for name in phases[0]))
            report(runs)
        if "fresh" in parts:
            fresh_machine(work, args.out, args.repeats, summary)
        if "one" in parts:
            one(work, args.project, args.out, summary)
        if "all" in parts:
            many = work / "all"
            many.mkdir()
            for name in SCAFFOLDS:
                scaffold(many, name)
            for template in TEMPLATES:
                scaffold(many, f"my_{template}", template)
            for name in ("verify-all", "verify-all-kept"):  # cold, then with the checks' passes kept
                run = timed(["verify", *sorted(str(p) for p in many.iterdir()), "--json"], args.out, name,
                            limit_s=args.all_limit)
                finished = [f"{e['project']} {e['t']:.1f}" for e in run["events"] if e["type"] == "run_finished"]
                summary[name] = {"wall_s": run["wall_s"], "exit": run["exit"], "projects_finished_at": finished}
                print(f"all 12 ({name}): verify {run['wall_s']:.1f} s, exit {run['exit']}; projects finished at "
                      + ", ".join(finished))
        if "configs" in parts:
            # benchmarks/projects/many_configs: four autotuned kernels, 488 configs, each forced in turn (target <= 30 s)
            project = work / "many_configs"
            shutil.copytree(ROOT / "benchmarks" / "projects" / "many_configs", project,
                            ignore=shutil.ignore_patterns(".workbench"))
            runs = [timed(["verify", str(project), "--json", "--fresh-checks"], args.out, "verify-many-configs-cold")]
            summary["configs"] = {r["name"]: {"wall_s": r["wall_s"], "exit": r["exit"], "breakdown": breakdown(r)}
                                  for r in runs}
            print("many_configs: " + ", ".join(f"{r['name']} {r['wall_s']:.1f} s (exit {r['exit']})" for r in runs))
            report(runs)
        if "bench" in parts:
            project = scaffold(work, "rmsnorm")
            runs = [timed(["bench", str(project), "--json", "--no-plot"], args.out, "bench-rmsnorm-cold"),
                    timed(["bench", str(project), "--json", "--no-plot"], args.out, "bench-rmsnorm-kept"),
                    timed(["bench", str(project), "--json", "--no-plot", "--fresh-baselines", "--fresh-checks"],
                          args.out, "bench-rmsnorm-fresh")]
            summary["bench"] = {r["name"]: {"wall_s": r["wall_s"], "exit": r["exit"], "breakdown": breakdown(r)}
                                for r in runs}
            print("bench rmsnorm: " + ", ".join(f"{r['name']} {r['wall_s']:.1f} s (exit {r['exit']})" for r in runs))
            report(runs)
    finally:
        (args.out / "headless.json").write_text(json.dumps(summary, indent=1))
        shutil.rmtree(work, ignore_errors=True)
        for folder in SCRATCH:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
