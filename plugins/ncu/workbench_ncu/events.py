"""The event the profile stage adds to a run's stream (importing this module registers its type)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from workbench.core.events import Event

NVTX_PREFIX = "workbench case "  # the stage's NVTX range around a case's profiled call: + index or "default"


@dataclass
class ProfiledCase(Event):
    """One case's warm call ran between profiler start and stop.

    kernels: what Triton compiled for each @triton.jit function the module holds, one dict per
    compiled variant: name, num_warps, registers, spilled (4-byte words in local memory),
    shared_bytes, and for autotuned kernels the config the tuner picked.
    """

    type: ClassVar[str] = "ncu_profiled_case"
    case_index: int | None
    label: str
    nvtx_range: str
    kernels: list[dict[str, Any]] = field(default_factory=list)
