"""The IR tab: the chosen config's TTIR, TTGIR, LLIR, PTX or SASS, each line with the kernel.py line it came
from, or its difference from the previous save. Keys: s next stage, c next config, d the difference. The config
follows the row highlighted in the Autotune tab.

The texts are read from the project's Triton cache (core/timing/ir.py) on a thread, as soon as a run reports
its compiled kernels: the next save clears that cache, and the difference needs this save's text then."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Log, Static

from ...core.events import CompiledKernels, KernelFacts
from ...core.timing.compiler_facts import describe_facts
from ...core.timing.ir import STAGE_TITLES, STAGES, IRUnavailable, annotated, diff_summary, read_stage, stage_diff

Key = tuple[str, str, str]  # kernel, config, signature
IR_TARGET = "sm_90"  # what `g` compiles for where the workers interpret (no GPU)


def identity(facts: KernelFacts) -> Key:
    return (facts.kernel, facts.config, facts.signature)


class IRPanel(Vertical, can_focus=True):
    BINDINGS = [Binding("s", "next_stage", "stage"), Binding("c", "next_config", "config"),
                Binding("d", "toggle_diff", "diff"), Binding("g", "compile_for_target", f"compile for {IR_TARGET}")]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.kernels: list[KernelFacts] = []  # the current run's, in the order they came
        self.tools: dict[str, str] = {}
        self.kernel_file = ""
        self.run_id: int | None = None
        self.chosen: Key | None = None
        self.stage = "ttgir"
        self.show_diff = False
        self.texts: dict[tuple[Key, str], str] = {}  # this run's texts, read as they came
        self.before: dict[tuple[Key, str], str] = {}  # ... and the previous run's
        self.errors: dict[tuple[Key, str], str] = {}

    def compose(self):
        yield Static(id="ir-head", classes="panel-head")
        yield Log(id="ir-text", highlight=False)

    def on_mount(self) -> None:
        self.show_message(f"no compiled kernels yet: they are reported when the kernel is benchmarked on a GPU "
                          f"(without one: g compiles it for {IR_TARGET} here, nothing runs)")

    # -- what comes in ---------------------------------------------------------------------------------

    def add_compiled(self, run_id: int, event: CompiledKernels, kernel_file: str, picked: dict[str, str]) -> None:
        """A run's compiled kernels (one event per benchmark case). A new run keeps the last one's texts for
        the difference; the choice stays on the same kernel and config where it still exists."""
        if run_id != self.run_id:
            self.before, self.texts, self.errors = self.texts, {}, {}
            self.kernels, self.run_id = [], run_id
        self.kernel_file, self.tools = kernel_file, {**self.tools, **event.tools}
        known = {identity(k) for k in self.kernels}
        self.kernels += [k for k in event.kernels if identity(k) not in known]
        if self.chosen is None or self.chosen not in {identity(k) for k in self.kernels}:
            self.chosen = self._default(picked)
        self._read(self.facts(), list(self._text_stages()))

    def _default(self, picked: dict[str, str]) -> Key | None:
        for facts in self.kernels:
            if picked.get(facts.kernel) == facts.config:
                return identity(facts)
        previous = [k for k in self.kernels if self.chosen and k.kernel == self.chosen[0] and k.config == self.chosen[1]]
        if previous:
            return identity(previous[0])
        return identity(self.kernels[0]) if self.kernels else None

    def _text_stages(self):
        facts = self.facts()
        return [s for s in STAGES if s != "sass" and facts is not None and s in facts.files]

    def facts(self) -> KernelFacts | None:
        return next((k for k in self.kernels if identity(k) == self.chosen), None)

    @work(thread=True, exclusive=True, group="ir-read")
    def _read(self, facts: KernelFacts | None, stages: list[str]) -> None:
        if facts is None:
            return
        # SASS is placed on kernel.py's lines with the PTX's help (ir.line_locations): read it first
        for stage in dict.fromkeys((["ptx"] if self.stage == "sass" and "ptx" in facts.files else []) + [self.stage, *stages]):
            key = (identity(facts), stage)
            if key in self.texts or key in self.errors:
                continue
            try:
                self.texts[key] = read_stage(facts.files, stage, self.tools)
            except (IRUnavailable, OSError) as exc:
                self.errors[key] = str(exc)
            if stage == self.stage:
                self.app.call_from_thread(self.render_ir)
        self.app.call_from_thread(self.render_ir)

    def follow(self, kernel: str, config: str, case: int | None) -> None:
        """Show this config (the Autotune tab's highlighted row): its specialisation for `case` where there is one."""
        matching = [k for k in self.kernels if k.kernel == kernel and k.config == config]
        if not matching:
            return
        chosen = next((k for k in matching if case in k.case_indices), matching[0])
        if identity(chosen) != self.chosen:
            self.chosen = identity(chosen)
            self._read(chosen, [self.stage, *self._text_stages()])
            self.render_ir()

    # -- keys -----------------------------------------------------------------------------------------------

    def _stages(self) -> list[str]:
        """The stages the chosen kernel has: its text files, and SASS from its cubin."""
        facts = self.facts()
        have = [s for s in STAGES if facts is not None and (s in facts.files or (s == "sass" and "cubin" in facts.files))]
        return have or list(STAGES)

    def action_next_stage(self) -> None:
        stages = self._stages()
        self.stage = stages[(stages.index(self.stage) + 1) % len(stages)] if self.stage in stages else stages[0]
        self._read(self.facts(), [self.stage])
        self.render_ir()

    def action_next_config(self) -> None:
        if not self.kernels:
            return
        keys = [identity(k) for k in self.kernels]
        self.chosen = keys[(keys.index(self.chosen) + 1) % len(keys)] if self.chosen in keys else keys[0]
        self._read(self.facts(), [self.stage])
        self.render_ir()

    def action_compile_for_target(self) -> None:
        self.app.compile_for_target()

    def action_toggle_diff(self) -> None:
        self.show_diff = not self.show_diff
        self.render_ir()

    # -- drawing ----------------------------------------------------------------------------------------------

    def show_message(self, text: str) -> None:
        self.query_one("#ir-head", Static).update(Text(text, style="grey50"))
        self.query_one("#ir-text", Log).clear()

    def render_ir(self) -> None:
        facts = self.facts()
        if facts is None or not self.query("#ir-head"):  # nothing chosen, or the app closing under a read's thread
            return
        key = (identity(facts), self.stage)
        n = [identity(k) for k in self.kernels].index(identity(facts)) + 1
        head = Text()
        head.append(f"{STAGE_TITLES.get(self.stage, self.stage)}", style="bold")
        head.append(f" of {facts.kernel} ({facts.config}), {facts.target}, config {n} of {len(self.kernels)}\n")
        head.append(describe_facts(facts), style="cyan")
        head.append(f"   {facts.signature}", style="grey50")
        head.append("\ns: stage  c: config  d: " + ("source lines" if self.show_diff else "difference from the "
                                                                                          "previous save"),
                    style="grey50")
        log = self.query_one("#ir-text", Log)
        log.clear()
        if key in self.errors:
            self.query_one("#ir-head", Static).update(head)
            log.write_line(self.errors[key])
            return
        text = self.texts.get(key)
        if text is None:
            head.append("\nreading ...", style="grey50")
            self.query_one("#ir-head", Static).update(head)
            return
        if self.show_diff:
            before = self.before.get(key)
            if before is None:
                log.write_line("no text of this config and stage from the previous save to compare with")
            else:
                lines = stage_diff(self.stage, before, text)
                head.append(f"\nagainst the previous save (source locations left out): {diff_summary(lines)}")
                log.write_lines(lines or ["the same code as the previous save"])
        else:
            ptx = self.texts.get((identity(facts), "ptx"), "") if self.stage == "sass" else ""
            rows = annotated(self.stage, text, self.kernel_file, ptx)
            width = max((len(label) for label, _ in rows), default=0)
            log.write_lines([f"{label.rjust(width)} | {line}" for label, line in rows])
        self.query_one("#ir-head", Static).update(head)
        log.scroll_home(animate=False)
