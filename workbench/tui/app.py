"""The live loop's app: watch the project, re-run on every save, show what the run says.

    WorkbenchApp(Project.open("projects/rmsnorm"), pm=make_plugin_manager()).run()

Threads do the work and post messages (the watcher, the live loop's run thread,
profilers); the UI thread only folds events into `model.RunState` and renders.
The app never imports torch, triton or the kernel: runs happen in worker processes.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from ..core.live.loop import LiveLoop
from ..core.project.folder import Project
from ..core.project.history import RecentRecords
from ..core.run.contracts import RunnerLike
from ..core.run.session import PluginHooks
from .actions import TABS, Actions
from .history_tabs import HistoryTabs
from .kept_runs import KeptRuns
from .live_events import LiveEvents
from .messages import PluginWarning, RunBegan, RunDone
from .model import LiveSession
from .panels import PanelSpec, collect_panels
from .run_view import RunView
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
# How long a thread may hold the GIL while another waits (Python's default: 5 ms). The run thread's path
# from a save to the worker's job is dozens of short system calls, and each one gives the GIL up: while
# the UI thread draws, every one of them waited out a full 5 ms (save -> job 0.10 s on an H100 host).
GIL_SWITCH_INTERVAL_S = 0.0005
NARROW_WIDTH = 130  # below this, the cases table takes more of the width (workbench.tcss, Screen.-narrow)


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


class WorkbenchApp(LiveEvents, HistoryTabs, RunView, Actions, App):
    """The screen: its layout, its keys, its start and end. What the live loop says is handled by
    live_events.LiveEvents, drawn by run_view.RunView and kept by kept_runs.KeptRuns; the History and Changes tabs
    are read by history_tabs.HistoryTabs; the keys' actions are actions.Actions'."""

    CSS_PATH = Path(__file__).with_name("workbench.tcss")  # absolute: subclasses live elsewhere
    TITLE = "Kernel Workbench"
    BINDINGS = [
        Binding("r", "rerun", "rerun"),
        Binding("n", "new_inputs", "new inputs", show=False),  # said beside the seed in the status line
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
                 runner: RunnerLike | None = None, live: bool = True, seed: int | None = None) -> None:
        """`live=False` starts no watcher and no runs: the screen shows what is posted to it (tests, snapshots).
        `seed`: the inputs' seed of every save's run (None: workbench.toml's, else one drawn for the app)."""
        super().__init__()
        self.project, self.pm, self.live = project, pm, live
        self.session = LiveSession(project_name=project.name, kernel_name=project.kernel_path.name, bench_on=bench)
        self.kept = KeptRuns()  # the runs' states, which were recorded, their timed cases, the timeline
        self.known_configs: dict[str, list[str]] = {}  # autotuned kernel -> its configs, in pin-index order
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
                             interpret=interpret, seed=seed)

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

    # -- what the widgets say --------------------------------------------------------------------

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
