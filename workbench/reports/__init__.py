"""Verification outcomes as text tables, JSON records and JUnit XML; benchmark outcomes in reports/bench.py."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from ..core.events import (
    CaseResult,
    LogLine,
    Problem,
    Requeued,
)
from ..core.run.session import RunOutcome
from ..core.verify.compared import describe_compared
from ..core.verify.forced_configs import NOT_FORCED
from ..core.text import (
    MISSING,
    fmt_case_err,
    fmt_err,
    fmt_value,
    source_lines,
)
from ..core.verdict import CASE_RANK, GPU_ONLY_KIND

# The benchmark's reports, for `from workbench.reports import format_bench` (the public API plugins use).
from .bench import (  # noqa: F401
    autotune_lines,
    bench_table,
    comparison_lines,
    compiled_lines,
    format_bench,
    kinds_table,
    timing_change,
)
from . import grouping
from .tables import gpus_used, text_table  # noqa: F401 - text_table: the commands' too

STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "skip"}






def relpath(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def mode_line(outcome: RunOutcome) -> str:
    ready = outcome.ready
    if ready is None:
        # a project refused before any worker was asked for (a bad workbench.toml, an unreadable kernel.py) is
        # not a worker that failed to start
        refused = any(p.kind in ("config", "import") for p in outcome.of_type(Problem))
        return "not run: the project could not be used (below)" if refused else "worker did not start"
    if ready.mode == "interpreter":
        return (f"CPU — Triton interpreter ({ready.reason}); results are correctness only, never timings "
                f"| torch {ready.torch_version}, triton {ready.triton_version}")
    used = gpus_used(outcome.of_type(CaseResult))
    where = f" | on GPU {used[0]}" if len(used) == 1 else f" | on GPUs {', '.join(used)}" if used else ""
    return f"GPU {ready.device_name} | torch {ready.torch_version}, triton {ready.triton_version}{where}"


def seed_line(outcome: RunOutcome) -> str:
    """Where the inputs came from, and how to draw them again: "inputs: seed 482913 (`--seed 482913` draws them
    again)"."""
    return f"inputs: seed {outcome.seed} (`--seed {outcome.seed}` draws them again)"


def problems(outcome: RunOutcome) -> list[Problem]:
    return [e for e in outcome.events if isinstance(e, Problem)]


def format_outcome(outcome: RunOutcome, verbose: bool = False) -> str:
    """The readable report of one project's verification."""
    project = outcome.project
    lines = [f"{project.name}  {relpath(str(project.kernel_path))}", f"  {mode_line(outcome)}"]
    rows = outcome.case_results()
    if rows:
        on_gpus = len(gpus_used(rows)) > 1  # which GPU ran each case, when there was more than one
        header = ("case", "inputs", "dtype", "config", "status", "max abs", "max rel", "rel norm", "launches") + \
            (("gpu",) if on_gpus else ())
        table = [header]
        listed, left_out = grouping.table_rows(rows, verbose)
        for r in listed:
            table.append((str(r.case_index), r.label, r.dtype or MISSING, _short_config(r.config, r.phase),
                          STATUS_MARK.get(r.status, r.status), *errors_of(r),
                          fmt_err(r.rel_norm_err), MISSING if r.launches is None else str(r.launches))
                         + ((r.gpu or MISSING,) if on_gpus else ()))
        lines += text_table(table) + ([left_out] if left_out else [])
        forced = [r for r in rows if r.config]
        if forced:
            ok = sum(r.status == "passed" for r in forced)
            skipped = sum(r.status == "skipped" for r in forced)
            configs = len({r.config for r in forced})
            pruned = any(n.startswith(NOT_FORCED) for r in rows if not r.config for n in r.notes)
            where = "each on the cases its tuner's pruning keeps it for (-v says which)" \
                if pruned else "on every case"
            lines.append(f"  autotune: {configs} configs forced in turn {where}: {ok} of {len(forced) - skipped} "
                         "passed" + (f", {skipped} skipped (see the notes)" if skipped else ""))
        compared = describe_compared([e for r in rows if not r.config for e in r.compared])
        if compared:
            lines.append(f"  {compared}")
        if outcome.seed is not None:
            lines.append(f"  {seed_line(outcome)}")
        started = outcome.started
        if started is not None and started.bench_only and "verify" in outcome.stages:
            shown = ", ".join(map(str, started.bench_only))
            lines.append(f"  case{'s' if len(started.bench_only) > 1 else ''} {shown}: for the benchmark only "
                         "(purpose \"bench\"), not verified")
    skipped_configs: dict[tuple[str, str], list[int]] = {}  # (config, notes) -> the cases: said once for all
    for r in rows:
        if r.warnings and not r.config:  # the case proves little: said in the verdict, not only in JSON
            lines += [f"  WARNING, case {r.case_index} ({r.label}): {w}" for w in r.warnings]
        if r.status in ("failed", "error"):
            continue  # below, grouped with those that fail alike
        elif r.notes and r.config and r.status == "skipped" and not verbose:
            skipped_configs.setdefault((r.config, "; ".join(r.notes)), []).append(r.case_index)
        elif r.notes and (verbose or r.status == "skipped"):
            lines.append(f"  note, case {r.case_index}{f' ({r.config})' if r.config else ''}: " + "; ".join(r.notes))
        elif any("nondeterministic" in n for n in r.notes):
            lines.append(f"  note, case {r.case_index}: " + "; ".join(r.notes))
    for (config, notes), indices in skipped_configs.items():
        lines.append(f"  note, {config}, case{'s' if len(indices) > 1 else ''} {', '.join(map(str, indices))}: {notes}")
    for group in grouping.fold(rows, verbose):
        shown, rest = group.split(verbose)
        for failure in shown:
            lines += ["", *failure_details(failure.result, failure.title_suffix())]
        if rest:
            lines += ["", group.rest_line(rest)]
    lines += compatibility_lines(outcome, verbose)
    lines += requeued_lines(outcome)
    for p in problems(outcome):
        if p.kind in ("crash", "timeout") and p.case_index is not None:
            continue  # told in the case's own failure details
        label = "GPU ONLY:" if p.kind == GPU_ONLY_KIND else f"ERROR ({p.kind})"
        lines += ["", f"  {label} {relpath(p.location) + ': ' if p.location else ''}{p.message}"]
        lines += source_excerpt(p.file, p.line)
        if verbose and p.traceback:
            lines += ["    " + ln for ln in p.traceback.rstrip().splitlines()]
    if verbose or outcome.exit_code not in (0, 1):
        logs = [e.text for e in outcome.events if isinstance(e, LogLine) and e.text.strip()]
        if logs:
            lines += ["", "  worker output (last lines):"] + ["    " + t for t in logs[-12:]]
    lines += ["", f"  {summary_line(outcome)}"]
    return "\n".join(lines)


COMPAT_TITLE = {"torch_compile": "torch.compile(fullgraph=True)", "cuda_graph": "CUDA graph capture and replay",
                "noncontiguous": "non-contiguous inputs", "storage_offset": "inputs at a storage offset"}
ERROR_LINES_SHOWN = 30  # of a compatibility error, in the text report (all of it with -v, --json, JUnit)


def compatibility_lines(outcome: RunOutcome, verbose: bool = False) -> list[str]:
    """One line per compatibility check that ran (torch.compile, CUDA graphs): its finding, apart from the
    verdict, with the whole error of a failure under it."""
    lines = []
    for name, finding in outcome.compatibility().items():
        title = COMPAT_TITLE.get(name, name)
        cases = ", ".join(f"{c['case_index']}" for c in finding["cases"])
        if finding["status"] == "passed":
            kept = [c for c in finding["cases"] if c.get("kept")]
            when = f"; kept: {kept[0]['kept']}" if kept else ""
            lines.append(f"  compatibility: {title} passed (case{'s' if len(finding['cases']) > 1 else ''} {cases}"
                         f"{when})")
            continue
        if finding["status"] == "refused":
            refused = next(c for c in finding["cases"] if c["status"] == "refused")
            lines.append(f"  compatibility: {title} refused on case {refused['case_index']}: {refused['error']}")
            continue
        failed = [c for c in finding["cases"] if c["status"] == "failed"]
        how = ("required: it fails the verdict" if finding["required"] else
               f'not required: the verdict stands ([verify] {name} = "require" makes it count)')
        lines.append(f"  compatibility: {title} FAILED on case {failed[0]['case_index']} ({failed[0]['label']}); {how}")
        error = failed[0]["error"].splitlines()
        shown = error if verbose else error[:ERROR_LINES_SHOWN]
        lines += ["      " + ln for ln in shown]
        if len(shown) < len(error):
            lines.append(f"      ... {len(error) - len(shown)} more lines (-v, --json or --junit)")
    return [""] + lines if lines else []


def requeued_lines(outcome: RunOutcome) -> list[str]:
    """One line per worker whose GPU or machine was lost: why, and which cases ran again elsewhere."""
    lines = []
    for r in outcome.of_type(Requeued):
        again = f"cases {', '.join(map(str, r.cases))} re-run elsewhere" if r.cases else "its work re-run elsewhere"
        lines.append(f"  re-queued: {r.reason}; {again} (each result recorded once)")
    return [""] + lines if lines else []


def source_excerpt(file: str, line: int, around: int = 1) -> list[str]:
    """The offending kernel.py line with one line either side, numbered, the line itself marked."""
    return [f"    {'>' if n == line else ' '}{n:5d} | {text}" for n, text in source_lines(file, line, around)]


def _short_config(config: str, phase: str = "") -> str:
    if not config:
        return f"({phase or 'tuned'})"
    return config if len(config) <= 48 else config[:45] + "..."


def errors_of(r: CaseResult) -> tuple[str, str]:
    """A case's max abs and max rel for the table: NaN/Inf where it wrote one the reference does not have."""
    return fmt_case_err(r.max_abs_err, r.non_finite), fmt_case_err(r.max_rel_err, r.non_finite)


def failure_details(r: CaseResult, suffix: str = "") -> list[str]:
    title = f"  {STATUS_MARK[r.status]} case {r.case_index} ({r.label})"
    if r.config:
        title += f" with {r.config}"
    if r.phase:
        title += f", {r.phase}"
    out = [title + suffix]
    out += [f"    - {m}" for m in r.messages]
    if r.worst is not None:
        where = ", ".join(str(i) for i in r.worst.index)
        out.append(f"    worst at [{where}]{' of output' + r.output if r.output else ''}: "
                   f"kernel {fmt_value(r.worst.kernel, r.worst.kernel_special)}, "
                   f"reference {fmt_value(r.worst.reference)}")
    if r.pattern:
        out.append(f"    where: {r.pattern}")
    if r.bad_count and r.numel:
        if r.rtol is not None:
            finite = " over the finite elements" if r.non_finite else ""
            out.append(f"    {r.bad_count} of {r.numel} elements bad; max abs{finite} {fmt_err(r.max_abs_err)}, "
                       f"max rel {fmt_err(r.max_rel_err)}, rel norm {fmt_err(r.rel_norm_err)} "
                       f"(rtol {r.rtol:g}, atol {r.atol:g})")
    out += [f"    note: {n}" for n in r.notes]
    return out


def summary_line(outcome: RunOutcome) -> str:
    verdict = outcome.verdict
    took = f" in {outcome.finished.duration_s:.1f} s" if outcome.finished else ""
    after = "; a later stage stopped (above)" if verdict.after else ""
    # A cancelled run's command was interrupted: it exits 130 (Ctrl-C) or 143 (SIGTERM), said on stderr.
    code = "interrupted" if verdict.status == "cancelled" else f"exit {verdict.exit_code}"
    return f"{verdict.label}: {verdict.describe_counts()}{took}{after} ({code})"


def projects_summary(outcomes: list[RunOutcome], exit_code: int) -> str:
    """The last line of a run over several projects: how many came to each verdict, the names of those not
    verified, and the command's exit code (the most serious of theirs)."""
    by_label: dict[str, list[str]] = {}
    for outcome in outcomes:
        by_label.setdefault(outcome.verdict.label, []).append(outcome.project.name)
    order = ["VERIFIED", "FAILED", "GPU ONLY", "NOT USABLE", "CANNOT RUN HERE", "CANCELLED"]
    parts = []
    for label in sorted(by_label, key=lambda lab: order.index(lab) if lab in order else len(order)):
        names = by_label[label]
        parts.append(f"{len(names)} {label.lower()}" + ("" if label == "VERIFIED" else f" ({', '.join(names)})"))
    code = "interrupted" if "CANCELLED" in by_label else f"exit {exit_code}"
    return f"{len(outcomes)} projects: {'; '.join(parts)} ({code})"


def case_name(r: CaseResult) -> str:
    """A case result's test name, the same in JUnit and under `pytest --workbench`."""
    return (f"case {r.case_index}: {r.label}" + (f" [{r.config}]" if r.config else "")
            + (f" ({r.phase})" if r.phase else ""))


def cases_of(rows: list[CaseResult]) -> list[list[CaseResult]]:
    """A run's results grouped by case (and GPU, where a case ran on several), in the order they came: the
    case's own result first, then its forced configs' runs and rechecks. The unit every report counts."""
    grouped: dict[tuple[int, str], list[CaseResult]] = {}
    for r in rows:
        grouped.setdefault((r.case_index, r.gpu), []).append(r)
    return [sorted(results, key=lambda r: (bool(r.config), bool(r.phase))) for results in grouped.values()]


def worst_of(results: list[CaseResult]) -> CaseResult:
    """The result that decides a case's status: its worst (the first of equals)."""
    rank = {status: i for i, status in enumerate(CASE_RANK)}
    return max(results, key=lambda r: rank.get(r.status, 0))


def junit_tree(outcomes: list[RunOutcome]) -> ET.ElementTree:
    """One testsuite per project, one testcase per case (docs/VERIFIED.md): a case fails when
    any of its results did (its forced autotune configs, the recheck after timing); which ones, and every
    config's status, are in the testcase (the failure's text, its properties)."""
    root = ET.Element("testsuites", name="workbench verify")
    for outcome in outcomes:
        cases = cases_of(outcome.case_results())
        worst = [worst_of(results) for results in cases]
        probs = [p for p in problems(outcome) if p.case_index is None]
        compatibility = outcome.compatibility()
        suite = ET.SubElement(root, "testsuite", name=outcome.project.name,
                              tests=str(len(cases) + len(probs) + len(compatibility)),
                              failures=str(sum(w.status == "failed" for w in worst)
                                           + sum(f["status"] == "failed" and f["required"]
                                                 for f in compatibility.values())),
                              errors=str(sum(w.status == "error" for w in worst) + len(probs)),
                              skipped=str(sum(w.status == "skipped" for w in worst)),
                              time=f"{outcome.finished.duration_s if outcome.finished else 0:.3f}")
        if outcome.seed is not None:  # the inputs' draw: `workbench verify --seed N` draws it again
            ET.SubElement(ET.SubElement(suite, "properties"), "property", name="seed", value=str(outcome.seed))
        for results, w in zip(cases, worst):
            own = results[0]
            name = f"case {own.case_index}: {own.label}" + (f" [GPU {own.gpu}]" if len({r.gpu for r in
                                                            outcome.case_results()}) > 1 else "")
            case = ET.SubElement(suite, "testcase", classname=f"workbench.{outcome.project.name}", name=name,
                                 time=f"{sum(r.duration_s for r in results):.3f}")
            configs = [r for r in results if r.config]
            props = {"generated": str(own.generated).lower(),
                     "launches": "" if own.launches is None else str(own.launches),
                     **({"gpu": own.gpu} if own.gpu else {}),
                     **{f"check.{k}": v for k, v in sorted(own.checks.items())},
                     **{f"warning.{i}": msg for i, msg in enumerate(own.warnings)},
                     **({"configs.run": str(len(configs)),
                         "configs.passed": str(sum(r.status == "passed" for r in configs))} if configs else {}),
                     **{(f"config.{r.config}" + (f" ({r.phase})" if r.phase else "")) if r.config
                        else f"phase.{r.phase}": r.status
                        for r in results if r.config or r.phase}}
            properties = ET.SubElement(case, "properties")
            for key, value in props.items():
                ET.SubElement(properties, "property", name=key, value=value)
            if w.status in ("failed", "error"):
                bad = [r for r in results if r.status in ("failed", "error")]
                tag = "failure" if w.status == "failed" else "error"
                failed_checks = sorted({k for r in bad for k, v in r.checks.items() if v == "failed"})
                where = "" if not w.config else f"with {w.config}: "
                el = ET.SubElement(case, tag, message=(where + "; ".join(w.messages))[:500] or w.status,
                                   type=",".join(failed_checks) or w.status)
                el.text = "\n".join(line for r in bad for line in failure_details(r))
            elif w.status == "skipped":
                ET.SubElement(case, "skipped", message="; ".join(w.notes))
        for name, finding in outcome.compatibility().items():
            case = ET.SubElement(suite, "testcase", classname=f"workbench.{outcome.project.name}",
                                 name=f"compatibility: {name}")
            properties = ET.SubElement(case, "properties")
            for key, value in (("status", finding["status"]), ("required", str(finding["required"]).lower()),
                               ("cases", ",".join(str(c["case_index"]) for c in finding["cases"]))):
                ET.SubElement(properties, "property", name=key, value=value)
            failed = [c for c in finding["cases"] if c["status"] == "failed"]
            if failed and finding["required"]:
                el = ET.SubElement(case, "failure", message=failed[0]["error"].splitlines()[0][:500], type=name)
                el.text = failed[0]["error"]
            elif failed:  # a finding, not a failure: the whole error where CI dashboards show output
                ET.SubElement(case, "system-out").text = (f"not required ([verify] {name} = \"require\" makes it "
                                                          f"fail the verdict)\n" + failed[0]["error"])
        for p in probs:
            case = ET.SubElement(suite, "testcase", classname=f"workbench.{outcome.project.name}",
                                 name=f"project: {p.kind}")
            el = ET.SubElement(case, "error", message=p.message[:500], type=p.kind)
            el.text = (p.location + "\n" if p.location else "") + p.traceback
    ET.indent(root)
    return ET.ElementTree(root)
