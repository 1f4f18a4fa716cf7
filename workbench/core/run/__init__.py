"""Processes: the worker entry point that runs one job's stages (worker), the parent side that keeps
workers warm, shards cases and survives crashes and hangs (runner; one worker process: workers), one run of a project end to end
with its record (session), and the compile-ahead work that shortens a run (precompile,
compiler_warmup). May import every layer below; never live/.

The names plugins use are re-exported here, loaded on first use: a worker started as
``python -m workbench.core.run.worker`` must not import the runner (nor itself) through this file.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Job": "..stage", "JobContext": "..stage", "gpu_stage_cases": "..stage", "shard_of": "..stage",
    "Runner": ".runner", "WorkerProcess": ".workers", "WorkerStartError": ".workers", "default_parallel": ".runner",
    "RunOutcome": ".session", "run_project": ".session",
    "GpuSlot": ".gpus", "discover_gpus": ".gpus", "select_gpus": ".gpus",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
