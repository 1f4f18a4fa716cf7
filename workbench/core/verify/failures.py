"""What an exception kernel_fn raised means, for the battery: an explicit refusal of a generated shape (the
case is dropped), something the Triton interpreter cannot run (a verdict on a GPU only), or else a crash
(the case fails). README "What verified means": Refusals; the GPU ONLY verdict.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from ..project.contract import exception_chain, root_cause

REFUSALS = (ValueError, TypeError, AssertionError, NotImplementedError)
GPU_ONLY = "this kernel is checkable on a GPU only"


def interpreter_cannot_run(exc: BaseException) -> str:
    """What the Triton interpreter cannot run, when that is why `exc` was raised ("" otherwise): a libdevice
    function it has no implementation of (interpreter_gaps.InterpreterCannotRun), or a feature its own code
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
