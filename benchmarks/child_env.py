"""The environment a benchmark's child process runs in: the caller's, with this checkout first on PYTHONPATH.

Every command a benchmark starts imports this checkout's workbench (or, for timing_escapes.py, the checkout it is
given), and what the caller had on PYTHONPATH stays importable after it: packages installed beside Python rather
than into it, as on a machine with no registry, where textual and watchfiles travel as wheels. A child given
PYTHONPATH=<checkout> alone loses them (headless.py's commands once did)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def repo_env(extra: dict[str, str] | None = None, root: Path = ROOT, without: tuple[str, ...] = ()) -> dict[str, str]:
    """os.environ plus `extra`, less the variables named in `without`, with `root` put first on PYTHONPATH and the
    entries already there kept after it."""
    env = {k: v for k, v in {**os.environ, **(extra or {})}.items() if k not in without}
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(root)]
    env["PYTHONPATH"] = os.pathsep.join([str(root), *kept])
    return env
