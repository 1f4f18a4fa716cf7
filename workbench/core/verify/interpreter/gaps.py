"""Kernels that run on a GPU but failed under the Triton interpreter: four gaps, closed in interpreter workers.

Each fix is registered in interpreter/fixes.apply() and patches what it finds (Triton 3.6 and 3.9):

- Float launch arguments: the GPU types a Python float argument (`eps`) as a float32 scalar, so the
  kernel may write `eps.to(tl.float32)`, and `x_bf16 + eps` computes in float32. The interpreter handed
  the raw float over; `_implicit_cvt` now wraps it in a float32 scalar tl.tensor, as the compiler types it
  (and a bool in an int1 one, which Triton 3.6's interpreter got wrong).
- libdevice: `triton.language.extra.libdevice` is a module of stubs (each returns None) that the GPU
  compiler maps to the backend's module; here its names point at the CUDA module's functions, the
  interpreter's builtin patching (`_patch_lang`) gives them its semantic (module attributes, and names
  a kernel imported from either module), and `create_extern_elementwise` computes the libdevice symbol
  on the CPU (interpreter/libdevice.py). A symbol with no CPU version raises `InterpreterCannotRun`.
- `.value` of a dtype: a dtype constexpr reaches a `@triton.jit` helper wrapped in tl.constexpr on the
  GPU, so `dtype.value` works there; the interpreter passes the dtype itself. tl.dtype gets a `value`
  property returning the dtype, in interpreting processes only (TRITON_INTERPRET=1).
- The active driver: an interpreting process has no GPU driver ("0 active drivers"), yet kernel files
  ask it for their device, target and properties at import (the official tutorials do). Where nothing
  else was made active, an interpreting process gets `InterpreterDriver`: a Hopper-like CUDA target
  whose torch device is the CPU. And `kernel.warmup(...)`, which compiles on a GPU and returns the
  compiled kernel (the fused-softmax tutorial reads its registers and shared memory, then launches it
  with `kernel[grid](...)`), returns an `InterpretedKernel` whose launches run through
  `InterpretedFunction.run`. The tutorials' persistent loops (`tl.range(tl.program_id(0), n,
  tl.num_programs(0))`) need one more: Triton 3.6 turns a scalar tensor into a Python int in a way
  numpy 2.4 refuses.

Not closed: constexprs other than dtypes are passed unwrapped too (`BLOCK.value` on an int still fails).
"""

from __future__ import annotations

import inspect
import os
from collections import namedtuple
from typing import Any, Callable

try:
    import numpy as np
except ImportError:  # applied only where the interpreter (which needs numpy) runs; imported everywhere
    np = None  # type: ignore[assignment]

_NOTHING = (object(),)  # no (object, target) pair: held.get's default


class InterpreterCannotRun(Exception):
    """The kernel uses something the Triton interpreter has no CPU version of; a GPU can check it."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"the Triton interpreter cannot run `{what}`; this kernel is checkable on a GPU only")


def interpreting() -> bool:
    """Whether @triton.jit gives interpreted functions in this process (TRITON_INTERPRET=1)."""
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):
        return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


# --- float launch arguments ---

def _fix_float_arguments(interpreter: Any, tl: Any) -> bool:
    original, handle = getattr(interpreter, "_implicit_cvt", None), getattr(interpreter, "TensorHandle", None)
    if original is None or handle is None:
        return False

    def _implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):  # numpy's float64 too: what mangle_type calls "fp32"
            with np.errstate(over="ignore"):  # the launcher packs a C float: out of range is inf
                value = np.array([arg], dtype=np.float32)
            return tl.tensor(handle(value, tl.float32), tl.float32)
        if isinstance(arg, bool):  # an int too: Triton 3.6 made it an int1 tensor of int32 data, which fails
            return tl.tensor(handle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)  # as Triton 3.9 does
        return original(arg)  # which calls the module's _implicit_cvt, this one, for a tuple's items
    interpreter._implicit_cvt = _implicit_cvt
    return True


# --- libdevice ---

class FunctionGlobals:
    """A function's globals as attributes, so the interpreter's patch scope can set and restore names in them."""

    def __init__(self, names: dict):
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._names[name] = value

    def __delattr__(self, name: str) -> None:
        del self._names[name]


def _libdevice_names(module: Any) -> dict[str, str]:
    """libdevice symbol -> the Python name that calls it (`__nv_tanhf` -> `libdevice.tanh`)."""
    names = {}
    for name, member in vars(module).items():
        code = getattr(getattr(member, "__wrapped__", member), "__code__", None)
        for const in (code.co_consts if code is not None else ()):
            if isinstance(const, str) and const.startswith("__nv_"):
                names[const] = f"libdevice.{name}"
    return names


def _missing(name: str) -> Callable[..., Any]:
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise AttributeError(f"libdevice has no function {name!r} for CUDA (the GPU compiler looks it up in "
                             "triton.language.extra.cuda.libdevice, which lacks it too)")
    return missing


def _fix_libdevice(interpreter: Any, tl: Any) -> bool:
    builder, handle = getattr(interpreter, "InterpreterBuilder", None), getattr(interpreter, "TensorHandle", None)
    patch_lang, patch_attr = getattr(interpreter, "_patch_lang", None), getattr(interpreter, "_patch_attr", None)
    np_dtype, lang_builder = getattr(interpreter, "_get_np_dtype", None), getattr(interpreter, "interpreter_builder", None)
    if None in (builder, handle, patch_lang, patch_attr, np_dtype, lang_builder) \
            or not hasattr(builder, "create_extern_elementwise"):
        return False
    try:
        from triton.language.extra import libdevice as stub
        from triton.language.extra.cuda import libdevice as cuda
    except ImportError:
        return False
    from . import libdevice
    is_builtin = tl.core.is_builtin
    functions = {name: fn for name, fn in vars(cuda).items() if is_builtin(fn)}
    if not functions:
        return False
    held: dict[int, tuple[Any, Any]] = {id(fn): (fn, fn) for fn in functions.values()}  # what a kernel may hold
    for name, fn in list(vars(stub).items()):
        if inspect.isfunction(fn) and fn.__module__ == stub.__name__:
            if name in functions:
                held[id(fn)] = (fn, functions[name])  # a stub, imported before this ran
            setattr(stub, name, functions.get(name) or _missing(name))  # the GPU compiler's module map, as it were
    members = [(module, name, fn) for module in (cuda, stub) for name, fn in vars(module).items() if is_builtin(fn)]
    sentinel_module, sentinel_name, sentinel = members[0]
    python_names = _libdevice_names(cuda)

    def _patch_lang(fn: Any) -> Any:
        scope = patch_lang(fn)
        if getattr(sentinel_module, sentinel_name) is sentinel:  # not patched yet (a device function's call leaves it so)
            for module, name, member in members:
                patch_attr(module, name, member, lang_builder, scope)
        names = getattr(fn, "__globals__", {})
        imported = [(name, held[id(value)][1]) for name, value in names.items()
                    if held.get(id(value), _NOTHING)[0] is value]
        if imported:
            where = FunctionGlobals(names)
            for name, member in imported:
                patch_attr(where, name, member, lang_builder, scope)
        return scope

    def create_extern_elementwise(self: Any, lib_name: str, lib_path: str, symbol: str, args: list,
                                  ret_type: Any, is_pure: bool) -> Any:
        ret = getattr(ret_type, "scalar", ret_type)
        out = libdevice.compute(symbol, [h.data for h in args], np_dtype(ret))
        if out is None:
            raise InterpreterCannotRun(python_names.get(symbol, symbol))
        return handle(out, ret)
    interpreter._patch_lang = _patch_lang
    builder.create_extern_elementwise = create_extern_elementwise
    return True


# --- .value of a dtype ---

def _fix_dtype_value(interpreter: Any, tl: Any) -> bool:
    dtype = getattr(tl, "dtype", None)
    if dtype is None or hasattr(dtype, "value"):
        return False

    def value(self: Any) -> Any:
        if interpreting():
            return self  # what tl.constexpr(dtype).value is on the GPU
        raise AttributeError(f"{type(self).__name__!r} object has no attribute 'value'")
    dtype.value = property(value, doc="The dtype itself, in an interpreting process: the interpreter passes "
                                      "constexpr dtypes unwrapped, where the GPU compiler wraps them.")
    return True


# --- the active driver ---

# What `utils.get_device_properties` says, with the keys and units of Triton's CUDA driver: an H100 SXM.
DEVICE_PROPERTIES = {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132, "warpSize": 32,
                     "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120}


def fixed_time_benchmark(kernel_call: Callable[[], Any], quantiles: Any = None, **kwargs: Any) -> Any:
    """The interpreter has no timer: every autotune config 'takes' 1 ms (its first is kept); nothing runs."""
    return [1.0] * len(quantiles) if quantiles else 1.0


class _DeviceUtils:
    def get_device_properties(self, device: int | None = None) -> dict[str, int]:
        return dict(DEVICE_PROPERTIES)

    def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
        return (9, 0)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_default_stream(self, device: int | None = None) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the Triton interpreter's driver has no utils.{name} (nothing runs on a GPU here)")


class InterpreterDriver:
    """The active driver of an interpreting process: a CUDA sm_90 target (warp size 32) with the
    properties of an H100, whose torch device is the CPU, where the interpreter runs kernels."""

    def __init__(self) -> None:
        self.utils = _DeviceUtils()

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    # the same answers as its utils give (Triton asks either, by version)
    get_current_device = _DeviceUtils.get_current_device
    set_current_device = _DeviceUtils.set_current_device
    get_device_capability = _DeviceUtils.get_device_capability
    get_current_stream = _DeviceUtils.get_default_stream

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cpu

    def get_benchmarker(self) -> Callable[..., Any]:
        return fixed_time_benchmark

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(1 << 10, dtype=torch.int32)

    def clear_cache(self, cache: Any) -> None:
        cache.zero_()

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the Triton interpreter's driver has no {name!r} (nothing runs on a GPU here)")


def _fix_driver(interpreter: Any, tl: Any) -> bool:
    try:
        from triton.runtime.driver import DriverConfig
    except ImportError:
        return False
    original = vars(DriverConfig).get("active")
    if not isinstance(original, property) or not hasattr(DriverConfig, "set_active"):
        return False

    def active(self: Any) -> Any:
        if getattr(self, "_active", None) is None and interpreting():
            self.set_active(InterpreterDriver())  # a process that runs real kernels keeps its GPU driver
        return original.fget(self)
    DriverConfig.active = property(active, doc=original.__doc__)
    return True


# --- kernel.warmup(...) ---

KernelMetadata = namedtuple("KernelMetadata", "name num_warps num_stages num_ctas shared warp_size target")


class InterpretedKernel:
    """What `kernel.warmup(...)` returns under the interpreter, in place of a compiled kernel: plausible
    resource figures (registers and shared memory: code that sizes its grid by occupancy divides by
    them), and `kernel[grid](*args)` runs the kernel through `InterpretedFunction.run` with the
    constexprs it was warmed up with, as a compiled kernel keeps those it was compiled with."""

    n_regs, n_spills, n_max_threads = 32, 0, 1024
    SHARED_BYTES = 1024  # no shared memory is laid out here; a small positive figure

    def __init__(self, fn: Any, constexprs: list[str], constants: dict[str, Any], options: dict[str, Any]):
        from triton.backends.compiler import GPUTarget

        self.fn, self.name = fn, getattr(fn, "__name__", "kernel")
        self._constexprs, self._constants = constexprs, constants
        self.metadata = KernelMetadata(name=self.name, num_warps=options.get("num_warps") or 4,
                                       num_stages=options.get("num_stages") or 3, num_ctas=options.get("num_ctas") or 1,
                                       shared=self.SHARED_BYTES, warp_size=32, target=GPUTarget("cuda", 90, 32))
        self.asm: dict[str, Any] = {}
        self.module = self.function = None

    def _init_handles(self) -> None:
        pass

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def runner(*args: Any, stream: Any = None) -> Any:
            names = list(self.fn.arg_names)
            free = [name for name in names if name not in self._constexprs]
            if len(args) == len(names):  # Triton 3: every parameter, constexprs included
                bound = dict(zip(names, args))
            elif len(args) == len(free):
                bound = dict(zip(free, args))
            else:
                raise TypeError(f"{self.name} takes {len(names)} arguments ({len(free)} without its constexprs), "
                                f"{len(args)} given")
            bound.update(self._constants)
            return self.fn.run(grid=tuple(grid), warmup=False, **bound)
        return runner


def _fix_warmup(interpreter: Any, tl: Any) -> bool:
    function, executor = getattr(interpreter, "InterpretedFunction", None), getattr(interpreter, "GridExecutor", None)
    original = getattr(function, "run", None)
    if None in (function, executor, original):
        return False

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        if not warmup:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        constexprs = executor(self.fn, self.arg_names, grid).constexprs
        given = {**dict(zip(self.arg_names, args)), **kwargs}
        defaults = {name: p.default for name, p in inspect.signature(self.fn).parameters.items()
                    if p.default is not inspect.Parameter.empty}
        constants = {name: given[name] if name in given else defaults[name]
                     for name in constexprs if name in given or name in defaults}
        return InterpretedKernel(self, constexprs, constants, kwargs)
    function.run = run
    return True


def _fix_index(interpreter: Any, tl: Any) -> bool:
    """A scalar tensor as a Python int (`range(tl.program_id(0), n, tl.num_programs(0))`, the persistent
    loops of the tutorials): Triton 3.6's interpreter calls int() on the scalar's 1-element array, which
    numpy 2.4 refuses ("only 0-dimensional arrays can be converted"); 3.9 squeezes it first, as here."""
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        return False

    def _patch_lang_tensor(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    interpreter._patch_lang_tensor = _patch_lang_tensor
    return True


FIXES: list[tuple[str, Callable[[Any, Any], bool]]] = [
    ("float launch arguments", _fix_float_arguments),
    ("libdevice", _fix_libdevice),
    ("dtype .value", _fix_dtype_value),
    ("interpreter driver", _fix_driver),
    ("warmup kernels", _fix_warmup),
    ("scalar tensors as ints", _fix_index),
]
