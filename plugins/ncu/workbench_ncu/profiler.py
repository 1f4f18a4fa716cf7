"""The "ncu" profiler: one warm call of each case's Triton kernels under Nsight Compute.

Parent side (never imports torch, triton or the kernel): finds ``ncu``, names the project's
@triton.jit functions for ncu's kernel filter (read from the source, not imported), starts a
worker under

    ncu --profile-from-start off --nvtx --clock-control none --section SpeedOfLight
        --section LaunchStats --section Occupancy -k regex:^(kernel_a|kernel_b)$
        -o <project>/.workbench/profiles/<name>-<time> python -m workbench.core.run.child.worker

runs the stage ``workbench_ncu.stage:profile_stage`` in it, and reads the report back through
ncu's CSV export. ``options["full"]`` swaps the sections for ``--set full``. Unless
``options["lines"]`` is False, it also collects SourceCounters (warp-state samples per instruction,
with ``--import-source yes``) and reads each launch's hottest kernel.py lines from the source page
(``--page source --print-source cuda,sass``; see hotlines.py).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from workbench.commands import EXIT_ENVIRONMENT, EXIT_OK, EXIT_UNUSABLE
from workbench.core.events import (
    Event,
    Problem,
    WorkerReady,
)
from workbench.core.project import ConfigError, Project
from workbench.core.run import RunSpec, Session, discover_gpus
from workbench.core.verdict import worst_problem
from workbench.profiling import ProfileResult

from .events import ProfiledCase
from .hotlines import (
    SAMPLE_COUNT,
    Launch,
    SourceBlock,
    SourceFiles,
    SourcePageError,
    hot_lines,
    kernel_stalls,
    parse_source_page,
    tie_to_launches,
)
from .report import (
    EXTRA_METRICS,
    KernelRow,
    NcuReportError,
    RuleResult,
    describe_kernel,
    diagnose_log,
    kernel_record,
    parse_raw_page,
    parse_rules,
)

NCU_ENV = "WORKBENCH_NCU"  # path to the ncu executable, when it is not on PATH
STAGE = "workbench_ncu.stage:profile_stage"
DEFAULT_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy")
# Warp-state samples and instruction counts per instruction, so per source line; --set full has it. Its sampling
# metrics on the raw page also give each launch's stall reasons. Cost, measured on an H100 (ncu 2025.3.1), the
# rmsnorm project's six benchmark cases, in one process, alternating: 17.8 and 18.3 s with the lines (the
# source page's export included, about 2.2 s of it) against 14.9 s without (20.4 s on the first, cold run).
LINE_SECTIONS = ("SourceCounters",)
SOURCE_PAGE = ("--page", "source", "--print-source", "cuda,sass")
DEFAULT_TIMEOUT_S = 600.0  # replaying a large kernel for every metric pass is slow and silent
EXPORT_TIMEOUT_S = 300.0
PLUGIN_ROOT = Path(__file__).resolve().parents[1]  # so the worker imports this stage, installed or not


def find_ncu() -> str | None:
    return os.environ.get(NCU_ENV) or shutil.which("ncu")


def _is_jit_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr == "jit"
    return isinstance(target, ast.Name) and target.id == "jit"


def triton_kernel_names(kernel_path: Path) -> list[str]:
    """The @triton.jit functions defined in kernel.py and the .py files beside it, read from source.

    Raises SyntaxError when kernel.py itself does not parse.
    """
    names: list[str] = []
    siblings = sorted(p for p in kernel_path.parent.glob("*.py") if p != kernel_path)
    for path in [kernel_path, *siblings]:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, OSError, UnicodeDecodeError):
            if path == kernel_path:
                raise
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(_is_jit_decorator(d) for d in node.decorator_list):
                if node.name not in names:
                    names.append(node.name)
    return names


def kernel_filter(names: list[str]) -> str:
    return "regex:^(" + "|".join(re.escape(n) for n in names) + ")$"


def sections_of(full: bool, lines: bool) -> list[str]:
    return ["full"] if full else [*DEFAULT_SECTIONS, *(LINE_SECTIONS if lines else ())]


def ncu_command(ncu: str, report_base: Path, log_path: Path, kernel_regex: str, full: bool,
                lines: bool = False, import_source: bool = False) -> list[str]:
    sections = ["--set", "full"] if full else [arg for s in sections_of(False, lines) for arg in ("--section", s)]
    if lines and import_source:  # kernel.py goes into the report: ncu-ui shows its lines on any machine
        sections += ["--import-source", "yes"]
    return [ncu, "--profile-from-start", "off", "--nvtx", "--clock-control", "none", *sections,
            "--metrics", ",".join(EXTRA_METRICS), "-k", kernel_regex, "--target-processes", "all",
            "-f", "-o", str(report_base), "--log-file", str(log_path)]


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(r"Version (\S+)", out)
    return match.group(1) if match else ""


def ncu_help(ncu: str) -> str:
    try:
        return subprocess.run([ncu, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def lines_refusal(help_text: str, version: str) -> str:
    """Why this ncu cannot give hot lines ("" when it can): an ncu whose --print-source has no "cuda,sass" view
    cannot tie counters to source lines, so it profiles without them."""
    if "cuda,sass" in help_text:
        return ""
    return (f"not available: this ncu ({version or 'version unknown'}) cannot print counters per source line (its "
            "--print-source has no cuda,sass view); a newer Nsight Compute can")


def export_csv(ncu: str, report: Path, *page_args: str) -> str:
    """`ncu --import REPORT --csv ...`'s stdout; raises NcuReportError with ncu's reason."""
    try:
        out = subprocess.run([ncu, "--import", str(report), "--csv", "--print-units", "base", *page_args],
                             capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NcuReportError(f"ncu --import {report.name} failed: {exc}") from None
    if out.returncode != 0:
        reason = (out.stderr.strip() or out.stdout.strip()).splitlines()
        raise NcuReportError(f"ncu --import {report.name} failed: {reason[-1] if reason else out.returncode}")
    return out.stdout


def _problem_line(problem: Problem) -> str:
    where = f" [{problem.location}]" if problem.file and problem.line else ""
    return problem.message + where


def failure_of_run(events: list[Event], log_text: str, kernel_regex: str) -> ProfileResult | None:
    """Why a profiling run failed, in one line, from the worker's events and ncu's log; None if it did not."""
    problems = [e for e in events if isinstance(e, Problem)]
    if "ERR_NVGPUCTRPERM" in log_text:  # ncu may end the worker for it: say why, not that it died
        return ProfileResult.failure(*diagnose_log(log_text, kernel_regex))
    if not any(isinstance(e, WorkerReady) for e in events):  # ncu or the worker never came up
        diagnosis = diagnose_log(log_text, kernel_regex)
        if diagnosis is not None:
            return ProfileResult.failure(*diagnosis)
        reason = problems[0].message if problems else "the worker did not start under ncu"
        return ProfileResult.failure(EXIT_ENVIRONMENT, reason)
    code, problem = worst_problem(problems)
    if problem is not None:
        return ProfileResult.failure(code, _problem_line(problem))
    diagnosis = diagnose_log(log_text, kernel_regex)
    return ProfileResult.failure(*diagnosis) if diagnosis is not None else None


def run_ncu(project: Project, options: dict[str, Any]) -> ProfileResult:
    """The Profiler.run of "ncu" (options: cases, full, timeout_s, on_event; see workbench.profiling)."""
    ncu = find_ncu()
    if ncu is None:
        gpu_too = "" if discover_gpus() else "; it profiles an NVIDIA GPU, and this machine shows none"
        return ProfileResult.failure(EXIT_ENVIRONMENT, "ncu (Nsight Compute) is not on PATH: install Nsight Compute "
                                                       f"(it comes with the CUDA toolkit) or set {NCU_ENV}{gpu_too}")
    try:
        names = triton_kernel_names(project.kernel_path)
    except SyntaxError as exc:
        return ProfileResult.failure(EXIT_UNUSABLE, f"{project.kernel_path}:{exc.lineno}: kernel.py has a syntax "
                                                    f"error: {exc.msg}")
    except OSError as exc:
        return ProfileResult.failure(EXIT_UNUSABLE, f"cannot read {project.kernel_path}: {exc}")
    if not names:
        return ProfileResult.failure(EXIT_UNUSABLE, f"{project.kernel_path}: no @triton.jit function in kernel.py or "
                                                    "beside it, so nothing for ncu to profile")
    try:
        project.load_config()
    except ConfigError as exc:
        return ProfileResult.failure(EXIT_UNUSABLE, str(exc))

    regex = kernel_filter(names)
    full = bool(options.get("full"))
    out_dir = project.ensure_state_dir() / "profiles"
    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / f"{project.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    report, log_path = Path(f"{base}.ncu-rep"), Path(f"{base}.log")
    cache_dir = project.state_dir / "triton-cache-profile"  # not the live loop's cache, which a save clears
    shutil.rmtree(cache_dir, ignore_errors=True)
    lines = bool(options.get("lines", True))
    version = ncu_version(ncu)
    help_text = ncu_help(ncu) if lines else ""
    lines_refused = lines_refusal(help_text, version) if lines else ""
    lines = lines and not lines_refused
    command = ncu_command(ncu, base, log_path, regex, full, lines, import_source="--import-source" in help_text)

    on_event: Callable[[Event], None] | None = options.get("on_event")
    timeout = float(options.get("timeout_s") or DEFAULT_TIMEOUT_S)
    # One worker started under ncu, its Triton cache apart from the project's; Triton keeps each instruction's
    # kernel.py line unless told not to: the hot lines need them.
    spec = RunSpec((STAGE,), case_indices=options.get("cases"), timeout_s=timeout, record=False, launcher=command,
                   env={"PYTHONPATH": str(PLUGIN_ROOT), "TRITON_DISABLE_LINE_INFO": "0"}, cache_dir=str(cache_dir))
    with Session() as session:
        events = session.run(project, spec, on_event).events
    log_text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.is_file() else ""
    failure = failure_of_run(events, log_text, regex)
    if failure is not None:
        return failure
    if not report.is_file():
        return ProfileResult.failure(EXIT_ENVIRONMENT, f"ncu wrote no report (its log: {log_path})")
    try:
        rows = parse_raw_page(export_csv(ncu, report, "--page", "raw"))
        rules = parse_rules(export_csv(ncu, report, "--page", "details"))
    except NcuReportError as exc:
        return ProfileResult.failure(EXIT_ENVIRONMENT, str(exc), str(report))
    if not rows:
        return ProfileResult.failure(EXIT_ENVIRONMENT, f"ncu profiled no kernel: none launched in the profiled "
                                                       f"call matched {regex}", str(report))
    source = read_source_lines(ncu, report, rows) if lines else None
    if lines_refused:
        source = SourceLines(collected=False, problem=lines_refused)
    return summarize(project, events, rows, rules, report, log_path, version, full, regex, source)


@dataclass
class SourceLines:
    """What the source page gave: each launch's blocks by launch id, or why there are none."""

    collected: bool = True  # SourceCounters was asked of ncu
    by_launch: dict[int, list[SourceBlock]] = field(default_factory=dict)
    problem: str = ""  # "not available: <why>", shown instead of the hot lines


def source_lines_of(page: str, rows: list[KernelRow]) -> SourceLines:
    """The source page's export tied to the raw page's launches (rows), or the reason it cannot be."""
    try:
        blocks = parse_source_page(page)
        if not blocks:
            return SourceLines(problem="not available: ncu's source page names no source file: the kernel was "
                                       "compiled without line info (is TRITON_DISABLE_LINE_INFO=1 set?)")
        if not any(b.has_samples for b in blocks):
            return SourceLines(problem="not available: the report holds no warp-state samples (the SourceCounters "
                                       "section was not collected)")
        launches = [Launch(id=r.id, name=r.name, samples=r.number(SAMPLE_COUNT)) for r in rows]
        return SourceLines(by_launch=tie_to_launches(blocks, launches))
    except SourcePageError as exc:
        return SourceLines(problem=f"not available: {exc}")


def read_source_lines(ncu: str, report: Path, rows: list[KernelRow]) -> SourceLines:
    try:
        page = export_csv(ncu, report, *SOURCE_PAGE)
    except NcuReportError as exc:
        return SourceLines(problem=f"not available: ncu could not export the source page ({exc})")
    return source_lines_of(page, rows)


def add_source_lines(record: dict[str, Any], row: KernelRow, source: SourceLines | None, root: Path,
                     files: SourceFiles) -> None:
    """A launch's warp samples, stall reasons and hot lines, into its record (nothing when not asked for)."""
    if source is None:
        return
    samples = row.number(SAMPLE_COUNT)
    record["warp_samples"] = int(samples) if samples is not None else None
    record["stall_reasons"] = kernel_stalls(row.metrics)
    blocks = source.by_launch.get(row.id)
    record["hot_lines"] = hot_lines(blocks, root, files) if blocks is not None else None
    if blocks is None:
        record["hot_lines_unavailable"] = source.problem or "not available: the source page has no lines of it"


def summarize(project: Project, events: list[Event], rows: list[KernelRow], rules: list[RuleResult],
              report: Path, log_path: Path, version: str, full: bool, regex: str,
              source: SourceLines | None = None) -> ProfileResult:
    """The summary lines and metrics of a profile: the report's kernels, each under the case that launched it
    (with its hot lines when `source` holds the source page's)."""
    ready = next((e for e in events if isinstance(e, WorkerReady)), None)
    device = ready.device_name if ready else "?"
    cases = [e for e in events if isinstance(e, ProfiledCase)]
    by_range = {c.nvtx_range: c for c in cases}
    lines_asked = source is not None
    sections = sections_of(full, lines_asked and source.collected)
    what = "--set full" if full else "sections " + ", ".join(sections)
    files = SourceFiles()
    lines = [f"{project.name}: Nsight Compute {version or '?'} on {device}; one warm call per case, "
             f"clocks as they run (--clock-control none), {what}"]
    records = []
    for case in cases:
        lines.append(f"case {case.case_index}  {case.label}" if case.case_index is not None else case.label)
        mine = [r for r in rows if r.case_range == case.nvtx_range]
        if not mine:
            lines.append(f"  no kernel matching {regex} ran in this call")
        for row in mine:
            record = kernel_record(row, case.case_index, case.label, case.kernels, rules)
            add_source_lines(record, row, source, project.root, files)
            records.append(record)
            lines += describe_kernel(record)
    stray = [r for r in rows if r.case_range not in by_range]
    if stray:  # launched outside every case's range: should not happen, shown rather than hidden
        lines.append("outside the cases' NVTX ranges")
    for row in stray:
        record = kernel_record(row, None, "", [], rules)
        add_source_lines(record, row, source, project.root, files)
        records.append(record)
        lines += describe_kernel(record)
    lines.append("the .ncu-rep report opens in the Nsight Compute GUI (ncu-ui REPORT) for the full story")
    metrics = {"tool": "ncu", "version": version, "device": device, "report": str(report), "log": str(log_path),
               "sections": "full" if full else sections, "kernel_filter": regex, "lines": lines_asked,
               "kernels": records}
    if lines_asked and source.problem:
        metrics["hot_lines_unavailable"] = source.problem
    return ProfileResult(exit_code=EXIT_OK, summary_lines=lines, report_path=str(report), metrics=metrics)
