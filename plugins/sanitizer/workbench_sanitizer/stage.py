"""Worker stage "workbench_sanitizer.stage:sanitize_stage": each case's call, under compute-sanitizer.

Runs inside a worker started under ``compute-sanitizer --tool TOOL``. For each case: fresh inputs,
one call of ``kernel_fn`` (an autotuned kernel tries every config on its first call, so each
config runs under the tool), a synchronize so the tool has reported before the stage says the case
is done. Outputs are not pre-filled (initcheck must see a read of memory nobody wrote) and the
reference is not run: this stage only shows the tool what the kernel touches.
"""

from __future__ import annotations

from workbench.core.events import StageChanged
from workbench.core.project import (
    Case,
    first_line,
    is_compilation_error,
    problem_from_exception,
)
from workbench.core.run import gpu_stage_cases
from workbench.core.stage import JobContext
from workbench.core.verify import ContextPoisoned, RunAborted, is_cuda_fatal

from .events import SanitizedCase, SanitizePlan


def sanitize_cases(cases: list[Case], indices: list[int] | None, all_cases: bool) -> list[Case]:
    """The cases asked for; else the verification cases (small, odd shapes: where masks go wrong); else all."""
    if indices is not None:
        wanted = set(indices)
        return [c for c in cases if c.index in wanted]
    if all_cases:
        return list(cases)
    return [c for c in cases if c.purpose == "verify"] or list(cases)


def sanitize_stage(context: JobContext) -> None:
    emit = context.emit
    all_cases = bool(context.job.options.get("all_cases"))
    cases = gpu_stage_cases(context, lambda cases, indices: sanitize_cases(cases, indices, all_cases),
                            "compute-sanitizer checks GPU kernels, and this machine has no CUDA GPU that torch can see")
    if cases is None:
        return
    import torch

    km = context.km
    emit(SanitizePlan(cases=[c.index for c in cases], labels=[c.label for c in cases]))
    for n, case in enumerate(cases, 1):
        emit(StageChanged(stage="sanitizing", detail=case.label, current=n, total=len(cases), case_index=case.index))
        try:
            inputs = km.get_inputs(**case.params)
        except Exception as exc:  # noqa: BLE001 - user code
            emit(problem_from_exception("inputs", exc, km.path, f"get_inputs({case.label}) raised", case.index))
            raise RunAborted() from exc
        error = ""
        try:
            km.kernel_fn(*inputs)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - user code
            if is_cuda_fatal(exc):
                emit(SanitizedCase(case_index=case.index, label=case.label,
                                   error=f"the CUDA context was destroyed: {first_line(exc)}"))
                raise ContextPoisoned(str(exc)) from exc
            if is_compilation_error(exc):
                emit(problem_from_exception("compile", exc, km.path, "the kernel does not compile", case.index))
                raise RunAborted() from exc
            error = f"kernel_fn raised {type(exc).__name__}: {first_line(exc)}"
        emit(SanitizedCase(case_index=case.index, label=case.label, error=error))
