"""The four interpreter gaps of workbench/core/verify/interpreter/gaps.py, closed.

- Real kernels (tests/interpreter_gaps_kernels.py, in the styles of Liger, Unsloth, FlagGems and the
  tutorials) run under TRITON_INTERPRET=1 in one child process, after interpreter/fixes.apply(),
  and give their torch reference's values; the fused-softmax tutorial's style also verifies through
  `workbench verify`.
- libdevice numerics: `InterpreterBuilder.create_extern_elementwise` is called directly on
  TensorHandles, symbol family by family, against torch (float64, rounded once) on random inputs
  and edge values; rounding-mode variants and integer functions against exact Python arithmetic.
"""

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from workbench.core.verify.interpreter import fixes
from workbench.core.verify.interpreter import libdevice as interpreter_libdevice
from workbench.core.verify.interpreter.gaps import (
    InterpreterCannotRun,
    InterpreterDriver,
)

tl = pytest.importorskip("triton.language")
interpreter = pytest.importorskip("triton.runtime.interpreter")
fixes.apply()
Handle = interpreter.TensorHandle
builder = interpreter.InterpreterBuilder()
ROOT = Path(__file__).resolve().parents[1]
TL = {np.dtype(np.float32): tl.float32, np.dtype(np.float64): tl.float64, np.dtype(np.int32): tl.int32,
      np.dtype(np.uint32): tl.uint32, np.dtype(np.int64): tl.int64, np.dtype(np.uint64): tl.uint64}

CHILD = """
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: @triton.jit reads it
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests")]
from workbench.core.verify.interpreter.fixes import apply
apply()
import interpreter_gaps_kernels
print("RESULTS " + json.dumps(interpreter_gaps_kernels.run_checks()))
"""


@pytest.fixture(scope="module")
def kernels():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], capture_output=True, text=True, timeout=300, check=False,
                         env=env, cwd=ROOT)
    line = next((x for x in run.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert run.returncode == 0 and line is not None, run.stdout + run.stderr
    return json.loads(line[len("RESULTS "):])


def error_of(kernels, name):
    result = kernels[name]
    assert "error" in result, f"{name} raised:\n{result['traceback']}"
    return result["error"]


# --- real kernels under the interpreter ---

def test_float_arguments_are_float32_scalar_tensors(kernels):
    assert error_of(kernels, "rms_norm eps.to") < 1e-5  # eps.to(tl.float32)
    # A bf16 block times the float32 scalar computes in float32 (stored unrounded), `if limit > 0` works,
    # and so does a bool argument (`if negate:`).
    assert error_of(kernels, "bf16 times float scale, clamped") == 0
    assert error_of(kernels, "bf16 times float scale, no clamp, negated") == 0


def test_libdevice_runs_as_the_kernels_import_it(kernels):
    assert error_of(kernels, "geglu with imported tanh") < 1e-6  # `from ...libdevice import tanh`, in a helper
    assert error_of(kernels, "libdevice gelu_erf") < 1e-6  # `libdevice.erf` through the stub module
    assert error_of(kernels, "libdevice cuda_exp") < 1e-6  # tl.extra.cuda.libdevice.exp
    for name in ("pow", "round", "isnan", "fma_rn"):
        assert error_of(kernels, f"libdevice {name}") == 0, name


def test_a_libdevice_function_without_a_cpu_version_says_so_by_name(kernels):
    chain = kernels["libdevice jn"].get("raised")
    assert chain, kernels["libdevice jn"]
    assert {"type": "InterpreterCannotRun",
            "message": "the Triton interpreter cannot run `libdevice.jn`; this kernel is checkable on a GPU only"} in chain


def test_a_dtype_constexpr_answers_value_in_a_helper(kernels):
    for dtype in ("float32", "float16", "bfloat16"):
        assert error_of(kernels, f"cast to torch.{dtype}") == 0


def test_the_driver_answers_what_tutorials_ask_at_import(kernels):
    assert error_of(kernels, "driver") == 0
    assert error_of(kernels, "autotuned axpy") == 0  # the tuner's benchmarker: fixed times, the first config kept


def test_the_fused_softmax_tutorials_warmup_and_launch(kernels):
    # warmup -> registers and shared memory -> a persistent grid launched positionally, counted once
    assert error_of(kernels, "softmax tutorial") < 1e-6
    assert error_of(kernels, "softmax tutorial, 3 programs") < 1e-6  # each program loops over rows


SOFTMAX_PROJECT = '''

kernel_fn = softmax


def reference_fn(x):
    return torch.softmax(x, dim=-1)


def get_inputs(rows=37, cols=200):
    return [torch.randn(rows, cols, device="cuda")]


CASES = [dict(rows=37, cols=200), dict(rows=4, cols=1000)]
'''


@pytest.mark.slow
def test_a_helper_called_in_a_loop_is_right_and_patches_nothing_more(kernels):
    """The interpreter patched tl again on every call of a @triton.jit helper; once per launch is enough, and
    each launch still patches afresh and restores tl when it ends (interpreter/fixes.py)."""
    assert error_of(kernels, "helper in a loop") < 1e-5
    assert error_of(kernels, "patches a helper adds") == 0


def test_int32_arithmetic_wraps_as_on_the_gpu_with_no_overflow_checks_left_to_pay_for(kernels):
    """A hash's int32 products wrap on the GPU; the interpreter gives the same bits, and its overflow checks,
    whose assert it drops without debug, are off (interpreter/fixes.py)."""
    assert error_of(kernels, "int32 hash") == 0


def test_the_tutorial_style_softmax_verifies(cli, make_project):
    source = (ROOT / "tests" / "interpreter_gaps_kernels.py").read_text() + SOFTMAX_PROJECT
    code, out, _ = cli("verify", make_project(source), "--json")
    record = json.loads(out)["projects"][0]
    assert code == 0, [(c["label"], c["status"], c["messages"]) for c in record["cases"]]
    assert all(c["status"] == "passed" for c in record["cases"])


# --- the pieces, in this process ---

def test_dtype_value_and_the_driver_only_where_the_process_interprets(monkeypatch):
    from triton.runtime.driver import driver

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not hasattr(tl.float32, "value")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert tl.float32.value is tl.float32 and tl.pointer_type(tl.int8).value == tl.pointer_type(tl.int8)
    saved = driver._active
    driver._active = None
    try:
        active = driver.active
        assert isinstance(active, InterpreterDriver) and driver.active is active
        assert str(active.get_active_torch_device()) == "cpu"
        assert active.utils.get_device_properties(None)["multiprocessor_count"] == 132
        assert active.get_benchmarker()(lambda: 1 / 0, quantiles=(0.5, 0.2, 0.8)) == [1.0, 1.0, 1.0]
    finally:
        driver._active = saved


def call(symbol, *arrays, ret=None):
    arrays = [np.asarray(a) for a in arrays]
    handles = [Handle(a, TL[a.dtype]) for a in arrays]
    ret_type = TL[np.dtype(ret)] if ret is not None else handles[0].dtype
    out = builder.create_extern_elementwise("", "", symbol, handles, ret_type, True)
    assert out.dtype == ret_type
    return out.data


def test_unknown_symbols_raise_interpreter_cannot_run_never_none():
    with pytest.raises(InterpreterCannotRun) as info:
        call("__nv_jnf", np.array([2], np.int32), np.array([1.0], np.float32))
    assert str(info.value) == "the Triton interpreter cannot run `libdevice.jn`; this kernel is checkable on a GPU only"
    with pytest.raises(InterpreterCannotRun, match="`__nv_not_a_function`"):
        call("__nv_not_a_function", np.array([1.0], np.float32))


def test_every_cuda_libdevice_symbol_but_three_functions_is_implemented():
    import re

    import triton.language.extra.cuda.libdevice as cuda

    symbols = set(re.findall(r'"(__nv_\w+)"', Path(cuda.__file__).read_text()))
    assert symbols - set(interpreter_libdevice.implemented()) == {"__nv_jn", "__nv_jnf", "__nv_yn", "__nv_ynf",
                                                                   "__nv_rcp64h"}


# --- libdevice float math against torch ---

EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5, 1e-45, -1e-40, 1e-30,
         3.4e38, -3.4e38, 88.5, -103.0, 1e10, 0.999, -0.999]


def inputs(low=-10.0, high=10.0, seed=0, n=3000, edges=True):
    rng = np.random.RandomState(seed)
    values = np.concatenate([rng.uniform(low, high, n), rng.standard_normal(n // 3) * 0.01,
                             EDGES if edges else []])
    return values.astype(np.float32)


def ulps(a, b):
    """Units in the last place between float32 (or float64) arrays; NaN against NaN is 0."""
    a, b = np.asarray(a), np.asarray(b).astype(a.dtype)
    ints = np.int32 if a.dtype == np.float32 else np.int64
    magnitude = np.int64((1 << (a.dtype.itemsize * 8 - 1)) - 1)

    def ordered(x):
        i = x.view(ints).astype(np.int64)
        return np.where(i < 0, -(i & magnitude), i)  # -0 and +0 both 0
    with np.errstate(over="ignore"):  # float64 +-inf and NaN patterns far apart: any large number will do
        d = np.abs(ordered(a) - ordered(b)).astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return np.where(nan_a & nan_b, 0, np.where(nan_a | nan_b, np.inf, d))


def t64(x):
    return torch.from_numpy(np.asarray(x, dtype=np.float64))


def tgamma_reference(t):
    sign = torch.where(t > 0, torch.ones_like(t), torch.sign(torch.sin(math.pi * t)))
    return sign * torch.exp(torch.lgamma(t))


UNARY = {  # family: (torch reference on float64, input range)
    "exp": (torch.exp, (-100, 90)), "exp2": (torch.exp2, (-140, 130)), "exp10": (lambda t: 10 ** t, (-40, 40)),
    "expm1": (torch.expm1, (-5, 5)), "log": (torch.log, (0, 1e6)), "log2": (torch.log2, (0, 1e6)),
    "log10": (torch.log10, (0, 1e6)), "log1p": (torch.log1p, (-1, 10)), "sqrt": (torch.sqrt, (0, 1e6)),
    "rsqrt": (torch.rsqrt, (0, 1e6)), "cbrt": (lambda t: torch.sign(t) * t.abs() ** (1 / 3), (-1e6, 1e6)),
    "rcbrt": (lambda t: 1 / (torch.sign(t) * t.abs() ** (1 / 3)), (-1e6, 1e6)),
    "sin": (torch.sin, (-100, 100)), "cos": (torch.cos, (-100, 100)), "tan": (torch.tan, (-10, 10)),
    "asin": (torch.asin, (-1.2, 1.2)), "acos": (torch.acos, (-1.2, 1.2)), "atan": (torch.atan, (-50, 50)),
    "sinh": (torch.sinh, (-90, 90)), "cosh": (torch.cosh, (-90, 90)), "tanh": (torch.tanh, (-20, 20)),
    "asinh": (torch.asinh, (-1e4, 1e4)), "acosh": (torch.acosh, (0, 1e4)), "atanh": (torch.atanh, (-1.2, 1.2)),
    "sinpi": (lambda t: torch.sin(math.pi * t), (-4, 4)), "cospi": (lambda t: torch.cos(math.pi * t), (-4, 4)),
    "erf": (torch.special.erf, (-5, 5)), "erfc": (torch.special.erfc, (-5, 12)),
    "erfinv": (torch.special.erfinv, (-1.1, 1.1)), "erfcinv": (lambda t: torch.special.erfinv(1 - t), (0.01, 1.99)),
    "erfcx": (torch.special.erfcx, (-10, 50)), "normcdf": (torch.special.ndtr, (-10, 10)),
    "normcdfinv": (torch.special.ndtri, (0, 1)), "lgamma": (torch.lgamma, (-20, 50)),
    "tgamma": (tgamma_reference, (-20, 34)), "j0": (torch.special.bessel_j0, (-30, 30)),
    "j1": (torch.special.bessel_j1, (-30, 30)), "y0": (torch.special.bessel_y0, (0, 30)),
    "y1": (torch.special.bessel_y1, (0, 30)), "cyl_bessel_i0": (torch.special.modified_bessel_i0, (-50, 50)),
    "cyl_bessel_i1": (torch.special.modified_bessel_i1, (-50, 50)),
    "floor": (torch.floor, (-100, 100)), "ceil": (torch.ceil, (-100, 100)), "trunc": (torch.trunc, (-100, 100)),
    "round": (lambda t: torch.sign(t) * torch.floor(t.abs() + 0.5), (-10, 10)),
    "rint": (torch.round, (-10, 10)), "nearbyint": (torch.round, (-10, 10)), "fabs": (torch.abs, (-10, 10)),
    "logb": (lambda t: torch.floor(torch.log2(t.abs())), (-1e6, 1e6)),
}
FAST = {"fast_exp": "exp", "fast_exp10": "exp10", "fast_log": "log", "fast_log2": "log2", "fast_log10": "log10",
        "fast_sin": "sin", "fast_cos": "cos", "fast_tan": "tan"}


@pytest.mark.parametrize("family", [*UNARY, *FAST])
def test_float32_math_is_float64_rounded_once(family):
    reference, (low, high) = UNARY[FAST.get(family, family)]
    # edges outside the tested range (and the poles of tgamma) are checked by the edge-value test
    edges = family not in ("tgamma", "sinpi", "cospi", "erfcinv", "logb", "rcbrt", "fast_tan", "tan", "j0", "j1",
                           "y0", "y1", "cyl_bessel_i0", "cyl_bessel_i1")  # torch: NaN at +-inf
    x = inputs(low, high, seed=len(family), edges=edges)
    got = call(f"__nv_{family}f", x)
    with np.errstate(all="ignore"):
        expected = reference(t64(x)).float().numpy()
    worst = ulps(got, expected)
    allowed = 2 if family in ("lgamma", "tgamma", "erfcinv", "cbrt", "rcbrt", "exp10") else 1
    assert worst.max() <= allowed, f"{family}: {worst.max()} ulps at x={x[worst.argmax()]!r}: " \
                                   f"{got[worst.argmax()]!r} vs {expected[worst.argmax()]!r}"


@pytest.mark.parametrize("family", ["exp", "log", "sin", "tanh", "erf", "sqrt", "atan", "expm1", "log1p", "j0",
                                    "lgamma", "floor", "round"])
def test_float64_math(family):
    reference, (low, high) = UNARY[family]
    x = inputs(low, high, seed=7, edges=family != "j0").astype(np.float64)
    worst = ulps(call(f"__nv_{family}", x), reference(t64(x)).numpy())
    assert worst.max() <= (4 if family in ("lgamma", "j0") else 2), family


def test_edge_values_as_cuda_documents_them():
    f = np.float32
    inf, nan = math.inf, math.nan

    def one(family, *args, ret=None):
        return call(f"__nv_{family}f", *[np.array([a], f) for a in args], ret=ret)[0].item()

    assert one("round", 2.5) == 3.0 and one("round", -2.5) == -3.0 and one("rint", 2.5) == 2.0
    assert math.copysign(1, one("round", -0.3)) == -1  # -0.0
    assert one("sinpi", 1.0) == 0.0 and one("sinpi", 1e30) == 0.0 and one("cospi", 0.5) == 0.0
    assert one("cospi", 1.0) == -1.0 and math.copysign(1, one("sinpi", -0.0)) == -1
    assert one("tgamma", 0.0) == inf and one("tgamma", -0.0) == -inf and math.isnan(one("tgamma", -2.0))
    assert one("tgamma", 40.0) == inf and one("tgamma", 5.0) == 24.0 and one("lgamma", -3.0) == inf
    assert one("erfcinv", 0.0) == inf and one("erfcinv", 2.0) == -inf and one("erfinv", 1.0) == inf
    assert one("j0", inf) == 0.0 and one("y0", 0.0) == -inf and math.isnan(one("y0", -1.0))
    assert one("cyl_bessel_i0", -inf) == inf and one("cyl_bessel_i1", -inf) == -inf
    assert one("rsqrt", 0.0) == inf and one("rsqrt", -0.0) == -inf and math.isnan(one("rsqrt", -1.0))
    assert one("exp", 100.0) == inf and one("exp", -200.0) == 0.0 and one("log", 0.0) == -inf
    assert math.isnan(one("pow", -8.0, 1 / 3)) and one("pow", nan, 0.0) == 1.0 and one("pow", 1.0, nan) == 1.0
    assert one("fmin", nan, 2.0) == 2.0 and one("fmax", 1.0, nan) == 1.0 and math.isnan(one("fmin", nan, nan))
    assert one("fdim", 5.0, 3.0) == 2.0 and one("fdim", 3.0, 5.0) == 0.0 and math.isnan(one("fdim", nan, 1.0))
    assert one("logb", 0.0) == -inf and one("logb", 1e-45) == -149 and one("logb", -inf) == inf
    assert one("ilogb", 0.0, ret=np.int32) == -2**31 and one("ilogb", inf, ret=np.int32) == 2**31 - 1
    assert one("ilogb", 1e-45, ret=np.int32) == -149
    assert one("hypot", inf, nan) == inf and one("norm3d", 3.0, 4.0, 12.0) == 13.0
    assert one("rnorm4d", 0.0, 0.0, 0.0, 0.0) == inf and one("norm4d", 1e30, 1e30, 1e30, 1e30) == 2 * f(1e30)
    assert call("__nv_saturatef", np.array([nan, -2, 0.5, 7], f)).tolist() == [0.0, 0.0, 0.5, 1.0]
    assert call("__nv_fast_fdividef", np.array([1.0], f), np.array([3.0], f))[0] == f(1) / f(3)


BINARY = {  # family: (torch reference on float64, first range, second range)
    "pow": (torch.pow, (0, 10), (-20, 20)), "atan2": (torch.atan2, (-10, 10), (-10, 10)),
    "hypot": (torch.hypot, (-1e20, 1e20), (-1e20, 1e20)), "fmod": (torch.fmod, (-100, 100), (-7, 7)),
    "copysign": (torch.copysign, (-10, 10), (-10, 10)), "fmin": (torch.fmin, (-10, 10), (-10, 10)),
    "fmax": (torch.fmax, (-10, 10), (-10, 10)),
    "fdim": (lambda a, b: torch.clamp(a - b, min=0), (-10, 10), (-10, 10)),
    "remainder": (lambda a, b: torch.tensor([math.remainder(x, y) if y and math.isfinite(x) else math.nan
                                             for x, y in zip(a.tolist(), b.tolist())], dtype=torch.float64),
                  (-100, 100), (-7, 7)),
    "rhypot": (lambda a, b: 1 / torch.hypot(a, b), (-1e3, 1e3), (-1e3, 1e3)),
}


@pytest.mark.parametrize("family", BINARY)
def test_float32_binary_math(family):
    reference, first, second = BINARY[family]
    a, b = inputs(*first, seed=1), inputs(*second, seed=2)
    b = np.concatenate([b[: len(a) - len(EDGES)], np.array(EDGES[::-1], np.float32)])  # the edges against each other
    with np.errstate(all="ignore"):
        expected = reference(t64(a), t64(b)).float().numpy()
    worst = ulps(call(f"__nv_{family}f", a, b), expected)
    assert worst.max() <= 1, f"{family}: {worst.max()} ulps at {a[worst.argmax()]!r}, {b[worst.argmax()]!r}"


def test_nextafter_ldexp_powi_and_classification():
    a, b = inputs(seed=3), inputs(seed=4)
    assert ulps(call("__nv_nextafterf", a, b), torch.nextafter(torch.from_numpy(a), torch.from_numpy(b)).numpy()).max() == 0
    n = np.random.RandomState(5).randint(-160, 160, a.size).astype(np.int32)
    assert ulps(call("__nv_ldexpf", a, n), torch.ldexp(t64(a), torch.from_numpy(n)).float().numpy()).max() == 0
    assert ulps(call("__nv_scalbnf", a, n), call("__nv_ldexpf", a, n)).max() == 0
    k = np.random.RandomState(6).randint(-8, 9, a.size).astype(np.int32)
    with np.errstate(all="ignore"):
        assert ulps(call("__nv_powif", a, k), torch.pow(t64(a), t64(k)).float().numpy()).max() <= 1
    x = np.array(EDGES + [-math.nan], np.float32)
    for family, test in (("isnanf", np.isnan), ("isinff", np.isinf), ("signbitf", np.signbit), ("finitef", np.isfinite)):
        assert call(f"__nv_{family}", x, ret=np.int32).tolist() == test(x).astype(int).tolist(), family
    assert call("__nv_isnand", x.astype(np.float64), ret=np.int32).tolist() == np.isnan(x).astype(int).tolist()


def exact(value):
    return Fraction(float(value))


def nearest_float32(q):
    """The float32 nearest a Fraction, ties to even."""
    if abs(q) > Fraction(2**128 - 2**103):
        return np.float32(math.copysign(math.inf, q))
    n = np.float32(float(q))
    candidates = [np.nextafter(n, np.float32(-math.inf)), n, np.nextafter(n, np.float32(math.inf))]
    finite = [c for c in candidates if math.isfinite(c)]
    return min(finite, key=lambda c: (abs(exact(c) - q), int(np.array(c).view(np.uint32)) & 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_rounds_once(dtype):
    rng = np.random.RandomState(8)
    a, b = rng.standard_normal(400).astype(dtype), rng.standard_normal(400).astype(dtype)
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(400) * 1e-6)).astype(dtype)  # cancellation
    got = call("__nv_fmaf" if dtype == np.float32 else "__nv_fma", a, b, c)
    for x, y, z, r in zip(a, b, c, got):
        q = exact(x) * exact(y) + exact(z)
        expected = nearest_float32(q) if dtype == np.float32 else float(q)
        assert r == expected, (x, y, z, r, expected)
    edge = call("__nv_fmaf", np.array([1e30, math.inf, 0.0], np.float32), np.array([1e30, 0.0, 5.0], np.float32),
                np.array([-math.inf, 1.0, -0.0], np.float32))
    assert edge[0] == -math.inf and math.isnan(edge[1]) and edge[2] == 0.0


# --- rounding-mode variants: to nearest, and the exact value bracketed toward the mode ---

EXACT_OPS = {"add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b), "mul": (2, lambda a, b: a * b),
             "div": (2, lambda a, b: a / b), "rcp": (1, lambda a: 1 / a), "fma": (3, lambda a, b, c: a * b + c)}


def rounding_symbol(op, mode, dtype):
    if op == "fma":
        return f"__nv_fmaf_{mode}" if dtype == np.float32 else f"__nv_fma_{mode}"
    return f"__nv_{'f' if dtype == np.float32 else 'd'}{op}_{mode}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", [*EXACT_OPS, "sqrt"])
def test_rounding_modes_bracket_the_exact_result(op, dtype):
    rng = np.random.RandomState(9)
    arity, fn = EXACT_OPS.get(op, (1, None))
    args = [(rng.standard_normal(150) * 10.0 ** rng.randint(-3, 4, 150)).astype(dtype) for _ in range(arity)]
    if op == "sqrt":
        args = [np.abs(args[0])]
    results = {mode: call(rounding_symbol(op, mode, dtype), *args) for mode in ("rn", "rz", "rd", "ru")}
    for i in range(150):
        xs = [a[i] for a in args]
        rd, ru, rz, rn = (results[m][i] for m in ("rd", "ru", "rz", "rn"))
        if op == "sqrt":
            assert exact(rd) ** 2 <= exact(xs[0]) <= exact(ru) ** 2, (xs, rd, ru)
            assert rn == np.sqrt(xs[0])
        else:
            q = fn(*map(exact, xs))
            assert exact(rd) <= q <= exact(ru), (op, xs, rd, ru)
            expected = nearest_float32(q) if dtype == np.float32 else float(q)
            assert rn == expected, (op, xs, rn, expected)
        assert rd == ru or np.nextafter(rd, dtype(math.inf)) == ru
        assert rz == (rd if rd >= 0 else ru)


def test_conversions_round_as_named_and_saturate():
    x = np.array([2.5, -2.5, 3.7, -3.7, 0.5, -0.5, 1e10, -1e10, math.nan, math.inf, -0.0], np.float32)
    expected = {"rn": [2, -2, 4, -4, 0, 0], "rz": [2, -2, 3, -3, 0, 0], "rd": [2, -3, 3, -4, 0, -1],
                "ru": [3, -2, 4, -3, 1, 0]}
    for mode, values in expected.items():
        got = call(f"__nv_float2int_{mode}", x, ret=np.int32).tolist()
        assert got == values + [2**31 - 1, -2**31, 0, 2**31 - 1, 0], mode
        assert call(f"__nv_double2ll_{mode}", x.astype(np.float64), ret=np.int64).tolist()[:6] == values
    assert call("__nv_float2uint_rn", np.array([-5.0, 3e9, 1e10], np.float32), ret=np.int32).view(np.uint32).tolist() \
        == [0, 3000000000, 2**32 - 1]
    assert call("__nv_float2ll_rz", np.array([1e30, -1e30], np.float32), ret=np.int64).tolist() == [2**63 - 1, -2**63]
    assert call("__nv_float2ull_ru", np.array([1e30, -1.0], np.float32), ret=np.int64).view(np.uint64).tolist() \
        == [2**64 - 1, 0]
    assert call("__nv_llrintf", np.array([2.5, 3.5, -2.5], np.float32), ret=np.int64).tolist() == [2, 4, -2]
    assert call("__nv_llroundf", np.array([2.5, 3.5, -2.5], np.float32), ret=np.int64).tolist() == [3, 4, -3]
    # to float: 2^24 + 1 lies between two float32s
    ints = np.array([2**24 + 1, -(2**24 + 1), 7], np.int32)
    assert call("__nv_int2float_rd", ints, ret=np.float32).tolist() == [2**24, -(2**24 + 2), 7]
    assert call("__nv_int2float_ru", ints, ret=np.float32).tolist() == [2**24 + 2, -(2**24), 7]
    assert call("__nv_int2float_rz", ints, ret=np.float32).tolist() == [2**24, -(2**24), 7]
    big = np.array([2**62 + 1, -(2**53 + 1)], np.int64)
    assert call("__nv_ll2float_ru", big, ret=np.float32).tolist() == [2**62 + 2**39, -(2**53)]
    assert call("__nv_ll2double_rd", big, ret=np.float64).tolist() == [2**62, -(2**53 + 2)]
    assert call("__nv_ull2double_rn", np.array([2**64 - 1], np.uint64), ret=np.float64).tolist() == [2.0**64]
    d = np.array([1 / 3, -1 / 3, 1e300, -1e300, 1e-300], np.float64)
    rd, ru = call("__nv_double2float_rd", d, ret=np.float32), call("__nv_double2float_ru", d, ret=np.float32)
    assert (rd.astype(np.float64) <= d).all() and (ru.astype(np.float64) >= d).all()
    assert rd[2] == np.finfo(np.float32).max and ru[3] == -np.finfo(np.float32).max and ru[4] > 0 == rd[4]
    bits = np.array([1.5, -2.25], np.float32)
    assert (call("__nv_int_as_float", call("__nv_float_as_int", bits, ret=np.int32), ret=np.float32) == bits).all()
    hi, lo = call("__nv_double2hiint", d, ret=np.int32), call("__nv_double2loint", d, ret=np.int32)
    assert (call("__nv_hiloint2double", hi, lo, ret=np.float64) == d).all()


# --- integers, against Python's integers ---

def test_integer_functions_bit_for_bit():
    rng = np.random.RandomState(10)
    a32 = np.concatenate([rng.randint(-2**31, 2**31, 500, dtype=np.int64), [0, -1, 1, -2**31, 2**31 - 1]]).astype(np.int32)
    b32 = rng.randint(-2**31, 2**31, a32.size, dtype=np.int64).astype(np.int32)
    a64 = np.concatenate([rng.randint(-2**63, 2**63, 500, dtype=np.int64), [0, -1, 1, -2**63, 2**63 - 1]])
    b64 = rng.randint(-2**63, 2**63, a64.size, dtype=np.int64)

    def unsigned(v, bits):
        return int(v) % (1 << bits)

    def signed(v, bits):
        v %= 1 << bits
        return v - (1 << bits) if v >> (bits - 1) else v

    def check(symbol, args, reference, ret, bits=32):
        got = call(symbol, *args, ret=ret).tolist()
        want = [signed(reference(*map(int, row)), bits) if np.dtype(ret).kind == "i" else reference(*map(int, row)) % (1 << bits)
                for row in zip(*args)]
        assert got == want, symbol

    check("__nv_clz", [a32], lambda v: 32 - unsigned(v, 32).bit_length(), np.int32)
    check("__nv_clzll", [a64], lambda v: 64 - unsigned(v, 64).bit_length(), np.int32)
    check("__nv_popc", [a32], lambda v: unsigned(v, 32).bit_count(), np.int32)
    check("__nv_popcll", [a64], lambda v: unsigned(v, 64).bit_count(), np.int32)
    check("__nv_ffs", [a32], lambda v: (unsigned(v, 32) & -unsigned(v, 32)).bit_length(), np.int32)
    check("__nv_ffsll", [a64], lambda v: (unsigned(v, 64) & -unsigned(v, 64)).bit_length(), np.int32)
    check("__nv_brev", [a32], lambda v: int(f"{unsigned(v, 32):032b}"[::-1], 2), np.int32)
    check("__nv_brevll", [a64], lambda v: int(f"{unsigned(v, 64):064b}"[::-1], 2), np.int64, 64)
    check("__nv_mulhi", [a32, b32], lambda x, y: (x * y) >> 32, np.int32)
    check("__nv_umulhi", [a32.view(np.uint32), b32.view(np.uint32)], lambda x, y: (x * y) >> 32, np.uint32)
    check("__nv_mul64hi", [a64, b64], lambda x, y: (x * y) >> 64, np.int64, 64)
    check("__nv_umul64hi", [a64.view(np.uint64), b64.view(np.uint64)], lambda x, y: (x * y) >> 64, np.uint64, 64)
    check("__nv_mul24", [a32, b32], lambda x, y: signed(x, 24) * signed(y, 24), np.int32)
    check("__nv_umul24", [a32.view(np.uint32), b32.view(np.uint32)], lambda x, y: (x % 2**24) * (y % 2**24), np.uint32)
    check("__nv_hadd", [a32, b32], lambda x, y: (x + y) >> 1, np.int32)
    check("__nv_rhadd", [a32, b32], lambda x, y: (x + y + 1) >> 1, np.int32)
    check("__nv_uhadd", [a32.view(np.uint32), b32.view(np.uint32)], lambda x, y: (x + y) >> 1, np.uint32)
    check("__nv_sad", [a32 >> 2, b32 >> 2, np.abs(a32 >> 3).view(np.uint32)], lambda x, y, z: abs(x - y) + z, np.int32)
    check("__nv_abs", [a32], abs, np.int32)
    check("__nv_llabs", [a64], abs, np.int64, 64)
    check("__nv_byte_perm", [a32, b32, (a32 ^ b32) & 0x7777],
          lambda x, y, s: sum(((unsigned(y, 32) << 32 | unsigned(x, 32)) >> (8 * ((s >> (4 * i)) & 7)) & 0xFF) << (8 * i)
                              for i in range(4)), np.int32)
    check("__nv_min", [a32, b32], min, np.int32)
    check("__nv_ullmax", [a64.view(np.uint64), b64.view(np.uint64)], max, np.uint64, 64)
