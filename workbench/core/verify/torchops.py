"""Which outputs torch computed: the torch functions kernel_fn calls, followed to the outputs it returns.

A kernel_fn may allocate, view, copy, cast and fill with torch as it likes, and may finish a Triton
kernel's result with torch (a loss summed over the per-row losses a kernel wrote, a bias added to a
kernel's matmul). What it may not do, unless the project says so, is return an output that no Triton
kernel had a hand in while torch computed it: ``noop[(1,)](x); return x * 2 + y``.

`TorchOpRecorder` follows the contents of each storage through one call of kernel_fn:
- a torch function that computes (anything but allocating, viewing, copying, casting, filling and
  reading a scalar; seen as kernel_fn calls it, through a torch function mode: `torch.add` for
  `x + y`) adds its name to what its result was computed with, unless one of its arguments holds data
  a Triton kernel wrote;
- a Triton launch writes some of its tensor arguments: their storages (found by comparing their bytes
  before and after the launch) now hold Triton's work, and whatever torch computed there before is
  the kernel's input, not the answer;
- a buffer allocated with set values (zeros, full) and handed to a launch counts as written by it even
  where its bytes did not change (the kernel may store the zero that was there); a buffer from
  torch.empty* holds poison by then, so a store changes it;
- copies and views carry both along; an op that overwrites a whole storage replaces what it held.
An output whose contents hold no Triton-written data and were computed by torch ops is reported with
those ops' names. The judge decides (``[verify] allow_torch_ops``).

A training kernel's gradients (verify/gradients.py) come out of one `torch.autograd.grad` call, which the mode
sees whole: they hold what its arguments held, unless the backward launched no Triton kernel and read nothing
a Triton kernel wrote, when gradients.py marks them computed with `AUTOGRAD`.

The recorder stands down, reporting nothing, when it cannot follow every launch (a kernel.py that
launches a compiled kernel directly, which Triton's launch hook counts but no wrapper sees) or when
recording fails: an unknown is never a finding. Triton's own work inside a launch (the interpreter
runs on torch tensors) is not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._pytree import tree_flatten

from .launches import LaunchCounter

AUTOGRAD = "torch.autograd.grad"  # what a gradient torch autograd computed alone is said to be computed with

# torch functions that only allocate, fill, move, cast or read a value out: never "torch doing the work".
# (Views need no list: a result that shares an argument's storage is a view of it.) Names as torch resolves
# them, without "torch.", "Tensor." or a trailing "_": torch.Tensor.zero_ is "zero".
ALLOCATES = {
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "new_tensor",
    "tensor", "as_tensor", "asarray", "from_numpy", "frombuffer", "scalar_tensor", "arange", "linspace", "eye",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "uniform",
    "bernoulli", "random", "exponential", "fill", "zero", "resize", "set",
}
# Allocations whose first contents are poison (verify/torchmodes.PrefillEmpty fills them): a kernel that stores
# into one changes its bytes. Any other allocation holds values a kernel may write again unchanged (a zero).
EMPTY = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
MOVES = {
    "clone", "copy", "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "int", "long", "short", "bool",
    "byte", "char", "type", "type_as", "contiguous", "cat", "concat", "concatenate", "stack", "hstack", "vstack",
    "index_select", "gather", "take", "masked_select", "flip", "roll", "repeat", "tile", "item", "tolist",
    "detach", "requires_grad", "pin_memory", "record_stream", "__getitem__", "__setitem__", "pad",
    "view", "reshape", "as_strided", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten",
    "split", "chunk", "narrow", "unbind", "select", "movedim", "view_as", "reshape_as", "expand_as",
}


def function_name(func: Any) -> str:
    """'torch.add' for torch.add and Tensor.__add__ alike; 'torch.nn.functional.softmax'."""
    name = resolve_name(func) or getattr(func, "__qualname__", "") or repr(func)
    name = name.replace("torch.Tensor.", "torch.").replace("torch._C.TensorBase.", "torch.")
    return name[:-len(".__get__")] if name.endswith(".__get__") else name


def base_name(name: str) -> str:
    """'add' for torch.add, torch.add_, aten.add.Tensor and "add"."""
    if name.startswith("aten."):
        name = name.split(".")[1]
    base = name.rsplit(".", 1)[-1]
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    leaves, _ = tree_flatten(value)
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            yield leaf
        else:  # a tensor descriptor (TMA) launches on its base tensor
            base = getattr(leaf, "base", None)
            if isinstance(base, torch.Tensor):
                yield base


def _key(t: torch.Tensor) -> tuple[str, int] | None:
    try:
        storage = t.untyped_storage()
        if not storage.nbytes():
            return None
        return str(t.device), storage.data_ptr()
    except Exception:  # noqa: BLE001 - a tensor without storage (a subclass, a meta tensor): not followed
        return None


def _writes_first_argument(name: str) -> bool:
    base = name.rsplit(".", 1)[-1]
    return (base.endswith("_") and not base.endswith("__")) or base == "__setitem__" or \
        (base.startswith("__i") and base.endswith("__") and base not in ("__index__", "__int__", "__invert__",
                                                                         "__iter__"))


@dataclass
class Contents:
    """What one storage holds: whether a Triton kernel wrote it (or data derived from it), and which torch
    compute ops produced it otherwise."""

    triton: bool = False
    ops: set[str] = field(default_factory=set)
    initialised: bool = False  # allocated with set values (zeros, full): a launch given it may write them again


class _Recording(TorchFunctionMode):
    def __init__(self, recorder: "TorchOpRecorder"):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if self.recorder.in_launch:
            return result  # Triton's own work (the interpreter runs on torch tensors)
        try:
            self.recorder.op(func, args, kwargs, result)
        except Exception as exc:  # noqa: BLE001 - the recording must never change what kernel_fn does
            self.recorder.stand_down(f"recording failed ({type(exc).__name__}: {exc})")
        return result


class TorchOpRecorder:
    """A context for one call of kernel_fn: ``with TorchOpRecorder() as rec: out = kernel_fn(...)``, then
    ``rec.computed_by_torch(outputs)``. Only one records at a time (the launch wrappers find it here)."""

    active: "TorchOpRecorder | None" = None
    _wrapped = False

    def __init__(self) -> None:
        self.contents: dict[tuple[str, int], Contents] = {}
        self.keep: list[torch.Tensor] = []  # every storage seen stays alive: no address is reused mid-call
        self.launches_followed = 0
        self.launches_counted_from = 0
        self.unknown = ""  # why the recording cannot be trusted ("" when it can)
        self.in_launch = False
        self._mode: _Recording | None = None

    # -- the context ----------------------------------------------------------------------

    def __enter__(self) -> "TorchOpRecorder":
        TorchOpRecorder._wrap_launchers()
        TorchOpRecorder.active = self
        self.launches_counted_from = LaunchCounter.count
        self._mode = _Recording(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._mode is not None:
                self._mode.__exit__(*exc)
        finally:
            TorchOpRecorder.active = None
        counted = LaunchCounter.count - self.launches_counted_from
        if counted > self.launches_followed and not self.unknown:
            self.stand_down(f"{counted - self.launches_followed} Triton launch(es) not seen with their arguments "
                            "(a compiled kernel launched directly)")

    def stand_down(self, why: str) -> None:
        if not self.unknown:
            self.unknown = why

    # -- what happens in the call ---------------------------------------------------------

    def _contents(self, t: torch.Tensor) -> Contents | None:
        key = _key(t)
        if key is None:
            return None
        found = self.contents.get(key)
        if found is None:
            found = self.contents[key] = Contents()
            self.keep.append(t)
        return found

    def op(self, func: Any, args: Any, kwargs: Any, result: Any) -> None:
        results = list(_tensors(result))
        if not results:
            return  # a size, a dtype, a Python number: nothing stored
        name = function_name(func)
        base = base_name(name)
        written = list(results)
        if _writes_first_argument(name) and args and isinstance(args[0], torch.Tensor):
            written.append(args[0])
        out = kwargs.get("out")
        written += list(_tensors(out)) if out is not None else []
        arguments = {k for k in (_key(t) for t in _tensors((args, kwargs))) if k is not None}
        if len(written) == len(results) and all(_key(t) in arguments for t in results):
            for t in results:  # a view of an argument: the same storage, the same contents
                self._contents(t)
            return
        targets = [(c, _whole(t)) for c, t in ((self._contents(t), t) for t in written) if c is not None]
        if base in ALLOCATES:
            for contents, _ in targets:
                contents.triton, contents.ops, contents.initialised = False, set(), base not in EMPTY
            return
        sources = [c for c in (self._contents(t) for t in _tensors((args, kwargs))) if c is not None]
        triton = any(c.triton for c in sources)
        ops: set[str] = set().union(*(c.ops for c in sources)) if sources else set()
        if base not in MOVES and not triton:
            ops.add(name)
        for contents, whole in targets:
            if whole and all(contents is not c for c in sources):  # overwritten: what it held is gone
                contents.triton, contents.ops, contents.initialised = triton, set(ops), False
            else:  # written in part, or from itself (x += y): what it held stays in it
                contents.triton = contents.triton or triton
                contents.ops |= ops

    def launch(self, run: Any, target: Any, args: tuple, kwargs: dict) -> Any:
        """One Triton launch, with the bytes of its tensor arguments compared around it."""
        self.launches_followed += 1
        self.in_launch = True
        try:
            tensors = {}
            for t in _tensors((args, kwargs)):
                key = _key(t)
                if key is not None and key not in tensors:
                    tensors[key] = t
            before = {key: _bytes(t).clone() for key, t in tensors.items()}
            result = run(target, *args, **kwargs)
            for key, t in tensors.items():
                contents = self._contents(t)
                if contents is None:
                    continue
                if not torch.equal(before[key], _bytes(t)):
                    contents.triton, contents.ops = True, set()
                elif contents.initialised and not contents.ops:
                    # a buffer of zeros (or any set value) handed to a kernel is its output, though it
                    # may store what was there (a loss of 0): counted as written
                    contents.triton = True
        finally:
            self.in_launch = False
        return result

    def holds_triton_data(self, tensors: list[torch.Tensor]) -> bool:
        """Whether any of `tensors` holds data a Triton kernel wrote in this call (or torch computed from such)."""
        for t in tensors:
            key = _key(t)
            contents = self.contents.get(key) if key is not None else None
            if contents is not None and contents.triton:
                return True
        return False

    def computed_by_autograd(self, gradients: list[torch.Tensor]) -> None:
        """`gradients` are torch autograd's alone: no Triton kernel wrote them or what they were computed from."""
        for t in gradients:
            contents = self._contents(t)
            if contents is not None:
                contents.triton, contents.ops = False, {AUTOGRAD}

    def computed_by_torch(self, outputs: list[torch.Tensor], names: list[str]) -> list[str]:
        """'output[0]: torch.add, torch.mul' for each output torch computed with no Triton kernel's
        data in it; [] when there is none, or when the recording stood down (`unknown` says why)."""
        if self.unknown:
            return []
        found = []
        for t, name in zip(outputs, names):
            key = _key(t)
            contents = self.contents.get(key) if key is not None else None
            if contents is not None and contents.ops and not contents.triton:
                found.append(f"output{name}: {', '.join(sorted(contents.ops))}")
        return found

    # -- the launchers ----------------------------------------------------------------------

    @classmethod
    def _wrap_launchers(cls) -> None:
        if cls._wrapped:
            return
        cls._wrapped = True
        targets = []
        try:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append(InterpretedFunction)
        except ImportError:  # pragma: no cover
            pass
        try:
            from triton.runtime.jit import JITFunction

            targets.append(JITFunction)
        except ImportError:  # pragma: no cover
            pass
        for target in targets:
            original = target.run

            def run(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                recorder = TorchOpRecorder.active
                if recorder is None or kwargs.get("warmup", False):
                    return _original(self, *args, **kwargs)
                return recorder.launch(_original, self, args, kwargs)

            target.run = run


def _whole(t: torch.Tensor) -> bool:
    """Does `t` cover every byte of its storage?"""
    try:
        return t.is_contiguous() and t.numel() * t.element_size() == t.untyped_storage().nbytes()
    except Exception:  # noqa: BLE001
        return False


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage under `t`, as bytes (a launch may write past the view it was given)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
