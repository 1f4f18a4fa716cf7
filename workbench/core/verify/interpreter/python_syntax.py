"""Python the GPU compiler gives a meaning the Triton interpreter did not: three more gaps, closed in
interpreter workers (registered in interpreter/fixes.apply(), beside interpreter/gaps.py's).

- `a and b` / `a or b` between tensors inside a `@triton.jit` function: the compiler makes them
  logical_and / logical_or of the tensors (short-circuiting only on compile-time values); the interpreter ran
  Python's `and`, which takes the first tensor's truth and returns one operand whole, so a mask built that
  way was wrong (and read as out-of-bounds loads). The interpreter's AST rewriter now turns each boolean
  operator into a call that does what the compiler does.
- A module-level alias of a `tl` builtin (`triton_cast = tl.cast`): the interpreter gives builtins its own
  semantic only where they are reached through `tl`; an alias raised "Did you forget to add @triton.jit ?".
  Aliases in the kernel's globals are now patched with the rest.
- A launcher that enters the tensors' device (`torch.get_device_module().device(x.device)`,
  `torch.cuda.device(x.device)`, `torch.cuda.device_of(x)`): on the CPU, torch.cpu has no `device` and
  torch.cuda.device refuses a CPU device. In an interpreting process, with no GPU, both are contexts that do
  nothing: the CPU is the one device there.
"""

from __future__ import annotations

import ast
import contextlib
from typing import Any, Callable

from .gaps import FunctionGlobals

BOOL_OP_HELPER = "_workbench_boolean_operator"


def boolean_operator(tl: Any) -> Callable[..., Any]:
    """`a and b` as the compiler evaluates it: operands in order; a compile-time (non-tensor) operand
    short-circuits as Python's would (False for and, True for or) or drops out; the tensors that remain are
    combined with logical_and / logical_or from the right."""

    def apply(method: str, *operands: Callable[[], Any]) -> Any:
        tensors, value = [], None
        for operand in operands:
            value = operand()
            if not isinstance(value, tl.tensor):
                truth = bool(value.value if isinstance(value, tl.constexpr) else value)
                if (method == "logical_and" and not truth) or (method == "logical_or" and truth):
                    return value
                continue
            tensors.append(value)
        if not tensors:
            return value
        while len(tensors) >= 2:
            rhs, lhs = tensors.pop(), tensors.pop()
            tensors.append(getattr(lhs, method)(rhs))
        return tensors[0]

    return apply


class _BooleanOperators(ast.NodeTransformer):
    """`a and b` -> _workbench_boolean_operator("logical_and", lambda: a, lambda: b)."""

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        method = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        thunks = [ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                defaults=[]), body=value) for value in node.values]
        call = ast.Call(func=ast.Name(id=BOOL_OP_HELPER, ctx=ast.Load()),
                        args=[ast.Constant(value=method), *thunks], keywords=[])
        return ast.copy_location(call, node)


def _fix_boolean_operators(interpreter: Any, tl: Any) -> bool:
    transformer = getattr(interpreter, "ASTTransformer", None)
    if transformer is None or hasattr(transformer, "visit_BoolOp"):
        return False
    # The rewritten function's globals get the interpreter module's names it lacks (FunctionRewriter).
    setattr(interpreter, BOOL_OP_HELPER, boolean_operator(tl))
    transformer.visit_BoolOp = _BooleanOperators.visit_BoolOp
    original_assign = getattr(transformer, "visit_Assign", None)
    if original_assign is not None:
        def visit_Assign(self: Any, node: ast.Assign) -> Any:
            # Triton 3.6 wraps an assignment's value without visiting it: its boolean operators first
            node.value = _BooleanOperators().visit(node.value)
            return original_assign(self, node)
        transformer.visit_Assign = visit_Assign
    return True


def _fix_builtin_aliases(interpreter: Any, tl: Any) -> bool:
    patch_lang, patch_attr = getattr(interpreter, "_patch_lang", None), getattr(interpreter, "_patch_attr", None)
    builder = getattr(interpreter, "interpreter_builder", None)
    is_builtin = getattr(getattr(tl, "core", None), "is_builtin", None)
    if None in (patch_lang, patch_attr, builder, is_builtin):
        return False

    def _patch_lang(fn: Any) -> Any:
        scope = patch_lang(fn)
        names = getattr(fn, "__globals__", {})
        aliases = [(name, value) for name, value in list(names.items()) if is_builtin(value)]
        if aliases:
            where = FunctionGlobals(names)
            for name, member in aliases:
                patch_attr(where, name, member, builder, scope)
        return scope

    interpreter._patch_lang = _patch_lang
    return True


class _NoDevice(contextlib.AbstractContextManager):
    """torch.cuda.device(...) where there is no GPU: the CPU is the one device, nothing to enter."""

    def __init__(self, device: Any = None):
        self.idx = -1

    def __exit__(self, *exc: Any) -> None:
        return None


def _fix_device_contexts(interpreter: Any, tl: Any) -> bool:
    import torch

    if torch.cuda.is_available():
        return False
    torch.cpu.device = _NoDevice  # type: ignore[attr-defined]  # torch.get_device_module() is torch.cpu here
    torch.cuda.device = _NoDevice  # type: ignore[misc]
    torch.cuda.device_of = _NoDevice  # type: ignore[misc]
    return True


FIXES: list[tuple[str, Callable[[Any, Any], bool]]] = [
    ("and/or between tensors", _fix_boolean_operators),
    ("aliases of tl builtins", _fix_builtin_aliases),
    ("device contexts on the CPU", _fix_device_contexts),
]
