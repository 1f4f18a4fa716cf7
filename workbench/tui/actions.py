"""The app's key actions: rerun, verify only, bench on/off, open in $EDITOR, pin a config, profile, show a tab,
compile for a named GPU (the IR tab without a GPU); which of them the key bar and the command palette offer.

A mixin of WorkbenchApp (app.py binds the keys; the live loop's events are live_events.py's).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable

from textual import work
from textual.app import SystemCommand
from textual.screen import Screen
from textual.widgets import TabbedContent

from ..core.project.config import draw_seed
from .editor import editor_command, is_terminal_editor
from .messages import ProfileDone
from .model import RunState
from .widgets.cases import CasesTable
from .widgets.ir import IR_TARGET, IRPanel
from .widgets.pin import UNPIN, PinScreen
from .widgets.profile import ProfilePanel

TABS = ("bench", "autotune", "changes", "log", "history", "profile", "ir")  # keys 1-7 show them


class Actions:
    target_compiles = 0  # how many compiles for a target the IR tab has had (their run ids count down from -1)

    # -- which actions are offered -------------------------------------------------------------------------------

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

    def refresh_keys(self) -> None:
        """Refresh the bindings (the key bar is composed again) only when what check_action reads has changed."""
        session = self.session
        state = (bool(self.known_configs or session.pins), session.bench_on, bool(session.bench_unavailable),
                 bool(self.profilers))
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def _learn_configs(self, run: RunState) -> None:
        """The configs of each autotuned kernel `run` verified, for the pin action to offer."""
        if run.request.pins or run.started is None:
            return  # a pinned run verified one config: keep the full list learnt before
        for kernel in run.started.autotuned:
            configs = [c.split(": ", 1)[1] for c in run.configs_of(kernel)]
            if configs:
                self.known_configs[kernel] = configs
        self.refresh_keys()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield SystemCommand("Rerun", "Verify and benchmark the kernel again (r)", self.action_rerun)
        yield SystemCommand("Rerun on new inputs", "Draw the inputs from a new seed, for this run and the saves "
                            "after it (n)", self.action_new_inputs)
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

    # -- the actions ---------------------------------------------------------------------------------------------

    def action_rerun(self) -> None:
        self.submit("rerun")

    def action_new_inputs(self) -> None:
        """Run again on inputs drawn from a new seed, kept for the saves after it (a verdict that holds on one
        draw of the inputs and not another is borderline: the seed on screen replays either)."""
        self.loop.seed = draw_seed()
        self.submit("new inputs")

    def action_verify_only(self) -> None:
        self.submit("verify only", stages=("verify",))

    def action_bench_on(self) -> None:
        self._set_bench(True)

    def action_bench_off(self) -> None:
        self._set_bench(False)

    def _set_bench(self, on: bool) -> None:
        self.session.bench_on = on
        self.refresh_bindings()
        self.render_run({"bench"})
        self.notify(f"benchmarking {'on' if on else 'off'} from the next run (r reruns now)", timeout=3)

    def action_show_tab(self, tab: str) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.query(f"#tab-{tab}"):
            tabs.active = f"tab-{tab}"
            self.screen.add_class("-show-tabs")  # the compact layout shows the tabs in place of the cases
            if tab == "ir":  # its keys (s, c, d) are the panel's own
                self.query_one("#ir").focus()

    def action_show_cases(self) -> None:
        """The compact layout's way back from a tab to the cases and their detail."""
        self.screen.remove_class("-show-tabs")

    def action_edit(self) -> None:
        run = self.session.current
        key = self.query_one(CasesTable).selected_key()
        row = run.rows.get(int(key)) if run is not None and key is not None else None
        location = (row.location() if row else None) or (run.first_location() if run else None)
        path, line = location if location else (str(self.project.kernel_path), None)
        command = editor_command(path, line)
        if command is None:
            self.notify(f"set $EDITOR to open {Path(path).name}{f':{line}' if line else ''}", severity="warning")
            return
        if location is None:
            self.notify("no line to point at for this case: opening the kernel", timeout=3)
        try:
            if is_terminal_editor(command):
                try:
                    with self.suspend():
                        subprocess.run(command, check=False)
                    return
                except Exception:  # noqa: BLE001 - SuspendNotSupported (tests, web): run it as is
                    pass
            subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            self.notify(f"cannot start {command[0]}: {exc}", severity="error")

    def action_pin(self) -> None:
        if not self.known_configs and not self.session.pins:
            self.notify("no autotuned kernel seen yet", timeout=3)
            return
        self.push_screen(PinScreen(self.known_configs, self.session.pins), self._pinned)

    def _pinned(self, choice) -> None:
        if choice is None:
            return
        if choice == UNPIN:
            self.session.pins.clear()
            self.session.pin_labels.clear()
            self.notify("unpinned: the autotuner tries every config again", timeout=3)
        else:
            kernel, index, label = choice
            self.session.pins[kernel] = index
            self.session.pin_labels[kernel] = label
            self.notify(f"pinned {kernel} to {label}", timeout=3)
        self.render_run({"autotune"})
        self.submit("pin")

    def action_profile(self, name: str | None = None) -> None:
        if not self.profilers:
            return
        name = name or next(iter(self.profilers))
        self.query_one(ProfilePanel).running(name)
        self.action_show_tab("profile")
        self.run_profiler(name)

    @work(thread=True, group="profile", exclusive=True, exit_on_error=False)
    def run_profiler(self, name: str) -> None:
        try:
            result = self.profilers[name].run(self.project, {})
        except Exception as exc:  # noqa: BLE001 - a profiler's failure is shown, never fatal
            self.post_message(ProfileDone(name, error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(ProfileDone(name, result))

    def on_profile_done(self, message: ProfileDone) -> None:
        self.query_one(ProfilePanel).show(message.name, message.result, message.error)

    # -- the IR tab without a GPU: compile for a named target ------------------------------------------------------

    def compile_for_target(self, target: str = IR_TARGET) -> None:
        """Compile the kernel for `target` in a worker that runs nothing (`workbench ir --target`), for the IR tab and
        the facts where the workers interpret. Not on a GPU: that would clear the Triton cache the runs' IR is in."""
        ready = self.session.ready
        if ready is None or ready.mode != "interpreter":
            self.notify("the IR comes with each run's benchmark on a GPU", timeout=4)
            return
        self.query_one(IRPanel).show_message(f"compiling for {target} (nothing runs) ...")
        self._compile_for_target(target)

    @work(thread=True, group="ir-target", exclusive=True, exit_on_error=False)
    def _compile_for_target(self, target: str) -> None:
        from ..core.events import CompiledKernels, Problem
        from ..core.run.session import compile_for_target

        outcome = compile_for_target(self.project, target)
        compiled = outcome.of_type(CompiledKernels)
        problems = outcome.of_type(Problem)
        self.target_compiles -= 1  # each compile a run of its own for the IR tab (its difference from the last)
        self.call_from_thread(self._show_compiled, self.target_compiles, compiled, problems, target)

    def _show_compiled(self, run_id: int, compiled: list, problems: list, target: str) -> None:
        panel = self.query_one(IRPanel)
        if not compiled:
            why = problems[0].message if problems else "the kernel launched no Triton kernel"
            panel.show_message(f"compiling for {target} failed: {why}")
            return
        for event in compiled:
            panel.add_compiled(run_id, event, self.project.kernel_path.name, {})
