"""Verification outcomes as text tables, JSON records and JUnit XML."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from .core.events import CaseResult, LogLine, Problem
from .core.session import RunOutcome

STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "skip"}


def fmt_err(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return f"{value:.2e}"


def fmt_value(value: float | None) -> str:
    return "unwritten/NaN" if value is None else f"{value:.6g}"


def relpath(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def mode_line(outcome: RunOutcome) -> str:
    ready = outcome.ready
    if ready is None:
        return "worker did not start"
    if ready.mode == "interpreter":
        return (f"CPU — Triton interpreter ({ready.reason}); results are correctness only, never timings "
                f"| torch {ready.torch_version}, triton {ready.triton_version}")
    return f"GPU {ready.device_name} | torch {ready.torch_version}, triton {ready.triton_version}"


def case_rows(outcome: RunOutcome) -> list[CaseResult]:
    return [e for e in outcome.events if isinstance(e, CaseResult)]


def problems(outcome: RunOutcome) -> list[Problem]:
    return [e for e in outcome.events if isinstance(e, Problem)]


def format_outcome(outcome: RunOutcome, verbose: bool = False) -> str:
    """The readable report of one project's verification."""
    project = outcome.project
    lines = [f"{project.name}  {relpath(str(project.kernel_path))}", f"  {mode_line(outcome)}"]
    rows = case_rows(outcome)
    if rows:
        header = ("case", "inputs", "dtype", "config", "status", "max abs", "max rel", "rel norm")
        table = [header]
        for r in rows:
            if r.config and r.status == "passed" and not verbose:
                continue  # every forced config that passed is summarised below
            table.append((str(r.case_index), r.label, r.dtype or "-", _short_config(r.config),
                          STATUS_MARK.get(r.status, r.status), fmt_err(r.max_abs_err), fmt_err(r.max_rel_err),
                          fmt_err(r.rel_norm_err)))
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        forced = [r for r in rows if r.config]
        if forced:
            ok = sum(r.status == "passed" for r in forced)
            configs = len({r.config for r in forced})
            lines.append(f"  autotune: {configs} configs forced in turn on every case: {ok} of {len(forced)} passed")
    for r in rows:
        if r.status in ("failed", "error"):
            lines += ["", *failure_details(r)]
        elif r.notes and (verbose or r.status == "skipped"):
            lines.append(f"  note, case {r.case_index}: " + "; ".join(r.notes))
        elif any("nondeterministic" in n for n in r.notes):
            lines.append(f"  note, case {r.case_index}: " + "; ".join(r.notes))
    for p in problems(outcome):
        if p.kind in ("crash", "timeout") and p.case_index is not None:
            continue  # told in the case's own failure details
        lines += ["", f"  ERROR ({p.kind}) {relpath(p.location) + ': ' if p.location else ''}{p.message}"]
        lines += source_excerpt(p.file, p.line)
        if verbose and p.traceback:
            lines += ["    " + ln for ln in p.traceback.rstrip().splitlines()]
    if verbose or outcome.tally.exit_code not in (0, 1):
        logs = [e.text for e in outcome.events if isinstance(e, LogLine) and e.text.strip()]
        if logs:
            lines += ["", "  worker output (last lines):"] + ["    " + t for t in logs[-12:]]
    lines += ["", f"  {summary_line(outcome)}"]
    return "\n".join(lines)


def source_excerpt(file: str, line: int, around: int = 1) -> list[str]:
    """The offending kernel.py line with one line either side, numbered, the line itself marked."""
    if not file or not line:
        return []
    try:
        text = Path(file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for n in range(max(1, line - around), min(len(text), line + around) + 1):
        mark = ">" if n == line else " "
        out.append(f"    {mark}{n:5d} | {text[n - 1]}")
    return out


def _short_config(config: str) -> str:
    if not config:
        return "(tuned)"
    return config if len(config) <= 48 else config[:45] + "..."


def failure_details(r: CaseResult) -> list[str]:
    title = f"  {STATUS_MARK[r.status]} case {r.case_index} ({r.label})"
    if r.config:
        title += f" with {r.config}"
    out = [title]
    out += [f"    - {m}" for m in r.messages]
    if r.worst is not None:
        where = ", ".join(str(i) for i in r.worst.index)
        out.append(f"    worst at [{where}]{' of output' + r.output if r.output else ''}: "
                   f"kernel {fmt_value(r.worst.kernel)}, reference {fmt_value(r.worst.reference)}")
    if r.pattern:
        out.append(f"    where: {r.pattern}")
    if r.bad_count and r.numel:
        out.append(f"    {r.bad_count} of {r.numel} elements bad; max abs {fmt_err(r.max_abs_err)}, "
                   f"max rel {fmt_err(r.max_rel_err)}, rel norm {fmt_err(r.rel_norm_err)} "
                   f"(rtol {r.rtol:g}, atol {r.atol:g})" if r.rtol is not None else "")
    out += [f"    note: {n}" for n in r.notes]
    return out


def summary_line(outcome: RunOutcome) -> str:
    t = outcome.tally
    verdict = {"passed": "VERIFIED", "failed": "FAILED", "error": "NOT USABLE"}.get(t.verdict, t.verdict.upper())
    if outcome.finished is not None and outcome.finished.verdict == "cancelled":
        verdict = "CANCELLED"
    parts = [f"{t.passed} passed", f"{t.failed} failed"]
    if t.errors:
        parts.append(f"{t.errors} errors")
    if t.skipped:
        parts.append(f"{t.skipped} skipped")
    took = f" in {outcome.finished.duration_s:.1f} s" if outcome.finished else ""
    return f"{verdict}: {', '.join(parts)}{took} (exit {t.exit_code})"


def outcome_to_dict(outcome: RunOutcome) -> dict[str, Any]:
    return outcome.to_record()


def junit_tree(outcomes: list[RunOutcome]) -> ET.ElementTree:
    root = ET.Element("testsuites", name="workbench verify")
    for outcome in outcomes:
        rows = case_rows(outcome)
        probs = [p for p in problems(outcome) if p.case_index is None]
        suite = ET.SubElement(root, "testsuite", name=outcome.project.name,
                              tests=str(len(rows) + len(probs)),
                              failures=str(sum(r.status == "failed" for r in rows)),
                              errors=str(sum(r.status == "error" for r in rows) + len(probs)),
                              skipped=str(sum(r.status == "skipped" for r in rows)),
                              time=f"{outcome.finished.duration_s if outcome.finished else 0:.3f}")
        for r in rows:
            name = f"case {r.case_index}: {r.label}" + (f" [{r.config}]" if r.config else "")
            case = ET.SubElement(suite, "testcase", classname=f"workbench.{outcome.project.name}", name=name,
                                 time=f"{r.duration_s:.3f}")
            if r.status in ("failed", "error"):
                tag = "failure" if r.status == "failed" else "error"
                el = ET.SubElement(case, tag, message="; ".join(r.messages)[:500] or r.status)
                el.text = "\n".join(failure_details(r))
            elif r.status == "skipped":
                ET.SubElement(case, "skipped", message="; ".join(r.notes))
        for p in probs:
            case = ET.SubElement(suite, "testcase", classname=f"workbench.{outcome.project.name}",
                                 name=f"project: {p.kind}")
            el = ET.SubElement(case, "error", message=p.message[:500], type=p.kind)
            el.text = (p.location + "\n" if p.location else "") + p.traceback
    ET.indent(root)
    return ET.ElementTree(root)


def timing_change(older: dict[str, Any], newer: dict[str, Any]) -> list[str]:
    """Per benchmark case: the kernel's median time in two run records and the change."""
    before = {b["case_index"]: b for b in older.get("bench", [])}
    lines = []
    for b in newer.get("bench", []):
        a = before.get(b["case_index"])
        if a is None or not a.get("median_ms") or not b.get("median_ms"):
            continue
        change = (b["median_ms"] / a["median_ms"] - 1) * 100
        lines.append(f"  case {b['case_index']} {b.get('label', '')}: {a['median_ms']:.4f} ms -> "
                     f"{b['median_ms']:.4f} ms ({change:+.1f}%)")
    if not lines:
        lines.append("  (no benchmark timings in both runs)")
    return lines
