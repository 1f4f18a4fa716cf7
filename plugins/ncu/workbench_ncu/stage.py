"""Worker stage "workbench_ncu.stage:profile_stage": exactly one warm call per case, profiled.

Runs inside a worker started under ``ncu --profile-from-start off``: nothing is profiled until
``torch.cuda.profiler.start()``. For each case the stage calls ``kernel_fn`` until it is
compiled and autotuned, synchronizes, then brackets one more call with profiler start/stop and
an NVTX range naming the case (ncu attributes each kernel it profiles to that range). The
parent's ``-k regex:`` filter keeps PyTorch's own kernels out of the report.
"""

from __future__ import annotations

from typing import Any

from workbench.core.events import StageChanged
from workbench.core.project import (
    Case,
    describe_config,
    find_autotuners,
    is_compilation_error,
    problem_from_exception,
)
from workbench.core.run import gpu_stage_cases
from workbench.core.stage import JobContext
from workbench.core.verify import ContextPoisoned, RunAborted, is_cuda_fatal

from .events import NVTX_PREFIX, ProfiledCase

WARM_CALLS = 3  # the first compiles and autotunes; the others make sure nothing is left to do


def nvtx_range_name(case: Case | None) -> str:
    return NVTX_PREFIX + ("default" if case is None or case.index < 0 else str(case.index))


def profile_cases(cases: list[Case], indices: list[int] | None) -> list[Case]:
    """The cases asked for; else those marked purpose="bench" (what `workbench bench` times); else get_inputs()."""
    if indices is not None:
        wanted = set(indices)
        return [c for c in cases if c.index in wanted]
    marked = [c for c in cases if c.purpose == "bench"]
    return marked or [Case(index=-1, params={}, purpose="bench")]


def jit_functions(module: Any) -> dict[str, Any]:
    """The @triton.jit functions reachable from the module's globals, by kernel name."""
    from triton.runtime.jit import JITFunction

    found: dict[str, Any] = {}
    for value in vars(module).values():
        fn = value
        for _ in range(4):  # Autotuner -> Heuristics -> JITFunction
            if isinstance(fn, JITFunction):
                found[fn.__name__] = fn
                break
            fn = getattr(fn, "fn", None)
            if fn is None:
                break
    return found


def compiled_variants(jit_fn: Any) -> list[Any]:
    """Every kernel Triton compiled (and loaded) for this function, on any device."""
    variants = []
    for entry in getattr(jit_fn, "device_caches", {}).values():
        kernel_cache = entry[0] if isinstance(entry, tuple) else entry
        variants += [k for k in kernel_cache.values() if getattr(k, "n_regs", None) is not None]
    return variants


def kernel_facts(module: Any) -> list[dict[str, Any]]:
    tuners = find_autotuners(module)
    facts = []
    for name, jit_fn in sorted(jit_functions(module).items()):
        tuner = tuners.get(name)
        picked = describe_config(tuner.best_config) if tuner is not None and getattr(tuner, "best_config", None) \
            else ""
        for compiled in compiled_variants(jit_fn):
            meta = compiled.metadata
            facts.append({"name": name, "num_warps": getattr(meta, "num_warps", None),
                          "registers": compiled.n_regs, "spilled": compiled.n_spills,
                          "shared_bytes": getattr(meta, "shared", None), "autotune_pick": picked})
    return facts


def profile_stage(context: JobContext) -> None:
    emit = context.emit
    cases = gpu_stage_cases(context, profile_cases, "Nsight Compute profiles GPU kernels, and this machine has no "
                                                    "CUDA GPU that torch can see")
    if cases is None:
        return
    import torch

    km = context.km
    warm_calls = int(context.job.options.get("warm_calls", WARM_CALLS))
    for n, case in enumerate(cases, 1):
        emit(StageChanged(stage="profiling", detail=case.label, current=n, total=len(cases),
                          case_index=case.index if case.index >= 0 else None))
        try:
            inputs = km.get_inputs(**case.params)
        except Exception as exc:  # noqa: BLE001 - user code
            emit(problem_from_exception("inputs", exc, km.path, f"get_inputs({case.label}) raised"))
            raise RunAborted() from exc
        range_name = nvtx_range_name(case)
        try:
            for _ in range(warm_calls):
                km.kernel_fn(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(range_name)
            torch.cuda.profiler.start()
            try:
                km.kernel_fn(*inputs)
                torch.cuda.synchronize()
            finally:
                torch.cuda.profiler.stop()
                torch.cuda.nvtx.range_pop()
        except Exception as exc:  # noqa: BLE001 - user code
            if is_cuda_fatal(exc):
                emit(problem_from_exception("crash", exc, km.path, "the kernel crashed the GPU context",
                                            case.index))
                raise ContextPoisoned(str(exc)) from exc
            kind = "compile" if is_compilation_error(exc) else "runtime"
            emit(problem_from_exception(kind, exc, km.path, f"kernel_fn raised on {case.label}",
                                        case.index if case.index >= 0 else None))
            raise RunAborted() from exc
        emit(ProfiledCase(case_index=case.index if case.index >= 0 else None, label=case.label,
                          nvtx_range=range_name, kernels=kernel_facts(km.module)))
