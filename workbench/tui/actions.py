"""The app's key actions: rerun, verify only, bench on/off, open in $EDITOR, pin a config, profile, compile for
a named GPU (the IR tab without a GPU).

A mixin of WorkbenchApp (kept apart so app.py stays about events and rendering).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from textual import work
from textual.widgets import TabbedContent

from .editor import editor_command, is_terminal_editor
from .messages import ProfileDone
from .widgets.cases import CasesTable
from .widgets.ir import IR_TARGET, IRPanel
from .widgets.pin import UNPIN, PinScreen
from .widgets.profile import ProfilePanel


class Actions:
    target_compiles = 0  # how many compiles for a target the IR tab has had (their run ids count down from -1)

    def action_rerun(self) -> None:
        self.submit("rerun")

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
