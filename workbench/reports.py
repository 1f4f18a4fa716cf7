"""Verification outcomes as text tables, JSON records and JUnit XML."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

from .core.events import (
    AutotuneReport,
    BenchResult,
    CaseResult,
    CompiledKernels,
    DeviceFacts,
    LogLine,
    Problem,
    Requeued,
    Timing,
)
from .core.run.session import RunOutcome
from .core.text import (
    MISSING,
    fmt_err,
    fmt_fraction,
    fmt_ms,
    fmt_rate,
    fmt_speedup,
    fmt_value,
    source_lines,
)
from .core.timing.compiler_facts import describe_facts, facts_by_config, facts_cells, picked_facts
from .core.timing.stats import bench_summary, relative_spread
from .core.verdict import CASE_RANK, GPU_ONLY_KIND

if TYPE_CHECKING:
    from .core.live.changes import Comparison, SpeedChange

STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "skip"}






def relpath(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def gpus_used(results: list[Any]) -> list[str]:
    """The GPUs (GpuSlot ids) that produced these results, in order."""
    return sorted({r.gpu for r in results if r.gpu})


def mode_line(outcome: RunOutcome) -> str:
    ready = outcome.ready
    if ready is None:
        return "worker did not start"
    if ready.mode == "interpreter":
        return (f"CPU — Triton interpreter ({ready.reason}); results are correctness only, never timings "
                f"| torch {ready.torch_version}, triton {ready.triton_version}")
    used = gpus_used(outcome.of_type(CaseResult))
    where = f" | on GPU {used[0]}" if len(used) == 1 else f" | on GPUs {', '.join(used)}" if used else ""
    return f"GPU {ready.device_name} | torch {ready.torch_version}, triton {ready.triton_version}{where}"


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
        for r in rows:
            if r.config and r.status == "passed" and not verbose:
                continue  # every forced config that passed is summarised below
            table.append((str(r.case_index), r.label, r.dtype or MISSING, _short_config(r.config, r.phase),
                          STATUS_MARK.get(r.status, r.status), fmt_err(r.max_abs_err), fmt_err(r.max_rel_err),
                          fmt_err(r.rel_norm_err), MISSING if r.launches is None else str(r.launches))
                         + ((r.gpu or MISSING,) if on_gpus else ()))
        lines += text_table(table)
        forced = [r for r in rows if r.config]
        if forced:
            ok = sum(r.status == "passed" for r in forced)
            configs = len({r.config for r in forced})
            lines.append(f"  autotune: {configs} configs forced in turn on every case: {ok} of {len(forced)} passed")
    for r in rows:
        if r.warnings and not r.config:  # the case proves little: said in the verdict, not only in JSON
            lines += [f"  WARNING, case {r.case_index} ({r.label}): {w}" for w in r.warnings]
        if r.status in ("failed", "error"):
            lines += ["", *failure_details(r)]
        elif r.notes and (verbose or r.status == "skipped"):
            lines.append(f"  note, case {r.case_index}: " + "; ".join(r.notes))
        elif any("nondeterministic" in n for n in r.notes):
            lines.append(f"  note, case {r.case_index}: " + "; ".join(r.notes))
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
            lines.append(f"  compatibility: {title} passed (case{'s' if len(finding['cases']) > 1 else ''} {cases})")
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


def failure_details(r: CaseResult) -> list[str]:
    title = f"  {STATUS_MARK[r.status]} case {r.case_index} ({r.label})"
    if r.config:
        title += f" with {r.config}"
    if r.phase:
        title += f", {r.phase}"
    out = [title]
    out += [f"    - {m}" for m in r.messages]
    if r.worst is not None:
        where = ", ".join(str(i) for i in r.worst.index)
        out.append(f"    worst at [{where}]{' of output' + r.output if r.output else ''}: "
                   f"kernel {fmt_value(r.worst.kernel)}, reference {fmt_value(r.worst.reference)}")
    if r.pattern:
        out.append(f"    where: {r.pattern}")
    if r.bad_count and r.numel:
        if r.rtol is not None:
            out.append(f"    {r.bad_count} of {r.numel} elements bad; max abs {fmt_err(r.max_abs_err)}, "
                       f"max rel {fmt_err(r.max_rel_err)}, rel norm {fmt_err(r.rel_norm_err)} "
                       f"(rtol {r.rtol:g}, atol {r.atol:g})")
    out += [f"    note: {n}" for n in r.notes]
    return out


def summary_line(outcome: RunOutcome) -> str:
    verdict = outcome.verdict
    took = f" in {outcome.finished.duration_s:.1f} s" if outcome.finished else ""
    after = "; a later stage stopped (above)" if verdict.after else ""
    return f"{verdict.label}: {verdict.describe_counts()}{took}{after} (exit {verdict.exit_code})"


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
    return f"{len(outcomes)} projects: {'; '.join(parts)} (exit {exit_code})"


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
    """One testsuite per project, one testcase per case (README "What verified means"): a case fails when
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


def timing_change(older: dict[str, Any], newer: dict[str, Any]) -> list[str]:
    """Per benchmark case: the kernel's median time in two run records and the change, with its interval and
    word where both runs kept samples (core/timing/noise.py)."""
    from .core.live.changes import case_timings, speed_change

    speed = speed_change(case_timings(older), case_timings(newer))
    lines = [f"  {c.name}: {c.change.before_ms:.4f} ms -> {c.change.after_ms:.4f} ms, {c.change.describe()}"
             for c in (speed.matched if speed else [])]
    if not lines:
        lines.append("  (no benchmark timings in both runs)")
    return lines


def comparison_lines(comparison: Comparison, gate: float | None = None) -> list[str]:
    """A run's benchmark against an earlier run (core/live/changes.Comparison): per case the times, the change
    with its interval and word, the cases only one run timed, and with `gate` (--fail-slower, a fraction) the
    cases that fail it."""
    if comparison.record is None:
        lines = [f"  vs {comparison.title}: none recorded yet"]
        if gate is not None:
            lines.append(f"    regression gate (--fail-slower {gate * 100:g}%): " + gate_line(None, gate))
        return lines
    lines = [f"  vs {comparison.title} ({comparison.where or comparison.record.id}):"]
    speed = comparison.speed
    if speed is not None:
        lines[0] += f" kernel time {speed.overall.describe()} over {speed.describe_counts()}"
        rows = [("case", "before", "after", "change", "")]
        for case in speed.matched:
            change = case.change
            interval = change.interval_percent
            rows.append((case.name, fmt_ms(change.before_ms), fmt_ms(change.after_ms),
                         f"{change.percent:+.1f}%" + (f" [{interval[0]:+.1f}%, {interval[1]:+.1f}%]" if interval
                                                      else ""),
                         change.label + (f" ({change.why})" if change.why else "")))
        lines += text_table(rows, indent="    ")
        lines += [f"    not compared: {c.name} (timed in {c.only_in} only)" for c in speed.unmatched]
    lines += [f"    note: {n}" for n in comparison.notes]
    if gate is not None:
        lines.append(f"    regression gate (--fail-slower {gate * 100:g}%): " + gate_line(speed, gate))
    return lines


def gate_line(speed: SpeedChange | None, gate: float) -> str:
    """What the regression gate found: the cases slower beyond noise by more than `gate`, or why none failed."""
    if speed is None:
        return "nothing to compare, so nothing failed it"
    failing = speed.slower_than(gate)
    if failing:
        return "FAILED: " + "; ".join(f"{c.name} {c.change.describe()}" for c in failing)
    unjudged = [c for c in speed.matched if c.change.low is None]
    return "passed: no case slower beyond noise by more than that" + (
        f" ({len(unjudged)} of {speed.cases} cases not judged: no interval)" if unjudged else "")


# -- benchmark results ---------------------------------------------------------------------

def timing_mark(timing: Timing) -> str:
    """E: CUDA events around each call; G: CUDA-graph replay (calls under [bench] cuda_graph_below_us, or
    moving under timers.WRITEBACK_L2S L2s of data: the replay counts writing back what they leave in L2)."""
    return "G" if timing.method.startswith("cuda graph") else "E"


def fmt_timing(timing: Timing | None) -> str:
    return f"{fmt_ms(timing.median_ms)} {timing_mark(timing)}" if timing is not None else MISSING






def text_table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def device_lines(facts: DeviceFacts) -> list[str]:
    state = ", ".join(part for part in (
        f"SM {facts.sm_clock_mhz} MHz" if facts.sm_clock_mhz is not None else "",
        f"memory {facts.mem_clock_mhz} MHz" if facts.mem_clock_mhz is not None else "",
        f"{facts.temperature_c} °C" if facts.temperature_c is not None else "") if part)
    which = f" [{facts.gpu}]" if facts.gpu else ""
    lines = [f"  GPU {facts.name}{which}" + (f" | {state} before timing" if state else "") +
             f" | driver {facts.driver or '?'} | torch {facts.torch_version}, triton {facts.triton_version}"]
    if facts.copy_gbps:
        lines.append(f"  ceilings of this GPU: copy {fmt_rate(facts.copy_gbps, 'GB/s')}, bf16 matmul "
                     f"{fmt_rate(facts.matmul_tflops, 'TFLOP/s')} (measured {facts.ceilings_measured_at[:10]})")
    lines += [f"  note: {n}" for n in facts.notes]
    return lines


def bench_table(results: list[BenchResult], verbose: bool) -> list[str]:
    with_flops = any(r.flops for r in results)
    on_gpus = len(gpus_used(results)) > 1
    header = ("case", "inputs", "kernel", "IQR", "n", "reference", "torch.compile", "vs ref", "vs compile",
              "GB/s", "% copy") + (("TFLOP/s", "% mm") if with_flops else ()) + (("SM MHz", "°C") if verbose else ()) \
        + (("gpu",) if on_gpus else ())
    rows = [header]
    for r in results:
        k = r.kernel
        kernel_cell = "RE-CHECK FAILED" if r.recheck.startswith("failed") else "NOT POSTED" if r.withheld \
            else fmt_timing(k)
        row = (str(r.case_index), r.label, kernel_cell, f"{relative_spread(k):.1%}" if k else MISSING,
               str(k.samples) if k else MISSING,
               fmt_timing(r.reference), fmt_timing(r.compiled), fmt_speedup(r.speedup_vs_reference),
               fmt_speedup(r.speedup_vs_compiled), fmt_rate(r.gbps, "").strip(), fmt_fraction(r.bandwidth_fraction))
        if with_flops:
            row += (fmt_rate(r.tflops, "").strip(), fmt_fraction(r.compute_fraction))
        if verbose:
            row += (str(r.sm_clock_mhz) if r.sm_clock_mhz is not None else MISSING,
                    str(r.temperature_c) if r.temperature_c is not None else MISSING)
        if on_gpus:
            row += (r.gpu or MISSING,)
        rows.append(row)
    return text_table(rows)


def method_lines(results: list[BenchResult]) -> list[str]:
    methods: dict[str, Timing] = {}
    for r in results:
        for timing in (r.kernel, r.reference, r.compiled):
            if timing is not None:
                methods.setdefault(timing.method, timing)
    lines = [f"  {timing_mark(timing)} = {method}" for method, timing in methods.items()]
    lines.append("  times are medians; IQR is the middle half's spread over the median; n the kernel's samples")
    sources = sorted({r.bytes_source for r in results if r.bytes_source})
    lines += [f"  bytes: {s}" for s in sources]
    flop_sources = sorted({r.flops_source for r in results if r.flops_source})
    lines += [f"  flops: {s}" for s in flop_sources] or ["  flops: kernel.py has no flops(); no TFLOP/s"]
    return lines


def autotune_lines(reports: list[AutotuneReport], compiled: list[CompiledKernels] = ()) -> list[str]:
    """Each tuning: every config's time beside what the compiler made of it (registers, spills, shared
    memory, occupancy), the pick marked."""
    lines = []
    for a in reports:
        took = f" after {a.tuning_s:.2f} s of tuning" if a.tuning_s is not None else ""
        lines.append(f"  autotune, case {a.case_index}: {a.kernel} [{a.key}] picked {a.picked}{took} ({a.source})")
        facts = facts_by_config(compiled, a.case_index)
        rows = [("time", "config", "regs", "spills", "smem", "occupancy", "")] if facts else []
        for t in sorted(a.timings, key=lambda t: (t.ms is None, t.ms or 0.0)):
            row: tuple[str, ...] = (fmt_ms(t.ms) if t.ms is not None else t.status, t.config)
            if facts:
                row += facts_cells(facts.get((a.kernel, t.config)))
            rows.append(row + ("<- picked" if t.config == a.picked else "",))
        lines += text_table(rows, indent="      ") if rows else []
    return lines


def compiled_lines(compiled: list[CompiledKernels], reports: list[AutotuneReport]) -> list[str]:
    """Per benchmark case, what the compiler made of the kernels it ran (the autotuner's pick)."""
    return [f"  compiled, case {case}: {facts.kernel} ({facts.config}): {describe_facts(facts)}"
            for case, facts in picked_facts(compiled, reports)]


def kinds_table(results: list[BenchResult], facts: list[DeviceFacts]) -> list[str]:
    """Benchmarks of one project on several kinds of GPU, side by side: per case and kind, the kernel's
    time and its fraction of that GPU's own measured ceiling (copy, or matmul when it is the larger).
    [] unless the results come from more than one kind."""
    kind_of = {f.gpu: f.name for f in facts if f.gpu}
    kinds = sorted({kind_of[r.gpu] for r in results if r.gpu in kind_of})
    if len(kinds) < 2:
        return []
    cells: dict[tuple[int, str], BenchResult] = {}
    labels: dict[int, str] = {}
    for r in results:
        if r.gpu in kind_of:
            cells.setdefault((r.case_index, kind_of[r.gpu]), r)
            labels.setdefault(r.case_index, r.label)
    header = ("case", "inputs") + tuple(cell for kind in kinds for cell in (kind, "% ceiling"))
    rows = [header]
    for case in sorted(labels):
        row = (str(case), labels[case])
        for kind in kinds:
            r = cells.get((case, kind))
            fractions = [f for f in (r.bandwidth_fraction, r.compute_fraction) if f is not None] if r else []
            row += (fmt_timing(r.kernel) if r else MISSING, fmt_fraction(max(fractions)) if fractions else MISSING)
        rows.append(row)
    return ["  per GPU kind (each % is of that GPU's own measured ceilings):"] + text_table(rows)


def format_bench(outcome: RunOutcome, verbose: bool = False) -> str:
    """The readable report of one project's benchmark: the sweep table, methods, autotuning, notes."""
    results: list[BenchResult] = outcome.of_type(BenchResult)
    every_facts: list[DeviceFacts] = outcome.of_type(DeviceFacts)  # several when the run spanned GPUs
    facts = next(iter(every_facts), None)
    if facts is None and not results:
        if outcome.exit_code == 1 and "bench" in outcome.stages:
            return f"{outcome.project.name}: not benchmarked: verification failed (a failing kernel is never timed)"
        return ""
    lines = [f"{outcome.project.name}  benchmark"]
    for each in every_facts:
        lines += device_lines(each)
    kinds = kinds_table(results, every_facts)
    if kinds:
        lines += [""] + kinds
    if results:
        lines += [""] + bench_table(results, verbose) + [""] + method_lines(results)
    timed = {r.case_index for r in results}
    untimed = sorted({c.case_index for c in outcome.of_type(CaseResult)
                      if c.status in ("failed", "error") and c.case_index not in timed})
    if facts is not None and untimed:
        lines.append(f"  not timed: case {', '.join(map(str, untimed))}, wrong before timing (a wrong kernel's "
                     "time is never posted; see the verification report above)")
    compiled = outcome.of_type(CompiledKernels)
    autotune = autotune_lines(outcome.of_type(AutotuneReport), compiled)
    facts_lines = compiled_lines(compiled, outcome.of_type(AutotuneReport))
    if facts_lines:
        lines += [""] + facts_lines
    if autotune:
        lines += [""] + autotune
    notes = [f"  note, case {r.case_index}: {n}" for r in results for n in r.notes]
    notes += [f"  note, case {r.case_index}: torch.compile: {r.compiled_note}" for r in results if r.compiled_note]
    if notes:
        lines += [""] + notes
    summary = bench_summary(results)
    if summary:
        lines += ["", f"  {summary}"]
    return "\n".join(lines)
