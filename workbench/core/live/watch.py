"""Watching a project for saves: debounce, content-hash dedupe, files that vanish and come back.

    watcher = ProjectWatcher(project)
    for change in watcher.watch(stop_event):   # blocks; run it in a thread
        ...                                    # a Save, or a FilesMissing notice

Watched: the kernel file, workbench.toml, and every local module the kernel
imports (sibling `.py` files and packages of the project folder, followed
transitively). Editors save in bursts (a temp file, a rename, a chmod): the
watcher waits until the folder has been quiet for `step_ms`, then hashes the
watched files and yields a `Save` only when their content changed. A save is seen
`step_ms` to twice that after it lands (watchfiles checks once a step and waits one
quiet step); 20 ms keeps that under 40 ms, and a burst split in two costs no more than
a run restarted with the final content (the hashes decide what counts as a save). A kernel file
that disappears (a rename-over save caught half-way, a `git checkout`) is given a
short grace period; if it stays gone the watcher says so and waits for it, and a project folder that is
removed and made again (by any route) is watched again.

UI-free: the TUI, the latency benchmark and tests all drive this module.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import watchfiles

from ..project.folder import (  # noqa: F401 - imported_top_names: re-exported for the watcher's users
    Project,
    imported_top_names,
    local_modules,
    read_source_bytes,
    source_hash,
    watched_files,
)

MISSING = "missing"
ROOT_CHECK_MS = 250  # how often the watcher checks that the project folder is still the one it watches


@dataclass(frozen=True)
class Snapshot:
    """The content of every watched file at one moment (relative path -> hash, or MISSING)."""

    hashes: dict[str, str]
    kernel_name: str
    kernel_source: str | None

    @property
    def fingerprint(self) -> str:
        text = "\n".join(f"{path}\0{digest}" for path, digest in sorted(self.hashes.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def kernel_missing(self) -> bool:
        return self.kernel_source is None

    @property
    def kernel_hash(self) -> str:
        return self.hashes.get(self.kernel_name, MISSING)


def take_snapshot(project: Project) -> Snapshot:
    """Each watched file's hash; a file that is not a regular file (a FIFO, a link to /dev/urandom) or is too
    large for source counts as missing and is never read (folder.read_source_bytes): reading it would block or
    never end."""
    paths = watched_files(project)
    hashes: dict[str, str] = {}
    kernel_source = None
    for path in paths:
        name = _relative(project, path)
        try:
            raw = read_source_bytes(path)
        except OSError:
            hashes[name] = MISSING
            continue
        hashes[name] = source_hash(raw)
        if path == project.kernel_path:
            kernel_source = raw.decode("utf-8", errors="replace")
    return Snapshot(hashes=hashes, kernel_name=_relative(project, project.kernel_path), kernel_source=kernel_source)


def _relative(project: Project, path: Path) -> str:
    try:
        return str(path.relative_to(project.root))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Save:
    """An accepted save: the watched files' content changed since the last accepted one."""

    fingerprint: str
    kernel_hash: str  # source_hash of the kernel file, as RunStarted.source_hash will report it
    changed: tuple[str, ...]  # relative paths whose content changed
    source: str  # the kernel file's text at acceptance
    saved_at: float  # wall clock: the newest modification time among the changed files
    accepted_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class FilesMissing:
    """Watched files that are gone; an empty tuple says they are all back."""

    paths: tuple[str, ...]


WatchNotice = Save | FilesMissing


class SaveGate:
    """Turns snapshots into notices: dedupes by content, reports a kernel that vanished and came back."""

    def __init__(self, initial: Snapshot):
        self.accepted = initial
        self.missing: tuple[str, ...] = (initial.kernel_name,) if initial.kernel_missing else ()

    def consider(self, snapshot: Snapshot, mtimes: dict[str, float] | None = None) -> list[WatchNotice]:
        notices: list[WatchNotice] = []
        missing = (snapshot.kernel_name,) if snapshot.kernel_missing else ()
        if missing != self.missing:
            self.missing = missing
            notices.append(FilesMissing(missing))
        if missing or snapshot.fingerprint == self.accepted.fingerprint:
            return notices
        old = self.accepted.hashes
        changed = tuple(sorted(p for p, h in snapshot.hashes.items() if old.get(p) != h)) or \
            tuple(sorted(set(old) - set(snapshot.hashes)))
        self.accepted = snapshot
        saved_at = max([(mtimes or {}).get(p, 0.0) for p in changed], default=0.0) or time.time()
        notices.append(Save(fingerprint=snapshot.fingerprint, kernel_hash=snapshot.kernel_hash, changed=changed,
                            source=snapshot.kernel_source or "", saved_at=saved_at))
        return notices


class ProjectWatcher:
    """Yields a project's accepted saves (see the module docstring)."""

    def __init__(self, project: Project, step_ms: int = 20, debounce_ms: int = 1600,
                 missing_grace_s: float = 0.3, force_polling: bool | None = None):
        self.project = project
        self.step_ms, self.debounce_ms = step_ms, debounce_ms
        self.missing_grace_s = missing_grace_s
        self.force_polling = force_polling
        self.gate = SaveGate(take_snapshot(project))

    def watch(self, stop: threading.Event) -> Iterator[WatchNotice]:
        """Block, yielding notices, until `stop` is set. The watched set follows the kernel's imports.

        The project folder is watched without recursion (its .workbench/ churns on every run)
        unless the kernel imports a local package, which must then be watched too. A folder removed is
        waited for, and a folder made again (rm -rf and cp -r back, a checkout that replaces it) is a new
        folder to watch: the folder's identity is checked every ROOT_CHECK_MS, and the watch starts over
        on the one there now, with what it holds compared against the last accepted save.
        """
        first = True
        while not stop.is_set():
            if not self._wait_for_root(stop):
                return
            root = self._root_id()
            if not first:
                yield from self.check()  # what the folder holds now: saved, gone or back while it was not watched
            first = False
            modules = local_modules(self.project)
            restart = False
            try:
                for batch in watchfiles.watch(self.project.root, watch_filter=self._filter(modules),
                                              recursive=bool(modules[1]), debounce=self.debounce_ms,
                                              step=self.step_ms, stop_event=stop, rust_timeout=ROOT_CHECK_MS,
                                              yield_on_timeout=True, raise_interrupt=False,
                                              force_polling=self.force_polling):
                    if self._root_id() != root:
                        break  # the folder was removed, or replaced by another: watch what is there now
                    if not batch:
                        continue
                    for notice in self.check():
                        yield notice
                        if isinstance(notice, Save) and local_modules(self.project) != modules:
                            restart = True  # the kernel imports other modules now: watch those instead
                    if restart:
                        break
            except (FileNotFoundError, OSError, RuntimeError):
                pass  # the folder went while the watch was being set up or read: the next round waits for it
            if self._root_id() is None and not stop.is_set():
                yield from self.check()  # the folder is gone, the kernel with it: said before waiting for it

    def _root_id(self) -> tuple[int, int] | None:
        """The project folder's identity (device, inode), None while it does not exist."""
        try:
            info = self.project.root.stat()
        except OSError:
            return None
        return (info.st_dev, info.st_ino)

    def _wait_for_root(self, stop: threading.Event) -> bool:
        """Until the project folder exists (False: stopped first)."""
        while self._root_id() is None:
            if stop.wait(ROOT_CHECK_MS / 1000):
                return False
        return True

    def _filter(self, modules: tuple[list[Path], list[Path]]):
        files, packages = modules
        watched = {str(p) for p in (self.project.kernel_path, self.project.config_path, *files)}
        package_roots = tuple(str(p) + "/" for p in packages)

        def relevant(_change: watchfiles.Change, path: str) -> bool:
            return path in watched or (path.endswith(".py") and path.startswith(package_roots))

        return relevant

    def check(self) -> list[WatchNotice]:
        """Hash the watched files now and return the notices (also used after each filesystem batch)."""
        snapshot = take_snapshot(self.project)
        deadline = time.monotonic() + self.missing_grace_s
        # A rename-over save caught between its unlink and its rename, or a save that truncates and then writes
        # (most editors; a copy) caught between the two: looked at again until the kernel is back and not empty,
        # for at most the grace (a kernel.py emptied on purpose is a save of its own, that much later).
        while (snapshot.kernel_missing or snapshot.kernel_source == "") and time.monotonic() < deadline:
            time.sleep(0.02)
            snapshot = take_snapshot(self.project)
        return self.gate.consider(snapshot, self._mtimes(snapshot))

    def _mtimes(self, snapshot: Snapshot) -> dict[str, float]:
        mtimes = {}
        for name in snapshot.hashes:
            try:
                mtimes[name] = (self.project.root / name).stat().st_mtime
            except OSError:
                pass
        return mtimes
