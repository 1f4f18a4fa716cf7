"""Child side: a worker process. Warm up, wait for one job, run it, stream events as JSON lines, exit.

    python -m workbench.core.run.child.worker     (run/protocol.WORKER_MODULE)

Start-up imports torch and triton and brings up the CUDA context (or chooses
the Triton interpreter when there is no GPU), warms the compiler and torch's kernels,
then writes a `worker_ready` event (with the seconds of each warm-up step) and blocks
on stdin for one job line. That is what lets the parent keep a worker warm ahead of a save. Events go to the original stdout; anything the
kernel prints goes to stderr, so user prints cannot corrupt the event stream.

Exit status: 0 after a job, exit_codes.EXIT_POISONED when a CUDA error poisoned the
context (the parent resumes the remaining cases in a fresh worker). A process started with
ROLE_ENV = COMPILE_ROLE is a compile process of a run's pool instead (child/compile_pool.py).
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ...stage import Job, JobContext, Phases
from ...exit_codes import EXIT_ENVIRONMENT, EXIT_POISONED
from ..protocol import COMPILE_MODE, COMPILE_ROLE, COMPILE_TARGET_ENV, JOB_DONE, ROLE_ENV, die_with_parent
from . import compile_pool

# Stages a job can ask for, by name -> "module:function". Functions take
# (context: JobContext) and emit events through context.emit. A job may also
# name a plugin's stage directly as "module:function".
STAGES: dict[str, str] = {
    "verify": "workbench.core.verify.battery:verify_stage",
    "bench": "workbench.core.timing.bench:bench_stage",
    "precompile": "workbench.core.run.child.precompile:precompile_stage",  # a verify shard's share of the bench cases
    "require_gpu": "workbench.core.timing.bench:require_gpu_stage",  # first stage of `bench`: refuse the interpreter
    "measure_ceilings": "workbench.core.timing.device:measure_ceilings_stage",  # `doctor --measure`; needs no kernel
    "ir": "workbench.core.timing.compiled:ir_stage",  # `workbench ir`: compile (for this GPU or a named target), run nothing
}


def _warm_up(watch: Phases) -> tuple[Any, str, str, str]:
    """Import torch and triton; choose GPU or interpreter; pay the compiler's and torch's first-use costs
    (run/compiler_warmup.py). Returns (torch, mode, device name, reason)."""
    import torch  # main() has set TRITON_INTERPRET when the interpreter was asked for

    reason = ""
    target = os.environ.get(COMPILE_TARGET_ENV)
    if target:  # compile for a named GPU, run nothing: no CUDA context, no interpreter
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        return torch, COMPILE_MODE, f"no GPU used: compiling for {target}", f"a target was named ({target})"
    if os.environ.get("WORKBENCH_INTERPRET") == "1":
        reason = "--interpret was asked for"
    elif not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
        reason = "no CUDA GPU visible to torch"
    if os.environ.get("TRITON_INTERPRET") == "1":
        mode, device_name = "interpreter", "CPU (Triton interpreter)"
    else:
        mode = "gpu"
        torch.zeros(1, device="cuda")  # bring the context up now, not on the first save
        device_name = torch.cuda.get_device_name()
        watch.done("CUDA context")
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    if mode == "interpreter":
        from ...verify.interpreter.fixes import apply

        apply()
    else:
        from .compiler_warmup import warm_battery_ops, warm_compiler
        from .launcher_cache import MANAGER

        os.environ.setdefault("TRITON_CACHE_MANAGER", MANAGER)

        try:
            warm_compiler(torch, watch.done)
            warm_battery_ops(torch)
            watch.done("the battery's torch ops")
        except Exception:  # noqa: BLE001 - only a head start: the user's first compile pays instead
            pass
    return torch, mode, device_name, reason


def main() -> int:
    die_with_parent()  # a worker, or a compile process, ends when the parent does, however it ends
    import faulthandler
    import signal

    # Asked by a parent that has waited too long for this worker to start (workers.stacks_of_stalled): every
    # thread's stack to stderr, the parent's log of this worker.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if os.environ.get(ROLE_ENV) == COMPILE_ROLE:
        return compile_pool.serve_compiles()  # a compile process of a run's pool: no CUDA, no judge, no events
    started = time.perf_counter()
    events_fd = os.dup(1)
    os.dup2(2, 1)  # the kernel's prints, Python's or C's, go to stderr
    sys.stdout = sys.stderr

    from ...events import EventStream, Problem, StageChanged, WorkerReady

    if os.environ.get("WORKBENCH_INTERPRET") == "1":
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import torch  # noqa: F401 - the judge forks with torch loaded, before CUDA, triton or kernel.py

        from ...timing import primitives  # noqa: F401 - the timing's CUDA calls, bound likewise
        from ...verify import handoff  # noqa: F401 - binds its primitives before kernel.py can patch them
    except Exception as exc:  # noqa: BLE001 - reported, the parent exits 3
        EventStream(events_fd)(Problem(kind="environment", message=f"the worker cannot start: {type(exc).__name__}: {exc}"))
        return EXIT_ENVIRONMENT
    from .judge_process import fork_judge

    watch = Phases()
    link = fork_judge(events_fd)  # from here on, only the judge can reach the parent
    emit = link.emit
    watch.done("judge forked")
    try:
        torch, mode, device_name, reason = _warm_up(watch)
    except Exception as exc:  # noqa: BLE001 - reported, the parent exits 3
        emit(Problem(kind="environment", message=f"the worker cannot start: {type(exc).__name__}: {exc}"))
        return EXIT_ENVIRONMENT
    import platform

    import triton

    target = compile_pool.target_of_this_process() if mode == "gpu" and compile_pool.supported() else []
    ready = WorkerReady(pid=os.getpid(), mode=mode, device_name=device_name, torch_version=torch.__version__,
                        triton_version=triton.__version__, python_version=platform.python_version(),
                        warmup_s=round(time.perf_counter() - started, 3), reason=reason,
                        warmup_phases=watch.seconds, compile_target=target)
    emit(ready)
    line = link.read_job()
    if not line.strip():
        return 0  # the parent let this warm worker go unused
    code = profiled(run_job, Job.from_json(line), emit, ready, link.judge, link.wait_for_gate)
    sys.stderr.flush()
    emit(StageChanged(stage=JOB_DONE, current=code))  # the parent need not wait for the exit itself
    return code


def profiled(run: Callable[..., int], job: Job, *args: Any) -> int:
    """run(job, *args), under cProfile when WORKBENCH_PROFILE_DIR names a folder: one
    `<pid>-<stage>_<stage>.prof` per job there (read it with pstats or snakeviz), for finding where a run's time goes."""
    folder = os.environ.get("WORKBENCH_PROFILE_DIR")
    if not folder:
        return run(job, *args)
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(run, job, *args)
    finally:
        Path(folder).mkdir(parents=True, exist_ok=True)
        stages = "_".join(s.rsplit(":", 1)[-1] for s in job.stages)
        profiler.dump_stats(str(Path(folder) / f"{os.getpid()}-{stages}.prof"))


def run_job(job: Job, emit: Callable[[Any], None], ready: Any, judge: Callable[[Any], Any] | None = None,
            gate: Callable[[], None] | None = None) -> int:
    from ...events import Problem, RunStarted, StageChanged
    from ...project.config import ConfigError, ProjectConfig
    from ...project.contract import ContractError, load_kernel
    from ...project.folder import source_hash
    from ...verdict import Tally
    from ...verify.edge_cases import generate_cases
    from ...verify.large_index import large_index_cases
    from ...verify.value_stress import stress_cases

    interpret = ready.mode == "interpreter"
    if job.cache_dir:
        os.environ["TRITON_CACHE_DIR"] = job.cache_dir
    tally = Tally()

    def emit_counted(event: Any) -> None:
        tally.add(event)
        emit(event)

    def judge_counted(data: Any) -> Any:
        result = judge(data)
        tally.add(result)
        return result

    # functools.cache: the gate is waited for once; later calls return at once.
    wait_for_gpu = functools.cache(gate) if gate is not None and job.gpu_gate else (lambda: None)
    if not job.kernel_path:  # a device-only job (`doctor --measure`): no kernel.py to import
        try:
            config = ProjectConfig.from_dict(job.config)
        except ConfigError as exc:
            emit(Problem(kind="config", message=str(exc), file=exc.path))
            return 0
        return _run_stages(JobContext(job=job, km=None, config=config, interpret=interpret, emit=emit_counted,
                                      tally=tally, wait_for_gpu=wait_for_gpu))
    path = Path(job.kernel_path)
    emit(StageChanged(stage="importing", detail=path.name))
    # Open before the import: the compile processes import kernel.py meanwhile, then connect.
    compiles = _open_compile_pool(job, ready) if not interpret else None
    try:
        config = ProjectConfig.from_dict(job.config)
        km = load_kernel(path, module_name=compile_pool.MODULE_NAME if compiles is not None else "")
        km.cases += generate_cases(km.cases, config.verify)
        km.cases += stress_cases(km.cases, config.verify, len(km.cases), interpret)
        km.cases += large_index_cases(km.cases, config.verify, len(km.cases), not interpret and not job.live)
    except (ConfigError, ContractError) as exc:
        if compiles is not None:
            compiles.close()
        emit(Problem(kind="config", message=str(exc), file=exc.path) if isinstance(exc, ConfigError) else exc.problem)
        return 0
    from ...project.contract import find_autotuners, select_cases

    planned_cases = select_cases(km.cases, job.case_indices, "verify") if "verify" in job.stages else []
    planned = [c.index for c in planned_cases]
    emit(RunStarted(planned=planned, labels=[c.label for c in planned_cases],
                    generated=[c.index for c in planned_cases if c.generated], kernel_path=str(path),
                    source_hash=source_hash(path.read_bytes()), mode=ready.mode, device_name=ready.device_name,
                    n_cases=len(km.cases),
                    autotuned=sorted(find_autotuners(km.module)),
                    bench_only=[c.index for c in km.cases if c.purpose == "bench"], seed=config.verify.seed))
    try:
        return _run_stages(JobContext(job=job, km=km, config=config, interpret=interpret, emit=emit_counted,
                                      tally=tally, judge=judge_counted if judge is not None else None,
                                      wait_for_gpu=wait_for_gpu, compiles=compiles))
    finally:
        if compiles is not None:
            compiles.close()


def _open_compile_pool(job: Job, ready: Any) -> compile_pool.CompilePool | None:
    """The run's compile processes' server (child/compile_pool.py), when the runner started some."""
    pool = job.compile_pool
    if pool is None or not ready.compile_target:
        return None
    try:
        return compile_pool.CompilePool(pool.address, bytes.fromhex(pool.authkey), int(pool.processes))
    except OSError:  # the address taken: the worker compiles alone, as without a pool
        return None


def _run_stages(context: JobContext) -> int:
    import importlib

    from ...events import Problem
    from ...stage import ContextPoisoned, RunAborted

    try:
        with _device_mode(context.interpret):
            for stage in context.job.stages:
                target = STAGES.get(stage, stage if ":" in stage else None)
                if target is None:
                    context.emit(Problem(kind="internal", message=f"unknown stage {stage!r}"))
                    return 0
                module_name, func_name = target.split(":")
                getattr(importlib.import_module(module_name), func_name)(context)
    except RunAborted:
        return 0
    except ContextPoisoned:
        return EXIT_POISONED
    return 0


def _device_mode(interpret: bool) -> Any:
    import contextlib

    if not interpret:
        return contextlib.nullcontext()
    from ...verify.torchmodes import CudaToCpu

    return CudaToCpu()


if __name__ == "__main__":
    code = main()
    # Every event is written; skip the interpreter's and CUDA's orderly teardown (half a second on
    # a GPU) that the parent would otherwise wait out before it can call the run over.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
