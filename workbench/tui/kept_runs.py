"""What the app keeps of its runs, bounded whatever the length of the day. No Textual here.

The run states (model.RunState) of the newest runs only (an older run can no longer report), the ids of the
newest runs recorded, the timed cases of the newest runs timed (their records hold them too: this is for the
comparisons while a record is being read), and the newest entries of the timeline (what went on screen when).
The history and changes tabs read the newest HISTORY_ROWS records from disk and an older one only when a
comparison needs it (history_tabs.py); the log keeps its last LogPanel.MAX_LINES lines (its last
LogPanel.DEFERRED_WRITES writes while the Log tab has never been shown).
"""

from __future__ import annotations

import time

from ..core.live.changes import CaseKey, CaseTiming
from ..core.live.loop import RunRequest
from ..core.run.session import RunOutcome
from .model import RunState

RECENT_RUNS = 3
RECORDED_KEPT = 32
TIMED_RUNS_KEPT = 16
TIMELINE_KEPT = 120


class KeptRuns:
    """The app's runs: their states, which were recorded, their timed cases, and the timeline of what was shown."""

    def __init__(self) -> None:
        self.runs: dict[int, RunState] = {}  # run id -> its state, the newest RECENT_RUNS
        self.bench_times: dict[str, dict[CaseKey, CaseTiming]] = {}  # history record id -> its timed cases
        # (failure|verdict|bench, run id, source hash, shown at), the newest TIMELINE_KEPT
        self.timeline: list[tuple[str, int, str, float]] = []
        self.recorded: set[int] = set()  # the newest run ids whose outcome is in the history (after RunDone)

    def begin(self, run_id: int, request: RunRequest) -> RunState:
        """The state of a run just asked for; the runs too old to report any more are let go."""
        self.runs = {k: v for k, v in self.runs.items() if k > run_id - RECENT_RUNS}  # only these can still report
        self.runs[run_id] = RunState(run_id=run_id, request=request)
        return self.runs[run_id]

    def shown(self, what: str, run: RunState) -> None:
        """`what` of `run` (its first failure, its verdict, its benchmark) is on screen now."""
        self.timeline.append((what, run.run_id, run.source_hash, time.time()))
        if len(self.timeline) > TIMELINE_KEPT:
            del self.timeline[:-TIMELINE_KEPT]

    def done(self, run_id: int, outcome: RunOutcome) -> RunState | None:
        """A run ended (its record written, if any): its timed cases kept by record id. Its state, if kept."""
        run = self.runs.get(run_id)
        if run is not None and outcome.record is not None and run.case_timings():
            self.bench_times[outcome.record.id] = run.case_timings()
            for old in list(self.bench_times)[:-TIMED_RUNS_KEPT]:
                del self.bench_times[old]
        if outcome.record is not None:
            self.recorded.add(run_id)
            if len(self.recorded) > RECORDED_KEPT:
                self.recorded = set(sorted(self.recorded)[-RECORDED_KEPT:])
        return run
