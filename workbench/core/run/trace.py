"""Parent side: optional marks of the runner's timeline, for benchmarks/loop_latency.py --trace.

A process-wide hook, off by default (a `mark` then costs one test): workers started, ready, taken,
sent their job, killed; cancels, prewarms, waits for exits, compile processes forked, the GPU gate
opened. A benchmark sets it with `set_hook(fn)`; the product never does.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

_hook: Callable[[str], None] | None = None


def set_hook(hook: Callable[[str], None] | None) -> None:
    global _hook
    _hook = hook


def mark(what: str) -> None:
    if _hook is not None:
        _hook(what)


@contextlib.contextmanager
def span(label: str) -> Iterator[None]:
    """Marks "<label> start" and "<label> end" around a block (nothing when no hook is set)."""
    if _hook is None:
        yield
        return
    mark(f"{label} start")
    try:
        yield
    finally:
        mark(f"{label} end")
