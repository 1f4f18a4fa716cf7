"""NVIDIA's libdevice functions on the CPU, by symbol, for the Triton interpreter.

On a GPU `libdevice.tanh(x)` is a call of libdevice's `__nv_tanhf` (float32) or `__nv_tanh` (float64);
the interpreter has no libdevice. `compute(symbol, arrays, dtype)` gives what the symbol returns for
numpy arrays of its arguments, in its return type (interpreter/gaps.py calls it).

- float32 math is computed in float64 (numpy; torch's float64 CPU kernels for erf, erfinv, erfcx, the
  normal distribution, lgamma and the Bessel functions; Python's math.gamma for tgamma) and rounded
  once to float32: within about half an ulp of the exact value, which CUDA's results are within
  1 to 4 ulp of (its documented bounds). float64 math in float64 (numpy's libm: an ulp or two).
- Exact functions (floor, round (half away from zero), rint, fabs, fmod, remainder, copysign,
  nextafter, fmin/fmax (NaN-ignoring), fdim, the classifications, bit reinterpretations) in the
  argument's own type; fma rounds once.
- The rounding-mode variants (`add_rz`, `div_ru`, `fma_rd`, `sqrt_rz`, `double2float_rd`,
  `ll2float_ru`, `float2int_rz`, ...) round as named: the nearest value first, then one step toward
  the mode wherever the exact value (a Fraction) lies on the other side.
- fast_* approximations (`__expf`, `__fdividef`, ...) give the accurate result: the GPU's is within
  its documented error of it.
- Integer functions (abs, clz, popc, ffs, brev, mulhi, mul24, sad, hadd, rhadd, byte_perm, min,
  max) bit for bit.

`compute` returns None for a symbol it does not know: Bessel functions of integer order (jn, yn),
rcp64h, and any symbol a kernel names through `tl.extern_elementwise` that is not here.

Not modelled: Triton links libdevice with flush-to-zero on (`__CUDA_FTZ`), so on a GPU a float32
function may flush subnormal arguments and results to zero; here they are kept.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np

_TABLE: dict[str, Callable[..., Any]] = {}


def compute(symbol: str, arrays: list[Any], dtype: Any) -> Any | None:
    """What libdevice's `symbol` returns for these arguments (numpy arrays of the argument types), as
    numpy `dtype` (the symbol's return type; rounded to nearest, integers wrapped); None when the symbol
    is not implemented here."""
    fn = _TABLE.get(symbol)
    if fn is None:
        return None
    arrays = [np.ascontiguousarray(a) for a in np.broadcast_arrays(*[np.asarray(a) for a in arrays])]
    with np.errstate(all="ignore"):  # overflow to inf, NaN from NaN: as on the GPU
        return np.asarray(fn(*arrays)).astype(dtype)


def implemented() -> list[str]:
    return sorted(_TABLE)


def _wide(x: Any) -> Any:
    return x.astype(np.float64) if x.dtype == np.float32 else x


def _float(fn: Callable[..., Any], *bases: str) -> None:
    """`__nv_<base>f` (float32) and `__nv_<base>` (float64): fn on float64 values (float32 widened)."""
    for base in bases:
        _TABLE[f"__nv_{base}f"] = _TABLE[f"__nv_{base}"] = lambda *a: fn(*map(_wide, a))


def _exact(fn: Callable[..., Any], *bases: str) -> None:
    """As _float, but fn gets the arguments in their own type (exact operations)."""
    for base in bases:
        _TABLE[f"__nv_{base}f"] = _TABLE[f"__nv_{base}"] = fn


def _torch(name: str, edges: Callable[[Any, Any], Any] | None = None) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        import torch

        out = getattr(torch.special, name)(torch.from_numpy(np.array(x, dtype=np.float64))).numpy()
        return out if edges is None else edges(x, out)
    return fn


def _elementwise(fn: Callable[..., Any], *arrays: Any, otypes: Any = np.float64) -> Any:
    return np.frompyfunc(fn, len(arrays), 1)(*arrays).astype(otypes)


# --- float math, through float64 ---

def _sinpi(x: Any, cos: bool = False) -> Any:
    r = np.fmod(x, 2.0)  # exact; sinpi has period 2
    n = np.rint(2 * r)  # r = n/2 + f, |f| <= 1/4
    f = r - n / 2
    q = np.mod(n + cos, 4)
    s, c = np.sin(np.pi * f), np.cos(np.pi * f)
    out = np.select([q == 0, q == 1, q == 2], [s, c, -s], -c)
    return np.where(out == 0, 0.0 if cos else np.copysign(0.0, x), out)


def _gamma(v: float) -> float:
    try:
        return math.gamma(v)
    except ValueError:  # a pole (0: +-inf; negative integers, -inf: NaN)
        return math.copysign(math.inf, v) if v == 0 else math.nan
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _norm(*xs: Any) -> Any:
    a = np.abs(np.stack(np.broadcast_arrays(*xs)))
    m = a.max(axis=0)
    scale = np.where((m == 0) | ~np.isfinite(m), 1.0, m)
    total = scale * np.sqrt(((a / scale) ** 2).sum(axis=0))
    return np.where(np.isinf(a).any(axis=0), np.inf, total)


def _logb(x: Any) -> Any:
    e = np.frexp(x)[1].astype(np.float64) - 1
    return np.where(x == 0, -np.inf, np.where(np.isfinite(x), e, np.abs(x)))


def _ilogb(x: Any) -> Any:
    e = np.frexp(x)[1].astype(np.int64) - 1
    return np.where((x == 0) | np.isnan(x), -2**31, np.where(np.isinf(x), 2**31 - 1, e))


def _bessel(name: str, odd: bool = False, at_inf: float = 0.0) -> Callable[[Any], Any]:
    # torch gives NaN at +-inf; C and CUDA give the limit (j0, j1, y0, y1: 0; i0, i1: inf)
    def edges(x: Any, out: Any) -> Any:
        limit = np.copysign(at_inf, x) if odd else at_inf
        valid = x > 0 if name.startswith("bessel_y") else True
        return np.where(np.isinf(x) & valid, limit, out)
    return _torch(name, edges)


_NUMPY = {"exp fast_exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log fast_log": np.log, "log2 fast_log2": np.log2,
          "log10 fast_log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "cbrt": np.cbrt, "sin fast_sin": np.sin,
          "cos fast_cos": np.cos, "tan fast_tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
          "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
          "acosh": np.arccosh, "atanh": np.arctanh, "hypot": np.hypot, "pow fast_pow": np.power, "ldexp scalbn": np.ldexp,
          "norm3d norm4d": _norm, "logb": _logb, "ilogb": _ilogb, "sinpi": _sinpi}
for _bases, _fn in _NUMPY.items():
    _float(_fn, *_bases.split())
_float(lambda x: np.power(10.0, x), "exp10", "fast_exp10")
_float(lambda x: 1 / np.sqrt(x), "rsqrt")
_float(lambda x: 1 / np.cbrt(x), "rcbrt")
_float(lambda x: _sinpi(x, cos=True), "cospi")
_float(lambda x, y: 1 / np.hypot(x, y), "rhypot")
_float(lambda *xs: 1 / _norm(*xs), "rnorm3d", "rnorm4d")
_float(lambda x, n: np.power(x, n.astype(np.float64)), "powi")
_float(_torch("erf"), "erf")
_float(_torch("erfc"), "erfc")
_float(_torch("erfinv"), "erfinv")
_float(lambda x: -_torch("ndtri")(x / 2) / math.sqrt(2), "erfcinv")  # exact for small x, where 1 - x is not
_float(_torch("erfcx"), "erfcx")
_float(_torch("ndtr"), "normcdf")
_float(_torch("ndtri"), "normcdfinv")
_float(_torch("gammaln"), "lgamma")
_float(lambda x: _elementwise(_gamma, x), "tgamma")
_float(_bessel("bessel_j0"), "j0")
_float(_bessel("bessel_j1", odd=True), "j1")
_float(_bessel("bessel_y0"), "y0")
_float(_bessel("bessel_y1"), "y1")
_float(_bessel("modified_bessel_i0", at_inf=np.inf), "cyl_bessel_i0")
_float(_bessel("modified_bessel_i1", odd=True, at_inf=np.inf), "cyl_bessel_i1")
_TABLE["__nv_frsqrt_rn"] = _TABLE["__nv_rsqrtf"]


# --- exact float functions, in the argument's own type ---

def _round_half_away(x: Any) -> Any:
    t = np.trunc(x)
    return t + np.copysign((np.abs(x - t) >= 0.5).astype(x.dtype), x)


def _remainder(x: float, y: float) -> float:
    try:
        return math.remainder(x, y)
    except ValueError:  # remainder(inf, y), remainder(x, 0)
        return math.nan


for _bases, _fn in {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": _round_half_away, "fabs": np.abs,
                    "rint nearbyint": np.rint, "copysign": np.copysign, "nextafter": np.nextafter, "fmod": np.fmod,
                    "fmin": np.fmin, "fmax": np.fmax}.items():
    _exact(_fn, *_bases.split())
_exact(lambda x, y: _elementwise(_remainder, x, y, otypes=x.dtype), "remainder")
_exact(lambda x, y: np.where(np.isnan(x) | np.isnan(y), x + y, np.where(x > y, x - y, 0)), "fdim")
_TABLE["__nv_saturatef"] = lambda x: np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(x.dtype)
for _f, _d, _test in (("isnanf", "isnand", np.isnan), ("isinff", "isinfd", np.isinf),
                      ("signbitf", "signbitd", np.signbit), ("finitef", "isfinited", np.isfinite)):
    _TABLE[f"__nv_{_f}"] = _TABLE[f"__nv_{_d}"] = lambda x, _test=_test: _test(x).astype(np.int32)


# --- rounding: to nearest, then a step toward the mode where the exact value lies beyond ---

def _step(n: Any, cmp: Any, mode: str) -> Any:
    """n rounded to nearest, cmp the sign of n - exact: n rounded toward zero, down or up instead."""
    if mode == "rn":
        return n
    down, up = np.nextafter(n, n.dtype.type(-np.inf)), np.nextafter(n, n.dtype.type(np.inf))
    if mode == "rd":
        return np.where(cmp > 0, down, n)
    if mode == "ru":
        return np.where(cmp < 0, up, n)
    return np.where((cmp > 0) & (n > 0), down, np.where((cmp < 0) & (n < 0), up, n))


def _sign_of_error(exact: Callable[..., Fraction], square: bool = False) -> Callable[..., int]:
    """sign(n - exact(*args)) for a rounded result n, with Fractions (sqrt: sign(n*n - x))."""
    def one(n: Any, *args: Any) -> int:
        n, args = float(n), [float(a) for a in args]
        if math.isnan(n) or not all(math.isfinite(a) for a in args):
            return 0
        try:
            value = exact(*map(Fraction, args))
        except ZeroDivisionError:
            return 0
        if math.isinf(n):
            return 1 if n > 0 else -1  # finite arguments: overflowed
        mine = Fraction(n) ** 2 if square else Fraction(n)
        return (mine > value) - (mine < value)
    return one


def _fma_nearest(a: Any, b: Any, c: Any) -> Any:
    if a.dtype == np.float32:  # the float64 product is exact; round to odd in float64, then to float32
        product, c64 = a.astype(np.float64) * b.astype(np.float64), c.astype(np.float64)
        total = product + c64
        back = total - product
        error = np.where(np.isfinite(total), (product - (total - back)) + (c64 - back), 0.0)
        inexact_even = (error != 0) & ((total.view(np.uint64) & np.uint64(1)) == 0)
        return np.where(inexact_even, np.nextafter(total, np.where(error > 0, np.inf, -np.inf)), total).astype(np.float32)

    def one(x: float, y: float, z: float) -> float:
        if not (math.isfinite(x) and math.isfinite(y)):
            return x * y + z
        if not math.isfinite(z):
            return z
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact == 0:
            return x * y + z  # the sign of an exact zero, as IEEE gives it
        try:
            return float(exact)
        except OverflowError:
            return math.copysign(math.inf, exact)
    return _elementwise(one, a, b, c)


_ARITHMETIC: dict[str, tuple[Callable[..., Any], Callable[..., Fraction], bool]] = {
    "add": (np.add, lambda x, y: x + y, False), "sub": (np.subtract, lambda x, y: x - y, False),
    "mul": (np.multiply, lambda x, y: x * y, False), "div": (np.divide, lambda x, y: x / y, False),
    "rcp": (lambda x: 1 / x, lambda x: 1 / x, False), "sqrt": (np.sqrt, lambda x: x, True),
    "fma": (_fma_nearest, lambda x, y, z: x * y + z, False),
}


def _rounded(op: str, mode: str) -> Callable[..., Any]:
    nearest, exact, square = _ARITHMETIC[op]

    def fn(*args: Any) -> Any:
        n = np.asarray(nearest(*args)).astype(args[0].dtype)
        if mode == "rn":
            return n
        return _step(n, _elementwise(_sign_of_error(exact, square), n, *args, otypes=np.int8), mode)
    return fn


for _mode in ("rn", "rz", "rd", "ru"):
    for _op in ("add", "sub", "mul", "div", "rcp", "sqrt"):
        _TABLE[f"__nv_f{_op}_{_mode}"] = _TABLE[f"__nv_d{_op}_{_mode}"] = _rounded(_op, _mode)
    _TABLE[f"__nv_fmaf_{_mode}"] = _TABLE[f"__nv_fma_{_mode}"] = _rounded("fma", _mode)
_TABLE["__nv_fmaf"] = _TABLE["__nv_fma"] = _rounded("fma", "rn")
_TABLE["__nv_fast_fdividef"] = np.divide


# --- conversions ---

_INTEGERS = {"int": (np.int32, -2**31, 2**31 - 1), "uint": (np.uint32, 0, 2**32 - 1),
             "ll": (np.int64, -2**63, 2**63 - 1), "ull": (np.uint64, 0, 2**64 - 1)}
_TO_INTEGER = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def _float_to_integer(kind: str, mode: str) -> Callable[[Any], Any]:
    """Rounded as named, saturated to the type's range; NaN gives 0 (PTX's cvt)."""
    dtype, lo, hi = _INTEGERS[kind]

    def fn(x: Any) -> Any:
        r = _TO_INTEGER[mode](x.astype(np.float64))
        low, high = r <= float(lo), r >= float(hi)
        inside = ~(low | high | np.isnan(r))
        out = np.zeros(r.shape, dtype)
        out[inside] = r[inside].astype(dtype)
        out[low], out[high] = lo, hi
        return out
    return fn


def _to_float(dtype: Any, mode: str) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        n = x.astype(dtype)
        if mode == "rn":
            return n
        if x.dtype.kind == "f" or x.dtype.itemsize <= 4:  # exact in float64
            wide, mine = x.astype(np.float64), n.astype(np.float64)
            cmp = (mine > wide).astype(np.int8) - (mine < wide)
        else:  # 64-bit integers: compared as Python integers
            cmp = _elementwise(lambda a, b: (int(a) > int(b)) - (int(a) < int(b)), n, x, otypes=np.int8)
        return _step(n, cmp, mode)
    return fn


for _mode in ("rn", "rz", "rd", "ru"):
    for _src in ("float", "double"):
        for _kind in _INTEGERS:
            _TABLE[f"__nv_{_src}2{_kind}_{_mode}"] = _float_to_integer(_kind, _mode)
    for _src in ("int", "uint", "ll", "ull", "double"):
        _TABLE[f"__nv_{_src}2float_{_mode}"] = _to_float(np.float32, _mode)
        if _src != "double":
            _TABLE[f"__nv_{_src}2double_{_mode}"] = _to_float(np.float64, _mode)
_exact(_float_to_integer("ll", "rn"), "llrint")
_exact(lambda x: _float_to_integer("ll", "rz")(_round_half_away(x)), "llround")
for _name, _view in (("int_as_float", np.float32), ("uint_as_float", np.float32), ("float_as_int", np.int32),
                     ("float_as_uint", np.uint32), ("longlong_as_double", np.float64),
                     ("double_as_longlong", np.int64)):
    _TABLE[f"__nv_{_name}"] = lambda x, _view=_view: x.view(_view)
_TABLE["__nv_double2loint"] = lambda x: (x.view(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
_TABLE["__nv_double2hiint"] = lambda x: (x.view(np.uint64) >> np.uint64(32)).astype(np.uint32)
_TABLE["__nv_hiloint2double"] = lambda hi, lo: (
    (hi.view(np.uint32).astype(np.uint64) << np.uint64(32)) | lo.view(np.uint32).astype(np.uint64)).view(np.float64)


# --- integers, bit for bit ---

def _unsigned(x: Any) -> Any:
    return x.view(np.uint32 if x.itemsize == 4 else np.uint64).astype(np.uint64)


def _bit_length(u: Any) -> Any:
    hi, lo = (u >> np.uint64(32)).astype(np.float64), (u & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return np.where(hi > 0, np.frexp(hi)[1] + 32, np.frexp(lo)[1]).astype(np.int32)


def _popc(x: Any) -> Any:
    v = _unsigned(x)
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((v * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int32)


def _brev(x: Any) -> Any:
    u, bits = _unsigned(x), x.itemsize * 8
    out = np.zeros(u.shape, np.uint64)
    for i in range(bits):
        out |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(bits - 1 - i)
    return out


def _mulhi(a: Any, b: Any) -> Any:
    if a.itemsize == 4:
        wide = np.int64 if a.dtype == np.int32 else np.uint64
        return (a.astype(wide) * b.astype(wide)) >> wide(32)
    return _elementwise(lambda x, y: ((int(x) * int(y)) >> 64) & (2**64 - 1), a, b, otypes=np.uint64)


def _mul24(a: Any, b: Any) -> Any:
    """The low 32 bits of the product of the arguments' low 24 bits (sign-extended for int32)."""
    def low(v: Any) -> Any:
        if v.dtype == np.int32:
            return ((v << np.int32(8)) >> np.int32(8)).astype(np.int64)
        return (v & np.uint32(0xFFFFFF)).astype(np.int64)
    return (low(a) * low(b)) & 0xFFFFFFFF


def _byte_perm(x: Any, y: Any, s: Any) -> Any:
    both = (_unsigned(y) << np.uint64(32)) | _unsigned(x)
    out = np.zeros(both.shape, np.uint64)
    for i in range(4):
        select = (_unsigned(s) >> np.uint64(4 * i)) & np.uint64(7)
        out |= ((both >> (select * np.uint64(8))) & np.uint64(0xFF)) << np.uint64(8 * i)
    return out


def _lowest_set_bit(x: Any) -> Any:
    u = _unsigned(x)
    return _bit_length(u & (~u + np.uint64(1)))


_TABLE["__nv_abs"] = _TABLE["__nv_llabs"] = np.abs
_TABLE["__nv_clz"] = lambda x: 32 - _bit_length(_unsigned(x))
_TABLE["__nv_clzll"] = lambda x: 64 - _bit_length(_unsigned(x))
_TABLE["__nv_popc"] = _TABLE["__nv_popcll"] = _popc
_TABLE["__nv_ffs"] = _TABLE["__nv_ffsll"] = _lowest_set_bit
_TABLE["__nv_brev"] = _TABLE["__nv_brevll"] = _brev
for _name in ("mulhi", "umulhi", "mul64hi", "umul64hi"):
    _TABLE[f"__nv_{_name}"] = _mulhi
_TABLE["__nv_mul24"] = _TABLE["__nv_umul24"] = _mul24
_TABLE["__nv_sad"] = _TABLE["__nv_usad"] = lambda x, y, z: (np.abs(x.astype(np.int64) - y) + z) & 0xFFFFFFFF
_TABLE["__nv_hadd"] = _TABLE["__nv_uhadd"] = lambda x, y: (x.astype(np.int64) + y) >> 1
_TABLE["__nv_rhadd"] = _TABLE["__nv_urhadd"] = lambda x, y: (x.astype(np.int64) + y + 1) >> 1
_TABLE["__nv_byte_perm"] = _byte_perm
for _prefix in ("", "u", "ll", "ull"):
    _TABLE[f"__nv_{_prefix}min"], _TABLE[f"__nv_{_prefix}max"] = np.minimum, np.maximum
