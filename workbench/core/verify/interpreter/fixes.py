"""Fixes and checks for the Triton interpreter, applied in interpreter workers only.

The interpreter keeps bfloat16 values as their raw 16 bits (numpy has no
bfloat16) and hands those bits to numpy as unsigned integers, so a correct bf16
kernel computes nonsense on the CPU while the same kernel is right on a GPU.
The fixes make 16-bit float arithmetic do what the GPU does: widen to float32
(exact), compute, and round back to the storage type to nearest even.

- bf16 `tl.dot`: the operands are widened to float32 first, which gives the
  product a GPU computes with an fp32 accumulator (triton-lang/triton#11584).
- 16-bit float casts: float32 -> bf16 rounds to nearest even (the interpreter
  truncates), rounding "rtz" truncates; float64, float16, integers and fp8 to
  bf16 and back go through float32 as on the GPU (the interpreter converts the
  bits as if they were integers); float32 -> fp16 "rtz" truncates; bf16
  constants exist (Triton 3.6's interpreter has no `get_bf16`).
- bf16 arithmetic: every binary float operation (+ - * / %, min, max,
  comparisons), unary one (negation) and clamp widens its bf16 operands,
  computes in float32 and rounds once: what the GPU's bf16 instructions do.
  fp16 needs no fix: numpy computes float16 the same way.
- 16-bit fma: `tl.fma` on bf16 or fp16 rounds once, from the exact a*b+c, as
  the GPU's fma.rn does (the interpreter multiplies bf16 bits; Triton 3.6's
  rounds the fp16 product before adding).
- bf16 atomics: `tl.atomic_add` and `tl.atomic_xchg` on bf16, which the interpreter
  refuses ("Unsupported data type"), add in float32 and round, lane after lane.
- 16-bit float reductions: `tl.sum` / `tl.cumsum` / `tl.cumprod` of bf16 or fp16
  accumulate in that type, as on the GPU (Triton does not widen them): a tree
  of pairwise sums, each rounded. argmin / argmax of bf16 compare values, not bits.
- Bounds: the interpreter loads and stores through raw host pointers with no
  check, so a missing mask corrupts the worker's heap (a crash later, or
  nothing at all). Every active lane of a load or store is checked against the
  launch's tensor arguments first, and an access outside all of them raises
  `OutOfBoundsAccess` naming the argument it ran past: on the CPU, the check
  compute-sanitizer's memcheck makes on a GPU.

Gaps where a kernel that runs on a GPU failed here (interpreter/gaps.py):

- float launch arguments: a Python float (`eps`) is a float32 scalar tensor, as the compiler types it.
- libdevice: `triton.language.extra.libdevice` and `.cuda.libdevice` functions run, computed on the
  CPU by symbol (interpreter/libdevice.py); one with no CPU version raises `InterpreterCannotRun`.
- dtype `.value`: a dtype constexpr handed to a `@triton.jit` helper answers `.value` as on the GPU.
- driver and warmup: an interpreting process gets an active driver (CUDA sm_90 target, CPU torch
  device, H100-like properties, fixed-time benchmarker), and `kernel.warmup(...)` returns a stand-in
  for the compiled kernel whose `kernel[grid](...)` runs interpreted.
- scalar tensors as ints: `range(tl.program_id(0), ...)` on Triton 3.6 with numpy 2.4.

And Python the compiler gives a meaning of its own (interpreter/python_syntax.py): `and`/`or` between tensors
(logical_and/or, as compiled), module-level aliases of tl builtins (`triton_cast = tl.cast`), and a launcher
entering its tensors' device (`torch.get_device_module().device(x.device)`, `torch.cuda.device(...)`).

And two for speed, which change no result:
- the interpreter patched `tl` again on every call of a `@triton.jit` helper (a few thousand a launch in an
  attention backward: 17% of a cold verify of attention_train on the CPU). A launch's patches hold until it
  ends, so each module's globals are patched once per launch.
- its options ask for integer-overflow checks and never for debug, and without debug the check's
  device_assert is dropped: every int32 +, - and * was computed again in int64, and compared, for nothing
  (a quarter of that verify). The checks are off where debug is.

What cannot match bit for bit: the order in which a GPU adds up a 16-bit
reduction follows the kernel's layout (threads, warps), which the interpreter
does not have; its tree gives errors of the same size, not the same bits.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .gaps import FIXES as GAP_FIXES
from .python_syntax import FIXES as PYTHON_FIXES

try:
    import numpy as np
except ImportError:  # the fixes are only applied where the interpreter (which needs numpy) runs
    np = None  # type: ignore[assignment]


class OutOfBoundsAccess(Exception):
    """A load or store outside every tensor argument of the launch (a missing or wrong mask?)."""


def apply() -> list[str]:
    """Patch what the installed interpreter needs; returns the names of the fixes applied."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return []
    if np is None or getattr(interpreter, "_workbench_fixes", None) is not None:
        return []  # no numpy, or patched already: each fix wraps the method it finds, so once only
    fixes: list[tuple[str, Callable[[Any, Any], bool]]] = [
        ("bounds checks", _check_bounds),
        ("bf16 tl.dot", _fix_bf16_dot),
        ("16-bit float casts", _fix_casts),
        ("bf16 arithmetic", _fix_bf16_arithmetic),
        ("16-bit fma", _fix_fma),
        ("bf16 atomics", _fix_bf16_atomics),
        ("16-bit float reductions", _fix_reductions),
        ("flush-to-zero approximate sqrt", _fix_approx_sqrt_ftz),
        *GAP_FIXES,
        *PYTHON_FIXES,
        ("overflow checks only with debug", _overflow_checks_only_with_debug),
        ("helpers patched once per launch", _patch_once_per_launch),  # last: it wraps every other _patch_lang
    ]
    interpreter._workbench_fixes = [name for name, fix in fixes if fix(interpreter, tl)]
    return interpreter._workbench_fixes


def _overflow_checks_only_with_debug(interpreter: Any, tl: Any) -> bool:
    """The interpreter's builder has options with sanitize_overflow on and debug off; the overflow check of
    an integer +, - or * computes the operation again in int64 and compares it with the type's range, then
    hands the condition to device_assert, which drops it without debug. Off, then, while debug is."""
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or getattr(options, "sanitize_overflow", None) is not True \
            or getattr(options, "debug", None) is not False:
        return False
    try:
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
    except TypeError:  # not a dataclass in this Triton: left as it is
        return False
    return True


def _patch_once_per_launch(interpreter: Any, tl: Any) -> bool:
    """A launch patches the `tl` modules (and the names in its kernel's globals) and restores them when it ends;
    in between, every call of a `@triton.jit` helper patched them again, to the same effect, through
    inspect.getmembers of each module. Now a helper's call patches only globals no call of this launch has
    patched yet (a helper from another module has its own). Where the installed interpreter does not return a
    scope that the launch restores, nothing is changed."""
    patch_lang = getattr(interpreter, "_patch_lang", None)
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if patch_lang is None or scope_type is None or not hasattr(scope_type, "restore"):
        return False
    patched: set[int] = set()  # id() of the globals patched since the launch began (empty: no launch under way)

    def _patch_lang(fn: Any) -> Any:
        key = id(getattr(fn, "__globals__", fn))
        if key in patched:
            return scope_type()  # nothing changed, nothing to restore
        scope = patch_lang(fn)
        if not isinstance(scope, scope_type):
            return scope
        first = not patched
        patched.add(key)
        if first:  # the launch's own scope, restored when it ends: the next launch patches afresh
            restore = scope.restore

            def restore_and_forget() -> None:
                patched.clear()
                restore()
            scope.restore = restore_and_forget
        return scope

    interpreter._patch_lang = _patch_lang
    return True


# --- 16-bit float numerics (numpy arrays in, numpy arrays out) ---

def bf16_to_f32(bits: Any) -> Any:
    """bfloat16 bit patterns (uint16) -> float32 values; exact."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(values: Any, toward_zero: bool = False) -> Any:
    """float32 values -> bfloat16 bit patterns, rounded to nearest even (or toward zero); NaN stays NaN."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    if toward_zero:
        rounded = bits >> 16
    else:
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (bits >> 16) | 0x0040, rounded).astype(np.uint16)


def f64_to_f32_round_odd(values: Any, error: Any = None) -> Any:
    """float64 (plus an optional exact error term) -> float32, rounded to odd.

    Rounding to odd first and to nearest even after gives the once-rounded
    result of the exact value (float32 keeps more than two extra bits over
    bf16 and fp16), where rounding to nearest twice can land on a false tie.
    """
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = values.astype(np.float32)
        diff = values - nearest.astype(np.float64)  # exact: nearest is values rounded
        if error is not None:
            diff = np.where(diff == 0, error, diff)
    inexact = (diff != 0) & np.isfinite(values)
    if not inexact.any():
        return nearest
    past_it = inexact & ((diff < 0) == (nearest > 0)) & (nearest != 0)  # rounded away from zero
    truncated = np.where(past_it, np.nextafter(nearest, np.float32(0)), nearest)
    bits = truncated.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def round_f32_to(values: Any, dtype: str) -> Any:
    """float32 values rounded to nearest even to "bfloat16" or "float16", still as float32."""
    if dtype == "bfloat16":
        return bf16_to_f32(f32_to_bf16(values))
    return np.asarray(values, dtype=np.float32).astype(np.float16).astype(np.float32)


# --- the patches ---

def _is_bf16(tl: Any, h: Any) -> bool:
    return h.data.dtype == np.uint16 and h.dtype.scalar == tl.bfloat16  # the cheap test first: it runs per op


def _fix_bf16_dot(interpreter: Any, tl: Any) -> bool:
    builder = interpreter.InterpreterBuilder
    handle = interpreter.TensorHandle
    original = getattr(builder, "create_dot", None)
    if original is None:
        return False

    def widen(h: Any) -> Any:
        return handle(bf16_to_f32(h.data), tl.float32) if _is_bf16(tl, h) else h

    def create_dot(self: Any, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        return original(self, widen(a), widen(b), *args, **kwargs)
    builder.create_dot = create_dot
    return True


def _to_bf16(data: Any, toward_zero: bool = False) -> Any:
    """float64, float32, float16 or integer values -> bf16 bits, rounded once as the GPU rounds.

    Integers go through float32 first: the GPU converts them that way too.
    """
    wide = f64_to_f32_round_odd(data) if data.dtype == np.float64 else data.astype(np.float32)
    return f32_to_bf16(wide, toward_zero)


def _to_fp16(data: Any, toward_zero: bool) -> Any:
    wide = f64_to_f32_round_odd(data) if data.dtype == np.float64 else data.astype(np.float32)
    with np.errstate(over="ignore"):
        half = wide.astype(np.float16)
    if toward_zero:
        half = np.where(np.abs(half.astype(np.float32)) > np.abs(wide), np.nextafter(half, np.float16(0)), half)
    return half


def _fix_casts(interpreter: Any, tl: Any) -> bool:
    builder = interpreter.InterpreterBuilder
    handle = interpreter.TensorHandle
    cast, fp_to_fp = getattr(builder, "cast_impl", None), getattr(builder, "create_fp_to_fp", None)
    rounding = getattr(getattr(interpreter, "_ir", None), "ROUNDING_MODE", None)
    if None in (cast, fp_to_fp, rounding):
        return False

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        dst = dst_type.scalar
        if _is_bf16(tl, src) and dst != tl.bfloat16:
            wide = handle(bf16_to_f32(src.data), tl.float32)
            return wide if dst == tl.float32 else cast(self, wide, dst_type)
        if dst == tl.bfloat16 and src.dtype.scalar != tl.bfloat16:
            return handle(_to_bf16(src.data), tl.bfloat16)
        return cast(self, src, dst_type)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        dst, toward_zero = dst_type.scalar, rounding_mode == rounding.RTZ
        if _is_bf16(tl, src):
            src = handle(bf16_to_f32(src.data), tl.float32)
            if dst == tl.float32:
                return src
        if dst == tl.bfloat16:
            if src.dtype.scalar.primitive_bitwidth == 8:  # fp8: the interpreter widens those exactly
                src = fp_to_fp(self, src, tl.float32, rounding_mode)
            return handle(_to_bf16(src.data, toward_zero), tl.bfloat16)
        if dst == tl.float16 and src.dtype.scalar in (tl.float32, tl.float64):
            return handle(_to_fp16(src.data, toward_zero), tl.float16)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    def get_bf16(self: Any, value: float) -> Any:  # missing from Triton 3.6's interpreter: bf16 constants raised
        return handle(f32_to_bf16(np.array([value], dtype=np.float32)), tl.bfloat16)
    builder.cast_impl = cast_impl
    builder.create_fp_to_fp = create_fp_to_fp
    if not hasattr(builder, "get_bf16"):
        builder.get_bf16 = get_bf16
    return True


def _fix_bf16_arithmetic(interpreter: Any, tl: Any) -> bool:
    builder = interpreter.InterpreterBuilder
    handle = interpreter.TensorHandle
    binary, unary, ternary = (getattr(builder, n, None) for n in ("binary_op", "unary_op", "ternary_op"))
    if None in (binary, unary, ternary):
        return False

    def wide(h: Any) -> Any:
        return bf16_to_f32(h.data) if _is_bf16(tl, h) else h.data

    def result(values: Any) -> Any:
        if values.dtype == np.bool_:  # a comparison
            return handle(values, tl.int1)
        return handle(f32_to_bf16(values), tl.bfloat16)

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if not (_is_bf16(tl, lhs) or _is_bf16(tl, rhs)):
            return binary(self, lhs, rhs, op)
        return result(op(wide(lhs), wide(rhs)))

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if not _is_bf16(tl, arg):
            return unary(self, arg, op)
        return result(op(wide(arg)))

    def ternary_op(self: Any, a: Any, b: Any, c: Any, op: Any) -> Any:
        # tl.where (np.where) picks bits and is right already; clamp (np.clip) compares values.
        if op is np.where or not any(_is_bf16(tl, h) for h in (a, b, c)):
            return ternary(self, a, b, c, op)
        return result(op(wide(a), wide(b), wide(c)))
    builder.binary_op, builder.unary_op, builder.ternary_op = binary_op, unary_op, ternary_op
    return True


def _fix_fma(interpreter: Any, tl: Any) -> bool:
    builder = interpreter.InterpreterBuilder
    handle = interpreter.TensorHandle
    original = getattr(builder, "create_fma", None)
    if original is None:
        return False

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        dtype = z.dtype.scalar
        if dtype not in (tl.bfloat16, tl.float16):
            return original(self, x, y, z)
        a, b, c = np.broadcast_arrays(*(
            (bf16_to_f32(h.data) if _is_bf16(tl, h) else h.data).astype(np.float64) for h in (x, y, z)))
        product = a * b  # exact: 16 (bf16) or 22 (fp16) significant bits
        with np.errstate(invalid="ignore"):
            total = product + c
            back = total - product  # TwoSum: total + error is exactly product + c
            error = np.where(np.isfinite(total), (product - (total - back)) + (c - back), 0.0)
        once = f64_to_f32_round_odd(total, error)
        return handle(f32_to_bf16(once) if dtype == tl.bfloat16 else once.astype(np.float16), dtype)
    builder.create_fma = create_fma
    return True


def _fix_bf16_atomics(interpreter: Any, tl: Any) -> bool:
    builder = interpreter.InterpreterBuilder
    handle = interpreter.TensorHandle
    original = getattr(builder, "create_atomic_rmw", None)
    atomic = getattr(getattr(interpreter, "_ir", None), "ATOMIC_OP", None)
    memory = getattr(interpreter, "_interpreter", None)  # the native load and store the interpreter uses
    if None in (original, atomic, memory):
        return False
    combine = {atomic.FADD: lambda old, new: f32_to_bf16(bf16_to_f32(old) + bf16_to_f32(new)),
               atomic.XCHG: lambda old, new: new}

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        if op not in combine or not _is_bf16(tl, val):
            return original(self, op, ptr, val, mask, sem, scope)
        ptrs, values, pending = (np.array(a) for a in np.broadcast_arrays(ptr.data, val.data, mask.data.astype(bool)))
        old = np.zeros(values.shape, dtype=np.uint16)
        while pending.any():  # each round takes each address once, lanes in order, as if one after another
            waiting = np.flatnonzero(pending)
            lanes = waiting[np.unique(ptrs.flat[waiting], return_index=True)[1]]
            where, everywhere = ptrs.flat[lanes], np.ones(lanes.size, dtype=bool)
            current = memory.load(where, everywhere, np.zeros(lanes.size, dtype=np.uint16), np.dtype(np.uint16))
            old.flat[lanes] = current
            memory.store(where, combine[op](current, values.flat[lanes]), everywhere)
            pending.flat[lanes] = False
        return handle(old, tl.bfloat16)
    builder.create_atomic_rmw = create_atomic_rmw
    return True


def tree_sum(values: Any, dtype: str) -> Any:
    """Sum float32 values along the last axis as a GPU's reduction tree does: halves against
    halves (a warp's butterfly shuffles), each partial sum rounded to `dtype` ("bfloat16" or "float16")."""
    while values.shape[-1] > 1:
        n = values.shape[-1]
        half = (n + 1) // 2
        combined = round_f32_to(values[..., :n - half] + values[..., half:], dtype)
        values = np.concatenate([combined, values[..., n - half:half]], axis=-1)
    return values[..., 0]


def tree_scan(values: Any, dtype: str, op: Any = np.add if np is not None else None) -> Any:
    """Inclusive scan (`op`: np.add, np.multiply) along the last axis in log2(n) steps
    (Hillis-Steele, as a warp's shuffles do), each partial result rounded to `dtype`."""
    step = 1
    while step < values.shape[-1]:
        combined = round_f32_to(op(values[..., :-step], values[..., step:]), dtype)
        values = np.concatenate([values[..., :step], combined], axis=-1)
        step *= 2
    return values


def _fix_reductions(interpreter: Any, tl: Any) -> bool:
    reduce_ops, scan_ops = getattr(interpreter, "ReduceOps", None), getattr(interpreter, "ScanOps", None)
    methods = [getattr(reduce_ops, "sum", None), getattr(reduce_ops, "min_max", None),
               getattr(scan_ops, "cumsum", None), getattr(scan_ops, "cumprod", None)]
    if None in methods:
        return False
    original_sum, original_min_max, original_cumsum, original_cumprod = methods
    kinds = {tl.bfloat16: "bfloat16", tl.float16: "float16"}

    def as_f32(tensor: Any) -> Any:
        data = tensor.handle.data
        return bf16_to_f32(data) if _is_bf16(tl, tensor.handle) else data.astype(np.float32)

    def storage(values: Any, kind: str) -> Any:
        return f32_to_bf16(values) if kind == "bfloat16" else np.asarray(values, dtype=np.float16)

    def sum(self: Any, input: Any) -> Any:
        kind = kinds.get(input.dtype.scalar)
        if kind is None:
            return original_sum(self, input)
        values, axis = as_f32(input), self.axis
        total = tree_sum(np.moveaxis(values, axis, -1) if axis is not None else values.reshape(-1), kind)
        if self.keep_dims:
            total = np.expand_dims(total, axis) if axis is not None else total.reshape([1] * values.ndim)
        return self.to_tensor(storage(total, kind), input.dtype)

    def min_max(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        input = input[0] if isinstance(input, tuple) else input
        if input.dtype.scalar != tl.bfloat16:
            return original_min_max(self, input, val_reduce_op, idx_reduce_op)
        values, where = bf16_to_f32(input.handle.data), dict(axis=self.axis, keepdims=self.keep_dims)
        found = []
        if val_reduce_op:
            found.append(self.to_tensor(f32_to_bf16(val_reduce_op(values, **where)), input.dtype))
        if idx_reduce_op:
            found.append(self.to_tensor(idx_reduce_op(values, **where), tl.int32))
        if not found:
            raise ValueError("val_reduce_op and idx_reduce_op are both None")
        return tuple(found) if len(found) > 1 else found[0]

    def scan(original: Any, op: Any) -> Any:
        def patched(self: Any, input: Any) -> Any:
            kind = kinds.get(input.dtype.scalar)
            if kind is None:
                return original(self, input)
            values = tree_scan(np.moveaxis(as_f32(input), self.axis, -1), kind, op)
            return [self.to_tensor(storage(np.moveaxis(values, -1, self.axis), kind), input.dtype)]

        return patched
    reduce_ops.sum, reduce_ops.min_max = sum, min_max
    scan_ops.cumsum, scan_ops.cumprod = scan(original_cumsum, np.add), scan(original_cumprod, np.multiply)
    return True


class _LaunchMemory:
    """The byte ranges of the current launch's tensor arguments: (start, end, name, element size), for stores
    and for loads. A tensor inside guard margins (guards.py) may store into them (the guards report it, as
    on a GPU); its loads are held to the tensor's own span."""

    ranges: list[tuple[int, int, str, int]] = []
    load_ranges: list[tuple[int, int, str, int]] = []


def _check_bounds(interpreter: Any, tl: Any) -> bool:
    executor = getattr(interpreter, "GridExecutor", None)
    builder = getattr(interpreter, "InterpreterBuilder", None)
    init_args = getattr(executor, "_init_args_hst", None)
    load = getattr(builder, "create_masked_load", None)
    store = getattr(builder, "create_masked_store", None)
    if None in (init_args, load, store):
        return False
    from ..guards import GUARDED_SPANS  # once, when the fix is applied (this module imports no torch itself)

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        named = list(zip(getattr(self, "arg_names", []), args_hst)) + list(kwargs_hst.items())
        ranges, load_ranges = [], []
        for name, arg in named:
            storage = getattr(arg, "untyped_storage", None)
            if storage is None:
                continue
            st = storage()
            whole = (st.data_ptr(), st.data_ptr() + st.nbytes())
            ranges.append((*whole, name, arg.element_size()))
            load_ranges.append((*GUARDED_SPANS.get(st.data_ptr(), whole), name, arg.element_size()))
        _LaunchMemory.ranges, _LaunchMemory.load_ranges = ranges, load_ranges
        return args_hst, kwargs_hst

    def check(kind: str, ptrs: Any, mask: Any) -> None:
        ranges = _LaunchMemory.load_ranges if kind == "load" else _LaunchMemory.ranges
        if not ranges:
            return
        addresses = ptrs.data.astype(np.uint64)
        active = np.broadcast_to(mask.data.astype(bool), addresses.shape)
        wanted = addresses[active]
        if wanted.size == 0:
            return
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        inside = np.zeros(wanted.shape, dtype=bool)
        for start, end, _, _ in ranges:
            inside |= (wanted >= start) & (wanted + size <= end)
        if inside.all():
            return
        bad = wanted[~inside]
        first = int(bad[0])
        start, end, name, esize = min(ranges, key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
        index = (first - start) // max(esize, 1)
        raise OutOfBoundsAccess(
            f"out-of-bounds {kind}: {bad.size} of {wanted.size} active lanes outside every tensor argument; "
            f"the first at element {index} of {name} (which holds {(end - start) // max(esize, 1)}): "
            "a missing or wrong mask?")

    def masked_load(self: Any, ptrs: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        check("load", ptrs, mask)
        return load(self, ptrs, mask, *args, **kwargs)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        check("store", ptrs, mask)
        return store(self, ptrs, value, mask, *args, **kwargs)
    executor._init_args_hst = init_args_hst
    builder.create_masked_load = masked_load
    builder.create_masked_store = masked_store
    return True


def _fix_approx_sqrt_ftz(interpreter: Any, tl: Any) -> bool:
    """`tl.sqrt` and `tl.rsqrt` compile to the GPU's approximate instructions, which flush subnormal
    inputs and results to zero (sqrt.approx.ftz.f32, rsqrt.approx.ftz.f32; on an H100 the sqrt of a
    subnormal float32 comes back 0.0, recorded in tests/fixtures/interpreter_agreement/gpu.json).
    numpy keeps subnormals. `tl.sqrt_rn` (create_precise_sqrt) is IEEE on both and stays as it is."""
    builder = interpreter.InterpreterBuilder
    handle = interpreter.TensorHandle
    patched = False
    for name in ("create_sqrt", "create_rsqrt"):
        original = getattr(builder, name, None)
        if original is None:
            continue

        def flushed(self: Any, arg: Any, _original: Any = original) -> Any:
            if getattr(arg.data, "dtype", None) != np.float32:
                return _original(self, arg)
            out = _original(self, handle(flush_subnormals(arg.data), arg.dtype.scalar))
            return handle(flush_subnormals(out.data), out.dtype.scalar)
        setattr(builder, name, flushed)
        patched = True
    return patched


def flush_subnormals(values: Any) -> Any:
    """float32 subnormals to a zero of the same sign."""
    values = np.asarray(values, dtype=np.float32)
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(values) < tiny, np.copysign(np.float32(0), values), values).astype(np.float32)
