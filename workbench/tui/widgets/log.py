"""The log: compile errors and tracebacks pointing at kernel.py lines, crashes, and the worker's output."""

from __future__ import annotations

import os
import re

from rich.rule import Rule
from rich.text import Text
from textual.widgets import RichLog

from ...core.events import LogLine, Problem
from ..render import source_excerpt

TRACEBACK_FILE_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


class LogPanel(RichLog):
    """A run's header is written with its first line (so a run overtaken before it said anything gets one header
    that says so, `cancel_run`), then what it reports. It keeps its last MAX_LINES lines; until the Log tab is
    first shown (RichLog renders once it knows its width) its last DEFERRED_WRITES writes, each a line or more
    (a save with a syntax error writes ~9 kB of them: the whole kernel.py in its excerpt, the traceback)."""

    MAX_LINES = 4000
    DEFERRED_WRITES = 500

    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=self.MAX_LINES, wrap=True, markup=False, highlight=False, **kwargs)
        self.pending: tuple[int, str] | None = None  # (run id, header) of the run begun, not yet written
        self.headed: int | None = None  # the run whose header was written last

    def write(self, *args, **kwargs):
        """RichLog.write; writes kept for later (the tab not shown yet) are bounded as the lines are: RichLog
        keeps every one of them (a day in the app with the Log tab never opened kept each save's)."""
        result = super().write(*args, **kwargs)
        deferred = getattr(self, "_deferred_renders", None)
        kept = min(self.max_lines or self.DEFERRED_WRITES, self.DEFERRED_WRITES)
        if deferred is not None and len(deferred) > kept:
            for _ in range(len(deferred) - kept):
                deferred.popleft()
        return result

    def begin_run(self, title: str, run_id: int = 0) -> None:
        self._flush()
        self.pending = (run_id, title)

    def cancel_run(self, run_id: int, why: str) -> None:
        """The run `run_id` was cancelled (`why`: "overtaken by a save"): its header says so."""
        if self.pending is not None and self.pending[0] == run_id:
            title = self.pending[1]
            self.pending = None
            self.headed = run_id
            self.write(Rule(f"{title} (cancelled: {why})", style="grey35", align="left"))
        elif self.headed == run_id:
            self.write(Text(f"run {run_id} cancelled: {why}", style="grey50"))  # its header went out with its output

    def _flush(self) -> None:
        if self.pending is not None:
            run_id, title = self.pending
            self.pending = None
            self.headed = run_id
            self.write(Rule(title, style="grey35", align="left"))

    def problem(self, problem: Problem, kernel_path: str) -> None:
        self._flush()
        head = Text(f"■ {problem.kind}", style="bold red1")
        if problem.location:
            head.append(f"  {os.path.basename(problem.file)}:{problem.line}" if problem.line
                        else f"  {os.path.basename(problem.file)}", style="bold")
        head.append(f"  {problem.message}")
        self.write(head)
        if problem.file and problem.line:
            self.write(source_excerpt(problem.file, problem.line))
        if problem.traceback:
            self.write(traceback_text(problem.traceback, kernel_path))

    def line(self, line: LogLine) -> None:
        if line.text.strip():
            self._flush()
            self.write(Text(line.text, style="grey62" if line.stream == "stdout" else "grey50"))

    def note(self, text: str, style: str = "yellow") -> None:
        self._flush()
        self.write(Text(text, style=style))


def traceback_text(traceback: str, kernel_path: str) -> Text:
    """A traceback with the frames in the user's kernel file picked out."""
    text = Text()
    for line in traceback.rstrip().splitlines():
        match = TRACEBACK_FILE_LINE.search(line)
        in_kernel = match is not None and os.path.abspath(match["file"]) == os.path.abspath(kernel_path)
        text.append(line + "\n", style="bold yellow" if in_kernel else "grey50")
    return text
