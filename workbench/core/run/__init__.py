"""Processes, in two halves across the process boundary (docs/ARCHITECTURE.md, "The process boundary").

Parent side (the CLI's or the app's process; never imports kernel.py, torch or triton):
    runner        the Runner: a run's events relayed as one run's; the strategy chosen once per run
    strategies    one worker, one GPU worker with compile processes, or sharded verification
    supply        the warm-worker supply: spares, taking, releasing, exits
    pump          one worker's events until its job ends: time-outs, crashes, re-queueing
    relay         a run's events deduplicated, GPU-stamped, shards merged
    workers       a worker process of this machine, and their source (LocalWorkers)
    forkserver    the client of the warm template workers are forked from
    contracts     what a runner and a worker are (Protocols plugins implement)
    factory       how a runner is built: make_runner, lanes, choose_runners
    session       one run of a project end to end, with its record; Session, the one owner of a front end's
                  runs: it chooses their runners, builds their Jobs and fires the plugins' hooks
    gpus, trace   GPU discovery and placement; optional timeline marks for benchmarks
Both sides:
    protocol      what crosses the boundary: module names, the job and gate lines, exit statuses
Child side (run/child/: worker processes, the template, compile processes):
    see run/child/__init__.py

May import every layer below; never live/. The names plugins use are re-exported here, loaded on
first use: a worker started as ``python -m workbench.core.run.child.worker`` must not import the
runner through this file.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Job": "..stage", "JobContext": "..stage", "CompilePoolOrder": "..stage", "gpu_stage_cases": "..stage",
    "shard_of": "..stage",
    "Runner": ".runner", "default_parallel": ".runner", "make_runner": ".factory", "lanes": ".factory",
    "choose_runners": ".factory", "lane_sizes": ".factory", "verify_lanes_per_gpu": ".factory",
    "RunnerLike": ".contracts", "WorkerHandle": ".contracts", "WorkerSource": ".contracts", "ProcessLike": ".contracts",
    "WorkerProcess": ".workers", "WorkerStartError": ".workers", "LocalWorkers": ".workers",
    "event_or_log": ".workers", "log_lines_left": ".workers", "worker_env": ".workers", "wait_for_ready": ".workers",
    "RunOutcome": ".session", "run_project": ".session", "RunSpec": ".session", "PluginHooks": ".session",
    "Session": ".session",
    "GpuSlot": ".gpus", "discover_gpus": ".gpus", "select_gpus": ".gpus",
    "WORKER_MODULE": ".protocol",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
