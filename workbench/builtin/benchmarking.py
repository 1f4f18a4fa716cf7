"""Built-in command `bench`: verify, then time every benchmark case (headless; scripts, CI with a GPU).

    workbench bench projects/rmsnorm            the sweep as a table, plus a plot under .workbench/
    workbench bench projects/rmsnorm --json     the same as one JSON record
    workbench bench --baseline base.json --fail-slower 5%   a regression gate (exit 4)
    workbench bench projects/rmsnorm_train --mode bwd    a training kernel's backward alone

The worker refuses the Triton interpreter before verifying anything (exit 3), and
never times a kernel that failed verification (exit 1). Every case's time is compared with the
previous timed run of the project and with a `--baseline` run, with an interval (core/timing/noise.py).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from ..commands import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_UNUSABLE,
    Command,
    CommandError,
    Context,
    hookimpl,
)
from ..core.events import BenchResult, DeviceFacts, LogLine, Problem
from ..core.live.changes import BaselineError, Comparison, compare_timings, load_baseline, previous_timed, timings_of
from ..core.project.config import BENCH_MODES
from ..core.project.history import RunRecord, read_records, set_pin
from ..core.run.session import RunOutcome, Session
from ..core.stage import BENCH_STAGES
from ..core.verdict import with_gate
from ..reports import comparison_lines, format_bench, projects_summary
from .verifying import add_run_arguments, overall_exit, resolve_projects, run_many

MEASURE_TIMEOUT_S = 300.0


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--plot", type=Path, metavar="FILE",
                        help="save the sweep's plot here (default: <project>/.workbench/bench-<run id>.png)")
    parser.add_argument("--no-plot", action="store_true", help="save no plot")
    parser.add_argument("--fresh-baselines", action="store_true",
                        help="time reference_fn and torch.compile(reference_fn) again rather than reuse an earlier "
                             "run's times (kept while reference_fn, get_inputs, the case, the GPU, torch, Triton and "
                             "the timing method are the same)")
    parser.add_argument("--mode", choices=BENCH_MODES,
                        help="a training kernel: time its forward (fwd), its backward alone (bwd) or both (full, "
                             "the default; workbench.toml's [bench] mode); the baselines are timed the same way")
    parser.add_argument("--baseline", metavar="RUN|FILE",
                        help="also compare every case's time with this run: an id, id prefix or index from "
                             "`workbench history`, or a `workbench bench --json` output or run record file "
                             "(the previous timed run is always compared)")
    parser.add_argument("--fail-slower", type=percent_argument, metavar="PCT",
                        help="exit 4 when a case is slower than the baseline (without --baseline: the previous "
                             "timed run) beyond noise and by more than PCT percent ('5%%' or '5'); only where "
                             "the run would otherwise exit 0")


def percent_argument(text: str) -> float:
    """An argparse `type` for a percentage ("5%" or "5", 0 or more): the fraction (0.05), else exit 2."""
    number = text.strip()
    number = number[:-1].strip() if number.endswith("%") else number
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage: give a number, 0 or more, such as 5% or 5")
    return value / 100.0


def _run(args: argparse.Namespace, context: Context) -> int:
    if args.interpret:
        raise CommandError("--interpret: the Triton interpreter is never timed (its times say nothing about a "
                           "kernel's speed); use `workbench verify --interpret` for correctness", EXIT_ENVIRONMENT)
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise CommandError(f"--plot {args.plot}: the plot is a PNG image; give a file name ending in .png")
    baselines = read_baselines(args.projects, args.baseline) if args.baseline else {}  # before anything runs
    outcomes = run_many(args, context, list(BENCH_STAGES))
    records = []
    slower = False
    for outcome in outcomes:
        plot_path, plot_line = None, ""
        if not args.no_plot and outcome.of_type(BenchResult):
            plot_path, plot_line = save_plot(outcome, args.plot if len(outcomes) == 1 else None)
        comparisons = compare_outcome(outcome, baselines.get(outcome.project.root))
        gated = comparisons[-1] if args.fail_slower is not None and comparisons else None
        failing = gated.speed.slower_than(args.fail_slower) if gated is not None and gated.speed else []
        slower = slower or bool(failing)
        if args.json:
            gate = None if args.fail_slower is None else {
                "threshold_percent": args.fail_slower * 100, "against": gated.to_dict()["against"] if gated else None,
                "failed": [c.to_dict() for c in failing]}
            records.append({**outcome.to_record(), "plot": str(plot_path) if plot_path else None,
                            "comparisons": [c.to_dict() for c in comparisons], "regression_gate": gate})
        else:
            text = format_bench(outcome, verbose=args.verbose)
            lines = [line for c in comparisons
                     for line in comparison_lines(c, args.fail_slower if c is gated else None)]
            if args.fail_slower is not None and gated is None:
                lines.append(f"  regression gate (--fail-slower {args.fail_slower * 100:g}%): this run timed no "
                             "case, so nothing failed it")
            if text:
                print(text + (f"\n  {plot_line}" if plot_line else "") + "".join(f"\n{line}" for line in lines))
                print()
    code = with_gate(overall_exit(outcomes), slower)
    if args.json:
        print(json.dumps({"exit_code": code, "projects": records}, indent=2, allow_nan=False, default=str))
    elif len(outcomes) > 1:
        print(projects_summary(outcomes, code))
    return code


# -- comparisons with earlier runs --------------------------------------------------------

def read_baselines(paths: list[str], ref: str) -> dict[Path, tuple[RunRecord, str]]:
    """--baseline for every project the command will run (`paths`, resolved as run_many resolves them), by
    project folder: (the record, where it came from). One that cannot be used is a usage error (exit 2), said
    before anything runs or is written."""
    found = {}
    for project in resolve_projects(paths):
        records = read_records(project)
        try:
            found[project.root] = load_baseline(project, ref, records)
        except BaselineError as exc:
            raise CommandError(str(exc), EXIT_UNUSABLE) from None
        baseline = found[project.root][0]
        if any(r.id == baseline.id for r in records):  # a run of the history: the limits never remove it now
            set_pin(project, baseline.id, "a --baseline")
    return found


def compare_outcome(outcome: RunOutcome, baseline: tuple[RunRecord, str] | None) -> list[Comparison]:
    """A run's timed cases against the project's previous timed run, and against the baseline when one is named
    (last: the regression gate reads the last comparison). [] when the run timed nothing."""
    after = timings_of(outcome.of_type(BenchResult), outcome.of_type(DeviceFacts))
    if not after:
        return []
    ready = outcome.ready
    device = ready.device_name if ready else ""
    own = outcome.record.id if outcome.record else ""
    comparisons = [compare_timings("previous timed run", previous_timed(read_records(outcome.project), own),
                                   after, device)]
    if baseline is not None:
        record, where = baseline
        comparisons.append(compare_timings("baseline", record, after, device, where=where))
    return comparisons


# -- the plot ----------------------------------------------------------------------------

def default_plot_path(outcome: RunOutcome) -> Path:
    run_id = outcome.record.id if outcome.record else time.strftime("%Y%m%d-%H%M%S")
    return outcome.project.state_dir / f"bench-{run_id}.png"


def save_plot(outcome: RunOutcome, path: Path | None = None) -> tuple[Path | None, str]:
    """Time and GB/s against size for kernel, reference and torch.compile, as Triton's perf_report draws.

    Returns (path, the line to print). matplotlib is optional: without it, one line says so.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, "plot: not drawn (it needs matplotlib: pip install matplotlib)"
    results: list[BenchResult] = outcome.of_type(BenchResult)
    facts = next(iter(outcome.of_type(DeviceFacts)), None)
    sizes = [r.bytes_moved for r in results]
    by_size = all(sizes) and len(set(sizes)) == len(sizes)
    if by_size:  # lines join the cases in order of size, as a sweep
        results = sorted(results, key=lambda r: r.bytes_moved)
    xs = [r.bytes_moved / 1e6 for r in results] if by_size else list(range(len(results)))
    figure, (time_axis, rate_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = (("kernel", "kernel"), ("reference", "reference_fn"), ("compiled", "torch.compile(reference_fn)"))
    for attr, name in series:
        timed = [(x, r, getattr(r, attr)) for x, r in zip(xs, results) if getattr(r, attr) is not None]
        if timed:
            time_axis.plot([x for x, _, _ in timed], [t.median_ms for _, _, t in timed], marker="o", label=name)
        rates = [(x, bytes_per(r, t)) for x, r, t in timed if bytes_per(r, t) is not None]
        if rates:
            rate_axis.plot([x for x, _ in rates], [gbps for _, gbps in rates], marker="o", label=name)
    for x, r in zip(xs, results):  # which case each point is
        if r.kernel is not None:
            time_axis.annotate(str(r.case_index), (x, r.kernel.median_ms), textcoords="offset points",
                               xytext=(4, -10), fontsize=7)
    if facts is not None and facts.copy_gbps:
        rate_axis.axhline(facts.copy_gbps, linestyle="--", color="grey", label="measured copy ceiling")
    for axis, ylabel in ((time_axis, "median time (ms)"), (rate_axis, "GB/s")):
        axis.set_xlabel("bytes moved per call (MB)" if by_size else "benchmark case")
        axis.set_ylabel(ylabel)
        if by_size:
            axis.set_xscale("log")
        else:
            axis.set_xticks(xs, [r.label for r in results], rotation=30, ha="right", fontsize=7)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    time_axis.set_yscale("log")
    gpu = facts.name if facts else "GPU"
    figure.suptitle(f"{outcome.project.name} on {gpu}")
    figure.tight_layout()
    target = path or default_plot_path(outcome)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(target, dpi=120)
    except OSError as exc:
        return None, f"plot: could not be saved to {target}: {exc}"
    finally:
        plt.close(figure)
    return target, f"plot: {target}"


def bytes_per(result: BenchResult, timing: Any) -> float | None:
    """GB/s of any of a case's timings, by the case's own byte count."""
    if not result.bytes_moved or timing is None or timing.median_ms <= 0:
        return None
    return result.bytes_moved / (timing.median_ms * 1e-3) / 1e9


# -- `doctor --measure` --------------------------------------------------------------------

def measure_ceilings(interpret: bool = False) -> tuple[list[tuple[str, str]], int]:
    """Re-measure this GPU's ceilings in a worker; returns doctor rows and an exit code."""
    from ..core.timing.device import Ceilings, describe_ceilings

    events: list[Any] = []
    with Session(interpret=interpret) as session:
        session.run_stage("measure_ceilings", events.append, timeout_s=MEASURE_TIMEOUT_S)
    problems = [e for e in events if isinstance(e, Problem)]
    facts = next((e for e in events if isinstance(e, DeviceFacts)), None)
    if problems or facts is None or facts.copy_gbps is None:
        why = problems[0].message if problems else "the worker reported no measurement"
        return [("ceilings", f"NOT MEASURED: {why}")], EXIT_ENVIRONMENT
    ceilings = Ceilings(gpu=facts.name, copy_gbps=facts.copy_gbps, matmul_tflops=facts.matmul_tflops or 0.0,
                        measured_at=facts.ceilings_measured_at, torch_version=facts.torch_version,
                        driver=facts.driver)
    rows = [("ceilings", "re-measured: " + describe_ceilings(ceilings))]
    rows += [("", e.text) for e in events if isinstance(e, LogLine) and e.stream == "stdout"]
    return rows, EXIT_OK


def cached_ceilings_row(device_name: str) -> tuple[str, str]:
    from ..core.timing.device import (
        CeilingsCacheError,
        ceilings_path,
        describe_ceilings,
        read_ceilings,
    )

    try:
        ceilings = read_ceilings(device_name)
    except CeilingsCacheError as exc:
        return "ceilings", f"cache unusable ({exc}); `workbench doctor --measure` re-measures"
    if ceilings is None:
        return "ceilings", f"not measured yet (the first `workbench bench` does, or `workbench doctor --measure`); " \
                           f"cache: {ceilings_path(device_name)}"
    return "ceilings", describe_ceilings(ceilings)


@hookimpl
def workbench_register_commands(register):
    register(Command(name="bench", help="verify, then time kernels against the reference and torch.compile",
                     add_arguments=_add_arguments, run=_run,
                     description="Verify, then time every benchmark case of each project: median and spread, "
                                 "the reference and torch.compile(reference) in the same run, GB/s and TFLOP/s "
                                 "against this GPU's measured ceilings, and what the autotuner picked. "
                                 "Needs a CUDA GPU (exit 3 without one)."))
