"""Benchmark outcomes as text: the sweep table, methods, autotuning with what the compiler made of each config,
changes between runs and the regression gate, GPU kinds side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.events import (
    AutotuneReport,
    BenchResult,
    CaseResult,
    CompiledKernels,
    DeviceFacts,
    Timing,
)
from ..core.run.session import RunOutcome
from ..core.text import (
    MISSING,
    fmt_fraction,
    fmt_memory,
    fmt_ms,
    fmt_rate,
    fmt_speedup,
)
from ..core.timing.compiler_facts import describe_facts, facts_by_config, facts_cells, picked_facts
from ..core.timing.stats import bench_summary, relative_spread
from .tables import gpus_used, text_table

if TYPE_CHECKING:
    from ..core.live.changes import Comparison, SpeedChange


def timing_change(older: dict[str, Any], newer: dict[str, Any]) -> list[str]:
    """Per benchmark case: the kernel's median time in two run records and the change, with its interval and
    word where both runs kept samples (core/timing/noise.py)."""
    from ..core.live.changes import case_timings, speed_change

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
    with_mode = any(r.mode for r in results)
    with_memory = any(t is not None and t.peak_memory_bytes is not None
                      for r in results for t in (r.kernel, r.compiled))
    header = ("case", "inputs") + (("mode",) if with_mode else ()) + (
        "kernel", "IQR", "n", "reference", "torch.compile", "vs ref", "vs compile", "GB/s", "% copy") \
        + (("TFLOP/s", "% mm") if with_flops else ()) + (("peak mem", "compile mem") if with_memory else ()) \
        + (("SM MHz", "°C") if verbose else ()) + (("gpu",) if on_gpus else ())
    rows = [header]
    for r in results:
        k = r.kernel
        kernel_cell = "RE-CHECK FAILED" if r.recheck.startswith("failed") else "NOT POSTED" if r.withheld \
            else fmt_timing(k)
        row = (str(r.case_index), r.label) + ((r.mode or "fwd",) if with_mode else ()) + (
            kernel_cell, f"{relative_spread(k):.1%}" if k else MISSING, str(k.samples) if k else MISSING,
            fmt_timing(r.reference), fmt_timing(r.compiled), fmt_speedup(r.speedup_vs_reference),
            fmt_speedup(r.speedup_vs_compiled), fmt_rate(r.gbps, "").strip(), fmt_fraction(r.bandwidth_fraction))
        if with_flops:
            row += (fmt_rate(r.tflops, "").strip(), fmt_fraction(r.compute_fraction))
        if with_memory:
            row += (fmt_memory(k), fmt_memory(r.compiled))
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
    if any(t is not None and t.peak_memory_bytes is not None for r in results for t in (r.kernel, r.compiled)):
        lines.append("  peak mem: device memory one call took at its peak beyond what was allocated before it "
                     "(outputs, saved tensors, temporaries)")
    sources = sorted({r.bytes_source for r in results if r.bytes_source})
    lines += [f"  bytes: {s}" for s in sources]
    flop_sources = sorted({r.flops_source for r in results if r.flops_source})
    lines += [f"  flops: {s}" for s in flop_sources] or ["  flops: kernel.py has no flops(); no TFLOP/s"]
    return lines


def kernel_compiled_lines(results: list[BenchResult]) -> list[str]:
    """kernel_fn under torch.compile beside its eager time, per case (the launches Inductor makes of the kernel)."""
    lines: list[str] = []
    told: set[str] = set()  # a changed scalar is said once, at the first case it slows
    for r in results:
        if r.kernel_compiled is not None and r.kernel is not None:
            ratio = r.kernel_compiled.median_ms / r.kernel.median_ms if r.kernel.median_ms else None
            said = f" ({ratio:.2f}x the eager call's {fmt_timing(r.kernel)})" if ratio else ""
            kept = " [kept from an earlier run of the same project files]" if r.kernel_compiled_reused else ""
            lines.append(f"  kernel_fn under torch.compile, case {r.case_index}: {fmt_timing(r.kernel_compiled)}{said}"
                         f"{kept}")
            for note in r.kernel_compiled_scalars:
                if note not in told:
                    told.add(note)
                    lines.append(f"    {'why' if ratio and ratio > 1.02 else 'beside it'}: {note}")
        elif r.kernel_compiled_note:
            lines.append(f"  kernel_fn under torch.compile, case {r.case_index}: {r.kernel_compiled_note}")
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
    in_compiled = kernel_compiled_lines(results)
    if in_compiled:
        lines += [""] + in_compiled
    notes = [f"  note, case {r.case_index}: {n}" for r in results for n in r.notes]
    notes += [f"  note, case {r.case_index}: torch.compile: {r.compiled_note}" for r in results if r.compiled_note]
    if notes:
        lines += [""] + notes
    summary = bench_summary(results)
    if summary:
        lines += ["", f"  {summary}"]
    return "\n".join(lines)
