"""The events the sanitize stage adds to a run's stream (importing this module registers their types)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from workbench.core.events import Event


@dataclass
class SanitizePlan(Event):
    """The cases the stage is about to run, in order (the parent resumes the rest after a crash)."""

    type: ClassVar[str] = "sanitizer_plan"
    cases: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


@dataclass
class SanitizedCase(Event):
    """A case's call returned (or raised): every sanitizer report since its StageChanged belongs to it."""

    type: ClassVar[str] = "sanitizer_case_done"
    case_index: int
    label: str
    error: str = ""  # kernel_fn raised: its one-line reason (not a sanitizer report)
