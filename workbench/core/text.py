"""Plain-text formatting of the numbers a run reports, one way for every screen: the CLI's reports
(workbench/reports/), the app's panels (workbench/tui/) and the history's summaries.

Pure Python; no Rich, no Textual. A missing value is MISSING everywhere.
"""

from __future__ import annotations

from pathlib import Path

MISSING = "-"


def fmt_err(value: float | None) -> str:
    """An error magnitude: 0, or two significant digits in scientific notation (1.2e-05): the tables' width."""
    if value is None:
        return MISSING
    return "0" if value == 0 else f"{value:.1e}"


NON_FINITE = "NaN/Inf"


def fmt_case_err(value: float | None, non_finite: bool) -> str:
    """A case's (or an output's) largest error for a table: NaN/Inf where the kernel wrote NaN or Inf and the
    reference has a number (an error with no size: the largest finite one, printed alone, reads as "nearly right"),
    else fmt_err."""
    return NON_FINITE if non_finite else fmt_err(value)


def fmt_value(value: float | None, special: str = "") -> str:
    """An element's value; None is one JSON cannot carry: `special` says which ("unwritten", "nan", "inf",
    "-inf"; Worst.kernel_special), else (an older record) an element never written or NaN."""
    if value is not None:
        return f"{value:.6g}"
    return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf", "unwritten": "never written"}.get(special, "unwritten/NaN")


def fmt_memory(timing) -> str:
    """A call's peak device memory beyond its inputs, in MiB (events.Timing.peak_memory_bytes; timing/memory.peak_memory)."""
    if timing is None or timing.peak_memory_bytes is None:
        return MISSING
    return f"{timing.peak_memory_bytes / (1 << 20):.4g} MiB"


def fmt_ms(ms: float | None) -> str:
    """A time at a readable scale: 12.3 µs, 412 µs, 0.412 ms, 1.25 s."""
    if ms is None:
        return MISSING
    if ms < 1.0:
        return f"{ms * 1e3:.1f} µs" if ms < 0.1 else f"{ms * 1e3:.0f} µs"
    if ms < 1000.0:
        return f"{ms:.3f} ms"
    return f"{ms / 1e3:.2f} s"


def fmt_rate(value: float | None, unit: str) -> str:
    """GB/s or TFLOP/s with sensible digits: 2987 GB/s, 412 TFLOP/s, 0.85 TFLOP/s."""
    if value is None:
        return MISSING
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def fmt_bandwidth(gbps: float) -> str:
    """A bandwidth in its own unit: 31.0 TB/s, 812 GB/s."""
    return f"{gbps / 1000:.1f} TB/s" if gbps >= 1000 else f"{gbps:.0f} GB/s"


def fmt_flops(tflops: float) -> str:
    """A rate of arithmetic in its own unit: 2.10 PFLOP/s, 750 TFLOP/s, 1.5 TFLOP/s."""
    if tflops >= 1000:
        return f"{tflops / 1000:.2f} PFLOP/s"
    return f"{tflops:.0f} TFLOP/s" if tflops >= 100 else f"{tflops:.3g} TFLOP/s"


def fmt_speedup(value: float | None) -> str:
    """How many times faster: 1.87x."""
    return MISSING if value is None else f"{value:.2f}x"


def fmt_fraction(value: float | None) -> str:
    """A share of a ceiling: 87%."""
    return MISSING if value is None else f"{value:.0%}"


def fmt_count(n: int) -> str:
    """A count (cases, elements, configs), never cut: exact below 100,000 ("36628"), else three significant
    digits and k, M, B ("520k", "1.05M", "16.8M"): at most five characters past the exact range. Every count
    the app shows goes through here."""
    n = int(n)
    if abs(n) < 100_000:
        return str(n)
    for scale, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "B")):
        value = n / scale
        if abs(value) < 999.5 or suffix == "B":
            digits = 2 if abs(value) < 9.995 else 1 if abs(value) < 99.95 else 0
            return f"{value:.{digits}f}{suffix}"
    raise AssertionError("unreachable")


def plural(n: int, noun: str, plural_form: str = "") -> str:
    """ "1 element", "3 elements", "1 compiled kernel": a count with its noun agreeing."""
    return f"{n} {noun if n == 1 else (plural_form or noun + 's')}"


def fmt_part(part: int, whole: int, sep: str = "/") -> str:
    """ "36628/37000", "412/1.05M": a part of a whole, each fmt_count'ed. A part short of the whole never reads
    as the whole once both are abbreviated: "<1.05M/1.05M"."""
    text_part, text_whole = fmt_count(part), fmt_count(whole)
    if text_part == text_whole and part != whole:
        text_part = ("<" if part < whole else ">") + text_part
    return f"{text_part}{sep}{text_whole}"


def source_lines(path: str, line: int, around: int = 1, source: str | None = None) -> list[tuple[int, str]]:
    """(number, text) of the lines of `path` around `line` (`source`: its text, when already read); [] when it
    cannot be read or the line is out of range."""
    if not path or not line:
        return []
    try:
        text = source if source is not None else Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return []
    return [(n, lines[n - 1]) for n in range(max(1, line - around), min(len(lines), line + around) + 1)]
