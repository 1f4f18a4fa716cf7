"""A project: a folder holding kernel.py, an optional workbench.toml, and .workbench/.

`.workbench/` is the project's own state: its Triton cache (cleared before each
run), the run history, the last verdict. It is git-ignored by the scaffold. A loose kernel file's state is in
the workbench's cache instead (Project.state_dir).
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import os
import shutil
import stat
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from ..fsutil import cache_root
from .config import ProjectConfig, load_config

KERNEL_FILE = "kernel.py"
CONFIG_FILE = "workbench.toml"
STATE_DIR = ".workbench"
_retired = itertools.count()  # names for Triton caches being deleted


class ProjectError(Exception):
    """The path names no usable project."""


@dataclass(frozen=True)
class Project:
    root: Path
    kernel_path: Path

    @classmethod
    def open(cls, path: str | Path) -> "Project":
        """A project from a folder holding kernel.py, or from a kernel file itself. A bare name that is no
        folder here is looked for where `workbench new` put it: ./projects/NAME, this folder when it is the
        project NAME, or a sibling project when this folder is one (so `workbench verify NAME`, as AGENTS.md
        hands it out, works from where `new` ran, from projects/ and from inside the project)."""
        path = Path(path).expanduser()
        try:
            if not path.exists():
                path = by_name(path) or path
            if not path.exists():
                raise ProjectError(f"{path}: no such file or folder")
            path = path.resolve()
        except OSError as exc:  # a name over 255 bytes, a path the OS refuses
            shown = str(path) if len(str(path)) <= 80 else str(path)[:77] + "..."
            raise ProjectError(f"{shown}: not a usable path ({exc.strerror or exc})") from None
        if path.is_dir():
            kernel = path / KERNEL_FILE
            if not kernel.is_file():
                raise ProjectError(f"{path}: not a project (no {KERNEL_FILE} in it)")
            return cls(root=path, kernel_path=kernel)
        if path.suffix != ".py":
            raise ProjectError(f"{path}: expected a project folder or a .py kernel file")
        return cls(root=path.parent, kernel_path=path)

    @property
    def name(self) -> str:
        if self.kernel_path.name == KERNEL_FILE:
            return self.root.name
        return self.kernel_path.stem

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def loose(self) -> bool:
        """A kernel file verified on its own, not a project folder's kernel.py."""
        return self.kernel_path.name != KERNEL_FILE

    @property
    def state_dir(self) -> Path:
        """A project's own state: <project>/.workbench/. A loose kernel file's is in the workbench's cache
        (loose/<stem>-<a digest of its path>/): its folder is someone else's (a folder of scripts), and
        nothing is written beside it."""
        if not self.loose:
            return self.root / STATE_DIR
        digest = hashlib.sha256(str(self.kernel_path).encode("utf-8", "surrogateescape")).hexdigest()[:12]
        return cache_root() / "loose" / f"{self.kernel_path.stem}-{digest}"

    @property
    def triton_cache_dir(self) -> Path:
        return self.state_dir / "triton-cache"

    def load_config(self) -> ProjectConfig:
        return load_config(self.config_path)

    def source(self) -> str:
        return self.kernel_path.read_text(encoding="utf-8")

    def source_hash(self) -> str:
        return source_hash(read_source_bytes(self.kernel_path))

    def clear_triton_cache(self) -> None:
        """Start this project's own Triton cache afresh; never ~/.triton. The old one is renamed away at once
        and deleted by an `rm` process: a save's run need not wait for hundreds of unlinks (0.14 s on a GPU
        host), nor share the interpreter lock with a thread doing them while it starts the run, and a cancelled
        worker still writing lands in the renamed folder, not in the new run's."""
        cache = self.triton_cache_dir
        for old in cache.parent.glob(f"{cache.name}.old-*"):  # left by an exit mid-delete (ours are being deleted)
            if not old.name.startswith(f"{cache.name}.old-{os.getpid()}-"):
                shutil.rmtree(old, ignore_errors=True)
        if cache.exists():
            retired = cache.with_name(f"{cache.name}.old-{os.getpid()}-{next(_retired)}")
            try:
                cache.rename(retired)
            except OSError:
                shutil.rmtree(cache, ignore_errors=True)
            else:
                _delete_in_background(retired)
        cache.mkdir(parents=True, exist_ok=True)

    def ensure_state_dir(self) -> Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        ignore = self.root / STATE_DIR / ".gitignore"
        if not self.loose and not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")
        return self.state_dir


def _delete_in_background(folder: Path) -> None:
    """`rm -rf folder` in a process of its own (reaped by a thread that only waits); a thread deleting it
    where `rm` cannot be run."""
    try:
        rm = subprocess.Popen(["rm", "-rf", "--", str(folder)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    except OSError:
        threading.Thread(target=shutil.rmtree, args=(folder, True), name="workbench-cache-delete", daemon=True).start()
    else:
        threading.Thread(target=rm.wait, name="workbench-cache-delete", daemon=True).start()


def source_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def by_name(name: Path) -> Path | None:
    """Where a bare project name (no folder part, no suffix) that is not a folder here lives, if anywhere."""
    if len(name.parts) != 1 or name.suffix or str(name) in (".", ".."):
        return None
    here = Path.cwd()
    candidates = [here / "projects" / name]
    if (here / KERNEL_FILE).is_file():  # inside a project: itself, or a sibling
        candidates += [here] if here.name == str(name) else [here.parent / name]
    return next((c for c in candidates if (c / KERNEL_FILE).is_file()), None)


def find_projects(root: Path) -> list[Project]:
    """Projects directly under `root` (each a folder holding kernel.py), sorted by name."""
    if not root.is_dir():
        return []
    found = []
    for child in sorted(root.iterdir()):
        if child.is_dir() and (child / KERNEL_FILE).is_file():
            found.append(Project(root=child.resolve(), kernel_path=(child / KERNEL_FILE).resolve()))
    return found


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


# A source file larger than this is not one: it is not read (a link to a device, a log written over kernel.py).
MAX_SOURCE_BYTES = 16 << 20


def read_source_bytes(path: Path) -> bytes:
    """A source file's bytes; OSError for what is not a regular file (a FIFO would block the read, a link to
    /dev/urandom never end it) or is past MAX_SOURCE_BYTES."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: not a regular file")
    if st.st_size > MAX_SOURCE_BYTES:
        raise OSError(f"{path}: {st.st_size} bytes, too large for a source file")
    return path.read_bytes()


def local_modules(project: Project) -> tuple[list[Path], list[Path]]:
    """The project's own modules the kernel imports, transitively: (module files, package folders)."""
    files: list[Path] = []
    packages: list[Path] = []
    seen: set[Path] = {project.kernel_path}
    pending = [project.kernel_path]
    while pending:
        try:
            source = read_source_bytes(pending.pop()).decode("utf-8", errors="replace")
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


def watched_files(project: Project) -> list[Path]:
    """The files a run's verdict depends on, as the watcher watches them: kernel.py, workbench.toml and the
    project's own modules kernel.py imports (transitively, packages included)."""
    files, packages = local_modules(project)
    paths = [project.kernel_path, project.config_path, *files]
    for package in packages:
        paths += sorted(package.rglob("*.py"))
    return paths
