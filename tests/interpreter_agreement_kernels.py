"""Small Triton kernels exercising 16-bit float arithmetic, for the CPU/GPU agreement suite.

Each `AgreementCase` launches one kernel (bfloat16 or float16) on small deterministic inputs
(numpy's legacy RandomState: the same numbers on every machine and version) and carries a
reference: torch computing in float32 and rounding to the output type to nearest even, which is
what the GPU does. `ulps` is how far apart the kernel's bits and the reference's may be: 0 where
the GPU rounds an exact result once, 1 where it computes in float32 with approximations of its own
(exp, sqrt, division, a float32 sum in its own order), more where it adds up in 16 bits in an
order that follows its layout.

Used by benchmarks/record_interpreter_agreement.py (on a GPU: the fixtures; with --interpret: what
tests/test_interpreter_agreement.py compares with them). Only APIs of Triton 3.6 and later.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import torch
import triton
import triton.language as tl

ROWS, COLS = 4, 64
DOT_M, DOT_N, DOT_K = 16, 16, 64
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}

# Inputs that reach the edges: zeros of both signs, infinities, ties of both 16-bit types
# (1 + 2^-8 and 1 + 3 * 2^-8 for bf16, 1 + 2^-11 ... for fp16), overflow, subnormals.
SPECIAL_F32 = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8),
               1 + 2**-11, 1 + 3 * 2**-11, -(1 + 3 * 2**-11), 3.4028234663852886e38, 65519.0, 65520.0, 1e-40,
               2**-133, 2**-25, 3 * 2**-26, -(2**-126), 1e30, -1e-30]


# --- kernels: one program per row of COLS ---

@triton.jit
def _unary_kernel(x_ptr, out_ptr, N: tl.constexpr, OP: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if OP == "neg":
        y = -x
    elif OP == "abs":
        y = tl.abs(x)
    elif OP == "scalars":  # Python constants take the tensor's type: rounded to it, then each op rounds
        y = x * 0.1 + 1.5
    elif OP == "exp":
        y = tl.exp(x.to(tl.float32))
    elif OP == "log":
        y = tl.log(tl.abs(x.to(tl.float32)) + 0.01)
    elif OP == "sqrt":
        y = tl.sqrt(tl.abs(x.to(tl.float32)))
    elif OP == "rsqrt":
        y = tl.rsqrt(tl.abs(x.to(tl.float32)) + 0.01)
    elif OP == "sigmoid":
        y = tl.sigmoid(x.to(tl.float32))
    elif OP == "erf":
        y = tl.erf(x.to(tl.float32))
    else:  # "gelu": erf form, in float32, rounded once
        xf = x.to(tl.float32)
        y = 0.5 * xf * (1.0 + tl.erf(xf * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty))


@triton.jit
def _binary_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr, OP: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "div":
        z = x / y
    elif OP == "maximum":
        z = tl.maximum(x, y)
    elif OP == "minimum":
        z = tl.minimum(x, y)
    elif OP == "lt":
        z = x < y
    elif OP == "le":
        z = x <= y
    elif OP == "eq":
        z = x == y
    else:  # "ne"
        z = x != y
    tl.store(out_ptr + offs, z.to(out_ptr.dtype.element_ty))


@triton.jit
def _ternary_kernel(x_ptr, y_ptr, z_ptr, out_ptr, N: tl.constexpr, OP: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    z = tl.load(z_ptr + offs)
    if OP == "fma":
        r = tl.fma(x, y, z)
    elif OP == "where":
        r = tl.where(x > y, x, y * z)
    else:  # "clamp"
        r = tl.clamp(x, -0.75, 0.5)
    tl.store(out_ptr + offs, r)


@triton.jit
def _cast_kernel(x_ptr, out_ptr, N: tl.constexpr, TOWARD_ZERO: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if TOWARD_ZERO:
        y = x.to(out_ptr.dtype.element_ty, fp_downcast_rounding="rtz")
    else:
        y = x.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + offs, y)


@triton.jit
def _row_reduce_kernel(x_ptr, out_ptr, N: tl.constexpr, OP: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    if OP == "sum_f32":
        r = tl.sum(x.to(tl.float32), axis=0)
    elif OP == "sum":  # accumulates in the 16-bit type itself: Triton does not widen it
        r = tl.sum(x, axis=0)
    elif OP == "max":
        r = tl.max(x, axis=0)
    elif OP == "min":
        r = tl.min(x, axis=0)
    elif OP == "argmax":
        r = tl.argmax(x, axis=0)
    else:  # "argmin"
        r = tl.argmin(x, axis=0)
    tl.store(out_ptr + row, r.to(out_ptr.dtype.element_ty))


@triton.jit
def _row_scan_kernel(x_ptr, out_ptr, N: tl.constexpr, WIDEN: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if WIDEN:
        y = tl.cumsum(x.to(tl.float32), axis=0)
    else:
        y = tl.cumsum(x, axis=0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty))


@triton.jit
def _dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.dot(a, b)  # float32 accumulator
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc.to(out_ptr.dtype.element_ty))


@triton.jit
def _atomic_add_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.atomic_add(out_ptr + offs, tl.load(x_ptr + offs))  # one lane per address: no order to depend on


@triton.jit
def _silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def _swiglu_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    a = tl.load(a_ptr + offs).to(tl.float32)
    b = tl.load(b_ptr + offs)
    c = _silu(a).cast(b.dtype) * b  # the product in 16 bits, as published SwiGLU kernels take it
    tl.store(c_ptr + offs, c)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, N: tl.constexpr, EPS: tl.constexpr):
    cols = tl.arange(0, N)
    offs = tl.program_id(0) * N + cols
    x = tl.load(x_ptr + offs).to(tl.float32)
    w = tl.load(w_ptr + cols)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + EPS)
    y = (x * rstd).to(w.dtype) * w  # normalised in float32, scaled by the weight in 16 bits
    tl.store(out_ptr + offs, y)


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    z = x - tl.max(x, axis=0).to(x.dtype)  # the shift in 16 bits
    num = tl.exp(z.to(tl.float32))
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty))


# --- inputs ---

def _normal(seed: int, shape: tuple[int, ...], scale: float = 1.0) -> torch.Tensor:
    return torch.from_numpy(np.random.RandomState(seed).standard_normal(shape).astype(np.float32) * scale)


def _uniform(seed: int, shape: tuple[int, ...], low: float, high: float) -> torch.Tensor:
    return torch.from_numpy(np.random.RandomState(seed).uniform(low, high, shape).astype(np.float32))


def _with_specials(values: torch.Tensor, nan: bool = True) -> torch.Tensor:
    """The first row's leading elements replaced by SPECIAL_F32 (NaN left out where asked)."""
    specials = [v for v in SPECIAL_F32 if nan or v == v]
    values = values.clone()
    values.view(-1)[:len(specials)] = torch.tensor(specials, dtype=torch.float32)
    return values


# --- references: float32 (or exact) compute, rounded as the GPU rounds ---

def rounded(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 values rounded to nearest even to `dtype` (torch's conversion), back as float32."""
    return values.to(dtype).float()


def nearest_even(exact: list[Fraction], dtype: torch.dtype) -> torch.Tensor:
    """Exact rational values rounded once, to nearest even, to a 16-bit float type."""
    out = []
    for value in exact:
        guess = torch.tensor([float(value)], dtype=torch.float64).to(dtype)  # within one ulp of it
        if not torch.isfinite(guess).item():  # overflow
            out.append(guess)
            continue
        bits = int(guess.view(torch.int16).item()) & 0xFFFF
        candidates = []
        for b in {bits, (bits + 1) & 0xFFFF, (bits - 1) & 0xFFFF}:
            candidate = torch.tensor([b - 0x10000 if b & 0x8000 else b], dtype=torch.int16).view(dtype)
            if torch.isfinite(candidate).item():
                candidates.append((abs(Fraction(candidate.item()) - value), b & 1, candidate))
        out.append(min(candidates, key=lambda c: c[:2])[2])
    return torch.cat(out).float()


# --- the cases ---

@dataclass(frozen=True)
class AgreementCase:
    name: str
    make_inputs: Callable[[], list[torch.Tensor]]  # on the CPU; the recorder moves them
    run: Callable[..., torch.Tensor]  # launches the kernel on the inputs, returns its output
    reference: Callable[..., torch.Tensor]  # same inputs (CPU) -> expected values, float32 or integers
    out_dtype: torch.dtype
    ulps: int = 0


def _rows(fn: Any, *args: Any, out: torch.Tensor, grid: int = ROWS, **meta: Any) -> torch.Tensor:
    fn[(grid,)](*args, out, **meta)
    return out


def _flush_subnormals(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x.abs() < torch.finfo(torch.float32).tiny, torch.zeros_like(x), x)


def _elementwise_cases(name: str, dt: torch.dtype) -> list[AgreementCase]:
    r = lambda v: rounded(v, dt)  # noqa: E731
    shape = (ROWS, COLS)
    cases = []

    def unary(op: str, ref: Callable[[torch.Tensor], torch.Tensor], ulps: int = 0, seed: int = 1) -> None:
        cases.append(AgreementCase(
            f"{op}[{name}]", lambda: [_with_specials(_normal(seed, shape), nan=True).to(dt)],
            lambda x: _rows(_unary_kernel, x, out=torch.empty_like(x), N=COLS, OP=op),
            lambda x: ref(x.float()), dt, ulps))

    unary("neg", lambda x: -x)
    unary("abs", lambda x: x.abs())
    # 1 ulp: the GPU contracts x * c + d into one fused multiply-add (Triton's enable_fp_fusion), rounding
    # once where the interpreter, op by op, rounds the product first (recorded on an H100).
    unary("scalars", lambda x: r(r(x * r(torch.tensor(0.1))) + 1.5), 1)
    unary("exp", lambda x: r(torch.exp(x)), 1)
    unary("log", lambda x: r(torch.log(x.abs() + 0.01)), 1)
    # tl.sqrt is the GPU's approximate sqrt, which flushes subnormals to zero (recorded on an H100).
    unary("sqrt", lambda x: r(torch.sqrt(_flush_subnormals(x.abs()))), 1)
    unary("rsqrt", lambda x: r(torch.rsqrt(x.abs() + 0.01)), 1)
    unary("sigmoid", lambda x: r(torch.sigmoid(x)), 1)
    unary("erf", lambda x: r(torch.erf(x)), 1)
    unary("gelu", lambda x: r(0.5 * x * (1 + torch.erf(x * 0.7071067811865476))), 1)

    def binary(op: str, ref: Callable[..., torch.Tensor], out: torch.dtype | None = None, ulps: int = 0,
               nan: bool = True) -> None:
        def make() -> list[torch.Tensor]:
            x = _with_specials(_normal(2, shape, 4.0), nan).to(dt)
            y = _with_specials(_normal(3, shape, 4.0), nan).flip(-1).to(dt)
            y.view(-1)[COLS:COLS + 16] = x.view(-1)[COLS:COLS + 16]  # some equal pairs
            return [x, y]

        cases.append(AgreementCase(
            f"{op}[{name}]", make,
            lambda x, y: _rows(_binary_kernel, x, y, out=x.new_empty(shape, dtype=out or dt), N=COLS, OP=op),
            lambda x, y: ref(x.float(), y.float()), out or dt, ulps))

    binary("add", lambda x, y: r(x + y))
    binary("sub", lambda x, y: r(x - y))
    binary("mul", lambda x, y: r(x * y))
    binary("div", lambda x, y: r(x / y), ulps=1)
    binary("maximum", torch.maximum, nan=False)
    binary("minimum", torch.minimum, nan=False)
    for op, ref in (("lt", torch.lt), ("le", torch.le), ("eq", torch.eq), ("ne", torch.ne)):
        binary(op, lambda x, y, ref=ref: ref(x, y).to(torch.int8), out=torch.int8)

    def ternary(op: str, ref: Callable[..., torch.Tensor]) -> None:
        cases.append(AgreementCase(
            f"{op}[{name}]", lambda: [_normal(4, shape).to(dt), _normal(5, shape).to(dt), _normal(6, shape).to(dt)],
            lambda x, y, z: _rows(_ternary_kernel, x, y, z, out=torch.empty_like(x), N=COLS, OP=op),
            lambda x, y, z: ref(x.float(), y.float(), z.float()), dt))

    ternary("fma", lambda x, y, z: nearest_even(
        [Fraction(a) * Fraction(b) + Fraction(c) for a, b, c in zip(x.view(-1).tolist(), y.view(-1).tolist(),
                                                                    z.view(-1).tolist())], dt).view(shape))
    ternary("where", lambda x, y, z: torch.where(x > y, x, r(y * z)))
    ternary("clamp", lambda x, y, z: r(x.clamp(-0.75, 0.5) + r(y * 0)))
    return cases


def _cast_cases(name: str, dt: torch.dtype) -> list[AgreementCase]:
    other = torch.float16 if dt == torch.bfloat16 else torch.bfloat16
    shape = (ROWS, COLS)

    def cast(label: str, make: Callable[[], torch.Tensor], out: torch.dtype, ref: Callable[[torch.Tensor], Any],
             toward_zero: bool = False) -> AgreementCase:
        return AgreementCase(
            f"cast_{label}[{name}]", lambda: [make()],
            lambda x: _rows(_cast_kernel, x, out=x.new_empty(shape, dtype=out), N=COLS, TOWARD_ZERO=toward_zero),
            ref, out)

    def toward_zero(x: torch.Tensor) -> torch.Tensor:
        nearest = x.to(dt).float()
        past = (nearest.abs() > x.abs()) & torch.isfinite(x)
        step = torch.nextafter(nearest.to(dt), torch.zeros((), dtype=dt)).float()
        return torch.where(past, step, nearest)

    specials = lambda: _with_specials(_normal(7, shape, 3.0))  # noqa: E731
    span = 2**20 if dt == torch.bfloat16 else 2**15  # past the exact integers, inside the range
    ints = lambda: torch.from_numpy(np.random.RandomState(8).randint(-span, span, shape).astype(np.int32))  # noqa: E731
    return [
        cast("from_float32", specials, dt, lambda x: x.to(dt).float()),
        cast("from_float32_rtz", specials, dt, toward_zero, toward_zero=True),
        cast("from_float64", lambda: specials().double() * (1 + 2**-40), dt, lambda x: _from_f64(x, dt)),
        cast("to_float32", lambda: specials().to(dt), torch.float32, lambda x: x.float()),
        cast(f"to_{'float16' if other == torch.float16 else 'bfloat16'}", lambda: _normal(9, shape, 100.0).to(dt),
             other, lambda x: rounded(x.float(), other)),
        cast("to_int32", lambda: _normal(10, shape, 300.0).to(dt), torch.int32, lambda x: x.float().to(torch.int32)),
        cast("from_int32", ints, dt, lambda x: rounded(x.float(), dt)),  # integers round to float32 first
    ]


def _from_f64(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    finite = torch.isfinite(x)
    exact = nearest_even([Fraction(v) for v in torch.where(finite, x, 0).view(-1).tolist()], dt).view(x.shape)
    return torch.where(finite, exact, x.float())


def _reduction_cases(name: str, dt: torch.dtype) -> list[AgreementCase]:
    r = lambda v: rounded(v, dt)  # noqa: E731
    shape = (ROWS, COLS)
    normal = lambda: _normal(11, shape).to(dt)  # noqa: E731
    positive = lambda: _uniform(12, shape, 0.5, 1.5).to(dt)  # no cancellation: 16-bit partial sums stay comparable

    def reduce(op: str, make: Callable[[], torch.Tensor], ref: Callable[[torch.Tensor], torch.Tensor],
               out: torch.dtype | None = None, ulps: int = 0) -> AgreementCase:
        return AgreementCase(
            f"{op}[{name}]", lambda: [make()],
            lambda x: _rows(_row_reduce_kernel, x, out=x.new_empty(ROWS, dtype=out or dt), N=COLS, OP=op),
            lambda x: ref(x.float()), out or dt, ulps)

    def scan(label: str, widen: bool, ulps: int) -> AgreementCase:
        return AgreementCase(
            f"{label}[{name}]", lambda: [positive()],
            lambda x: _rows(_row_scan_kernel, x, out=torch.empty_like(x), N=COLS, WIDEN=widen),
            lambda x: r(torch.cumsum(x.float(), dim=1)), dt, ulps)

    # Adding up in 16 bits rounds at every step, in an order the GPU's layout decides: allow about a
    # rounding per level of a 64-long sum's tree (and of its carries), not bit equality.
    order_dependent = 8
    return [
        reduce("sum_f32", normal, lambda x: r(x.sum(dim=1)), ulps=1),
        reduce("sum", positive, lambda x: r(x.sum(dim=1)), ulps=order_dependent),
        reduce("max", normal, lambda x: x.amax(dim=1)),
        reduce("min", normal, lambda x: x.amin(dim=1)),
        reduce("argmax", normal, lambda x: x.argmax(dim=1).to(torch.int32), out=torch.int32),
        reduce("argmin", normal, lambda x: x.argmin(dim=1).to(torch.int32), out=torch.int32),
        scan("cumsum_f32", True, 1),
        scan("cumsum", False, order_dependent),
    ]


def _pattern_cases(name: str, dt: torch.dtype) -> list[AgreementCase]:
    r = lambda v: rounded(v, dt)  # noqa: E731
    shape = (ROWS, COLS)

    def rmsnorm_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x, w = x.float(), w.float()
        rstd = torch.rsqrt((x * x).sum(dim=1, keepdim=True) / COLS + 1e-6)
        return r(r(x * rstd) * w)

    def softmax_ref(x: torch.Tensor) -> torch.Tensor:
        z = r(x.float() - x.float().amax(dim=1, keepdim=True))
        num = torch.exp(z)
        return r(num / num.sum(dim=1, keepdim=True))

    return [
        AgreementCase(f"dot[{name}]",
                      lambda: [_normal(13, (DOT_M, DOT_K)).to(dt), _normal(14, (DOT_K, DOT_N)).to(dt)],
                      lambda a, b: _rows(_dot_kernel, a, b, out=a.new_empty(DOT_M, DOT_N), grid=1,
                                         M=DOT_M, N=DOT_N, K=DOT_K),
                      lambda a, b: r(a.float() @ b.float()), dt, 1),
        AgreementCase(f"atomic_add[{name}]", lambda: [_normal(20, shape).to(dt), _normal(21, shape).to(dt)],
                      lambda x, y: _rows(_atomic_add_kernel, x, out=y.clone(), N=COLS),
                      lambda x, y: r(x.float() + y.float()), dt),
        AgreementCase(f"swiglu[{name}]", lambda: [_normal(15, shape).to(dt), _normal(16, shape).to(dt)],
                      lambda a, b: _rows(_swiglu_kernel, a, b, out=torch.empty_like(a), N=COLS),
                      lambda a, b: r(r(torch.nn.functional.silu(a.float())) * b.float()), dt, 1),
        AgreementCase(f"rmsnorm[{name}]", lambda: [_normal(17, shape).to(dt), _normal(18, (COLS,)).to(dt)],
                      lambda x, w: _rows(_rmsnorm_kernel, x, w, out=torch.empty_like(x), N=COLS, EPS=1e-6),
                      rmsnorm_ref, dt, 1),
        AgreementCase(f"softmax[{name}]", lambda: [_normal(19, shape, 2.0).to(dt)],
                      lambda x: _rows(_softmax_kernel, x, out=torch.empty_like(x), N=COLS),
                      softmax_ref, dt, 1),
    ]


CASES: list[AgreementCase] = [
    case
    for name, dt in DTYPES.items()
    for make in (_elementwise_cases, _cast_cases, _reduction_cases, _pattern_cases)
    for case in make(name, dt)
]


# --- fixtures: raw bits as hex, so a comparison is of bits, never of printed decimals ---

def encode(output: torch.Tensor, inputs: list[torch.Tensor]) -> dict[str, Any]:
    output = output.detach().cpu().contiguous()
    return {"dtype": str(output.dtype).replace("torch.", ""), "shape": list(output.shape),
            "bits": output.view(torch.uint8).numpy().tobytes().hex(), "inputs_sha256": inputs_digest(inputs)}


def decode(entry: dict[str, Any]) -> torch.Tensor:
    raw = torch.frombuffer(bytearray(bytes.fromhex(entry["bits"])), dtype=torch.uint8)
    return raw.view(getattr(torch, entry["dtype"])).reshape(entry["shape"]).clone()


def inputs_digest(inputs: list[torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for t in inputs:
        digest.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def ulps_apart(got: torch.Tensor, expected: torch.Tensor) -> tuple[int, int | None]:
    """(largest distance in units in the last place of got's type, the flat index where it is).

    Floats compare by their position on the number line (+0 and -0 are one point, NaN matches
    NaN, NaN against a number is infinitely far); integers must be equal.
    """
    if got.shape != expected.shape:
        return 1 << 40, None
    if not got.dtype.is_floating_point:
        differ = (got.long() != expected.long()).view(-1)
        return (1 << 40, int(differ.nonzero()[0])) if differ.any() else (0, None)
    expected = expected.to(got.dtype)
    bits = {2: torch.int16, 4: torch.int32}[got.element_size()]
    ordered = [_ordered(t.contiguous().view(bits).long().view(-1), got.element_size() * 8) for t in (got, expected)]
    distance = (ordered[0] - ordered[1]).abs()
    nan_got, nan_expected = torch.isnan(got).view(-1), torch.isnan(expected).view(-1)
    distance = torch.where(nan_got & nan_expected, 0, distance)
    distance = torch.where(nan_got ^ nan_expected, 1 << 40, distance)
    worst = int(distance.argmax())
    return int(distance[worst]), (worst if distance[worst] else None)


def _ordered(signed_bits: torch.Tensor, width: int) -> torch.Tensor:
    magnitude = signed_bits & ((1 << (width - 1)) - 1)
    return torch.where(signed_bits < 0, -magnitude, magnitude)
