"""Each 16-bit float fix of workbench/core/verify/interpreter/fixes.py, one at a time, against a float32
computation rounded the GPU's way (torch's `.to(torch.bfloat16)` rounds to nearest even).

The patched InterpreterBuilder methods are called directly on TensorHandles: no kernel, no child
process. The last test verifies a published-style SwiGLU kernel through `workbench verify`.
"""

import json
from fractions import Fraction

import numpy as np
import pytest
import torch

from workbench.core.verify.interpreter import fixes

tl = pytest.importorskip("triton.language")
interpreter = pytest.importorskip("triton.runtime.interpreter")
fixes.apply()
Handle = interpreter.TensorHandle
builder = interpreter.InterpreterBuilder()


def bf16(values):
    """A bf16 TensorHandle of float values (rounded by torch)."""
    bits = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return Handle(bits, tl.bfloat16)


def values_of(handle):
    """A TensorHandle's values as a float32 torch tensor (bf16 bits decoded)."""
    if handle.dtype.scalar == tl.bfloat16:
        return torch.from_numpy(handle.data.astype(np.uint16).view(np.int16).copy()).view(torch.bfloat16).float()
    return torch.from_numpy(np.asarray(handle.data).astype(np.float32))


def rne(values, dtype=torch.bfloat16):
    return torch.as_tensor(values, dtype=torch.float32).to(dtype).float()


def random_bf16(seed, n=4096, scale=8.0):
    return rne(np.random.RandomState(seed).standard_normal(n).astype(np.float32) * scale).tolist()


def same(a, b):
    """Equal values, NaN where NaN, +0 and -0 told apart."""
    a, b = torch.as_tensor(a).float(), torch.as_tensor(b).float()
    both_nan = torch.isnan(a) & torch.isnan(b)
    return bool(((a == b) & (torch.signbit(a) == torch.signbit(b)) | both_nan).all())


def test_every_fix_is_applied_once():
    # every fix found its target in this Triton (8 + interpreter/gaps + interpreter/python_syntax + two for speed)
    assert len(interpreter._workbench_fixes) == 19
    assert all(f.__module__ == fixes.__name__ for f in (  # each is the workbench's wrapper
        interpreter.InterpreterBuilder.create_dot, interpreter.InterpreterBuilder.cast_impl,
        interpreter.InterpreterBuilder.binary_op, interpreter.InterpreterBuilder.create_fma,
        interpreter.InterpreterBuilder.create_atomic_rmw, interpreter.ReduceOps.sum))
    assert fixes.apply() == []  # applied at import above: a second call patches nothing twice


# --- rounding ---

def test_f32_to_bf16_rounds_every_kind_of_float32_as_torch_does():
    rng = np.random.RandomState(0)
    bits = np.concatenate([rng.randint(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32),
                           np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
                                     0x00000001, 0x007FFFFF, 0x80000000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF],
                                    dtype=np.uint32)])
    values = bits.view(np.float32)
    ours = torch.from_numpy(fixes.f32_to_bf16(values).view(np.int16)).view(torch.bfloat16).float()
    assert same(ours, torch.from_numpy(values).to(torch.bfloat16).float())


def test_f32_to_bf16_toward_zero_truncates():
    values = np.array([1 + 2**-8 + 2**-20, -(1 + 2**-7 - 2**-23), 3.4028235e38, float("inf"), 1e-45], np.float32)
    expected = (values.view(np.uint32) >> 16).astype(np.uint16)
    assert (fixes.f32_to_bf16(values, toward_zero=True) == expected).all()


def test_bf16_to_f32_is_exact_for_every_pattern():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    expected = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16).float()
    assert same(torch.from_numpy(fixes.bf16_to_f32(bits)), expected)


def test_round_to_odd_avoids_the_false_tie_of_rounding_twice():
    # 1 + 2^-8 + 2^-30 is above the midpoint of 1 and 1 + 2^-7: float32 first would make it the
    # midpoint itself, which rounds to even (1.0).
    just_above = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-8], np.float64)
    got = fixes.bf16_to_f32(fixes.f32_to_bf16(fixes.f64_to_f32_round_odd(just_above)))
    assert got.tolist() == [1 + 2**-7, -(1 + 2**-7), 1.0]


# --- casts ---

def test_float32_to_bf16_cast_rounds_to_nearest_even():
    values = [1 + 2**-8, 1 + 3 * 2**-8, 1.00390625 + 2**-20, -2.0009765625, 3.4028235e38, 1e-40, float("nan")]
    got = builder.create_fp_trunc(Handle(np.array(values, np.float32), tl.float32), tl.bfloat16)
    assert got.dtype == tl.bfloat16 and same(values_of(got), rne(values))


def test_rtz_cast_truncates_for_bf16_and_fp16():
    rtz = interpreter._ir.ROUNDING_MODE.RTZ
    values = np.array([1 + 2**-8 + 2**-20, -1.99, 70000.0, 1e-6], np.float32)
    got = builder.create_fp_to_fp(Handle(values, tl.float32), tl.bfloat16, rtz)
    assert (got.data == (values.view(np.uint32) >> 16)).all()
    half = builder.create_fp_to_fp(Handle(values, tl.float32), tl.float16, rtz)
    assert half.data.tolist() == [1 + 2**-8, -(1 + 1013 / 1024), 65504.0, 16 * 2**-24]
    assert all(abs(h) <= abs(v) for h, v in zip(half.data.astype(np.float64), values.astype(np.float64)))


def test_float64_and_integers_to_bf16_and_back():
    f64 = builder.create_fp_trunc(Handle(np.array([1 + 2**-8 + 2**-40, -3.0e38 * 1.2], np.float64), tl.float64),
                                  tl.bfloat16)
    assert values_of(f64).tolist() == [1 + 2**-7, float("-inf")]
    ints = np.array([257, -258, 1 << 20 | 3, 7], np.int32)
    from_int = builder.create_si_to_fp(Handle(ints, tl.int32), tl.bfloat16)
    assert same(values_of(from_int), rne(ints.astype(np.float32)))
    to_int = builder.create_fp_to_si(bf16([-2.75, 3.5, 1000.0]), tl.int32)
    assert to_int.data.tolist() == [-2, 3, 1000]
    wide = builder.create_fp_ext(bf16([-0.0, 1.5, float("inf")]), tl.float64)
    assert wide.data.dtype == np.float64 and same(wide.data, [-0.0, 1.5, float("inf")])


def test_bf16_fp16_conversions_round_once():
    rtne = interpreter._ir.ROUNDING_MODE.RTNE
    x = random_bf16(1, scale=1000.0)
    to_half = builder.create_fp_to_fp(bf16(x), tl.float16, rtne)
    assert to_half.data.dtype == np.float16 and same(to_half.data, rne(x, torch.float16))
    halves = np.array([1 + 2**-9, 1 + 3 * 2**-9, 65504.0], np.float16)
    back = builder.create_fp_to_fp(Handle(halves, tl.float16), tl.bfloat16, rtne)
    assert same(values_of(back), rne(halves.astype(np.float32)))


def test_bf16_constants():
    assert values_of(builder.get_bf16(0.1)).tolist() == [rne([0.1]).item()]


# --- arithmetic ---

@pytest.mark.parametrize("method, op", [
    ("create_fadd", torch.add), ("create_fsub", torch.sub), ("create_fmul", torch.mul),
    ("create_fdiv", torch.div), ("create_frem", torch.fmod),
    ("create_maximumf", torch.maximum), ("create_minimumf", torch.minimum),
])
def test_binary_float_ops_compute_in_float32_and_round_once(method, op):
    x, y = random_bf16(2), random_bf16(3)
    got = getattr(builder, method)(bf16(x), bf16(y))
    assert got.dtype == tl.bfloat16 and same(values_of(got), rne(op(torch.tensor(x), torch.tensor(y))))


@pytest.mark.parametrize("method, op", [
    ("create_fcmpOLT", torch.lt), ("create_fcmpOGE", torch.ge), ("create_fcmpOEQ", torch.eq),
    ("create_fcmpUNE", torch.ne),
])
def test_comparisons_compare_values_not_bits(method, op):
    x = [-1.0, -2.0, 0.0, -0.0, 3.0, float("nan")] + random_bf16(4)
    y = [1.0, -1.0, -0.0, 0.0, 3.0, 1.0] + random_bf16(5)
    got = getattr(builder, method)(bf16(x), bf16(y))
    assert got.data.dtype == np.bool_
    assert got.data.tolist() == op(torch.tensor(x), torch.tensor(y)).tolist()


def test_negation_and_clamp():
    x = [1.5, -0.0, 0.0, float("inf"), -3.25]
    minus = builder.create_fsub(bf16([0.0] * len(x)), bf16(x))  # how Triton 3.6 negates
    assert same(values_of(minus), [-1.5, 0.0, 0.0, float("-inf"), 3.25])
    if hasattr(builder, "create_fneg"):
        assert same(values_of(builder.create_fneg(bf16(x))), [-1.5, 0.0, -0.0, float("-inf"), 3.25])
    clipped = builder.ternary_op(bf16([-5.0, 0.25, 9.0]), bf16([-1.0] * 3), bf16([2.0] * 3), np.clip)
    assert values_of(clipped).tolist() == [-1.0, 0.25, 2.0]


def test_where_still_picks_bits():
    picked = builder.create_select(Handle(np.array([True, False]), tl.int1), bf16([-1.5, 2.0]), bf16([7.0, -0.0]))
    assert same(values_of(picked), [-1.5, -0.0])


def test_fma_rounds_once_from_the_exact_result():
    # bf16: 1.5 * 1.3203125 is the midpoint 507/256; -2^-80 puts the exact result just below it.
    got = builder.create_fma(bf16([1.5]), bf16([1.3203125]), bf16([-(2.0**-80)]))
    assert values_of(got).tolist() == [1.9765625]
    # fp16: 1.5 * (1 + 2^-10) is a midpoint; rounding the product first lands on the wrong side.
    half = builder.create_fma(*(Handle(np.array([v], np.float16), tl.float16) for v in (1.5, 1 + 2**-10, -(2.0**-24))))
    assert half.data.dtype == np.float16 and half.data.tolist() == [1.5009765625]
    x, y, z = random_bf16(6), random_bf16(7), random_bf16(8)
    exact = [Fraction(a) * Fraction(b) + Fraction(c) for a, b, c in zip(x, y, z)]
    expected = [rne([float(e)]).item() for e in exact]  # float64 holds these exactly
    assert values_of(builder.create_fma(bf16(x), bf16(y), bf16(z))).tolist() == expected


def test_bf16_dot_multiplies_values():
    rng = np.random.RandomState(9)
    a, b = rne(rng.standard_normal((16, 32))), rne(rng.standard_normal((32, 16)))
    acc = Handle(np.zeros((16, 16), np.float32), tl.float32)
    got = builder.create_dot(bf16(a.tolist()), bf16(b.tolist()), acc, None, None)
    assert torch.allclose(torch.from_numpy(got.data), a @ b, rtol=1e-5, atol=1e-5)


def test_bf16_atomic_add_adds_lane_after_lane_and_returns_the_old_values():
    slots = torch.tensor([1.0, -2.0], dtype=torch.bfloat16)
    adds = random_bf16(13, n=64)
    lanes = np.arange(64) % 2
    pointers = slots.data_ptr() + 2 * lanes.astype(np.uint64)
    pointer = Handle(pointers, tl.pointer_type(tl.bfloat16))
    add = interpreter._ir.ATOMIC_OP.FADD
    old = builder.create_atomic_rmw(add, pointer, bf16(adds), Handle(np.ones(64, bool), tl.int1), None, None)
    expected, seen = [1.0, -2.0], []
    for lane, value in zip(lanes, adds):
        seen.append(expected[lane])
        expected[lane] = rne([expected[lane] + value]).item()
    assert slots.float().tolist() == expected and values_of(old).tolist() == seen


# --- reductions ---

def tensor(handle, shape):
    return tl.core.tensor(handle, tl.block_type(handle.dtype.scalar, list(shape)))


def reduce(values, combine, axis=1, dtype=torch.bfloat16, keep_dims=False, with_index=False):
    x = rne(values, dtype)
    handle = bf16(x.tolist()) if dtype == torch.bfloat16 else Handle(x.numpy().astype(np.float16), tl.float16)
    operands = tensor(handle, x.shape)
    if with_index:  # how tl.argmax calls it: values and their indices
        index = np.broadcast_to(np.arange(x.shape[-1], dtype=np.int32), x.shape).copy()
        operands = (operands, tensor(Handle(index, tl.int32), x.shape))
    return interpreter.ReduceOps(axis, combine, keep_dims).apply(operands)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_sums_accumulate_in_16_bits_in_a_tree(dtype):
    x = np.random.RandomState(10).uniform(0.5, 1.5, (4, 64)).astype(np.float32)
    got = values_of(reduce(x, tl.standard._sum_combine, dtype=dtype).handle)
    rounded = rne(x, dtype).numpy()
    expected = fixes.bf16_to_f32(fixes.f32_to_bf16(fixes.tree_sum(rounded, "bfloat16"))) \
        if dtype == torch.bfloat16 else fixes.tree_sum(rounded, "float16")
    assert got.tolist() == expected.tolist()
    exact = rne(rne(x, dtype).sum(dim=1), dtype)
    ulp = {torch.bfloat16: 2**-7, torch.float16: 2**-10}[dtype] * 2.0 ** torch.floor(torch.log2(exact))
    assert ((got - exact).abs() <= 4 * ulp).all()  # 16-bit partial sums: a few ulps, never garbage


def test_sum_over_every_axis_keeps_dims_when_asked():
    x = rne(np.random.RandomState(11).uniform(0.5, 1.5, (4, 8)))
    whole = reduce(x, tl.standard._sum_combine, axis=None, keep_dims=True)
    assert whole.handle.data.shape == (1, 1) and abs(values_of(whole.handle).item() - x.sum().item()) < 0.5


def test_argmax_and_argmin_of_bf16_compare_values():
    x = [[-3.0, -1.0, 2.0, -7.5], [0.5, -0.25, -8.0, 4.0]]
    value, index = reduce(x, tl.standard._argmax_combine_tie_break_left, with_index=True)
    assert values_of(value.handle).tolist() == [2.0, 4.0] and index.handle.data.tolist() == [2, 3]
    value, index = reduce(x, tl.standard._argmin_combine_tie_break_left, with_index=True)
    assert values_of(value.handle).tolist() == [-7.5, -8.0] and index.handle.data.tolist() == [3, 2]


def test_16_bit_cumsum_rounds_each_partial_sum():
    x = rne(np.random.RandomState(12).uniform(0.5, 1.5, (2, 64)))
    scan = interpreter.ScanOps(1, tl.standard._sum_combine, False)
    got = values_of(scan.apply(tensor(bf16(x.tolist()), x.shape)).handle)
    assert got.tolist() == fixes.tree_scan(x.numpy(), "bfloat16").tolist()
    assert ((got - x.cumsum(dim=1)).abs() / x.cumsum(dim=1) < 2**-6).all()


# --- through the CLI ---

# A published-style fused SwiGLU forward kernel: one program per row, silu in float32, the product
# in the inputs' own type. On a GPU every case verifies; the interpreter used to multiply bf16 bits.
SWIGLU = '''
import torch
import triton
import triton.language as tl


@triton.jit
def silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def _swiglu_forward_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    # sigmoid needs float32
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = silu(a_row).cast(b_row.dtype) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)


def swiglu_forward(a, b):
    n_cols = a.shape[-1]
    a2, b2 = a.reshape(-1, n_cols), b.reshape(-1, n_cols)
    c = torch.empty_like(a2)
    block = triton.next_power_of_2(n_cols)
    _swiglu_forward_kernel[(a2.shape[0],)](a2, b2, c, c.stride(-2), n_cols=n_cols, BLOCK_SIZE=block,
                                          num_warps=4 if block < 2048 else 8)
    return c.view(*a.shape)


kernel_fn = swiglu_forward


def reference_fn(a, b):
    return torch.nn.functional.silu(a) * b


def get_inputs(rows=4, cols=1000, dtype=torch.float32):
    return [torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(rows, cols, device="cuda", dtype=dtype)]


CASES = [dict(rows=rows, cols=cols, dtype=dtype) for rows, cols in ((1, 127), (4, 1000), (3, 4097))
         for dtype in (torch.float32, torch.float16, torch.bfloat16)]
'''


@pytest.mark.slow
def test_published_swiglu_kernel_verifies_in_every_dtype(cli, make_project):
    code, out, err = cli("verify", make_project(SWIGLU), "--json")
    record = json.loads(out)["projects"][0]
    assert all(c["status"] == "passed" for c in record["cases"])  # the generated edge shapes too
    cases = [c for c in record["cases"] if not c["config"] and not c["generated"]]
    assert code == 0, [(c["label"], c["status"], c["messages"], c["notes"]) for c in cases]
    assert len(cases) == 9 and all(c["status"] == "passed" for c in cases)
    assert [c["dtype"] for c in cases].count("bfloat16") == 3
    assert not any("raw bits" in note for c in cases for note in c["notes"])


def test_approximate_sqrt_flushes_subnormals_as_the_gpu_does():
    import numpy as np

    from workbench.core.verify.interpreter.fixes import flush_subnormals

    tiny = np.finfo(np.float32).tiny
    values = np.array([tiny / 4, -tiny / 4, tiny, 2.0, 0.0], dtype=np.float32)
    flushed = flush_subnormals(values)
    assert flushed.tolist() == [0.0, 0.0, float(tiny), 2.0, 0.0]
    assert np.signbit(flushed[1])  # -subnormal -> -0.0
