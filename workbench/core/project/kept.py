"""What a project keeps across runs, in its state folder: the baselines' benchmark times and the compatibility
checks' passes. Each is kept by a key that hashes everything its value depends on, reused while the key is the
same, and said to be reused, with when it was measured.

- Baselines (the headless `workbench bench`): torch.compile(reference_fn)'s and reference_fn's times. A cold
  torch.compile of the reference costs seconds per benchmark case (Dynamo, Inductor, Triton), timing the eager
  reference a second or more. BenchResult.reference_key hashes reference_fn's and get_inputs' source, the case,
  the GPU's name, torch and the timing method; compiled_key adds Triton. `workbench bench --fresh-baselines`
  measures both again. kernel_fn's own time under torch.compile (`workbench bench`) is kept the same way, its key
  adding every Python file of the project (baselines.kernel_compiled_key): its compile imports Dynamo and Inductor,
  seconds on a run whose checks' passes are kept; a changed kernel is measured again.
- Findings (`workbench verify`, `bench`): a torch.compile or CUDA-graph check that passed (verify/compat.py's
  finding_key: every Python file of the project, the case, the GPU, torch, Triton, the workbench and the
  [verify] settings). Its cold start is most of a small project's headless run (Dynamo and Inductor imported,
  then compiled: RESULTS.md 3j); a failure is never kept, so it is run, and shown whole, every time.
  `--fresh-checks` runs them again.

Each file is written whole and atomically; an unreadable one is a miss, never an error.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, is_dataclass
from typing import Any, Iterable

from ..fsutil import atomic_write_text
from .folder import Project

BASELINES_FILE = "baselines.json"
FINDINGS_FILE = "findings.json"
MAX_ENTRIES = 256  # the newest kept: a project's cases over a few GPUs and versions


def kept_since(seconds: float) -> str:
    """When a kept time was measured or a kept finding passed, as the reports say it."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


def load_baselines(project: Project) -> dict[str, dict[str, Any]]:
    """key -> {"timing": Timing as a dict, "measured_at": epoch seconds, "of": what}; {} when none or unreadable."""
    return {key: entry for key, entry in _read(project, BASELINES_FILE).items()
            if isinstance(entry.get("timing"), dict)}


def load_findings(project: Project) -> dict[str, dict[str, Any]]:
    """finding_key -> {"check": its name, "at": epoch seconds it passed, "notes": what it noted, where it did};
    {} when none or unreadable."""
    return {key: entry for key, entry in _read(project, FINDINGS_FILE).items() if isinstance(entry.get("at"), (int, float))}


def remember_findings(project: Project, compatibility: dict[str, dict[str, Any]]) -> None:
    """Keep the compatibility checks that passed in this run (RunOutcome.compatibility()), by their keys."""
    now = time.time()
    fresh = {case["key"]: {"check": name, "at": now, **({"notes": case["notes"]} if case.get("notes") else {})}
             for name, finding in compatibility.items() for case in finding["cases"]
             if case["status"] == "passed" and case.get("key") and not case.get("kept")}
    _write_newest(project, FINDINGS_FILE, {**load_findings(project), **fresh}, "at", bool(fresh))


def remember_baselines(project: Project, results: Iterable[Any]) -> None:
    """Keep the baselines' times `results` (BenchResults) measured in this run: torch.compile's by its key, the
    reference's by its own (the keys are hashes of different things: they never meet)."""
    results = list(results)
    now = time.time()
    fresh = {r.compiled_key: {"timing": _plain(r.compiled), "measured_at": now, "of": "torch.compile"}
             for r in results if r.compiled_key and r.compiled is not None and not r.compiled_reused}
    fresh.update({r.reference_key: {"timing": _plain(r.reference), "measured_at": now, "of": "reference_fn"}
                  for r in results if r.reference_key and r.reference is not None and not r.reference_reused})
    fresh.update({r.kernel_compiled_key: {"timing": _plain(r.kernel_compiled), "measured_at": now,
                                          "of": "torch.compile(kernel_fn)", "scalars": list(r.kernel_compiled_scalars)}
                  for r in results if r.kernel_compiled_key and r.kernel_compiled is not None
                  and not r.kernel_compiled_reused})
    _write_newest(project, BASELINES_FILE, {**load_baselines(project), **fresh}, "measured_at", bool(fresh))


def _read(project: Project, name: str) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((project.state_dir / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {key: entry for key, entry in data.items() if isinstance(entry, dict)}


def _write_newest(project: Project, name: str, entries: dict[str, dict[str, Any]], stamp: str, changed: bool) -> None:
    """The newest MAX_ENTRIES of `entries` (by their `stamp`), written whole, when anything `changed`."""
    if not changed:
        return
    newest = sorted(entries.items(), key=lambda item: item[1].get(stamp, 0), reverse=True)[:MAX_ENTRIES]
    try:
        atomic_write_text(project.state_dir / name, json.dumps(dict(newest), indent=1))
    except OSError:
        pass  # a store that cannot be written costs the next run the work again, nothing else


def _plain(timing: Any) -> dict[str, Any]:
    return asdict(timing) if is_dataclass(timing) else dict(timing)
