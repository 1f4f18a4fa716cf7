"""The run state drawn on screen: the status line, the cases and the selected case, the Benchmark and Autotune
tabs, each drawn from `model.LiveSession` and the run on screen (`session.current`), and marked stale while a
newer save runs.

A mixin of WorkbenchApp: the live loop's events (live_events.py) say which panels changed, and these draw them.
"""

from __future__ import annotations

from .widgets.bench import AutotunePanel, BenchPanel
from .widgets.cases import CaseDetail, CasesTable
from .widgets.status import StatusBar


class RunView:
    _render_due: set[str]  # what render_soon has queued (WorkbenchApp.__init__ starts it empty)

    def render_all(self) -> None:
        self.render_run({"status", "cases", "bench", "autotune"})

    def render_status(self) -> None:
        self.query_one(StatusBar).show(self.session)

    def render_soon(self, changed: set[str]) -> None:
        """Draw `changed` once the messages already queued are handled: a burst of benchmark events (the
        GPU facts, the stage, the first rows) is drawn once, after the frame that shows the verdict."""
        pending = bool(self._render_due)
        self._render_due |= changed
        if pending:
            return  # a draw is already queued: it takes these too

        def draw() -> None:
            due, self._render_due = self._render_due, set()
            if due:  # empty: a full render_run came first and drew them
                self.render_run(due)

        self.call_later(draw)

    def render_now(self, changed: set[str]) -> None:
        """Draw `changed` now, with what render_soon has queued (its draw then finds nothing left to do)."""
        self.render_run(changed | self._render_due)
        self._render_due = set()

    def render_run(self, changed: set[str]) -> None:
        self.render_status()
        stale = self.session.stale
        if "cases" in changed:
            self.query_one(CasesTable).show(self.session.current)
            self.render_detail()
        if "bench" in changed:
            self.query_one(BenchPanel).show(self.session)
        if "autotune" in changed or "bench" in changed:
            self.query_one(AutotunePanel).show(self.session)
        for widget in (self.query_one(CasesTable), self.query_one(CaseDetail)):
            widget.set_class(stale, "-stale")
            widget.border_subtitle = "stale: a newer save is running" if stale else ""

    def render_detail(self) -> None:
        run = self.session.current
        key = self.query_one(CasesTable).selected_key()
        row = run.rows.get(int(key)) if run is not None and key is not None else None
        self.query_one(CaseDetail).show(row, run)

    def _tick(self) -> None:
        """Every quarter second: the status line's clocks, while the newest run has no verdict or has not ended."""
        latest = self.session.latest
        if latest is not None and (latest.verdict_at is None or latest.finished is None):
            self.render_status()
