"""What each tool hands back to a model: a run's record (RunOutcome.to_record()) made compact.

Pure functions over the record's dict (no torch, no runner), so they are tested on recorded data. A result
says, first, the verdict in one word and its exit code; then what went wrong and where (a problem's file
and line, a failing case's worst element and pattern), each shortcut the verdict caught named as such, the
speed against this GPU's ceilings and torch.compile, and `next`: the one thing to look at now. Lists longer
than a page are paged (`page`, `pages`); the full record is always `workbench verify --json` away.
"""

from __future__ import annotations

from typing import Any

from workbench.core.verdict import Verdict
from workbench.core.verify import describe_compared

PAGE_SIZE = 8  # failing cases or benchmark rows per page
MESSAGES_PER_CASE = 3
DIFF_LINES_PER_PAGE = 120
# Slower than torch.compile by more than run-to-run noise: a rmsnorm at 0.986x of it on an H100 is the same
# speed (two runs of one kernel differ by a few percent), and `next` must not send a model chasing it.
SLOWER = 0.95

# Checks whose failure means the kernel took a shortcut rather than computed wrong: said as such, never as a
# near miss ("no Triton kernel launched", "kernel_fn computed with torch ops", a result kept from an earlier call).
SHORTCUT_CHECKS = {
    "triton_launched": "no Triton kernel launched: kernel_fn must compute with a Triton kernel",
    "torch_ops": "torch computed an output: a Triton kernel must write it",
    "repeat_fresh_inputs": "right only on its first call: a result kept from an earlier call?",
    "repeat_recycled_addresses": "a result cached by the inputs' addresses or ids",
    "judge": "a verdict forged in the kernel's process",
    "mutated_input": "an input was changed",
    "aliasing": "an output is an input's memory",
    "out_of_bounds": "a store landed outside its tensor",
}

def page_of(items: list[Any], page: int, size: int = PAGE_SIZE) -> tuple[list[Any], dict[str, int]]:
    """Items of page `page` (1-based; past the end: the last page) and the paging fields."""
    pages = max(1, -(-len(items) // size))
    page = min(max(1, page), pages)
    return items[(page - 1) * size:page * size], {"page": page, "pages": pages, "total": len(items)}


def where(file: str, line: int | None) -> str:
    """'kernel.py:44' (the file's name only: the project folder is in the result)."""
    if not file:
        return ""
    name = file.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{name}:{line}" if line else name


def problem_of(problem: dict[str, Any]) -> dict[str, Any]:
    return {"kind": problem.get("kind", ""), "message": problem.get("message", ""),
            "where": where(problem.get("file", ""), problem.get("line")),
            **({"case": problem["case_index"]} if problem.get("case_index") is not None else {})}


def case_of(case: dict[str, Any]) -> dict[str, Any]:
    """One failing case, compact: what failed, the worst element, the pattern, the shortcut if one."""
    failed = sorted(k for k, v in case.get("checks", {}).items() if v == "failed")
    out: dict[str, Any] = {"case": case["case_index"], "label": case["label"], "status": case["status"]}
    if case.get("config"):
        out["config"] = case["config"]
    if case.get("phase"):
        out["phase"] = case["phase"]
    if case.get("generated"):
        out["generated"] = True
    out["failed_checks"] = failed
    shortcuts = [SHORTCUT_CHECKS[k] for k in failed if k in SHORTCUT_CHECKS]
    if shortcuts:
        out["shortcut"] = shortcuts
    messages = case.get("messages", [])
    out["messages"] = messages[:MESSAGES_PER_CASE] + (
        [f"... {len(messages) - MESSAGES_PER_CASE} more (workbench verify --json)"] if len(messages) > MESSAGES_PER_CASE
        else [])
    worst = case.get("worst")
    if worst:
        # a value JSON cannot carry is said by name: "nan", "inf", "-inf" or "unwritten" (Worst.kernel_special)
        kernel = worst.get("kernel") if worst.get("kernel") is not None else worst.get("kernel_special") or None
        out["worst"] = {"index": worst.get("index"), "kernel": kernel, "reference": worst.get("reference")}
        if case.get("output"):
            out["worst"]["output"] = case["output"]
    if case.get("pattern"):
        out["pattern"] = case["pattern"]
    if case.get("bad_count"):
        out["bad"] = f"{case['bad_count']} of {case.get('numel', '?')}"
    return out


def findings_of(compatibility: dict[str, Any]) -> dict[str, Any]:
    """The compatibility findings that did not pass, with the first line of their error."""
    found = {}
    for name, finding in compatibility.items():
        if finding["status"] == "passed":
            continue
        case = next((c for c in finding["cases"] if c["status"] == finding["status"]), finding["cases"][0])
        found[name] = {"status": finding["status"], "required": finding["required"], "case": case["case_index"],
                       "error": (case.get("error") or "").splitlines()[0][:400] if case.get("error") else ""}
    return found


def next_step(record: dict[str, Any], failing: list[dict[str, Any]]) -> str:
    """The one thing to look at now."""
    problems = record.get("problems", [])
    if problems:
        p = problem_of(problems[0])
        at = f" at {p['where']}" if p["where"] else ""
        return f"fix the {p['kind']} problem{at} first: {p['message'][:200]}"
    if record.get("verdict") == "cancelled":
        return "the run was cancelled: call verify again"
    if failing:
        first = failing[0]
        if first.get("shortcut"):
            return f"case {first['case']}: {first['shortcut'][0]}; the verdict counts it as a failure, not a pass"
        pattern = f" ({first['pattern']})" if first.get("pattern") else ""
        if first.get("generated"):
            return (f"case {first['case']} is a generated edge shape ({first['label']}){pattern}: check the masks and "
                    "that the grid covers every element (triton.cdiv)")
        if "unwritten" in first.get("failed_checks", []):
            return f"case {first['case']}: elements never written{pattern}: does the grid cover the whole output?"
        worst = first.get("worst")
        at = f" worst at {worst['index']}: kernel {worst['kernel']} vs reference {worst['reference']}" if worst else ""
        return f"case {first['case']} ({first['label']}):{at}{pattern}"
    if record.get("verdict") == "passed":
        if record.get("bench"):
            return bench_next(record)
        return "VERIFIED: call bench for its speed against this GPU's ceilings and torch.compile"
    return "see the messages above"


def verify_result(record: dict[str, Any], page: int = 1) -> dict[str, Any]:
    """A verify (or bench) run for a model: verdict, counts, problems, failing cases (paged), findings, next."""
    cases = record.get("cases", [])
    failing_all = [case_of(c) for c in cases if c["status"] in ("failed", "error")]
    failing, paging = page_of(failing_all, page)
    out: dict[str, Any] = {
        "project": record.get("project"),
        "kernel": record.get("kernel"),
        "verdict": Verdict.of_record(record).label,  # the word the CLI, the app and history say
        "exit_code": record.get("exit_code"),
        "mode": record.get("mode"),
        "device": record.get("device"),
        "counts": record.get("counts", {}),
        "seconds": round(record["duration_s"], 2) if record.get("duration_s") is not None else None,
        "seed": record.get("seed"),  # the inputs' draw: verify(..., seed=N) draws them again
    }
    compared = describe_compared([e for c in cases if not c.get("config") for e in c.get("compared", [])])
    if compared:  # each output compared (the gradients too) and its error against the error model's budget
        out["compared"] = compared
    if record.get("problems"):
        out["problems"] = [problem_of(p) for p in record["problems"]]
    if failing_all:
        out["failing_cases"] = failing
        out["failing_cases_paging"] = paging
    shortcuts = sorted({s for c in failing_all for s in c.get("shortcut", [])})
    if shortcuts:
        out["shortcuts_caught"] = shortcuts
    findings = findings_of(record.get("compatibility", {}))
    if findings:
        out["findings"] = findings
    out["next"] = next_step(record, failing_all)
    return out


def bench_row(row: dict[str, Any]) -> dict[str, Any]:
    """One benchmark case: the kernel's time and where it stands against the ceilings and torch.compile."""
    kernel = row.get("kernel") or {}
    out: dict[str, Any] = {"case": row["case_index"], "label": row["label"]}
    if row.get("withheld"):
        out["time_not_posted"] = row["withheld"]
    elif str(row.get("recheck", "")).startswith("failed"):
        out["time_not_posted"] = f"the output was wrong after the timed calls ({row['recheck']})"
    else:
        out["kernel_ms"] = row.get("median_ms")
        if kernel.get("median_ms"):
            spread = (kernel.get("q75_ms", 0) - kernel.get("q25_ms", 0)) / kernel["median_ms"]
            out["spread"] = round(spread, 4)
    for key, name in (("reference", "torch_ms"), ("compiled", "torch_compile_ms")):
        timing = row.get(key)
        if timing:
            out[name] = timing.get("median_ms")
    for key, name in (("speedup_vs_reference", "x_torch"), ("speedup_vs_compiled", "x_torch_compile")):
        if row.get(key) is not None:
            out[name] = round(row[key], 3)
    if row.get("gbps") is not None:
        out["gb_per_s"] = round(row["gbps"], 1)
    if row.get("bandwidth_fraction") is not None:
        out["pct_of_copy_ceiling"] = round(100 * row["bandwidth_fraction"], 1)
    if row.get("tflops") is not None:
        out["tflop_per_s"] = round(row["tflops"], 2)
    if row.get("compute_fraction") is not None:
        out["pct_of_matmul_ceiling"] = round(100 * row["compute_fraction"], 1)
    return out


def bench_next(record: dict[str, Any]) -> str:
    rows = [bench_row(r) for r in record.get("bench", [])]
    withheld = [r for r in rows if "time_not_posted" in r]
    if withheld:
        return f"case {withheld[0]['case']}: no time posted ({withheld[0]['time_not_posted'][:200]})"
    slower = [r for r in rows if r.get("x_torch_compile") is not None and r["x_torch_compile"] < SLOWER]
    if slower:
        r = slower[0]
        return f"case {r['case']} ({r['label']}) is slower than torch.compile ({r['x_torch_compile']}x): profile it"
    fractions = [max(r.get("pct_of_copy_ceiling") or 0, r.get("pct_of_matmul_ceiling") or 0) for r in rows]
    if fractions and min(fractions) < 60:
        r = rows[fractions.index(min(fractions))]
        return (f"case {r['case']} ({r['label']}) reaches {min(fractions):.0f}% of this GPU's ceiling: profile it "
                "(block sizes, num_warps, loads per element)")
    return "near this GPU's ceilings: keep the edit if the verdict stays VERIFIED"


def bench_result(record: dict[str, Any], page: int = 1) -> dict[str, Any]:
    out = verify_result(record, page)
    rows, paging = page_of([bench_row(r) for r in record.get("bench", [])], page)
    if rows:
        out["bench"] = rows
        out["bench_paging"] = paging
    if record.get("bench_summary"):
        out["bench_summary"] = record["bench_summary"]
    return out


def lines_page(lines: list[str], page: int, size: int = DIFF_LINES_PER_PAGE) -> dict[str, Any]:
    shown, paging = page_of(lines, page, size)
    return {"lines": shown, **paging}
