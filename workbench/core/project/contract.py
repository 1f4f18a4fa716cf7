"""The kernel contract: load kernel.py, check its exports, build its cases.

Runs inside a worker process only (it imports the user's kernel, torch and triton).

    kernel_fn(*inputs)        the Triton implementation
    reference_fn(*inputs)     the PyTorch reference, same signature and output structure
    get_inputs(**case)        a list of fresh inputs; with no arguments it must work
    CASES                     optional list of dicts passed to get_inputs(**case);
                              the reserved key "purpose" is "verify" (default) or "bench"
    flops(*inputs), bytes_moved(*inputs)   optional, for the roofline
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ..events import Problem

REQUIRED_EXPORTS = ("kernel_fn", "reference_fn", "get_inputs")
PURPOSES = ("verify", "bench")
_module_counter = itertools.count()


class ContractError(Exception):
    """kernel.py cannot be used; carries the Problem to report."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


@dataclass
class Case:
    index: int
    params: dict[str, Any]
    purpose: str = "verify"
    generated: bool = False  # an edge shape derived from CASES (verify/edge_cases.py)
    stress: str = ""  # a value stress on its inputs (verify/value_stress.py): "values x64", "offset" ...

    @property
    def label(self) -> str:
        text = " ".join(f"{k}={format_value(v)}" for k, v in self.params.items()) if self.params else "get_inputs()"
        if self.stress:
            text += f" [{self.stress}]"
        return text + " (generated)" if self.generated else text


@dataclass
class KernelModule:
    path: Path
    module: ModuleType
    kernel_fn: Callable[..., Any]
    reference_fn: Callable[..., Any]
    get_inputs: Callable[..., Any]
    cases: list[Case]
    flops: Callable[..., Any] | None = None
    bytes_moved: Callable[..., Any] | None = None
    jit_line_ranges: list[tuple[int, int, str]] = field(default_factory=list)
    gradients: list[str] = field(default_factory=list)  # a training kernel's inputs whose gradients are verified


def format_value(value: Any) -> str:
    text = str(value)
    return text[len("torch."):] if text.startswith("torch.") else text


def exception_chain(exc: BaseException) -> list[BaseException]:
    """exc and the exceptions it was raised from, outermost first.

    The Triton interpreter re-raises a kernel body's error as InterpreterError
    from the original, whose traceback holds the kernel.py line.
    """
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def kernel_frame(exc: BaseException, kernel_path: Path) -> tuple[int, str]:
    """The innermost kernel.py frame across the exception chain: (line, function name), or (0, "")."""
    target = str(kernel_path)
    for link in reversed(exception_chain(exc)):
        frames = [f for f in traceback.extract_tb(link.__traceback__) if f.filename == target]
        if frames:
            return frames[-1].lineno or 0, frames[-1].name
    return 0, ""


def root_cause(exc: BaseException) -> BaseException:
    """The interpreter's wrapped error unwrapped; other exceptions as they are."""
    chain = exception_chain(exc)
    if type(exc).__name__ == "InterpreterError" and len(chain) > 1:
        return chain[-1]
    return exc


def problem_from_exception(kind: str, exc: BaseException, kernel_path: Path, what: str,
                           case_index: int | None = None) -> Problem:
    """A Problem naming the kernel.py line the exception came from."""
    line, func = kernel_frame(exc, kernel_path)
    exc = root_cause(exc)
    file = str(kernel_path)
    if isinstance(exc, SyntaxError) and exc.filename == str(kernel_path):
        line = exc.lineno or 0
    compile_line = compilation_error_line(exc, kernel_path)
    if compile_line:
        line = compile_line
    where = f" in {func}()" if func and func != "<module>" else ""
    summary = first_line(exc)
    message = f"{what}{where}: {type(exc).__name__}: {summary}" if summary else f"{what}{where}: {type(exc).__name__}"
    tb_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Problem(kind=kind, message=message, file=file if line or kind != "environment" else "",
                   line=line, traceback=tb_text, case_index=case_index)


def first_line(exc: BaseException) -> str:
    """The line of an exception's text that says what went wrong.

    Triton compile errors start with "at 12:8:" and a source excerpt; the
    reason is on the last line.
    """
    text = str(exc).strip()
    if not text:
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if is_compilation_error(exc) and len(lines) > 1:
        return lines[-1].strip()
    return lines[0].strip()


def is_compilation_error(exc: BaseException) -> bool:
    return any(cls.__name__ == "CompilationError" for cls in type(exc).__mro__)


def compilation_error_line(exc: BaseException, kernel_path: Path) -> int:
    """Map a Triton CompilationError (line relative to the @jit function) to a kernel.py line."""
    if not is_compilation_error(exc):
        return 0
    src, node = getattr(exc, "src", None), getattr(exc, "node", None)
    lineno = getattr(node, "lineno", None)
    if not src or not lineno:
        return 0
    try:
        lines = kernel_path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    first = src.splitlines()[0].strip()
    for i, text in enumerate(lines):
        if text.strip() == first:
            return i + lineno
    return 0


def load_kernel(path: Path, module_name: str = "") -> KernelModule:
    """Import kernel.py afresh (a new module object every call) and check the contract. `module_name`:
    the name another process gave the same file (a compile process names it as its GPU worker did)."""
    path = path.resolve()
    name = module_name or f"workbench_kernel_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError(Problem(kind="import", message=f"cannot import {path}", file=str(path)))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and triton.jit look their module up by name
    # Let kernel.py import sibling modules of its project.
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ContractError(problem_from_exception("syntax", exc, path, "kernel.py has a syntax error")) from None
    except BaseException as exc:  # noqa: BLE001 - any failure of user code is reported, never raised
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ContractError(problem_from_exception("import", exc, path, "importing kernel.py failed")) from None
    finally:
        if sys.path and sys.path[0] == str(path.parent):
            sys.path.pop(0)
    return check_exports(module, path)


def check_exports(module: ModuleType, path: Path) -> KernelModule:
    missing = [n for n in REQUIRED_EXPORTS if not callable(getattr(module, n, None))]
    if missing:
        names = ", ".join(missing)
        raise ContractError(Problem(
            kind="contract", file=str(path), line=0,
            message=f"kernel.py must define {names} (the contract: kernel_fn, reference_fn, get_inputs)"))
    cases = build_cases(getattr(module, "CASES", None), path)
    optional = {n: getattr(module, n, None) for n in ("flops", "bytes_moved")}
    for n, fn in optional.items():
        if fn is not None and not callable(fn):
            raise ContractError(Problem(kind="contract", file=str(path), message=f"{n} must be a function of the inputs"))
    return KernelModule(path=path, module=module, kernel_fn=module.kernel_fn, reference_fn=module.reference_fn,
                        get_inputs=module.get_inputs, cases=cases, jit_line_ranges=jit_line_ranges(module, path),
                        **optional)


def build_cases(raw: Any, path: Path) -> list[Case]:
    if raw is None:
        return [Case(index=0, params={}, purpose="verify")]
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ContractError(Problem(kind="contract", file=str(path), line=_assignment_line(path, "CASES"),
                                    message="CASES must be a non-empty list of dicts (each passed as get_inputs(**case))"))
    cases = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ContractError(Problem(kind="contract", file=str(path), line=_assignment_line(path, "CASES"),
                                        message=f"CASES[{i}] is {type(entry).__name__}, expected a dict"))
        params = dict(entry)
        purpose = params.pop("purpose", "verify")
        if purpose not in PURPOSES:
            raise ContractError(Problem(kind="contract", file=str(path), line=_assignment_line(path, "CASES"),
                                        message=f"CASES[{i}]['purpose'] is {purpose!r}; expected one of {PURPOSES}"))
        cases.append(Case(index=i, params=params, purpose=purpose))
    return cases


def _assignment_line(path: Path, name: str) -> int:
    try:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith(f"{name} =") or line.startswith(f"{name}:"):
                return i
    except OSError:
        pass
    return 0


def jit_line_ranges(module: ModuleType, path: Path) -> list[tuple[int, int, str]]:
    """(first, last, name) line ranges of the @triton.jit functions defined in kernel.py."""
    import inspect

    ranges = []
    for value in vars(module).values():
        fn = value
        for _ in range(4):  # Autotuner -> Heuristics -> JITFunction -> python function
            fn = getattr(fn, "fn", fn) if not inspect.isfunction(fn) else fn
        if not inspect.isfunction(fn) or fn is value:
            continue
        try:
            if Path(inspect.getsourcefile(fn) or "").resolve() != path:
                continue
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            continue
        ranges.append((start, start + len(lines) - 1, fn.__name__))
    return ranges


DOT_CALL = re.compile(r"\bdot\s*\(")
IEEE_DOT = re.compile(r"""input_precision\s*=\s*["']ieee["']|allow_tf32\s*=\s*False""")


def dot_may_use_tf32(km: KernelModule) -> bool:
    """Whether a @triton.jit function of kernel.py calls tl.dot without asking for IEEE float32 on that line:
    tl.dot multiplies float32 inputs in TF32 unless told otherwise (its input_precision defaults to "tf32")."""
    try:
        lines = km.path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    return any(DOT_CALL.search(line) and not IEEE_DOT.search(line)
               for first, last, _ in km.jit_line_ranges for line in lines[first - 1:last])


def find_autotuners(module: ModuleType) -> dict[str, Any]:
    """The @triton.autotune'd kernels defined in the module, by the name they are bound to.

    Keyed by module attribute, not kernel name: two autotuners may wrap one @jit function.
    """
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - triton always present in a worker
        return {}
    return {name: value for name, value in vars(module).items() if isinstance(value, Autotuner)}


def describe_config(config: Any) -> str:
    """A triton.Config as "BLOCK_SIZE=1024, num_warps=4, num_stages=3"."""
    parts = [f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items()]
    for attr in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        value = getattr(config, attr, None)
        if value is not None and not (attr == "num_ctas" and value == 1):
            parts.append(f"{attr}={value}")
    return ", ".join(parts)


def select_cases(cases: list[Case], indices: list[int] | None, purpose: str) -> list[Case]:
    """The cases a stage runs: the ones asked for by index, else those of its purpose."""
    if indices is not None:
        wanted = set(indices)
        return [c for c in cases if c.index in wanted]
    return [c for c in cases if c.purpose == purpose]
