"""The Profile panel: what the last profiler run said (only when a profiler plugin is installed)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


class ProfilePanel(VerticalScroll):
    def compose(self):
        yield Static(Text("press p to profile the kernel", style="grey50"), id="profile-body")

    def running(self, name: str) -> None:
        self.query_one("#profile-body", Static).update(Text(f"profiling with {name}…", style="bold yellow"))

    def show(self, name: str, result: Any, error: str = "") -> None:
        text = Text()
        if error:
            text.append(f"{name} failed: {error}", style="bold red1")
        else:
            code = getattr(result, "exit_code", 0)
            text.append(f"{name}", style="bold")
            text.append(f"  exit {code}\n", style="green3" if code == 0 else "bold red1")
            for line in getattr(result, "summary_lines", []) or []:
                text.append(line + "\n")
            report = getattr(result, "report_path", None)
            if report:
                text.append(f"report: {report}", style="grey62")
        self.query_one("#profile-body", Static).update(text)
