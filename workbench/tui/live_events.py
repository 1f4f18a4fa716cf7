"""The live loop's plumbing into the app: the watcher's thread, runs asked for, and the messages the threads
post (messages.py) handled on the UI thread: a save, files gone, a run begun, each of its events, its end.

A mixin of WorkbenchApp. Each event is folded into its run's state (model.RunState.apply) and names the panels
it changed; run_view.py draws them, kept_runs.py keeps what the app remembers of the run, history_tabs.py reads
the history when a run starts and ends.
"""

from __future__ import annotations

import time
from typing import Any

from textual import work

from ..core.events import (
    CaseResult,
    CompiledKernels,
    Event,
    LogLine,
    Problem,
    RunFinished,
    RunStarted,
    StageChanged,
    WorkerReady,
)
from ..core.live.loop import RunRequest
from ..core.live.watch import ProjectWatcher, Save
from ..core.run.session import RunOutcome
from .messages import FilesGone, PluginWarning, RunBegan, RunDone, RunEvent, SaveAccepted, WatchFailed
from .model import RunState
from .widgets.cases import CasesTable
from .widgets.ir import IRPanel
from .widgets.log import LogPanel

# Events that mean the new run has something of its own to show (until then the old results stay, stale).
QUIET_EVENTS = (WorkerReady, LogLine, StageChanged)
BENCH_PANELS = frozenset({"status", "bench", "autotune", "log"})  # what events after the verdict redraw
# What overtook a run, by the newer request's reason: "run 3 · ... (cancelled: overtaken by a save)".
OVERTAKEN_BY = {"save": "a save", "rerun": "a rerun", "verify only": "a verify-only run", "pin": "a pinned run",
                "start": "the first run", "new inputs": "a run on new inputs"}


class LiveEvents:
    # -- threads: the watcher and the live loop -------------------------------------------------

    @work(thread=True, group="watch", exit_on_error=False)
    def watch_project(self) -> None:
        try:
            watcher = ProjectWatcher(self.project)
            for notice in watcher.watch(self._stop_watching):
                self.post_message(SaveAccepted(notice) if isinstance(notice, Save) else FilesGone(notice))
        except Exception as exc:  # noqa: BLE001 - said on screen; the app goes on without watching
            self.post_message(WatchFailed(f"{type(exc).__name__}: {exc}"))

    def _loop_event(self, run_id: int, event: Event) -> None:
        """On the run thread (the plugins have observed it: run/session.PluginHooks): the UI gets the event."""
        self.post_message(RunEvent(run_id, event))

    def submit(self, reason: str, stages: tuple[str, ...] | None = None, save: Save | None = None) -> int:
        request = RunRequest(stages=stages or self.session.stages, reason=reason,
                             pins=tuple(sorted(self.session.pin_labels.items())), save=save)
        overtaken = self.session.latest
        run_id = self.loop.submit(request)
        if overtaken is not None and overtaken.finished is None:  # the loop kills it: never shown, said so
            self.query_one(LogPanel).cancel_run(overtaken.run_id, f"overtaken by {OVERTAKEN_BY.get(reason, reason)}")
        self.session.latest = self.kept.begin(run_id, request)
        self.render_run({"bench", "autotune"})  # what is on screen is stale now
        return run_id

    # -- messages --------------------------------------------------------------------------------

    def on_save_accepted(self, message: SaveAccepted) -> None:
        self.session.last_save = message.save
        self.submit("save", save=message.save)  # the Changes tab follows at RunStarted, off the save's path

    def on_files_gone(self, message: FilesGone) -> None:
        self.session.missing = message.paths
        if message.paths:
            self.query_one(LogPanel).note(f"{', '.join(message.paths)} disappeared: waiting for it to come back")
        self.render_run({"bench", "autotune"})

    def on_plugin_warning(self, message: PluginWarning) -> None:
        self.query_one(LogPanel).note(message.text, style="red1")

    def on_watch_failed(self, message: WatchFailed) -> None:
        self.notify(f"saves are no longer watched: {message.reason}", title="watcher stopped", severity="error",
                    timeout=30)

    def on_run_began(self, message: RunBegan) -> None:
        run = self.kept.runs.get(message.run_id)
        if run is None or message.run_id != self.loop.latest:
            return
        save = message.request.save
        what = f"save of {', '.join(save.changed)}" if save else message.request.reason
        self.query_one(LogPanel).begin_run(f"run {message.run_id} · {what} · {time.strftime('%H:%M:%S')}",
                                           message.run_id)

    def on_run_event(self, message: RunEvent) -> None:
        run = self.kept.runs.get(message.run_id)
        if run is None or message.run_id != self.loop.latest:
            return  # a run that a newer save overtook: never shown as the verdict of the new source
        event = message.event
        had_verdict, had_bench = run.verdict_known, run.bench_shown
        changed = run.apply(event)
        session = self.session
        if isinstance(event, WorkerReady):
            session.ready = event
        if run is not session.current and not isinstance(event, QUIET_EVENTS):
            session.current = run
            changed |= {"cases", "bench", "autotune"}
        if isinstance(event, RunStarted):
            # Reading the history competes with the run's start for this process: done once the worker has the job.
            self.refresh_changes(run.request.save.source if run.request.save else None)
        if run.bench_shown:
            session.benched = run
        if isinstance(event, RunFinished):
            self._learn_configs(run)
        if isinstance(event, CompiledKernels):
            session.note_compiled(run)
            picked = {a.kernel: a.picked for a in run.autotune if a.case_index == event.case_index}
            self.query_one(IRPanel).add_compiled(run.run_id, event, self.project.kernel_path.name, picked)
        self._log_event(event, run)
        if changed <= BENCH_PANELS:
            self.render_soon(changed)  # the benchmark's events follow the verdict within milliseconds
        else:
            self.render_now(changed)
        for panel in self._event_panels():
            try:
                panel.workbench_event(event)
            except Exception as exc:  # noqa: BLE001
                self.query_one(LogPanel).note(f"panel {panel.id}: {type(exc).__name__}: {exc}", style="red1")
        if isinstance(event, CaseResult) and event.status in ("failed", "error") and not run.failure_shown:
            run.failure_shown = True  # the first failure goes on screen now, not with the complete verdict
            if not run.verdict_known:
                self.query_one(CasesTable).select_first_failure(run)
                self.render_detail()
            self.call_after_refresh(self.kept.shown, "failure", run)
        if not had_verdict and run.verdict_known and run.verdict != "cancelled":
            self.query_one(CasesTable).select_first_failure(run)
            self.render_detail()  # now, not when the highlight message has bubbled up
            self.call_after_refresh(self.kept.shown, "verdict", run)
        if not had_bench and run.bench_shown:
            self.call_after_refresh(self.kept.shown, "bench", run)

    def on_run_done(self, message: RunDone) -> None:
        outcome: RunOutcome = message.outcome
        run = self.kept.done(message.run_id, outcome)
        if run is not None and message.run_id == self.loop.latest:
            self.refresh_history(exclude=outcome.record.id if outcome.record else "",
                                 source=self.project_source(), current_times=run.case_timings())

    def _log_event(self, event: Event, run: RunState) -> None:
        log = self.query_one(LogPanel)
        if isinstance(event, Problem):
            log.problem(event, str(self.project.kernel_path))
            if event.kind in ("crash", "timeout"):
                self.notify(f"{event.message}. A fresh worker took over.", title=f"worker {event.kind}",
                            severity="error", timeout=8)
        elif isinstance(event, LogLine):
            log.line(event)
        elif isinstance(event, RunFinished) and event.verdict != "cancelled":
            verdict = run.tally.verdict()  # the status line's counts, as the CLI says them
            log.note(f"run finished: {run.verdict_label} ({verdict.describe_counts()}) in {event.duration_s:.2f} s",
                     style="grey62")

    def _event_panels(self) -> list[Any]:
        return [w for w in self.query("TabPane > *") if hasattr(w, "workbench_event")]
