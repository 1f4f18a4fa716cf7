"""The baselines' benchmark times kept across runs (the headless `workbench bench`): torch.compile(reference_fn)'s
and reference_fn's.

A cold torch.compile of the reference costs seconds per benchmark case (Dynamo, Inductor, Triton), and timing
the eager reference a second or more. Their times depend only on what their keys hash (BenchResult.reference_key:
reference_fn's and get_inputs' source, the case, the GPU's name, torch and the timing method; compiled_key adds
Triton). So a time measured once is reused by later runs while none of those change, and the report says so,
with when it was measured. `workbench bench --fresh-baselines` measures both again. Kept in the project's state
folder, written whole and atomically; an unreadable file is a cache miss.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, is_dataclass
from typing import Any, Iterable

from ..fsutil import atomic_write_text
from .folder import Project

BASELINES_FILE = "baselines.json"
MAX_ENTRIES = 256  # the newest kept: a project's cases over a few GPUs and versions


def load_baselines(project: Project) -> dict[str, dict[str, Any]]:
    """compiled_key -> {"timing": Timing as a dict, "measured_at": epoch seconds}; {} when none or unreadable."""
    try:
        data = json.loads((project.state_dir / BASELINES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {key: entry for key, entry in data.items()
            if isinstance(entry, dict) and isinstance(entry.get("timing"), dict)}


def remember_baselines(project: Project, results: Iterable[Any]) -> None:
    """Keep the baselines' times `results` (BenchResults) measured in this run: torch.compile's by its key, the
    reference's by its own (the keys are hashes of different things: they never meet)."""
    results = list(results)
    now = time.time()
    fresh = {r.compiled_key: {"timing": _plain(r.compiled), "measured_at": now, "of": "torch.compile"}
             for r in results if r.compiled_key and r.compiled is not None and not r.compiled_reused}
    fresh.update({r.reference_key: {"timing": _plain(r.reference), "measured_at": now, "of": "reference_fn"}
                  for r in results if r.reference_key and r.reference is not None and not r.reference_reused})
    if not fresh:
        return
    kept = {**load_baselines(project), **fresh}
    newest = sorted(kept.items(), key=lambda item: item[1].get("measured_at", 0), reverse=True)[:MAX_ENTRIES]
    try:
        atomic_write_text(project.state_dir / BASELINES_FILE, json.dumps(dict(newest), indent=1))
    except OSError:
        pass  # a cache that cannot be written costs the next run its compile, nothing else


def _plain(timing: Any) -> dict[str, Any]:
    return asdict(timing) if is_dataclass(timing) else dict(timing)
