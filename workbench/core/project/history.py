"""The run history: one record per run, plus the kernel source it ran.

Layout under the project's `.workbench/`:

    history/<run id>.json      one record per run, written atomically (temp file + rename)
    sources/<hash>.py.gz       each file a run depended on (kernel.py, workbench.toml, the local modules it
                               imports), gzip-compressed, once per distinct content (older histories: .py)
    pins.json                  the runs never pruned: run id -> why ("pinned", "a --baseline")

A record file either exists whole or not at all, so an interrupted write never
corrupts the history; a stray temp file is ignored by readers.

The history is bounded ([history] in workbench.toml: keep_runs, keep_mb): when a run recorded passes either,
the oldest runs go, down to 90% of it, never a pinned run nor the newest; a source no remaining run names goes
with them (`prune`).
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text
from ..text import plural
from ..verdict import LABELS, Verdict
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
    def verdict_label(self) -> str:
        """The verdict's word, as the report, the app and the MCP server say it: VERIFIED, FAILED, NOT USABLE,
        CANNOT RUN HERE, GPU ONLY, CANCELLED."""
        if "counts" in self.data:
            return Verdict.of_record(self.data).label
        return LABELS.get(self.verdict, self.verdict.upper())

    @property
    def counts_text(self) -> str:
        """The record's cases by verdict, as every report says them ("18 passed, 0 failed (90 forced-config
        runs, 90 passed)"); records written before the case was the unit counted each config's run."""
        return Verdict.of_record(self.data).describe_counts()

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


def append_record(project: Project, data: dict[str, Any], source: str,
                  files: dict[str, str] | None = None, limits: Any = None) -> RunRecord:
    """Store the sources (once per content) and a new record; returns the record. `files`: the text of every
    file the run depended on (folder.watched_files: kernel.py, workbench.toml, the local modules kernel.py
    imports) by its path in the project; the record names each by its hash (record["files"]). `limits`: the
    project's HistoryConfig, applied once the record is written (`prune`)."""
    project.ensure_state_dir()
    source_hash = data["source_hash"]
    _store_source(project, source_hash, source)
    names = {}
    for name, text in (files or {}).items():
        digest = data["source_hash"] if Path(name) == Path(project.kernel_path.name) else \
            hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]
        _store_source(project, digest, text)
        names[name] = digest
    run_id = data.get("id") or new_run_id()
    record = {"version": RECORD_VERSION, "id": run_id, "created": time.time(), **data,
              **({"files": names} if names else {})}
    atomic_write_text(history_dir(project) / f"{run_id}.json", json.dumps(record, indent=1, allow_nan=False,
                                                                           default=str))
    if limits is not None:
        prune(project, limits.keep_runs, limits.keep_mb)
    return RunRecord(id=run_id, data=record)


# -- how much the history holds, and keeping it within bounds --------------------------------------------

@dataclass(frozen=True)
class Holding:
    runs: int
    sources: int
    nbytes: int  # records and sources together

    def describe(self) -> str:
        return f"{plural(self.runs, 'run')}, {plural(self.sources, 'stored source')}, {self.nbytes / 2**20:.1f} MB"


def holding(project: Project) -> Holding:
    records, sources = _record_paths(project), _source_paths(project)
    return Holding(runs=len(records), sources=len(sources), nbytes=sum(_size(p) for p in [*records, *sources]))


def pins(project: Project) -> dict[str, str]:
    """The runs never pruned: run id -> why."""
    try:
        data = json.loads((project.state_dir / "pins.json").read_text(encoding="utf-8"))
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def set_pin(project: Project, run_id: str, why: str | None) -> None:
    """Pin a run (`why`: "pinned", "a --baseline"), or unpin it (None)."""
    current = pins(project)
    if why is None:
        current.pop(run_id, None)
    else:
        current[run_id] = why
    project.ensure_state_dir()
    atomic_write_text(project.state_dir / "pins.json", json.dumps(current, indent=1, sort_keys=True))


def prune(project: Project, keep_runs: int, keep_mb: float) -> list[str]:
    """When there are more than `keep_runs` runs or records and sources take more than `keep_mb` MB (0: no such
    limit), remove the oldest runs, never a pinned run nor the newest, down to 90% of the limit passed (so that
    a live loop at its limit reads the remaining records for the sources they name once every few dozen saves,
    not on every one); then the sources no remaining run names. Returns the ids removed, oldest first."""
    paths = _record_paths(project)
    sizes = {p: _size(p) for p in paths}
    total = sum(sizes.values()) + sum(_size(p) for p in _source_paths(project))
    runs_to = keep_runs - keep_runs // 10 if keep_runs > 0 and len(paths) > keep_runs else None
    bytes_to = 0.9 * keep_mb * 2**20 if keep_mb > 0 and total > keep_mb * 2**20 else None
    if runs_to is None and bytes_to is None:
        return []
    pinned = pins(project)
    removable = [p for p in paths[:-1] if p.stem not in pinned]
    left, removed = len(paths), []
    for path in removable:
        if not ((runs_to is not None and left > runs_to) or (bytes_to is not None and total > bytes_to)):
            break
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path.stem)
        left -= 1
        total -= sizes[path]
    if removed:
        _drop_unnamed_sources(project)
    return removed


def _drop_unnamed_sources(project: Project) -> None:
    named: set[str] = set()
    for path in _record_paths(project):  # one record at a time: a long history's records whole would be 100s of MB
        record = _read(path)
        if record is None:
            continue
        named.add(record.source_hash)
        named.update(str(v) for v in (record.data.get("files") or {}).values())
    for path in _source_paths(project):
        if path.name.split(".")[0] not in named:
            try:
                path.unlink()
            except OSError:
                pass


def _source_paths(project: Project) -> list[Path]:
    folder = sources_dir(project)
    if not folder.is_dir():
        return []
    return [p for p in folder.iterdir() if p.name.endswith((".py", ".py.gz")) and not p.name.startswith(".")]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _record_paths(project: Project) -> list[Path]:
    """Record files, oldest first (run ids sort by time); temp files of interrupted writes left out."""
    folder = history_dir(project)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def _read(path: Path, unreadable: list[str] | None = None) -> RunRecord | None:
    """The record in `path`; None when it cannot be read, said in `unreadable` (where, and why)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not a record")
    except (OSError, ValueError) as exc:
        if unreadable is not None:
            why = "truncated or not JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
            unreadable.append(f"{path}: unreadable run record ({why}), skipped; the other records are kept")
        return None
    return RunRecord(id=data.get("id", path.stem), data=data)


def read_records(project: Project, unreadable: list[str] | None = None) -> list[RunRecord]:
    """Every readable record, oldest first. An unreadable file is skipped, never fatal; `unreadable` (when
    given) gets one line per skipped file, saying where and why, for the caller to show."""
    return [r for r in (_read(path, unreadable) for path in _record_paths(project)) if r is not None]


class RecentRecords:
    """The newest `last` records of a project, each read once and kept small: what a view of the recent runs
    (the app's history tab) needs on every save, whatever the history's size. A record is written once and never
    changed, so only new files are read; a record on CPU can hold hundreds of kB (every case and config), and
    reading them all again on each save made the app's memory grow with the history."""

    KEYS = ("version", "id", "created", "source_hash", "stages", "mode", "device", "verdict", "counts", "after",
            "bench_summary")
    BENCH_KEYS = ("case_index", "label", "median_ms", "gpu")

    def __init__(self, project: Project, last: int):
        self.project, self.last = project, last
        self._kept: dict[str, RunRecord] = {}  # file name -> its small record

    def read(self, unreadable: list[str] | None = None) -> tuple[list[RunRecord], int]:
        """(the newest `last` readable records, oldest first, kept small; how many record files there are)."""
        paths = _record_paths(self.project)
        kept: dict[str, RunRecord] = {}
        for path in paths[-self.last:] if self.last > 0 else []:
            small = self._kept.get(path.name)
            if small is None:
                record = _read(path, unreadable)
                if record is None:
                    continue
                small = self.small(record)
            kept[path.name] = small
        self._kept = kept
        return list(kept.values()), len(paths)

    @classmethod
    def small(cls, record: RunRecord) -> RunRecord:
        """The record less what a list of runs never reads (each case's results, tracebacks, samples); its
        problems by kind only, as its verdict reads them. The whole record where the verdict would differ."""
        data = record.data
        small: dict[str, Any] = {k: data[k] for k in cls.KEYS if k in data}
        problems = [p for p in data.get("problems") or [] if isinstance(p, dict)]
        kinds = [{"kind": p.get("kind", ""), "n": n} for n, p in enumerate(problems)]
        small["problems"] = kinds
        if "after_verification" in data:
            later = [p for p in data.get("after_verification") or [] if isinstance(p, dict)]
            small["after_verification"] = [next((kinds[n] for n, q in enumerate(problems) if q == p),
                                                {"kind": p.get("kind", ""), "n": -1 - m}) for m, p in enumerate(later)]
        small["bench"] = [{**{k: row[k] for k in cls.BENCH_KEYS if k in row},
                           "kernel": {"median_ms": (row.get("kernel") or {}).get("median_ms")}}
                          for row in data.get("bench") or [] if isinstance(row, dict)
                          and isinstance(row.get("kernel") or {}, dict)]
        small["devices"] = [{"gpu": d.get("gpu"), "name": d.get("name")} for d in data.get("devices") or []
                            if isinstance(d, dict)]
        shrunk = RunRecord(id=record.id, data=small)
        try:
            same = shrunk.verdict == record.verdict and shrunk.verdict_label == record.verdict_label
        except Exception:  # noqa: BLE001 - a record edited by hand: kept whole, as it was read
            same = False
        return shrunk if same else record


def read_record(project: Project, run_id: str, unreadable: list[str] | None = None) -> RunRecord | None:
    """One record, whole, by its run id (None when there is no such file or it cannot be read)."""
    path = history_dir(project) / f"{run_id}.json"
    return _read(path, unreadable) if path.is_file() else None


def older_record(project: Project, before: str, wanted, unreadable: list[str] | None = None) -> RunRecord | None:
    """The newest record older than run `before` for which `wanted(record)` holds, read newest first and one at
    a time: no more files than it takes."""
    for path in reversed(_record_paths(project)):
        if path.stem >= before:
            continue
        record = _read(path, unreadable)
        if record is not None and wanted(record):
            return record
    return None


def last_record(project: Project, unreadable: list[str] | None = None) -> RunRecord | None:
    """The newest readable record, reading no more files than it takes (newer unreadable ones said)."""
    for path in reversed(_record_paths(project)):
        record = _read(path, unreadable)
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


def _store_source(project: Project, digest: str, text: str) -> None:
    folder = sources_dir(project)
    path = folder / f"{digest}.py.gz"
    if path.exists() or (folder / f"{digest}.py").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f".{digest}.{os.getpid()}.tmp"
    try:
        # mtime=0: the same content gives the same bytes
        temp.write_bytes(gzip.compress(text.encode("utf-8", errors="surrogateescape"), mtime=0))
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def read_source(project: Project, source_hash: str) -> str | None:
    folder = sources_dir(project)
    try:
        return gzip.decompress((folder / f"{source_hash}.py.gz").read_bytes()).decode("utf-8", errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        pass
    try:
        return (folder / f"{source_hash}.py").read_text(encoding="utf-8")
    except OSError:
        return None


def text_diff(older: str, newer: str, older_label: str, newer_label: str, context: int = 3) -> list[str]:
    """A unified diff of two kernel sources, line by line."""
    return list(difflib.unified_diff(older.splitlines(), newer.splitlines(), older_label, newer_label, n=context,
                                     lineterm=""))


def record_files(project: Project, record: RunRecord) -> dict[str, str]:
    """The files a record's run depended on, by path, to their hashes (a record written before every watched
    file was recorded names kernel.py alone)."""
    return dict(record.data.get("files") or {project.kernel_path.name: record.source_hash})


def changed_since(project: Project, record: RunRecord) -> list[str]:
    """The files a record's run depended on that differ on disk now (or are gone), by path."""
    changed = []
    for name, digest in record_files(project, record).items():
        path = project.root / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            changed.append(name)
            continue
        now = project.source_hash() if path == project.kernel_path else \
            hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]
        if now != digest:
            changed.append(name)
    return changed


def source_diff(project: Project, older: RunRecord, newer: RunRecord, context: int = 3) -> list[str]:
    """The diff of every file the two runs depended on (kernel.py, workbench.toml, the local modules it
    imports), file by file; [] when all are the same."""
    before, after = record_files(project, older), record_files(project, newer)
    lines: list[str] = []
    for name in sorted(set(before) | set(after), key=lambda n: (n != project.kernel_path.name, n)):
        if before.get(name) == after.get(name):
            continue
        old = read_source(project, before[name]) or "" if name in before else ""
        new = read_source(project, after[name]) or "" if name in after else ""
        lines += text_diff(old, new, f"{name}@{older.id}", f"{name}@{newer.id}", context)
    return lines


class RecorderLock:
    """One recorder per project: two `workbench watch` on one project recorded every run twice. The live
    loop that holds this lock (an advisory lock on .workbench/recorder.lock, released when its process ends,
    however it ends) records; another one runs without recording and says so (`holder`: the pid that records).
    Headless runs are each their own run and record regardless."""

    def __init__(self, project: Project):
        self.path = project.state_dir / "recorder.lock"
        self.holder = ""
        self._file: Any = None

    def acquire(self) -> bool:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the loop's life
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            self.holder = handle.read().strip() or "another process"
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle
        return True

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the file releases the lock
            self._file = None
