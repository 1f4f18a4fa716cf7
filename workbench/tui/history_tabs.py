"""The History and Changes tabs' content, read from the project's history in a thread: the newest records (each
read once, kept small: project/history.RecentRecords), the kernel's time across them, and the source on disk
compared with the previous run and the last passing one (live/changes.compare_with_history).

A mixin of WorkbenchApp: `refresh_history` runs on a worker thread and hands what it read to the UI thread.
"""

from __future__ import annotations

from textual import work

from ..core.live.changes import CaseKey, CaseTiming, compare_with_history, kernel_time_series
from ..core.project.history import older_record, read_record, read_source
from .widgets.changes import ChangesPanel, HistoryPanel


class HistoryTabs:
    def project_source(self) -> str:
        try:
            return self.project.kernel_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def refresh_changes(self, source: str | None) -> None:
        self.refresh_history(source=source if source is not None else self.project_source())

    @work(thread=True, group="history", exclusive=True, exit_on_error=False)
    def refresh_history(self, exclude: str = "", source: str | None = None,
                        current_times: dict[CaseKey, CaseTiming] | None = None) -> None:
        unreadable: list[str] = []
        # The newest runs only (one more than the table shows, for its oldest row's change): a long day's
        # history (up to [history] keep_runs) is not read whole on every save.
        records, total = self.recent_records.read(unreadable)  # each record read once, kept small
        times = dict(self.kept.bench_times)  # this thread's copy: the UI thread trims the original
        series = kernel_time_series(records, times)
        comparisons = None
        if source is not None:
            # The two runs compared with, read whole: the previous run and the last passing one (older than the
            # runs listed, read from disk only then).
            earlier = [r for r in records if r.id != exclude]
            passing = next((r for r in reversed(earlier) if r.verdict == "passed"), None)
            if passing is None and earlier:
                passing = older_record(self.project, earlier[0].id, lambda r: r.verdict == "passed", unreadable)
            wanted = {r.id for r in (earlier[-1:] + [passing]) if r is not None}
            whole = [read_record(self.project, r.id, unreadable) or r for r in earlier if r.id in wanted]
            if passing is not None and passing.id not in {r.id for r in earlier}:
                whole.insert(0, passing)
            comparisons = compare_with_history(whole, source, lambda h: read_source(self.project, h), times,
                                               current_times, exclude)
        for line in unreadable:
            self.call_from_thread(self.notify, line, title="history", severity="warning", timeout=15)
        self.call_from_thread(self._show_history, records, series, comparisons, total)

    def _show_history(self, records, series, comparisons, total: int | None = None) -> None:
        self.session.kernel_times = [ms for _, ms in series]
        self.query_one(HistoryPanel).show(records, {record.id: ms for record, ms in series}, total)
        if comparisons is not None:
            self.query_one(ChangesPanel).show(comparisons)
        self.render_status()
