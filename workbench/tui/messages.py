"""Messages the app's threads post to the UI. Threads only post; the UI renders."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from ..core.events import Event
from ..core.live.loop import RunRequest
from ..core.live.watch import FilesMissing, Save
from ..core.run.session import RunOutcome


class SaveAccepted(Message):
    """The watcher saw the watched files' content change."""

    def __init__(self, save: Save) -> None:
        super().__init__()
        self.save = save


class FilesGone(Message):
    """Watched files disappeared (or, with no paths, came back)."""

    def __init__(self, notice: FilesMissing) -> None:
        super().__init__()
        self.paths = notice.paths


class WatchFailed(Message):
    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class PluginWarning(Message):
    """A plugin's hook failed (run/session.PluginHooks): said in the log, the run goes on."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class RunBegan(Message):
    """The loop took a request off its queue: the project's Triton cache is being cleared."""

    def __init__(self, run_id: int, request: RunRequest) -> None:
        super().__init__()
        self.run_id, self.request = run_id, request


class RunEvent(Message):
    def __init__(self, run_id: int, event: Event) -> None:
        super().__init__()
        self.run_id, self.event = run_id, event


class RunDone(Message):
    def __init__(self, run_id: int, request: RunRequest, outcome: RunOutcome) -> None:
        super().__init__()
        self.run_id, self.request, self.outcome = run_id, request, outcome


class ProfileDone(Message):
    def __init__(self, name: str, result: Any = None, error: str = "") -> None:
        super().__init__()
        self.name, self.result, self.error = name, result, error
