"""Built-in command `ir`: what the compiler made of a kernel, without running it.

    workbench ir projects/rmsnorm                      every config's registers, spills, shared memory, occupancy
    workbench ir projects/rmsnorm --stage ptx          ... and the PTX of one config, each line with its kernel.py line
    workbench ir projects/rmsnorm --target sm_90       the same on a machine with no GPU (compiled for sm_90)

Compiles one case (the first benchmark case, or `--case K`) for every config, in a worker; nothing is
launched. Exit codes as `verify`: 2 when kernel.py cannot be imported or compiled, 3 when there is nothing
to compile for (no GPU and no `--target`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..commands import EXIT_OK, EXIT_UNUSABLE, Command, CommandError, Context, hookimpl
from ..core.events import CompiledKernels, KernelFacts, Problem
from ..core.project.history import read_records
from ..core.run.session import RunSpec, compile_for_target
from ..core.text import plural
from ..core.timing.compiler_facts import describe_facts, fmt_occupancy
from ..core.timing.ir import STAGE_TITLES, STAGES, IRUnavailable, annotated, parse_target, ptx_of, read_stage
from ..core.verdict import worst_problem
from ..reports.tables import text_table
from .verifying import open_session, resolve_projects


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", metavar="PROJECT", help="a project folder or kernel .py file")
    parser.add_argument("--stage", choices=STAGES, help="print this stage of the chosen config's IR "
                        "(ttir, ttgir, llir, ptx; sass with nvdisasm), each line with the kernel.py line it comes from")
    parser.add_argument("--case", type=int, action="append", metavar="K", dest="cases",
                        help="compile case K (its index in CASES); default: the first benchmark case")
    parser.add_argument("--config", metavar="K|TEXT", help="the config whose IR to print: its number in the "
                        "table, or text in its description (e.g. 'BLOCK_SIZE=2048'); default: the config the last "
                        "benchmark picked for this case, else the first")
    parser.add_argument("--kernel", metavar="NAME", help="the kernel whose IR to print, when a case launches several")
    parser.add_argument("--target", metavar="SM", help="compile for this GPU architecture (e.g. sm_90, sm_80, "
                        "sm_100) rather than this machine's GPU: works without a GPU")
    parser.add_argument("--json", action="store_true", help="print one JSON record instead of text")


def _run(args: argparse.Namespace, context: Context) -> int:
    if args.target is not None:
        try:
            parse_target(args.target)
        except ValueError as exc:
            raise CommandError(f"--target: {exc}") from None
    project = resolve_projects([args.project])[0]
    if args.target is not None:
        outcome = compile_for_target(project, args.target, args.cases)
    else:  # this machine's GPU, in the runner `verify` would use
        args.interpret, args.gpus = False, "all"
        with open_session(args, context, 1, keep_warm=False) as session:
            outcome = session.run(project, RunSpec(("ir",), case_indices=args.cases, record=False))
    compiled: list[CompiledKernels] = outcome.of_type(CompiledKernels)
    code, worst = worst_problem(outcome.of_type(Problem))
    kernels = [k for event in compiled for k in event.kernels]
    chosen, why = (choose(kernels, args.kernel, args.config, picked_configs(project)) if kernels else (None, ""))
    text_lines: list[tuple[str, str]] = []
    stage_error = ""
    if args.stage and chosen is not None:
        try:
            text_lines = annotated(args.stage, read_stage(chosen.files, args.stage, merged_tools(compiled)),
                                   project.kernel_path.name, ptx_of(chosen.files) if args.stage == "sass" else "")
        except IRUnavailable as exc:
            stage_error = str(exc)
    if args.json:
        print(json.dumps({"exit_code": code, "project": project.name,
                          "compiled": [c.to_dict() for c in compiled],
                          "problems": [p.to_dict() for p in outcome.of_type(Problem)],
                          "selected": chosen.__dict__ if chosen else None, "stage": args.stage,
                          "lines": [{"source_line": label, "text": text} for label, text in text_lines],
                          "stage_error": stage_error}, indent=2, default=str))
    else:
        report = format_compiled(project.name, compiled, chosen, why)
        print(report or f"{project.name}: nothing compiled")
        for problem in outcome.of_type(Problem):
            print(f"  {problem.kind}: {problem.message}")
        if args.stage and chosen is not None:
            print()
            print(stage_error or format_stage(args.stage, chosen, text_lines))
    if code == EXIT_OK and stage_error:
        code = EXIT_UNUSABLE
    if code == EXIT_OK and not kernels:
        if worst is None:
            print("  nothing compiled: the case launched no Triton kernel")
        code = EXIT_UNUSABLE
    return code


def picked_configs(project: Any) -> dict[tuple[int, str], str]:
    """(case, kernel) -> the config the latest benchmark of the project picked."""
    picked: dict[tuple[int, str], str] = {}
    try:
        records = read_records(project)
    except Exception:  # noqa: BLE001 - no history, or one that cannot be read: no default pick
        return picked
    for record in reversed(records):
        for report in record.data.get("autotune") or []:
            key = (report.get("case_index"), report.get("kernel"))
            if None not in key and report.get("picked"):
                picked.setdefault(key, report["picked"])
        if picked:
            break
    return picked


def choose(kernels: list[KernelFacts], kernel: str | None, config: str | None,
           picked: dict[tuple[int, str], str]) -> tuple[KernelFacts | None, str]:
    """The compiled kernel whose IR to show, and why that one."""
    candidates = [k for k in kernels if kernel is None or k.kernel == kernel]
    if not candidates:
        names = ", ".join(sorted({k.kernel for k in kernels}))
        raise CommandError(f"--kernel {kernel}: this case launches {names}")
    if config is not None:
        if config.isdigit():
            index = int(config)
            if not 1 <= index <= len(kernels):
                raise CommandError(f"--config {config}: the table lists configs 1 to {len(kernels)}")
            return kernels[index - 1], f"config {index}, as asked"
        matching = [k for k in candidates if config in k.config]
        if not matching:
            raise CommandError(f"--config {config!r}: no config of {candidates[0].kernel} contains it; they are: "
                               + "; ".join(k.config for k in candidates))
        return matching[0], "as asked"
    for facts in candidates:
        for case in facts.case_indices:
            if picked.get((case, facts.kernel)) == facts.config:
                return facts, "the config the last benchmark picked for this case"
    return candidates[0], "the first config (no benchmark pick on record for this case; --config to choose)"


def merged_tools(events: list[CompiledKernels]) -> dict[str, str]:
    tools: dict[str, str] = {}
    for event in events:
        tools.update(event.tools)
    return tools


def format_compiled(project: str, events: list[CompiledKernels], chosen: KernelFacts | None, why: str) -> str:
    lines = []
    number = 0
    for event in events:
        where = "compiled for this GPU" if event.compiled_here else "compiled for a named target; no GPU involved"
        lines.append(f"{project}  case {event.case_index}: {plural(len(event.kernels), 'compiled kernel')}, {event.target} "
                     f"({where})")
        rows = [("#", "kernel", "config", "regs", "spills", "smem", "occupancy", "signature")]
        for facts in event.kernels:
            number += 1
            shared = (facts.static_shared or 0) + facts.dynamic_shared
            occupancy = fmt_occupancy(facts)
            mark = "*" if facts is chosen else ""
            rows.append((f"{number}{mark}", facts.kernel, facts.config,
                         str(facts.registers) if facts.registers is not None else "?",
                         f"{facts.spill_bytes} B" if facts.spill_bytes is not None else "?",
                         f"{shared / 1024:.1f} KiB", occupancy, facts.signature))
        lines += text_table(rows)
        lines.append(f"  registers and spills: {event.facts_source}; occupancy: theoretical, per SM")
        lines += [f"  note: {note}" for note in event.notes]
    if chosen is not None:
        lines.append(f"  * {chosen.kernel} ({chosen.config}): {why}")
    return "\n".join(lines)


def format_stage(stage: str, facts: KernelFacts, lines: list[tuple[str, str]]) -> str:
    width = max((len(label) for label, _ in lines), default=0)
    head = [f"{STAGE_TITLES.get(stage, stage)} of {facts.kernel} ({facts.config}), {facts.target}; "
            f"left: the kernel.py line it comes from ({describe_facts(facts)})"]
    return "\n".join(head + [f"{label.rjust(width)} | {text}" for label, text in lines])


@hookimpl
def workbench_register_commands(register):
    register(Command(name="ir", help="registers, spills, occupancy and the IR of every config, compiled "
                                     "without running (--target sm_90 works without a GPU)",
                     add_arguments=_add_arguments, run=_run))
