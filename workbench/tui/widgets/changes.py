"""What changed: this save's diff against the previous and the last passing run, beside the speed change;
and the run history with its kernel-time sparkline."""

from __future__ import annotations

import time

from rich.text import Text
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Sparkline, Static

from ...core.live.changes import Comparison
from ...core.project.history import RunRecord
from ...core.text import MISSING, fmt_ms, fmt_part
from ..render import MARK, MARK_COLOR, case_change_lines, diff_text, speed_text


class ChangesPanel(Horizontal):
    def compose(self):
        for side in ("previous", "passing"):
            with VerticalScroll(classes="diff-column"):
                yield Static(id=f"changes-{side}-head", classes="panel-head")
                yield Static(id=f"changes-{side}")

    def show(self, comparisons: list[Comparison]) -> None:
        for side, comparison in zip(("previous", "passing"), comparisons):
            self.query_one(f"#changes-{side}-head", Static).update(comparison_head(comparison))
            self.query_one(f"#changes-{side}", Static).update(comparison_body(comparison))


def comparison_head(comparison: Comparison) -> Text:
    text = Text(f"vs {comparison.title}", style="bold")
    record = comparison.record
    if record is None:
        text.append("  none yet", style="grey50")
        return text
    verdict = record.verdict
    text.append(f"  {record.id[:15]} ", style="grey62")
    text.append(f"{MARK.get(verdict, '?')} {verdict}", style=MARK_COLOR.get(verdict, ""))
    text.append("\nspeed  ", style="grey62")
    text.append_text(speed_text(comparison.speed, "; ".join(comparison.notes)))
    text.append_text(case_change_lines(comparison.speed))
    return text


def comparison_body(comparison: Comparison) -> Text:
    if comparison.record is None:
        return Text("no earlier run to compare with", style="grey50")
    if not comparison.diff:
        return Text("the same source", style="grey50")
    return diff_text(comparison.diff)


HISTORY_ROWS = 200  # the newest runs the table lists (the app reads no more of the history for it)
HISTORY_COLUMNS = ("when", "run", "source", "verdict", "cases", "kernel time", "Δ prev")


class HistoryPanel(Vertical):
    """Kernel time across saves (sparkline), and the newest HISTORY_ROWS recorded runs, newest first."""

    def compose(self):
        yield Static(id="history-head", classes="panel-head")
        yield Sparkline([], id="history-spark")
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#history-table", DataTable).add_columns(*HISTORY_COLUMNS)

    def show(self, records: list[RunRecord], times: dict[str, float], total: int | None = None) -> None:
        """`times`: record id -> the run's kernel time (ms), for the runs that were timed; `records`: the newest
        runs, oldest first; `total`: how many the history holds (`workbench history` lists them all)."""
        series = [times[r.id] for r in records if r.id in times]
        total = len(records) if total is None else max(total, len(records))
        head = Text(f"{total} runs recorded", style="bold")
        if total > HISTORY_ROWS:
            head.append(f" (the newest {HISTORY_ROWS} listed: `workbench history` lists them all)", style="grey62")
        if series:
            head.append(f" · kernel time (geometric mean over benchmark cases): best {fmt_ms(min(series))}, "
                        f"last {fmt_ms(series[-1])}", style="grey62")
        else:
            head.append(" · no timed runs yet: the sparkline fills as saves are benchmarked", style="grey50")
        self.query_one("#history-head", Static).update(head)
        spark = self.query_one("#history-spark", Sparkline)
        spark.data = series[-120:]
        spark.display = len(series) > 1
        table = self.query_one("#history-table", DataTable)
        table.clear()
        previous: float | None = None
        rows = []
        for record in records:
            ms = times.get(record.id)
            change = MISSING
            if ms is not None and previous is not None:
                pct = (ms / previous - 1) * 100
                change = Text(f"{pct:+.1f}%", style="green3" if pct < -1 else "red1" if pct > 1 else "")
            if ms is not None:
                previous = ms
            rows.append((record, ms, change))
        for record, ms, change in reversed(rows[-HISTORY_ROWS:]):
            counts = record.data.get("counts") or {}
            total = sum(counts.get(k, 0) for k in ("passed", "failed", "errors"))
            verdict_name = record.verdict
            verdict = Text(f"{MARK.get(verdict_name, '?')} {verdict_name}", style=MARK_COLOR.get(verdict_name, ""))
            table.add_row(time.strftime("%H:%M:%S", time.localtime(record.created)), record.id[:15],
                          record.source_hash[:8], verdict, fmt_part(int(counts.get("passed", 0)), int(total)),
                          fmt_ms(ms), change, key=record.id)
