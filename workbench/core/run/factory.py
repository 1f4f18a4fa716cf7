"""Parent side: how a Runner is built. `session.Session` calls these for every front end (verify, bench, ir, watch
and the app, `pytest --workbench`, the MCP server, `doctor --measure`, the profiler and sanitizer plugins), and
chooses which runner a run gets; the one caller elsewhere is a plugin's workbench_make_runner hook building a runner
over its own worker source (the Ray plugin). `tests/test_run_spec_hooks.py` holds both to that.

    make_runner()                                   this machine's workers, verification sharded by default
    make_runner(launcher=["ncu", ...], env={...})   workers started under a profiler (one at a time)
    make_runner(workers=RayWorkers(...), parallel=8) workers from a plugin's source (contracts.WorkerSource)
    lanes(projects=3, gpus=select_gpus("all"))      one runner per lane of GPUs, for several projects at once
    choose_runners(3, ["verify"], plugin=...)       what a front end runs its projects with: a plugin's runner
                                                    (workbench_make_runner), else lanes over the chosen GPUs
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from .contracts import RunnerLike, WorkerSource
from .gpus import GpuSlot, select_gpus
from .protocol import count_from_env
from .runner import MAX_WORKERS_PER_RUN, Runner, default_parallel, machine_workers

PROJECTS_PER_GPU_ENV = "WORKBENCH_PROJECTS_PER_GPU"


def make_runner(*, interpret: bool = False, keep_warm: bool = False, parallel: int | None = None,
                gpus: Sequence[GpuSlot] = (), env: dict[str, str] | None = None, launcher: Sequence[str] = (),
                workers: WorkerSource | None = None, check_beside: bool = True) -> Runner:
    """A runner. `parallel`: the verification workers of a run (default: default_parallel(); one under a
    launcher, whose profiler wants one process at a time); `keep_warm`: start the next run's workers ahead
    (the live loop, several projects); `gpus`: the GPUs to place workers on (none: the environment's);
    `check_beside`: Runner's."""
    if parallel is None:
        parallel = 1 if launcher else default_parallel()
    return Runner(interpret=interpret, keep_warm=keep_warm, env=env, launcher=launcher, parallel=parallel, gpus=gpus,
                  workers=workers, check_beside=check_beside)


def lanes(projects: int, gpus: Sequence[GpuSlot], interpret: bool = False,
          keep_warm: bool = False, per_gpu: int = 1) -> list[Runner]:
    """Runners that share `projects` out: with several GPUs and several projects, each lane takes its share of
    the GPUs and of the verification workers and runs one project at a time, so a project's benchmark has its
    GPU alone. `per_gpu` > 1 (verification alone, which times nothing): that many lanes share each GPU, so one
    project's start-up and compiles overlap another's cases."""
    gpus = list(gpus)
    count, workers = lane_sizes(projects, len(gpus), per_gpu)
    if count <= len(gpus) or not gpus:
        shares = [gpus[lane::count] for lane in range(count)]
    else:
        shares = [[gpus[lane % len(gpus)]] for lane in range(count)]
    # One lane: its project's torch.compile check may run in a process of its own (runner.compile_check_wanted);
    # several: their projects already overlap, and the process was measured for one project only (RESULTS 3p)
    return [make_runner(interpret=interpret, keep_warm=keep_warm, parallel=workers, gpus=share,
                        check_beside=count == 1)
            for share in shares]


def choose_runners(projects: int, stages: Sequence[str], *, interpret: bool = False, keep_warm: bool = False,
                   gpus: str | None = "all", plugin: Callable[[], Any] | None = None) -> list[RunnerLike]:
    """The runners a front end runs `projects` projects' `stages` with (the CLI's verify, bench and watch,
    pytest --workbench, the MCP server): the runner a plugin gives (`plugin()`, the workbench_make_runner hook,
    when it gives one; or the lanes it gives, a list), else lanes over the GPUs `gpus` selects
    (gpus.select_gpus; none under the interpreter), several per GPU when the stages only verify. Raises
    gpus.GpuSelectionError for a `gpus` that names no GPU here."""
    given = plugin() if plugin is not None else None
    if given is not None:  # one runner, or a plugin's lanes
        return list(given) if isinstance(given, (list, tuple)) else [given]
    placed = [] if interpret else select_gpus(gpus)
    return lanes(projects, placed, interpret=interpret, keep_warm=keep_warm, per_gpu=lanes_per_gpu(stages))


def lane_sizes(projects: int, gpus: int, per_gpu: int = 1, cores: int | None = None) -> tuple[int, int]:
    """(lanes, verification workers per lane) for `projects` projects on `gpus` GPUs, `per_gpu` lanes to a GPU, on
    `cores` cores (default: this machine's; a cluster's, for a plugin's lanes)."""
    count = max(1, min(gpus * max(1, per_gpu), projects))
    # The machine's cores shared out (machine_workers), not one run's cap: on 2 GPUs and 32 cores, 8 lanes of 1
    # worker each left the longest project (attention_train) compiling alone and 2 GPUs slower than one (RESULTS 3q)
    shared = machine_workers(cores) if count > 1 else default_parallel(cores)
    return count, max(1, min(MAX_WORKERS_PER_RUN, shared // count))


def lanes_per_gpu(stages: Sequence[str]) -> int:
    """How many of a run's projects share one GPU at once: several when they only verify
    (verify_lanes_per_gpu), one when anything is timed."""
    return verify_lanes_per_gpu() if list(stages) == ["verify"] else 1


def verify_lanes_per_gpu(cores: int | None = None) -> int:
    """Projects verified at once on one GPU (`workbench verify` of several): WORKBENCH_PROJECTS_PER_GPU, else one
    per 4 cores (this machine's, or a cluster's `cores`), at most 4. Each brings its GPU worker, its judge and its
    compile processes; verification times nothing, so sharing the GPU changes no verdict."""
    return count_from_env(PROJECTS_PER_GPU_ENV, max(1, min(4, (cores or os.cpu_count() or 2) // 4)))
