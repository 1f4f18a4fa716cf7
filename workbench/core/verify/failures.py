"""What an exception kernel_fn raised means, for the battery: an explicit refusal of a generated shape (the
case is dropped), something the Triton interpreter cannot run (a verdict on a GPU only), a forced autotune
config this GPU cannot launch (skipped, as the autotuner skips it), or else a crash (the case fails).
docs/VERIFIED.md: Refusals; the GPU ONLY verdict; Autotuned kernels.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from ..project.contract import exception_chain, first_line, root_cause

REFUSALS = (ValueError, TypeError, AssertionError, NotImplementedError)
GPU_ONLY = "this kernel is checkable on a GPU only"
# Triton's OutOfResources names the resource; the unit its numbers count (triton/compiler/compiler.py)
RESOURCE_UNITS = {"shared memory": "bytes of shared memory", "tensor memory": "columns of tensor memory",
                  "threads": "threads per program"}


def interpreter_cannot_run(exc: BaseException) -> str:
    """What the Triton interpreter cannot run, when that is why `exc` was raised ("" otherwise): a libdevice
    function it has no implementation of (interpreter/gaps.InterpreterCannotRun), or a feature its own code
    refuses (inline PTX: NotImplementedError from triton/runtime/interpreter.py)."""
    for link in exception_chain(exc):
        if type(link).__name__ == "InterpreterCannotRun":
            return str(link)
        if isinstance(link, NotImplementedError):
            frames = traceback.extract_tb(link.__traceback__)
            if frames and frames[-1].filename.replace("\\", "/").endswith("triton/runtime/interpreter.py"):
                what = str(link).replace(" not supported in interpreter mode", "") or "this kernel"
                return f"the Triton interpreter cannot run {what}; {GPU_ONLY}"
    return ""


def is_refusal(exc: BaseException, kernel_path: Any) -> bool:
    """An explicit refusal of a shape: a ValueError, TypeError, AssertionError or NotImplementedError that
    the project's own code raises (a `raise` or `assert` statement under kernel.py's folder). Anything else
    on a shape the reference accepts (a ZeroDivisionError, an IndexError, Triton's errors) is a crash."""
    root = root_cause(exc)
    if not isinstance(root, REFUSALS) or type(root).__module__.split(".")[0] == "triton":
        return False
    frames = traceback.extract_tb(root.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    inside = Path(last.filename).resolve().is_relative_to(Path(kernel_path).resolve().parent)
    return inside and (last.line or "").lstrip().startswith(("raise", "assert"))


def out_of_resources(exc: BaseException) -> str:
    """How a config exceeds this GPU, when Triton's OutOfResources is why `exc` was raised ("" otherwise):
    "needs 262144 bytes of shared memory, has 232448". Triton's autotuner catches exactly this error (with
    compile-time asserts and ptxas errors) while timing, gives the config an infinite time and never picks
    it; a forced config that raises it is one the autotuner would have skipped."""
    try:
        from triton.runtime.errors import OutOfResources
    except ImportError:  # pragma: no cover - a Triton that moved it: the class name still says
        OutOfResources = None  # noqa: N806
    for link in exception_chain(exc):
        if (OutOfResources is not None and isinstance(link, OutOfResources)) \
                or any(cls.__name__ == "OutOfResources" for cls in type(link).__mro__):
            required, limit = getattr(link, "required", None), getattr(link, "limit", None)
            name = str(getattr(link, "name", "") or "")
            if required is None or limit is None:
                return first_line(link) or type(link).__name__
            return f"needs {required} {RESOURCE_UNITS.get(name, name or 'of a resource')}, has {limit}"
    return ""


# The other errors Triton's autotuner catches while timing a config (and so never picks it), by class name:
# ptxas refusing the config's code, and a tl.static_assert of the kernel's failing for the config's values.
AUTOTUNER_SKIPS = {"PTXASError": "ptxas refused its code", "CompileTimeAssertionFailure": "a compile-time assert failed"}


def not_runnable_note(exc: BaseException) -> str:
    """The note of a forced config this GPU cannot launch, or that the kernel's own compile-time asserts refuse
    ("" when `exc` says something else): the configs Triton's autotuner skips."""
    why = out_of_resources(exc)
    if why:
        return f"not runnable on this GPU ({why}): skipped, as the autotuner skips it"
    for link in exception_chain(exc):
        names = {cls.__name__ for cls in type(link).__mro__}
        for name, what in AUTOTUNER_SKIPS.items():
            if name in names:
                detail = first_line(link)
                return f"not compiled for this config ({what}{': ' + detail if detail else ''}): skipped, as the " \
                       "autotuner skips it"
    return ""

