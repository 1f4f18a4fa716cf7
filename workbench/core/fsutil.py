"""Small file-system helpers shared by the core."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


CACHE_ENV = "WORKBENCH_CACHE_DIR"


def cache_root() -> Path:
    """The workbench's own cache, shared by every project: $WORKBENCH_CACHE_DIR, else
    $XDG_CACHE_HOME/kernel-workbench (~/.cache/kernel-workbench)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernel-workbench"


INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def inductor_cache_dir() -> Path:
    """Where torch.compile's caches go in the workbench's workers (the torch.compile check, the benchmark's compiled
    baselines): $TORCHINDUCTOR_CACHE_DIR when set, else inside cache_root(), so that one folder kept by a CI
    cache step holds them beside the GPU's ceilings (Inductor's own default is under /tmp)."""
    override = os.environ.get(INDUCTOR_CACHE_ENV)
    return Path(override).expanduser() if override else cache_root() / "inductor"


def current_umask() -> int:
    """The process's umask, read where Linux shows it (setting it to read it back races other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def process_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's name, which may hold spaces and brackets: [0] its state
    ("Z": a zombie), [1] its parent's pid, [11] and [12] its user and system CPU in clock ticks. OSError where
    /proc has no such process."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
        return stat.read().rsplit(")", 1)[-1].split()


def shared_mode(directory: bool = False) -> int:
    """The mode a plain open() or mkdir() would give (0644 / 0755 under the usual umask): temporary files and
    folders are made 0600 / 0700, which a teammate on a shared machine cannot read."""
    return (0o777 if directory else 0o666) & ~current_umask()


def atomic_write_text(path: Path, text: str) -> None:
    """atomic_write_bytes of `text` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file so that a reader sees the old content or the new, never half of it; with the mode the file
    had, or a plain open()'s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = shared_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
