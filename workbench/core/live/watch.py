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
short grace period; if it stays gone the watcher says so and waits for it.

UI-free: the TUI, the latency benchmark and tests all drive this module.
"""

from __future__ import annotations

import ast
import hashlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import watchfiles

from ..project.folder import Project, source_hash

MISSING = "missing"


def imported_top_names(source: str) -> set[str]:
    """Top-level module names a source file imports (`import a.b` -> "a"; `from .c import d` -> "c", "d")."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and not node.module:  # from . import x, y
                names.update(alias.name for alias in node.names)
            elif node.module:
                names.add(node.module.split(".")[0])
    return names


def local_modules(project: Project) -> tuple[list[Path], list[Path]]:
    """The project's own modules the kernel imports, transitively: (module files, package folders)."""
    files: list[Path] = []
    packages: list[Path] = []
    seen: set[Path] = {project.kernel_path}
    pending = [project.kernel_path]
    while pending:
        try:
            source = pending.pop().read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name in sorted(imported_top_names(source)):
            module = project.root / f"{name}.py"
            package = project.root / name
            if module.is_file() and module not in seen:
                seen.add(module)
                files.append(module)
                pending.append(module)
            elif (package / "__init__.py").is_file() and package not in seen:
                seen.add(package)
                packages.append(package)
                for inner in sorted(package.rglob("*.py")):
                    if inner not in seen:
                        seen.add(inner)
                        pending.append(inner)
    return files, packages


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
    files, packages = local_modules(project)
    paths = [project.kernel_path, project.config_path, *files]
    for package in packages:
        paths += sorted(package.rglob("*.py"))
    hashes: dict[str, str] = {}
    kernel_source = None
    for path in paths:
        name = _relative(project, path)
        try:
            raw = path.read_bytes()
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
        unless the kernel imports a local package, which must then be watched too.
        """
        while not stop.is_set():
            modules = local_modules(self.project)
            restart = False
            for _batch in watchfiles.watch(self.project.root, watch_filter=self._filter(modules),
                                           recursive=bool(modules[1]), debounce=self.debounce_ms,
                                           step=self.step_ms, stop_event=stop, rust_timeout=500,
                                           raise_interrupt=False, force_polling=self.force_polling):
                for notice in self.check():
                    yield notice
                    if isinstance(notice, Save) and local_modules(self.project) != modules:
                        restart = True  # the kernel imports other modules now: watch those instead
                if restart:
                    break
            if restart:
                yield from self.check()  # anything saved while the watcher was being rebuilt

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
        while snapshot.kernel_missing and time.monotonic() < deadline:
            time.sleep(0.02)  # a rename-over save caught between its unlink and its rename
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
