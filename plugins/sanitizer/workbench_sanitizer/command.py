"""The `workbench sanitize` command: a project's cases under compute-sanitizer, reports per case.

    workbench sanitize projects/rmsnorm                      memcheck on the verification cases
    workbench sanitize projects/rmsnorm --tool initcheck     uninitialised reads (repeat --tool for more)
    workbench sanitize projects/rmsnorm --all-cases          the benchmark cases too (slow)

Parent side (never imports torch, triton or the kernel): the worker runs under
``compute-sanitizer --tool TOOL``, whose reports arrive on the worker's event stream, in order,
between the stage's "case K begins" and "case K done" events: that is how each report is tied
to its case. ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` gives every tensor its own allocation, so an
access past a tensor's end is out of bounds for the tool too, not a read of the allocator's pool.

Exit codes: 0 no report, 1 the tool reported errors, 2 the project is unusable, 3 an environment
problem (compute-sanitizer missing, no GPU, the tool failed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.commands import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNUSABLE,
    Command,
    CommandError,
    Context,
    Progress,
)
from workbench.core.events import (
    Event,
    LogLine,
    Problem,
    StageChanged,
    WorkerReady,
)
from workbench.core.project import ConfigError, Project, ProjectError
from workbench.core.run import RunSpec, Session, discover_gpus
from workbench.core.verdict import worst_problem

from .events import SanitizedCase, SanitizePlan
from .report import PREFIX, group_reports, parse_output

SANITIZER_ENV = "WORKBENCH_COMPUTE_SANITIZER"  # path to compute-sanitizer, when it is not on PATH
STAGE = "workbench_sanitizer.stage:sanitize_stage"
TOOLS = ("memcheck", "initcheck", "racecheck")
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_PRINT_LIMIT = 10000
MAX_RESTARTS = 3
PLUGIN_ROOT = Path(__file__).resolve().parents[1]


def find_sanitizer() -> str | None:
    return os.environ.get(SANITIZER_ENV) or shutil.which("compute-sanitizer")


def sanitizer_command(exe: str, tool: str, print_limit: int) -> list[str]:
    command = [exe, "--tool", tool, "--show-backtrace", "device", "--print-limit", str(print_limit),
               "--target-processes", "application-only", "--require-cuda-init", "no"]
    if tool == "memcheck":  # end only the faulting kernel, so the next cases run in the same worker
        command += ["--destroy-on-device-error", "kernel"]
    return command


@dataclass
class CaseOutcome:
    case_index: int | None  # None: reports outside any case (worker start-up)
    label: str
    lines: list[str] = field(default_factory=list)  # the tool's lines while this case ran
    error: str = ""  # kernel_fn raised, or the worker died on this case
    done: bool = False

    def to_dict(self) -> dict[str, Any]:
        parsed = parse_output(self.lines)
        return {"case_index": self.case_index, "label": self.label, "reports": len(parsed.reports),
                "error": self.error,
                "groups": [{"headline": g.headline, "kernel": g.kernel, "location": g.location, "count": g.count,
                            "summary": g.describe()} for g in group_reports(parsed.reports)]}


@dataclass
class ToolRun:
    tool: str
    cases: list[CaseOutcome] = field(default_factory=list)
    all_lines: list[str] = field(default_factory=list)
    failure: tuple[int, str] | None = None  # (exit code, one line) when the run itself failed
    device: str = ""
    log_path: Path | None = None

    @property
    def report_count(self) -> int:
        return sum(len(parse_output(c.lines).reports) for c in self.cases)

    @property
    def exit_code(self) -> int:
        if self.failure is not None:
            return self.failure[0]
        if self.report_count or any(c.error for c in self.cases):
            return EXIT_FAILED
        return EXIT_OK


def attribute(events: list[Event], run: ToolRun) -> list[int]:
    """Fold one worker's events into `run`: each tool line to the case running then. Returns the plan."""
    plan: list[int] = []
    labels: dict[int, str] = {}
    by_index = {c.case_index: c for c in run.cases}
    current: CaseOutcome | None = None

    def outcome(index: int | None, label: str) -> CaseOutcome:
        if index not in by_index:
            by_index[index] = CaseOutcome(index, label)
            run.cases.append(by_index[index])
        return by_index[index]

    for event in events:
        if isinstance(event, WorkerReady):
            run.device = event.device_name
        elif isinstance(event, SanitizePlan):
            plan, labels = list(event.cases), dict(zip(event.cases, event.labels))
        elif isinstance(event, StageChanged) and event.stage == "sanitizing" and event.case_index is not None:
            current = outcome(event.case_index, labels.get(event.case_index, event.detail))
        elif isinstance(event, SanitizedCase):
            done = outcome(event.case_index, event.label)
            done.error, done.done, current = event.error, True, None
        elif isinstance(event, LogLine) and event.stream == "stdout" and event.text.startswith(PREFIX):
            run.all_lines.append(event.text)
            (current or outcome(None, "outside the cases (worker start-up, exit)")).lines.append(event.text)
        elif isinstance(event, Problem) and event.kind == "crash" and current is not None and not current.error:
            current.error = event.message
            current.done = True
    return plan


def _failure(events: list[Event]) -> tuple[int, str] | None:
    """A problem that stopped the tool's run (the environment's, or a project it cannot use): its exit code and line."""
    code, problem = worst_problem(e for e in events if isinstance(e, Problem))
    if problem is None or code not in (EXIT_ENVIRONMENT, EXIT_UNUSABLE):
        return None
    where = f" [{problem.location}]" if problem.line else ""
    return code, problem.message + where


def run_tool(project: Project, tool: str, exe: str, args: argparse.Namespace, on_event: Any = None) -> ToolRun:
    """Every chosen case under one tool, resuming in a fresh worker when one dies."""
    run = ToolRun(tool=tool)
    cache_dir = project.ensure_state_dir() / "triton-cache-sanitizer"
    shutil.rmtree(cache_dir, ignore_errors=True)
    env = {"PYTHONPATH": str(PLUGIN_ROOT), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    indices: list[int] | None = args.cases
    for _attempt in range(MAX_RESTARTS + 1):
        # One worker under the tool (a fresh one each attempt), its Triton cache apart from the project's.
        spec = RunSpec((STAGE,), case_indices=indices, options={"all_cases": args.all_cases},
                       timeout_s=args.timeout or DEFAULT_TIMEOUT_S, record=False,
                       launcher=sanitizer_command(exe, tool, args.print_limit), env=env, cache_dir=str(cache_dir))
        with Session() as session:
            events = session.run(project, spec, on_event).events
        plan = attribute(events, run)
        run.failure = _failure(events)
        if run.failure is None and not any(isinstance(e, WorkerReady) for e in events):
            messages = parse_output(run.all_lines).tool_messages
            reason = messages[0] if messages else next((e.message for e in events if isinstance(e, Problem)),
                                                       "the worker did not start under compute-sanitizer")
            run.failure = (EXIT_ENVIRONMENT, f"compute-sanitizer: {reason}")
        if run.failure is not None:
            break
        done = {c.case_index for c in run.cases if c.done}
        remaining = [i for i in plan if i not in done]
        if not remaining:
            break
        indices = remaining  # the worker died mid-way: the cases it never reached, in a fresh one
    return run


def save_log(project: Project, run: ToolRun) -> Path:
    folder = project.ensure_state_dir() / "sanitizer"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run.tool}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    path.write_text("\n".join(run.all_lines) + "\n", encoding="utf-8")
    return path


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def format_run(project: Project, run: ToolRun, verbose: bool) -> list[str]:
    cases = [c for c in run.cases if c.case_index is not None]
    lines = [f"{project.name}: compute-sanitizer {run.tool} on {run.device or '?'}, {len(cases)} cases"]
    width = max((len(c.label) for c in cases), default=0)
    for case in sorted(run.cases, key=lambda c: (c.case_index is None, c.case_index or 0)):
        parsed = parse_output(case.lines)
        if case.case_index is None and not parsed.reports:
            continue
        verdict = plural(len(parsed.reports), "report") if parsed.reports else ("clean" if not case.error else "")
        name = f"case {case.case_index:<3} {case.label:<{width}}" if case.case_index is not None else case.label
        lines.append(f"  {name}  {verdict}{'  ' + case.error if case.error else ''}".rstrip())
        for group in group_reports(parsed.reports):
            lines.append(f"      {group.describe()}")
            if verbose:
                lines += [f"        {d}" for d in group.example.details]
    total = parse_output(run.all_lines)
    unprinted = f" (+{total.unprinted} over --print-limit, not attributed)" if total.unprinted else ""
    bad = sum(1 for c in cases if parse_output(c.lines).reports or c.error)
    lines.append(f"  {run.tool}: {plural(run.report_count, 'report')}{unprinted} in {bad} of {len(cases)} cases; "
                 f"the tool's log: {run.log_path}")
    return lines


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?", help="project folder or kernel .py file (default: this folder)")
    parser.add_argument("--tool", action="append", choices=TOOLS, dest="tools",
                        help="memcheck (default: out-of-bounds and misaligned accesses), initcheck (reads of "
                             "uninitialised memory), racecheck (shared-memory races); repeatable")
    parser.add_argument("--case", type=int, action="append", metavar="K", dest="cases",
                        help="only case K (its index in CASES); repeatable (default: the verification cases)")
    parser.add_argument("--all-cases", action="store_true", help="the benchmark cases too (large: slow)")
    parser.add_argument("--print-limit", type=int, default=DEFAULT_PRINT_LIMIT, metavar="N",
                        help=f"reports the tool prints per run (default {DEFAULT_PRINT_LIMIT})")
    parser.add_argument("--timeout", type=float, metavar="S", help="give up when the worker is silent S seconds")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="each report group's full text")


def _run(args: argparse.Namespace, context: Context) -> int:
    exe = find_sanitizer()
    if exe is None:
        gpu_too = "" if discover_gpus() else "; it checks kernels on an NVIDIA GPU, and this machine shows none"
        raise CommandError("compute-sanitizer is not on PATH: it comes with the CUDA toolkit; install it or set "
                           f"{SANITIZER_ENV}{gpu_too}", EXIT_ENVIRONMENT)
    try:
        project = Project.open(args.project or ".")
        project.load_config()
    except (ProjectError, ConfigError) as exc:
        raise CommandError(str(exc)) from None

    progress = Progress(enabled=sys.stderr.isatty() and not args.json)
    runs = []
    for tool in args.tools or ["memcheck"]:
        try:
            run = run_tool(project, tool, exe, args, progress)
        finally:
            progress.clear()
        if run.failure is not None:
            raise CommandError(run.failure[1], run.failure[0])
        run.log_path = save_log(project, run)
        runs.append(run)
        if not args.json:
            print("\n".join(format_run(project, run, args.verbose)), flush=True)
    code = max(run.exit_code for run in runs)
    if args.json:
        print(json.dumps({"project": project.name, "exit_code": code, "tools": [
            {"tool": r.tool, "device": r.device, "log": str(r.log_path), "reports": r.report_count,
             "exit_code": r.exit_code, "cases": [c.to_dict() for c in r.cases]} for r in runs]}, indent=2))
    return code


SANITIZE = Command(name="sanitize", help="run the kernel's cases under compute-sanitizer (memcheck, initcheck, "
                                         "racecheck); reports per case", add_arguments=_add_arguments, run=_run)
