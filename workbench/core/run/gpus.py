"""The GPUs a run may use, found without importing torch: the parent never touches CUDA.

    discover_gpus()             every GPU nvidia-smi lists that CUDA_VISIBLE_DEVICES lets through
    select_gpus("0,1")          some of them, by their position among the visible ones (as cuda:N counts)
    select_gpus("all")          all of them (the default of `workbench verify/bench`)

Each worker process is given one GPU: its CUDA_VISIBLE_DEVICES names that GPU alone (by UUID when
nvidia-smi gave one, so CUDA's own device order cannot pick another), and the worker's cuda:0 is it.
`discover_gpus` takes the nvidia-smi query as an argument, so tests can fake a machine of two GPUs.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]


class GpuSelectionError(ValueError):
    """--gpus named a GPU that is not there; the message says which ones are."""


@dataclass(frozen=True)
class GpuSlot:
    """One GPU a worker may be placed on.

    id: the short name reports use ("0", "1": nvidia-smi's index; "10.0.0.5/0" for a Ray node's GPU).
    visible: what the worker's CUDA_VISIBLE_DEVICES is set to ("" leaves it alone).
    """

    id: str
    name: str = ""
    visible: str = ""

    @property
    def describe(self) -> str:
        return f"{self.id} ({self.name})" if self.name else self.id

    def worker_env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": self.visible} if self.visible else {}


def query_nvidia_smi(timeout_s: float = 10.0) -> list[str]:
    """nvidia-smi's "index, uuid, name" lines; none when there is no nvidia-smi or it fails."""
    try:
        done = subprocess.run(NVIDIA_SMI_QUERY, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return []
    return done.stdout.splitlines() if done.returncode == 0 else []


def parse_gpu_lines(lines: Sequence[str]) -> list[GpuSlot]:
    slots = []
    for line in lines:
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and parts[0].isdigit():
            index, uuid, name = parts
            slots.append(GpuSlot(id=index, name=name, visible=uuid or index))
    return slots


def discover_gpus(query: Callable[[], Sequence[str]] = query_nvidia_smi,
                  env: Mapping[str, str] | None = None) -> list[GpuSlot]:
    """The GPUs this process's CUDA would see, in CUDA_VISIBLE_DEVICES' order when it is set."""
    env = os.environ if env is None else env
    every = parse_gpu_lines(query())
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return every
    chosen = []
    for token in (t.strip() for t in visible.split(",")):
        if not token:
            break
        match = next((s for s in every if token in (s.id, s.visible) or (token.startswith("GPU-") and
                                                                          s.visible.startswith(token))), None)
        if match is None:
            break  # CUDA stops at the first entry it cannot use; so does this
        if match not in chosen:
            chosen.append(match)
    return chosen


def select_gpus(spec: str | None, discover: Callable[[], list[GpuSlot]] | None = None) -> list[GpuSlot]:
    """The GPUs `--gpus SPEC` asks for: "all" (or None), or positions among the visible GPUs ("0,1").

    No GPU visible (a CPU machine): [] for "all"; a list of positions is refused. `discover` defaults
    to this module's `discover_gpus`, looked up at the call (tests replace it).
    """
    found = (discover or discover_gpus)()
    if spec is None or spec.strip().lower() in ("", "all"):
        return found
    chosen = []
    for token in (t.strip() for t in spec.split(",")):
        if not token.isdigit():
            raise GpuSelectionError(f"--gpus {spec}: give GPU numbers like 0,1 or 'all'")
        position = int(token)
        if position >= len(found):
            seen = ", ".join(s.describe for s in found) or "none"
            raise GpuSelectionError(f"--gpus {spec}: there is no GPU {position} (visible: {seen})")
        if found[position] not in chosen:
            chosen.append(found[position])
    return chosen
