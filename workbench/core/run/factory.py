"""Parent side: the one place a Runner is built, for every entry point (verify, bench, watch and the app,
`pytest --workbench`, `doctor --measure`, the profiler and sanitizer plugins, the Ray plugin).

    make_runner()                                   this machine's workers, verification sharded by default
    make_runner(launcher=["ncu", ...], env={...})   workers started under a profiler (one at a time)
    make_runner(workers=RayWorkers(...), parallel=8) workers from a plugin's source (contracts.WorkerSource)
    lanes(projects=3, gpus=select_gpus("all"))      one runner per lane of GPUs, for several projects at once
"""

from __future__ import annotations

from typing import Sequence

from .contracts import WorkerSource
from .gpus import GpuSlot
from .runner import Runner, default_parallel


def make_runner(*, interpret: bool = False, keep_warm: bool = False, parallel: int | None = None,
                gpus: Sequence[GpuSlot] = (), env: dict[str, str] | None = None, launcher: Sequence[str] = (),
                workers: WorkerSource | None = None) -> Runner:
    """A runner. `parallel`: the verification workers of a run (default: default_parallel(); one under a
    launcher, whose profiler wants one process at a time); `keep_warm`: start the next run's workers ahead
    (the live loop, several projects); `gpus`: the GPUs to place workers on (none: the environment's)."""
    if parallel is None:
        parallel = 1 if launcher else default_parallel()
    return Runner(interpret=interpret, keep_warm=keep_warm, env=env, launcher=launcher, parallel=parallel, gpus=gpus,
                  workers=workers)


def lanes(projects: int, gpus: Sequence[GpuSlot], interpret: bool = False,
          keep_warm: bool = False) -> list[Runner]:
    """Runners that share `projects` out: with several GPUs and several projects, each lane takes its share of
    the GPUs and of the verification workers and runs one project at a time, so a project's benchmark has its
    GPU alone."""
    count = max(1, min(len(gpus), projects))
    parallel = default_parallel()
    return [make_runner(interpret=interpret, keep_warm=keep_warm, parallel=max(1, parallel // count),
                        gpus=list(gpus)[lane::count]) for lane in range(count)]
