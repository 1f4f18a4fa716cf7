"""Small Rich renderings the panels share: verdict marks, bars, heat maps, diffs, source excerpts. The numbers
in them are core/text.py's, as the CLI's reports print them."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text

from ..core.live.changes import SpeedChange
from ..core.text import MISSING, fmt_ms
from ..core.timing.noise import FASTER, NO_INTERVAL, SLOWER, WITHIN_NOISE

MARK = {"passed": "✔", "failed": "✘", "error": "■", "skipped": "–", "pending": "·", "running": "●",
        "cancelled": "⊘", "not run": "–", "gpu only": "◇", "gpu_only": "◇", "forward ok": "◐"}
MARK_COLOR = {"passed": "green3", "failed": "red1", "error": "red1", "skipped": "grey50", "pending": "grey42",
              "running": "yellow", "cancelled": "grey50", "not run": "grey50", "gpu only": "yellow3",
              "gpu_only": "yellow3", "forward ok": "green4"}
BLOCKS = " ▏▎▍▌▋▊▉█"
SPARKS = "▁▂▃▄▅▆▇█"
HEAT = ["#2a2f3a", "#d4a017", "#e08a00", "#e06000", "#d93a25", "#ff1f1f"]  # clean, then few bad .. all bad


def status_text(status: str, label: str | None = None) -> Text:
    mark = MARK.get(status, "?")
    return Text(f"{mark} {label if label is not None else status}", style=f"bold {MARK_COLOR.get(status, '')}")


def bar(fraction: float | None, width: int = 12, style: str = "") -> Text:
    """A horizontal bar with eighth-block resolution, and the percentage after it."""
    if fraction is None:
        return Text(MISSING, style="grey50")
    clipped = max(0.0, min(fraction, 1.0))
    eighths = round(clipped * width * 8)
    full, part = divmod(eighths, 8)
    body = "█" * full + (BLOCKS[part] if part else "")
    color = style or ("green3" if fraction >= 0.7 else "yellow3" if fraction >= 0.4 else "orange3")
    text = Text(body.ljust(width), style=color)
    text.append(f" {fraction * 100:4.0f}%", style="bold")
    return text


CHANGE_STYLE = {FASTER: "bold green3", SLOWER: "bold red1", WITHIN_NOISE: "bold", NO_INTERVAL: "grey62"}
CHANGE_ARROW = {FASTER: "▼", SLOWER: "▲", WITHIN_NOISE: "≈", NO_INTERVAL: "?"}
CASES_SHOWN = 8  # per-case lines under a comparison's head; the rest are counted


def speed_text(change: SpeedChange | None, why_not: str = "") -> Text:
    """Kernel time against an earlier run (core/live/changes.py computes it): the geometric mean's change with
    its interval and word, and how many cases came out faster, slower or within noise."""
    if change is None:
        return Text(why_not or "no timing to compare", style="grey50")
    overall = change.overall
    text = Text(f"{fmt_ms(change.before_ms)} → {fmt_ms(change.after_ms)}  ")
    text.append(f"{CHANGE_ARROW[overall.label]} {overall.describe()}", style=CHANGE_STYLE[overall.label])
    text.append(f"  ({change.describe_counts()})", style="grey50")
    return text


def case_change_lines(change: SpeedChange | None) -> Text:
    """One line per benchmark case: its change with interval and word; the cases only one run timed."""
    text = Text()
    if change is None or len(change.per_case) < 2:
        return text
    for case in change.per_case[:CASES_SHOWN]:
        text.append(f"\n  {case.name}  ", style="grey62")
        if case.change is None:
            text.append(f"timed in {case.only_in} only", style="grey50")
        else:
            text.append(case.change.describe(), style=CHANGE_STYLE[case.change.label])
    if len(change.per_case) > CASES_SHOWN:
        text.append(f"\n  ... and {len(change.per_case) - CASES_SHOWN} more cases", style="grey50")
    return text


def spark(values: list[float], width: int = 24) -> Text:
    """A one-line sparkline (lower is better: the last point is marked)."""
    if not values:
        return Text("no timed runs yet", style="grey50")
    values = values[-width:]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    text = Text()
    for n, value in enumerate(values):
        level = SPARKS[min(len(SPARKS) - 1, int((value - low) / span * (len(SPARKS) - 1) + 0.5))]
        text.append(level, style="bold cyan" if n == len(values) - 1 else "cyan")
    return text


def heat_map(grid: list[list[float]] | None, max_width: int = 48) -> Text:
    """The coarse error map: one cell per region of the output; grey is clean, amber to red is bad."""
    if not grid or not grid[0]:
        return Text("no error map (nothing wrong, or a scalar output)", style="grey50")
    columns = len(grid[0])
    group = max(1, -(-columns // max_width))  # cells merged per character, keeping the worst
    cell = "██" if columns * 2 <= max_width else "█"
    text = Text()
    for row in grid:
        for start in range(0, columns, group):
            fraction = max(row[start:start + group])
            if fraction <= 0:
                text.append("·" * len(cell), style="grey30")
            else:
                text.append(cell, style=HEAT[min(len(HEAT) - 1, 1 + int(fraction * (len(HEAT) - 1)))])
        text.append("\n")
    text.append("clean ", style="grey50")
    for color in HEAT[1:]:
        text.append("█", style=color)
    text.append(" all bad", style="grey50")
    return text


def diff_text(lines: list[str]) -> Text:
    text = Text()
    for line in lines:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green3"
        elif line.startswith("-"):
            style = "red1"
        else:
            style = "grey66"
        text.append(line + "\n", style=style)
    return text


def source_excerpt(path: str, line: int, context: int = 2, source: str | None = None) -> Syntax | Text:
    """The kernel source around `line`, the line itself highlighted."""
    try:
        code = source if source is not None else Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return Text(f"{path}:{line} (cannot be read)", style="grey50")
    first = max(1, line - context)
    return Syntax(code, "python", line_numbers=True, line_range=(first, line + context), highlight_lines={line},
                  theme="ansi_dark", word_wrap=False, background_color="default")


