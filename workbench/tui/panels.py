"""Panels that plugins add to the TUI (hook `workbench_register_panels`).

    @hookimpl
    def workbench_register_panels(register):
        register(PanelSpec(id="sass", title="SASS", factory=SassView))

The app mounts each as a tab after its own and hands every run event to the
widget when it has a method `workbench_event(event)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from textual.widget import Widget

PANEL_ID = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass(frozen=True)
class PanelSpec:
    id: str
    title: str
    factory: Callable[[], Widget]


def collect_panels(pm: Any, reserved: set[str]) -> tuple[list[PanelSpec], list[str]]:
    """The plugins' panels, and a line for each one refused (a bad or taken id)."""
    panels: list[PanelSpec] = []
    refused: list[str] = []

    def register(spec: PanelSpec) -> None:
        if not PANEL_ID.match(spec.id):
            refused.append(f"panel id {spec.id!r}: use lower-case letters, digits, '-' and '_'")
        elif spec.id in reserved or any(p.id == spec.id for p in panels):
            refused.append(f"panel id {spec.id!r} is taken")
        else:
            panels.append(spec)

    if pm is not None:
        pm.hook.workbench_register_panels(register=register)
    return panels, refused
