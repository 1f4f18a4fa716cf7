"""The run history: one record per run, plus the kernel source it ran.

Layout under the project's `.workbench/`:

    history/<run id>.json      one record per run, written atomically (temp file + rename)
    sources/<source hash>.py   the kernel source each run ran, content-addressed

A record file either exists whole or not at all, so an interrupted write never
corrupts the history; a stray temp file is ignored by readers.
"""

from __future__ import annotations

import difflib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text
from ..verdict import Verdict
from .folder import Project

RECORD_VERSION = 1


@dataclass(frozen=True)
class RunRecord:
    id: str
    data: dict[str, Any]

    @property
    def verdict(self) -> str:
        """passed | failed | gpu_only | error | cancelled: core/verdict.py's rule, records of any age."""
        return Verdict.of_record(self.data).status if "counts" in self.data else self.data.get("verdict", "?")

    @property
    def source_hash(self) -> str:
        return self.data.get("source_hash", "")

    @property
    def created(self) -> float:
        return float(self.data.get("created", 0.0))


def history_dir(project: Project) -> Path:
    return project.state_dir / "history"


def sources_dir(project: Project) -> Path:
    return project.state_dir / "sources"


def new_run_id(now: float | None = None) -> str:
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{int((now % 1) * 1e6):06d}-{os.getpid() % 100000:05d}"


def append_record(project: Project, data: dict[str, Any], source: str) -> RunRecord:
    """Store the source (once per content) and a new record; returns the record."""
    project.ensure_state_dir()
    source_hash = data["source_hash"]
    source_path = sources_dir(project) / f"{source_hash}.py"
    if not source_path.exists():
        atomic_write_text(source_path, source)
    run_id = data.get("id") or new_run_id()
    record = {"version": RECORD_VERSION, "id": run_id, "created": time.time(), **data}
    atomic_write_text(history_dir(project) / f"{run_id}.json", json.dumps(record, indent=1, allow_nan=False,
                                                                           default=str))
    return RunRecord(id=run_id, data=record)


def _record_paths(project: Project) -> list[Path]:
    """Record files, oldest first (run ids sort by time); temp files of interrupted writes left out."""
    folder = history_dir(project)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def _read(path: Path) -> RunRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return RunRecord(id=data.get("id", path.stem), data=data)


def read_records(project: Project) -> list[RunRecord]:
    """Every readable record, oldest first. Unreadable files are skipped, never fatal."""
    return [r for r in map(_read, _record_paths(project)) if r is not None]


def last_record(project: Project) -> RunRecord | None:
    """The newest readable record, reading no more files than it takes."""
    for path in reversed(_record_paths(project)):
        record = _read(path)
        if record is not None:
            return record
    return None


def find_record(records: list[RunRecord], ref: str) -> RunRecord:
    """A record by id, unique id prefix, or index (0 = oldest, -1 = newest)."""
    try:
        return records[int(ref)]
    except (ValueError, IndexError):
        pass
    matches = [r for r in records if r.id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise KeyError(f"no run {ref!r} in the history ({len(records)} runs)")
    raise KeyError(f"{ref!r} names {len(matches)} runs; give more of the id")


def read_source(project: Project, source_hash: str) -> str | None:
    path = sources_dir(project) / f"{source_hash}.py"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def text_diff(older: str, newer: str, older_label: str, newer_label: str, context: int = 3) -> list[str]:
    """A unified diff of two kernel sources, line by line."""
    return list(difflib.unified_diff(older.splitlines(), newer.splitlines(), older_label, newer_label, n=context,
                                     lineterm=""))


def source_diff(project: Project, older: RunRecord, newer: RunRecord, context: int = 3) -> list[str]:
    return text_diff(read_source(project, older.source_hash) or "", read_source(project, newer.source_hash) or "",
                     f"kernel.py@{older.id}", f"kernel.py@{newer.id}", context)
