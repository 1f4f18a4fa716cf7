"""The pin chooser: force an autotuned kernel to one config while iterating, or unpin."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

UNPIN = "unpin"


class PinScreen(ModalScreen[tuple[str, int, str] | str | None]):
    """Dismisses with (kernel, config index, config) to pin, UNPIN, or None."""

    BINDINGS = [Binding("escape", "dismiss_none", "cancel")]

    def __init__(self, configs: dict[str, list[str]], pins: dict[str, int]) -> None:
        super().__init__()
        self.configs, self.pins = configs, pins

    def compose(self) -> ComposeResult:
        options: list[Option] = []
        for kernel, labels in self.configs.items():
            for index, label in enumerate(labels):
                mark = "📌 " if self.pins.get(kernel) == index else "   "
                options.append(Option(f"{mark}{kernel} #{index}: {label}", id=f"{kernel}\0{index}"))
        if self.pins:
            options.append(Option("   unpin: let the autotuner try every config again", id=UNPIN))
        with Vertical(id="pin-dialog"):
            yield Static("Pin the autotuner to one config", classes="dialog-title")
            yield OptionList(*options, id="pin-options")
            yield Static("enter: pin · esc: cancel", classes="dialog-help")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        choice = event.option.id or ""
        if choice == UNPIN:
            self.dismiss(UNPIN)
            return
        kernel, index = choice.split("\0")
        self.dismiss((kernel, int(index), self.configs[kernel][int(index)]))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
