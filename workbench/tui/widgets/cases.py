"""The cases table (one row per verification case) and the detail of the selected case."""

from __future__ import annotations

import os

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from ...core.events import CaseResult
from ...core.text import MISSING, fmt_err, fmt_value
from ..model import CaseRow, RunState
from ..render import (
    MARK,
    MARK_COLOR,
    heat_map,
    source_excerpt,
    status_text,
)

COLUMNS = (("", 1), ("#", 2), ("inputs", 23), ("dtype", 8), ("verdict", 7), ("max abs", 7), ("max rel", 7),
           ("bad", 9), ("configs", 7))


class CasesTable(DataTable):
    """Verdict per case; the cursor picks the case the detail view shows."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for label, width in COLUMNS:
            self.add_column(label, width=width, key=label or "mark")

    def show(self, run: RunState | None) -> None:
        rows = run.ordered_rows() if run else []
        keys = [str(r.index) for r in rows]
        if keys != [str(k.value) for k in self.rows]:
            selected = self.selected_key()
            self.clear()
            for row in rows:
                self.add_row(*cells(row), key=str(row.index))
            if selected in keys:
                self.move_cursor(row=keys.index(selected), animate=False)
            return
        for row in rows:
            for (label, _), value in zip(COLUMNS, cells(row)):
                self.update_cell(str(row.index), label or "mark", value)

    def select_first_failure(self, run: RunState) -> None:
        """Put the cursor on the first case that failed, so the detail shows it without a key press."""
        keys = [str(k.value) for k in self.rows]
        failing = next((str(r.index) for r in run.ordered_rows() if r.status in ("failed", "error")), None)
        if failing in keys:
            self.move_cursor(row=keys.index(failing), animate=False)

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except Exception:  # noqa: BLE001 - a cursor past the rows after a clear
            return None


def cells(row: CaseRow) -> tuple:
    result = row.result
    status = row.status
    mark = Text(MARK.get(status, "?"), style=f"bold {MARK_COLOR.get(status, '')}")
    verdict = Text(status, style=MARK_COLOR.get(status, ""))
    bad = MISSING
    if result is not None and result.numel:
        bad = f"{result.bad_count}/{result.numel}" if result.bad_count else "0"
    ok, total = row.configs_passed
    configs = MISSING if not total else Text(f"{ok}/{total}", style="green3" if ok == total else "bold red1")
    dtype = (result.dtype if result else "") or ""
    label = row.label.replace(f" dtype={dtype}", "").replace(f"dtype={dtype}", "") if dtype else row.label
    return (mark, str(row.index), label or row.label, dtype or MISSING, verdict,
            fmt_err(result.max_abs_err if result else None), fmt_err(result.max_rel_err if result else None),
            bad, configs)


class CaseDetail(VerticalScroll):
    """Everything known about one case: checks that failed, error statistics, worst element, where."""

    def compose(self):
        yield Static(id="detail-body")

    def show(self, row: CaseRow | None, run: RunState | None) -> None:
        body = self.query_one("#detail-body", Static)
        if row is None:
            body.update(project_problems(run) if run and run.problems else
                        Text("select a case to see its details", style="grey50"))
            return
        body.update(case_detail(row, run))


def case_detail(row: CaseRow, run: RunState | None) -> RenderableType:
    parts: list[RenderableType] = []
    title = Text()
    title.append_text(status_text(row.status, row.status.upper()))
    title.append(f"  case {row.index}  ", style="bold")
    title.append(row.label, style="grey70")
    parts.append(title)
    result = row.result
    for problem in row.problems:
        parts.append(Text(f"■ {problem.kind}: {problem.message}", style="red1"))
        if problem.file and problem.line:
            parts.append(source_excerpt(problem.file, problem.line))
    if result is not None:
        parts += result_detail(result)
    elif not row.problems:
        parts.append(Text("not run yet", style="grey50"))
    failing = [c for c in row.configs if c.status in ("failed", "error")]
    if row.configs:
        parts.append(Text(""))
        parts.append(Text(f"autotune configs: {row.configs_passed[0]} of {len(row.configs)} pass", style="bold"))
        for config in row.configs:
            line = Text("  ")
            line.append(f"{MARK.get(config.status, '?')} ", style=MARK_COLOR.get(config.status, ""))
            line.append(config.config)
            if config.status != "passed" and config.messages:
                line.append(f"  {config.messages[0]}", style="red1")
            parts.append(line)
        for config in failing[:1]:
            if config.error_map and (result is None or not result.error_map):
                parts.append(heat_map(config.error_map))
    location = row.location()
    if location and not row.problems:
        parts.append(Text(f"at {os.path.basename(location[0])}:{location[1]}", style="bold"))
        parts.append(source_excerpt(*location))
    return Group(*parts)


def result_detail(result: CaseResult) -> list[RenderableType]:
    parts: list[RenderableType] = []
    for message in result.messages:
        parts.append(Text(f"✘ {message}", style="red1"))
    if result.pattern:
        where = Text("where: ", style="bold")
        where.append(result.pattern, style="yellow")
        parts.append(where)
    if not result.numel:
        return parts + [Text(f"note: {note}", style="grey62") for note in result.notes]
    stats = Table.grid(padding=(0, 2))
    stats.add_column(style="grey62", no_wrap=True)
    stats.add_column()
    bad = f"{result.bad_count} of {result.numel}" if result.numel else MISSING
    if result.numel and result.bad_count:
        bad += f" ({result.bad_count / result.numel:.2%})"
    stats.add_row("bad elements", bad)
    stats.add_row("max abs · rel", f"{fmt_err(result.max_abs_err)} · {fmt_err(result.max_rel_err)}"
                  f"   rel norm {fmt_err(result.rel_norm_err)}")
    if result.rtol is not None:
        stats.add_row("tolerance", f"rtol {result.rtol:g} · atol {result.atol:g} ({result.dtype})")
    took = f"{result.duration_s:.2f} s" if result.duration_s else ""
    if result.gpu:  # the run spread its cases over GPUs: which one ran this case
        took = f"{took} on GPU {result.gpu}" if took else f"on GPU {result.gpu}"
    if result.launches is not None:
        took += f"{', ' if took else ''}{result.launches} Triton launch{'es' if result.launches != 1 else ''} per call"
    if took:
        stats.add_row("took", took)
    parts.append(stats)
    if result.worst is not None:
        worst = result.worst
        index = ", ".join(str(i) for i in worst.index)
        line = Text("worst ", style="bold")
        line.append(f"[{index}]{' of output' + result.output if result.output else ''}  ")
        line.append("kernel ", style="grey62")
        line.append(fmt_value(worst.kernel), style="bold red1")
        line.append("  reference ", style="grey62")
        line.append(fmt_value(worst.reference), style="bold green3")
        if worst.kernel is not None and worst.reference is not None:
            line.append(f"  Δ {worst.kernel - worst.reference:+.3g}", style="grey62")
        parts.append(line)
    if result.error_map:
        parts.append(Text("where the bad elements are", style="bold"))
        parts.append(heat_map(result.error_map))
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="grey62"))
    return parts


def project_problems(run: RunState) -> RenderableType:
    parts: list[RenderableType] = [Text("the project could not be verified", style="bold red1")]
    for problem in run.problems:
        parts.append(Text(f"■ {problem.kind}: {problem.message}", style="red1"))
        if problem.file and problem.line:
            parts.append(source_excerpt(problem.file, problem.line))
    return Group(*parts)
