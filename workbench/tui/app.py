"""The live loop's app: watch the project, re-run on every save, show what the run says.

    WorkbenchApp(Project.open("projects/rmsnorm"), pm=make_plugin_manager()).run()

Threads do the work and post messages (the watcher, the live loop's run thread,
profilers); the UI thread only folds events into `model.RunState` and renders.
The app never imports torch, triton or the kernel: runs happen in worker processes.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static, TabbedContent, TabPane

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
from ..core.live.changes import CaseKey, CaseTiming, compare_with_history, kernel_time_series
from ..core.live.loop import LiveLoop, RunRequest
from ..core.live.watch import ProjectWatcher, Save
from ..core.project.folder import Project
from ..core.project.history import RecentRecords, older_record, read_record, read_source
from ..core.run.contracts import RunnerLike
from ..core.run.session import PluginHooks, RunOutcome
from .actions import Actions
from .messages import FilesGone, PluginWarning, RunBegan, RunDone, RunEvent, SaveAccepted, WatchFailed
from .model import LiveSession, RunState
from .panels import PanelSpec, collect_panels
from .widgets.bench import AutotunePanel, BenchPanel
from .widgets.cases import CaseDetail, CasesTable
from .widgets.changes import HISTORY_ROWS, ChangesPanel, HistoryPanel
from .widgets.footer import KeyBar
from .widgets.ir import IRPanel
from .widgets.log import LogPanel
from .widgets.profile import ProfilePanel
from .widgets.status import StatusBar

MIN_WIDTH, MIN_HEIGHT = 60, 16  # below this, the screen says how big it must be
# Below this (80x24 is the common default terminal and editor split), the compact layout: the cases and the case
# detail (verdict, the failure) fill the screen, and the tabs are one key away (1-7; Escape comes back).
COMPACT_WIDTH, COMPACT_HEIGHT = 100, 28
TABS = ("bench", "autotune", "changes", "log", "history", "profile", "ir")
# Events that mean the new run has something of its own to show (until then the old results stay, stale).
QUIET_EVENTS = (WorkerReady, LogLine, StageChanged)
BENCH_PANELS = frozenset({"status", "bench", "autotune", "log"})  # what events after the verdict redraw
# How long a thread may hold the GIL while another waits (Python's default: 5 ms). The run thread's path
# from a save to the worker's job is dozens of short system calls, and each one gives the GIL up: while
# the UI thread draws, every one of them waited out a full 5 ms (save -> job 0.10 s on an H100 host).
GIL_SWITCH_INTERVAL_S = 0.0005
NARROW_WIDTH = 130  # below this, the cases table takes more of the width (workbench.tcss, Screen.-narrow)
# What overtook a run, by the newer request's reason: "run 3 · ... (cancelled: overtaken by a save)".
# What the app keeps of past runs, whatever the length of the day: the run states (RunState) of the newest runs
# only (an older run can no longer report), the ids of the newest runs recorded, the timed cases of the newest
# runs timed (their records hold them too: this is for the comparisons while a record is being read), and the
# newest entries of the timeline. The history and changes tabs read the newest HISTORY_ROWS records from disk
# and an older one only when a comparison needs it; the log keeps its last LogPanel.MAX_LINES lines (its last
# LogPanel.DEFERRED_WRITES writes while the Log tab has never been shown).
RECENT_RUNS = 3
RECORDED_KEPT = 32
TIMED_RUNS_KEPT = 16
TIMELINE_KEPT = 120
OVERTAKEN_BY = {"save": "a save", "rerun": "a rerun", "verify only": "a verify-only run", "pin": "a pinned run",
                "start": "the first run"}


def load_profilers(pm: Any) -> dict[str, Any]:
    if pm is None:
        return {}
    try:
        from ..profiling import collect_profilers
    except ImportError:
        return {}
    try:
        return dict(collect_profilers(pm))
    except Exception:  # noqa: BLE001 - a broken profiler plugin costs the key, not the app
        return {}


class WorkbenchApp(Actions, App):
    CSS_PATH = Path(__file__).with_name("workbench.tcss")  # absolute: subclasses live elsewhere
    TITLE = "Kernel Workbench"
    BINDINGS = [
        Binding("r", "rerun", "rerun"),
        Binding("v", "verify_only", "verify only"),
        Binding("b", "bench_off", "bench: on"),
        Binding("b", "bench_on", "bench: off"),
        Binding("p", "profile", "profile"),
        Binding("e", "edit", "edit at error"),
        Binding("t", "pin", "pin config"),
        Binding("q", "quit", "quit"),
        *(Binding(str(n), f"show_tab('{tab}')", tab, show=False) for n, tab in enumerate(TABS, 1)),
        Binding("escape", "show_cases", "cases", show=False),
    ]

    def __init__(self, project: Project, pm: Any = None, interpret: bool = False, bench: bool = True,
                 runner: RunnerLike | None = None, live: bool = True) -> None:
        """`live=False` starts no watcher and no runs: the screen shows what is posted to it (tests, snapshots)."""
        super().__init__()
        self.project, self.pm, self.live = project, pm, live
        self.session = LiveSession(project_name=project.name, kernel_name=project.kernel_path.name, bench_on=bench)
        self.runs: dict[int, RunState] = {}
        self.known_configs: dict[str, list[str]] = {}  # autotuned kernel -> its configs, in pin-index order
        self.bench_times: dict[str, dict[CaseKey, CaseTiming]] = {}  # history record id -> its timed cases
        # (failure|verdict|bench, run id, source hash, shown at), the newest TIMELINE_KEPT
        self.timeline: list[tuple[str, int, str, float]] = []
        self.recorded: set[int] = set()  # the newest run ids whose outcome is in the history (after RunDone)
        self.recent_records = RecentRecords(project, HISTORY_ROWS + 1)  # the history tab's, kept small
        self._binding_state: tuple[bool, ...] | None = None  # what the key bar shows was last drawn for this
        self._render_due: set[str] = set()  # panels a burst of benchmark events changed, drawn once (render_soon)
        self.profilers = load_profilers(pm)
        self.plugin_panels, self.refused_panels = collect_panels(pm, reserved=set(TABS))
        self._stop_watching = threading.Event()
        # `workbench watch` passes the runner (builtin/verifying.make_runners: GPUs, plugins); without one, the
        # loop's session makes this machine's, with no GPU placement: the app opened on its own (tests, the example).
        hooks = PluginHooks(pm, warn=lambda text: self.post_message(PluginWarning(text))) if pm is not None else None
        self.loop = LiveLoop(project, runner, self._loop_event,
                             on_start=lambda rid, req: self.post_message(RunBegan(rid, req)),
                             on_done=lambda rid, req, out: self.post_message(RunDone(rid, req, out)), hooks=hooks,
                             interpret=interpret)

    # -- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Vertical(id="main"):
            with Horizontal(id="upper"):
                yield CasesTable(id="cases")
                yield CaseDetail(id="detail")
            with TabbedContent(id="tabs", initial="tab-bench"):
                with TabPane("Benchmark [dim]1[/]", id="tab-bench"):
                    yield BenchPanel(id="bench")
                with TabPane("Autotune [dim]2[/]", id="tab-autotune"):
                    yield AutotunePanel(id="autotune")
                with TabPane("Changes [dim]3[/]", id="tab-changes"):
                    yield ChangesPanel(id="changes")
                with TabPane("Log [dim]4[/]", id="tab-log"):
                    yield LogPanel(id="log")
                with TabPane("History [dim]5[/]", id="tab-history"):
                    yield HistoryPanel(id="history")
                if self.profilers:
                    with TabPane("Profile [dim]6[/]", id="tab-profile"):
                        yield ProfilePanel(id="profile")
                with TabPane("IR [dim]7[/]", id="tab-ir"):
                    yield IRPanel(id="ir")
                for spec in self.plugin_panels:
                    with TabPane(spec.title, id=f"tab-plugin-{spec.id}"):
                        yield self._plugin_widget(spec)
        yield Static(id="too-small")
        yield KeyBar()

    def _plugin_widget(self, spec: PanelSpec):
        try:
            return spec.factory()
        except Exception as exc:  # noqa: BLE001 - a broken panel says so in its tab
            return Static(f"the {spec.title} panel failed to start: {type(exc).__name__}: {exc}")

    def on_mount(self) -> None:
        self.theme = "tokyo-night"
        self.query_one(CasesTable).border_title = "Cases"
        self.query_one(CaseDetail).border_title = "Selected case"
        self.query_one(CasesTable).focus()
        self._fit(self.size.width, self.size.height)
        self.render_all()
        for line in self.refused_panels:
            self.notify(line, title="plugin panel refused", severity="warning")
        self.refresh_history()
        if self.live:
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
            self.loop.start()
            if not self.loop.recording:
                self.notify(f"another `workbench watch` (pid {self.loop.recorder.holder}) records this project's runs: "
                            "this one does not record them", title="not recording", severity="warning", timeout=15)
            self.submit("start")
            self.watch_project()
            self.set_interval(0.25, self._tick)

    def on_unmount(self) -> None:
        self._stop_watching.set()
        if self.live:
            self.loop.close()
            sys.setswitchinterval(self._switch_interval)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        small = width < MIN_WIDTH or height < MIN_HEIGHT
        self.screen.set_class(small, "-too-small")
        self.screen.set_class(width < NARROW_WIDTH, "-narrow")
        compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
        self.screen.set_class(compact, "-compact")
        if not compact:
            self.screen.remove_class("-show-tabs")
        if small:
            self.query_one("#too-small", Static).update(
                f"The terminal is {width}×{height}; Kernel Workbench needs at least {MIN_WIDTH}×{MIN_HEIGHT}.\n\n"
                "Enlarge the window (or make the font smaller). Saves are still being watched and verified.\n\n"
                "q quits.")

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
                             pins=tuple(sorted(self.session.pins.items())), save=save)
        overtaken = self.session.latest
        run_id = self.loop.submit(request)
        if overtaken is not None and overtaken.finished is None:  # the loop kills it: never shown, said so
            self.query_one(LogPanel).cancel_run(overtaken.run_id, f"overtaken by {OVERTAKEN_BY.get(reason, reason)}")
        self.runs = {k: v for k, v in self.runs.items() if k > run_id - RECENT_RUNS}  # only these can still report
        self.runs[run_id] = RunState(run_id=run_id, request=request)
        self.session.latest = self.runs[run_id]
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
        run = self.runs.get(message.run_id)
        if run is None or message.run_id != self.loop.latest:
            return
        save = message.request.save
        what = f"save of {', '.join(save.changed)}" if save else message.request.reason
        self.query_one(LogPanel).begin_run(f"run {message.run_id} · {what} · {time.strftime('%H:%M:%S')}",
                                           message.run_id)

    def on_run_event(self, message: RunEvent) -> None:
        run = self.runs.get(message.run_id)
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
            self.render_run(changed | self._render_due)
            self._render_due = set()
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
            self.call_after_refresh(self._shown, "failure", run)
        if not had_verdict and run.verdict_known and run.verdict != "cancelled":
            self.query_one(CasesTable).select_first_failure(run)
            self.render_detail()  # now, not when the highlight message has bubbled up
            self.call_after_refresh(self._shown, "verdict", run)
        if not had_bench and run.bench_shown:
            self.call_after_refresh(self._shown, "bench", run)

    def _shown(self, what: str, run: RunState) -> None:
        self.timeline.append((what, run.run_id, run.source_hash, time.time()))
        if len(self.timeline) > TIMELINE_KEPT:
            del self.timeline[:-TIMELINE_KEPT]

    def on_run_done(self, message: RunDone) -> None:
        outcome: RunOutcome = message.outcome
        run = self.runs.get(message.run_id)
        if run is not None and outcome.record is not None and run.case_timings():
            self.bench_times[outcome.record.id] = run.case_timings()
            for old in list(self.bench_times)[:-TIMED_RUNS_KEPT]:
                del self.bench_times[old]
        if outcome.record is not None:
            self.recorded.add(message.run_id)
            if len(self.recorded) > RECORDED_KEPT:
                self.recorded = set(sorted(self.recorded)[-RECORDED_KEPT:])
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

    def _learn_configs(self, run: RunState) -> None:
        if run.request.pins or run.started is None:
            return  # a pinned run verified one config: keep the full list learnt before
        for kernel in run.started.autotuned:
            configs = [c.split(": ", 1)[1] for c in run.configs_of(kernel)]
            if configs:
                self.known_configs[kernel] = configs
        self.refresh_keys()

    def refresh_keys(self) -> None:
        """Refresh the bindings (the key bar is composed again) only when what check_action reads has changed."""
        session = self.session
        state = (bool(self.known_configs or session.pins), session.bench_on, bool(session.bench_unavailable),
                 bool(self.profilers))
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    # -- history and changes (read in threads) ----------------------------------------------------

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
        times = dict(self.bench_times)  # this thread's copy: the UI thread trims the original
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

    # -- rendering ---------------------------------------------------------------------------------

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

    @on(DataTable.RowHighlighted, "#autotune-table")
    def _config_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The IR tab shows the config the user highlights in the Autotune tab (not a redraw's cursor)."""
        if not event.data_table.has_focus:
            return
        chosen = self.query_one(AutotunePanel).row_configs.get(event.row_key.value or "")
        if chosen is not None:
            self.query_one(IRPanel).follow(*chosen)

    @on(DataTable.RowHighlighted, "#cases")
    def _case_selected(self) -> None:
        if self.is_running and self.screen.query("#cases"):  # a late highlight during shutdown has no table
            self.render_detail()

    def _tick(self) -> None:
        latest = self.session.latest
        if latest is not None and (latest.verdict_at is None or latest.finished is None):
            self.render_status()

    # -- actions -----------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        session = self.session
        if action == "bench_on":
            return not session.bench_on and not session.bench_unavailable
        if action == "bench_off":
            return session.bench_on and not session.bench_unavailable
        if action == "profile":
            return bool(self.profilers)
        if action == "pin":
            return True if self.known_configs or session.pins else None
        return True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield SystemCommand("Rerun", "Verify and benchmark the kernel again (r)", self.action_rerun)
        yield SystemCommand("Verify only", "Run verification without benchmarking (v)", self.action_verify_only)
        if not self.session.bench_unavailable:
            on = self.session.bench_on
            yield SystemCommand(f"Benchmarking {'off' if on else 'on'}", "Toggle benchmarking after a passing "
                                "verification (b)", self.action_bench_off if on else self.action_bench_on)
        for name, profiler in self.profilers.items():
            yield SystemCommand(f"Profile with {name}", getattr(profiler, "help", "") or "Profile the kernel (p)",
                                lambda name=name: self.action_profile(name))
        yield SystemCommand("Open error in editor", "Open the selected case's error line in $EDITOR (e)",
                            self.action_edit)
        if self.known_configs or self.session.pins:
            yield SystemCommand("Pin autotune config", "Force an autotuned kernel to one config (t)", self.action_pin)
        for n, tab in enumerate(TABS, 1):
            if self.query(f"#tab-{tab}"):
                yield SystemCommand(f"Show {tab}", f"Switch to the {tab} tab ({n})",
                                    lambda tab=tab: self.action_show_tab(tab))
        yield SystemCommand("Quit", "Stop watching and leave (q)", self.exit)
