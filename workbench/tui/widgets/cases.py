"""The cases table (one row per verification case) and the detail of the selected case."""

from __future__ import annotations

import os
import re

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from ...core.events import CaseResult
from ...core.text import MISSING, fmt_case_err, fmt_err, fmt_part, fmt_value
from ...core.verify.compared import compared_words
from ..model import CaseRow, RunState
from ..render import (
    MARK,
    MARK_COLOR,
    heat_map,
    source_excerpt,
    status_text,
)

# The table's columns, in order. The key columns always show (the inputs give way first, their parameters cut
# with an ellipsis, never a number in another column); the others follow while they fit whole, else they are
# left out (the selected case's detail has them all). Every column is as wide as its widest cell.
KEY_COLUMNS = ("mark", "#", "inputs", "dtype", "verdict", "bad")
OPTIONAL_COLUMNS = ("configs", "max abs", "max rel")  # configs only where some case has forced configs
HEADERS = {"mark": "", "#": "#", "inputs": "inputs", "dtype": "dtype", "verdict": "verdict", "bad": "bad",
           "configs": "configs", "max abs": "max abs", "max rel": "max rel"}
GENERATED_MARKS = (" (generated)", " (gen)")  # the inputs of a generated case say so, shorter where space is short
MIN_PARAMS = 6  # cells of a generated case's parameters kept before "(gen)" (with the ellipsis)
INPUTS_SOFT_MIN = 24  # the inputs give way to the other columns down to this width, then those go
SCROLLBAR = 1  # the vertical scrollbar's width (workbench.tcss), kept free so it never pushes a column off


class CasesTable(DataTable):
    """Verdict per case; the cursor picks the case the detail view shows."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self._run: RunState | None = None
        self._layout: tuple[tuple[str, int], ...] = ()
        self._relayout(self.plan([]))

    def on_resize(self) -> None:
        self.show(self._run)

    def show(self, run: RunState | None) -> None:
        self._run = run
        rows = run.ordered_rows() if run else []
        layout = self.plan(rows)
        keys = [str(r.index) for r in rows]
        selected = self.selected_key()
        if layout != self._layout:
            self._relayout(layout)  # a column's width changed: the table is built again
        if keys != [str(k.value) for k in self.rows]:
            self.clear()
            for row in rows:
                self.add_row(*self.cells_of(row), key=str(row.index))
            if selected in keys:
                self.move_cursor(row=keys.index(selected), animate=False)
            return
        for row in rows:
            for (column, _), value in zip(self._layout, self.cells_of(row)):
                self.update_cell(str(row.index), column, value)

    def _relayout(self, layout: tuple[tuple[str, int], ...]) -> None:
        self.clear(columns=True)
        self._layout = layout
        for column, width in layout:
            self.add_column(HEADERS[column], width=width, key=column)

    def cells_of(self, row: CaseRow) -> list:
        values = cells(row)
        widths = dict(self._layout)
        values["inputs"] = inputs_text(row, widths.get("inputs", 0))
        return [values[column] for column, _ in self._layout]

    def available_width(self) -> int:
        """Cells the columns may take: the table's width less the vertical scrollbar's."""
        width = self.scrollable_content_region.width
        return width - SCROLLBAR if not self.show_vertical_scrollbar else width

    def plan(self, rows: list[CaseRow]) -> tuple[tuple[str, int], ...]:
        """(column, width) of each column shown: each as wide as its widest cell (or its header)."""
        pad = 2 * self.cell_padding
        contents = [cells(row) for row in rows]

        def width(column: str) -> int:
            return max([cell_len(HEADERS[column]), *(cell_len(c[column]) for c in contents)])

        optional = [c for c in OPTIONAL_COLUMNS if c != "configs" or any(r.configs for r in rows)]
        widths = {c: width(c) for c in (*KEY_COLUMNS, *optional) if c != "inputs"}
        full = max([cell_len(HEADERS["inputs"]), *(len(inputs_label(r, 0)) for r in rows)])
        short = max([cell_len(HEADERS["inputs"]), *(len(inputs_label(r, -1)) for r in rows)])
        available = self.available_width()
        if available <= 0:  # not laid out yet: every column at its content's width
            return tuple((c, full if c == "inputs" else widths[c]) for c in (*KEY_COLUMNS, *optional))
        keys_width = sum(widths[c] + pad for c in KEY_COLUMNS if c != "inputs") + pad
        for inputs in (full, short):  # the generated mark shortens before a column is left out
            room = available - keys_width - inputs - sum(widths[c] + pad for c in optional)
            if room >= 0:
                break
        else:  # the inputs give way down to INPUTS_SOFT_MIN; past that, the optional columns go instead
            optional_width = sum(widths[c] + pad for c in optional)
            inputs = max(available - keys_width - optional_width, min(short, INPUTS_SOFT_MIN))
            inputs = max(min(inputs, available - keys_width), cell_len(HEADERS["inputs"]))
        layout = [(c, inputs if c == "inputs" else widths[c]) for c in KEY_COLUMNS]
        room = available - keys_width - inputs
        for column in optional:
            if widths[column] + pad > room:
                break
            layout.append((column, widths[column]))
            room -= widths[column] + pad
        return tuple(layout)

    def select_first_failure(self, run: RunState) -> None:
        """Put the cursor on the first case that failed, so the detail shows it without a key press."""
        keys = [str(k.value) for k in self.rows]
        failing = next((str(r.index) for r in run.ordered_rows() if r.status in ("failed", "error", "gpu only")),
                       None)
        if failing in keys:
            self.move_cursor(row=keys.index(failing), animate=False)

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except Exception:  # noqa: BLE001 - a cursor past the rows after a clear
            return None


def cell_len(value) -> int:
    return value.cell_len if isinstance(value, Text) else Text(str(value)).cell_len


def generated_marks(row: CaseRow) -> tuple[str, str]:
    """A generated case's mark, long and short: "(generated)" / "(gen)", or its value stress: "[values x64]" /
    "[x64]"."""
    if row.stress:
        return f" [{row.stress}]", f" [{row.stress.removeprefix('values ')}]"
    return GENERATED_MARKS


def inputs_label(row: CaseRow, which: int = 0) -> str:
    return row.params + (generated_marks(row)[which] if row.generated else "")


def inputs_text(row: CaseRow, width: int) -> Text:
    """The case's inputs in `width` cells: a generated case keeps its mark ("(generated)", else "(gen)"; a
    value-stress case its stress) and gives up its last parameters instead, marked with an ellipsis
    (shorten_params: no value is cut)."""
    if not row.generated:
        return Text(shorten_params(row.params, width) if width else row.params)
    marks = generated_marks(row)
    for mark in marks:
        if not width or len(row.params) + len(mark) <= width:
            return Text(row.params).append(mark, style="cyan")
    mark = marks[-1]
    return Text(shorten_params(row.params, max(width - len(mark), MIN_PARAMS))).append(mark, style="cyan")


PARAM_START = re.compile(r" (?=[A-Za-z_]\w*=)")  # the space before each "name=" of "rows=3 shape=(3, 100, 7)"
VALUE_CHARS = re.compile(r"[\w.+\-]+$")


def shorten_params(params: str, width: int) -> str:
    """`params` in `width` cells: the whole "name=value" parameters that fit, then " …"; a value is never cut
    ("heads=16" is never "heads=1…": it goes whole, or it goes)."""
    if len(params) <= width:
        return params
    kept = ""
    for param in PARAM_START.split(params):
        candidate = f"{kept} {param}" if kept else param
        if len(candidate) + 2 > width:
            break
        kept = candidate
    if kept:
        return kept + " …"
    # Not even one parameter fits: cut, and drop a value (or name) the cut ends in, whole or not ("heads=16…"
    # would read as a longer number): "shape=(3, 100,…", "seq_len=…".
    return VALUE_CHARS.sub("", params[:max(width - 1, 0)]).rstrip(" ") + "…"


def bad_cell(result: CaseResult | None) -> str:
    """Bad elements of all ("36628/37000", "412/1.05M"; "0" when none), never cut (render.fmt_part)."""
    if result is None or not result.numel:
        return MISSING
    return fmt_part(result.bad_count, result.numel) if result.bad_count else "0"


def cells(row: CaseRow) -> dict[str, RenderableType]:
    result = row.result or row.forward  # a training kernel's forward, until its gradients are judged
    status = row.status
    ok, total = row.configs_passed
    return {
        "mark": Text(MARK.get(status, "?"), style=f"bold {MARK_COLOR.get(status, '')}"),
        "#": str(row.index),
        "inputs": inputs_label(row),
        "dtype": row.dtype or MISSING,
        "verdict": Text(status, style=MARK_COLOR.get(status, "")),
        "bad": bad_cell(result),
        "configs": MISSING if not total else Text(fmt_part(ok, total), style="green3" if ok == total else "bold red1"),
        "max abs": error_cell(result, "max_abs_err"),
        "max rel": error_cell(result, "max_rel_err"),
    }


def error_cell(result: CaseResult | None, field: str) -> RenderableType:
    if result is None:
        return MISSING
    text = fmt_case_err(getattr(result, field), result.non_finite)
    return Text(text, style="red1") if result.non_finite else text


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
    elif row.forward is not None:  # a training kernel in the live loop: its forward judged, its gradients next
        parts.append(Text(f"forward alone: {row.forward.status}; the gradients are not judged yet", style="grey70"))
        parts += result_detail(row.forward)
    elif not row.problems:
        parts.append(Text("not run yet", style="grey50"))
    failing = [c for c in row.configs if c.status in ("failed", "error")]
    if row.configs:
        ok, total = row.configs_passed
        parts.append(Text(""))
        parts.append(Text(f"autotune configs: {fmt_part(ok, total, ' of ')} pass", style="bold"))
        for config in row.configs:
            line = Text("  ")
            line.append(f"{MARK.get(config.status, '?')} ", style=MARK_COLOR.get(config.status, ""))
            line.append(config.config)
            if config.status != "passed" and config.messages:
                line.append(f"  {config.messages[0]}", style="red1")
            elif config.status == "skipped" and config.notes:
                line.append(f"  {config.notes[0]}", style="grey70")
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
    bad = fmt_part(result.bad_count, result.numel, " of ") if result.numel else MISSING
    if result.numel and result.bad_count:
        bad += f" ({result.bad_count / result.numel:.2%})"
    stats.add_row("bad elements", bad)
    # NaN and Inf have no error size: beside a count of them, the max is over the finite elements alone
    stats.add_row("max abs · rel" + (" (finite)" if result.non_finite else ""),
                  f"{fmt_err(result.max_abs_err)} · {fmt_err(result.max_rel_err)}"
                  f"   rel norm {fmt_err(result.rel_norm_err)}")
    if result.rtol is not None:
        stats.add_row("tolerance", f"rtol {result.rtol:g} · atol {result.atol:g} ({result.dtype})")
    for entry in result.compared:
        stats.add_row(entry["output"], compared_text(entry))
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
        line.append(fmt_value(worst.kernel, worst.kernel_special), style="bold red1")
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


def compared_text(entry: dict) -> str:
    """One compared output's error against its budget (verify/error_model.py)."""
    mark = "✔" if entry["passed"] else "✘"
    budget = f" (budget {entry['factor']:g}x)" if entry["multiple"] is not None else ""
    largest = fmt_case_err(entry["max_abs_err"], bool(entry.get("non_finite")))
    return f"{mark} {compared_words(entry)}{budget}, max abs {largest}"


def project_problems(run: RunState) -> RenderableType:
    parts: list[RenderableType] = [Text("the project could not be verified", style="bold red1")]
    for problem in run.problems:
        parts.append(Text(f"■ {problem.kind}: {problem.message}", style="red1"))
        if problem.file and problem.line:
            parts.append(source_excerpt(problem.file, problem.line))
    return Group(*parts)
