"""Error statistics and pattern hints, on plain tensors."""

import torch

from workbench.core.project.config import DEFAULT_TOLERANCES, ConfigError, ProjectConfig, Tolerance
from workbench.core.verify.compare import (
    compare,
    describe_pattern,
    error_map,
    tensors_equal_bitwise,
)

FP32 = DEFAULT_TOLERANCES["float32"]


def test_identical_passes():
    x = torch.randn(100, 50)
    c = compare(x.clone(), x, FP32)
    assert c.passed and c.bad_count == 0 and c.max_abs_err == 0


def test_boundary_columns_pattern():
    ref = torch.randn(64, 100)
    out = ref.clone()
    out[:, 97:] += 1
    c = compare(out, ref, FP32)
    assert not c.passed and c.bad_count == 64 * 3
    assert "last 3 columns" in c.pattern
    assert c.worst.index[1] >= 97


def test_last_rows_and_one_row_patterns():
    bad = torch.zeros(10, 8, dtype=torch.bool)
    bad[7:] = True
    assert "last 3 rows" in describe_pattern(bad)
    bad = torch.zeros(10, 8, dtype=torch.bool)
    bad[4, 2:5] = True
    assert "row 4" in describe_pattern(bad)


def test_flat_tail_is_the_last_block():
    bad = torch.zeros(4097, dtype=torch.bool)
    bad[4096:] = True
    assert "last 1 elements, from index 4096" in describe_pattern(bad)
    assert "last block" in describe_pattern(bad)


def test_everywhere_pattern():
    assert "everywhere" in describe_pattern(torch.ones(10, 10, dtype=torch.bool))


def test_nan_positions_must_match():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare(ref.clone(), ref, FP32).passed
    out = torch.tensor([1.0, 2.0, float("nan")])
    c = compare(out, ref, FP32)
    assert c.nan_mismatch == 2 and not c.passed


def test_unwritten_elements_are_counted():
    ref = torch.randn(10)
    out = ref.clone()
    out[8:] = float("nan")
    mask = torch.isnan(out)
    c = compare(out, ref, FP32, unwritten_mask=mask)
    assert c.unwritten == 2 and "2 of 10 elements never written" in c.messages[0]


def test_relative_norm_catches_small_systematic_error():
    ref = torch.rand(1000, dtype=torch.float64) * 1e-4
    c = compare(ref * 1.01, ref, FP32)
    assert not c.passed and any("relative error norm" in m for m in c.messages)


def test_shape_mismatch():
    c = compare(torch.zeros(3), torch.zeros(4), FP32)
    assert not c.passed and "shape" in c.messages[0]


def test_error_map_keeps_single_errors_visible():
    bad = torch.zeros(1000, 1000, dtype=torch.bool)
    bad[999, 999] = True
    grid = error_map(bad)
    assert grid[-1][-1] > 0 and sum(map(sum, grid)) > 0


def test_bitwise_equality_treats_nan_as_equal():
    a = torch.tensor([float("nan"), 1.0])
    assert bool(tensors_equal_bitwise(a, a.clone()).all())


def test_config_tolerance_overrides_and_errors():
    cfg = ProjectConfig.from_dict({"tolerance": {"bfloat16": {"rtol": 0.05}}, "verify": {"fp32_precision": "tf32"}})
    assert cfg.verify.tolerance_for("bfloat16").rtol == 0.05
    assert cfg.verify.tolerance_for("bfloat16").atol == DEFAULT_TOLERANCES["bfloat16"].atol
    assert cfg.verify.tolerance_for("float32") == DEFAULT_TOLERANCES["tf32"]
    for bad in ({"verify": {"nope": 1}}, {"tolerance": {"float7": {}}}, {"verify": {"inplace": "yes"}},
                {"tolerance": {"float8_e4m3fnuz": {"rtol": 0.1}}},  # no default to start from: every bound said
                {"tolerance": {"complex64": {"rtol": 0.1, "atol": 0.1, "rel_norm": 0.1}}},  # compared as reals: no
                {"verify": {"fp32_precision": "fast"}}, {"verify": {"timeout_s": -1}}):
        try:
            ProjectConfig.from_dict(bad, "w.toml")
        except ConfigError as exc:
            assert "w.toml" in str(exc)
        else:
            raise AssertionError(f"accepted {bad}")


def test_live_loop_bench_budget():
    from workbench.core.project.config import BenchConfig

    live = BenchConfig().for_live_loop()
    assert live.rep_ms == 100 and live.warmup_ms == 25 and live.compare_torch_compile is False
    asked = ProjectConfig.from_dict({"bench": {"live_compare_torch_compile": True, "live_rep_ms": 300}}).bench
    assert asked.for_live_loop().compare_torch_compile is True and asked.for_live_loop().rep_ms == 300
    off = ProjectConfig.from_dict({"bench": {"compare_torch_compile": False, "live_compare_torch_compile": True}})
    assert off.bench.for_live_loop().compare_torch_compile is False  # never more than `bench` does


def test_unravel_matches_torch_for_every_element():
    import torch

    from workbench.core.verify.compare import unravel

    for shape in [(5,), (3, 4), (2, 3, 4), (1, 1), (7, 1, 2)]:
        for flat in range(torch.Size(shape).numel()):
            assert unravel(flat, shape) == [int(i) for i in torch.unravel_index(torch.tensor(flat), shape)]
    assert unravel(0, ()) == []


def test_a_one_element_output_gets_no_guess_about_boundaries():
    """A 1x1 output whose single element is never written (a mask one short) is a boundary bug: calling it
    "the computation itself, not a boundary" sent the reader the wrong way."""
    import torch

    from workbench.core.verify.compare import describe_pattern

    assert describe_pattern(torch.ones(1, 1, dtype=torch.bool)) == "1 of 1 element"
    assert "the computation itself" in describe_pattern(torch.ones(8, 8, dtype=torch.bool))


def judge_one(out, ref, config=None):
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.handoff import CaseData
    from workbench.core.verify.judge import Judge

    return Judge(config or VerifyConfig()).judge(CaseData(case_index=0, label="x", names=[""], first=[out],
                                                          reference=[ref]))


def test_float8_outputs_are_held_to_their_own_tolerance():
    ref = torch.randn(4096, dtype=torch.float64)
    for dtype, ulp in ((torch.float8_e4m3fn, 2.0 ** -3), (torch.float8_e5m2, 2.0 ** -2)):
        rounded = judge_one(ref.to(dtype), ref)  # correctly rounded: within half an ulp everywhere
        assert rounded.status == "passed", (dtype, rounded.messages)
        assert rounded.rtol == ulp
        # two ulps off on a tenth of the elements: more than rounding, so it fails
        off = ref.clone()
        off[::10] *= 1 + 2 * ulp
        wrong = judge_one(off.to(dtype), ref)
        assert wrong.status == "failed" and wrong.checks["values"] == "failed", dtype
        # float32's tolerance would have failed even the correctly rounded output: never the silent fallback
        assert judge_one(ref.to(dtype).float(), ref).status == "failed"


def test_a_configured_float8_tolerance_is_used():
    cfg = ProjectConfig.from_dict({"tolerance": {"float8_e4m3fn": {"rtol": 0.5}}})
    assert cfg.verify.tolerance_for("float8_e4m3fn").rtol == 0.5
    assert cfg.verify.tolerance_for("float8_e4m3fn").atol == DEFAULT_TOLERANCES["float8_e4m3fn"].atol


def test_integer_outputs_are_exact():
    ref = torch.arange(200_000, dtype=torch.int64)  # indices past 1e5: float32's rtol would let +-1 through
    assert judge_one(ref.clone(), ref).status == "passed"
    off = ref.clone()
    off[-1] += 1
    result = judge_one(off, ref)
    assert result.status == "failed" and result.bad_count == 1


def test_an_output_dtype_with_no_tolerance_is_an_explicit_failure_until_configured():
    from workbench.core.project.config import VerifyConfig

    ref = torch.randn(64, dtype=torch.complex128)
    result = judge_one(ref.to(torch.complex64), ref)
    assert result.status == "failed" and result.checks["tolerance"] == "failed"
    assert any("no tolerance for complex64 outputs" in m and "[tolerance.complex64]" in m for m in result.messages)
    cfg = ProjectConfig.from_dict({"tolerance": {"float8_e4m3fnuz": {"rtol": 0.2, "atol": 0.01, "rel_norm": 0.1}}})
    assert cfg.verify.tolerance_for("float8_e4m3fnuz").rtol == 0.2
    assert VerifyConfig().tolerance_for("float8_e4m3fnuz") is None


def test_counts_agree_with_their_nouns():
    """Issue 44: "1 of 1 elements", "1 elements are NaN"."""
    from workbench.core.text import plural

    assert (plural(1, "element"), plural(0, "element"), plural(3, "compiled kernel")) == \
        ("1 element", "0 elements", "3 compiled kernels")
    one = compare(torch.tensor([float("nan")]), torch.tensor([1.0], dtype=torch.float64), Tolerance(1e-5, 1e-5, 1e-5))
    assert "1 element is NaN/Inf where the reference is not" in one.messages[0]


def test_the_worst_element_says_whether_the_kernel_wrote_nan_inf_or_nothing_there():
    """JSON carries no NaN: the worst element's kernel value travels as None, and kernel_special says which it
    was, so a report no longer says "unwritten/NaN" of an element the kernel wrote as NaN."""
    import json

    from workbench.core.events import CaseResult, event_from_json
    from workbench.core.text import fmt_value

    ref, tol = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), Tolerance(1e-5, 1e-5, 1e-5)
    nan = compare(torch.tensor([1.0, float("nan"), 3.0]), ref, tol).worst
    inf = compare(torch.tensor([1.0, 2.0, float("-inf")]), ref, tol).worst
    unwritten = compare(torch.tensor([1.0, 2.0, 3.0]), ref, tol, torch.tensor([False, True, False])).worst
    wrong = compare(torch.tensor([1.0, 2.5, 3.0]), ref, tol).worst
    assert (nan.index, nan.kernel, nan.kernel_special) == ([1], None, "nan")
    assert fmt_value(nan.kernel, nan.kernel_special) == "NaN"
    assert (inf.kernel_special, fmt_value(inf.kernel, inf.kernel_special)) == ("-inf", "-Inf")
    assert unwritten.kernel_special == "unwritten"
    assert fmt_value(unwritten.kernel, unwritten.kernel_special) == "never written"
    assert (wrong.kernel, wrong.kernel_special, fmt_value(wrong.kernel, wrong.kernel_special)) == (2.5, "", "2.5")
    # through an event's JSON and back; a record written before the field reads as before
    record = CaseResult(case_index=0, label="n=3", status="failed", worst=nan).to_dict()
    assert event_from_json(json.dumps(record)).worst.kernel_special == "nan"
    older = event_from_json(json.dumps({**record, "worst": {"index": [1], "kernel": None, "reference": 2.0}})).worst
    assert fmt_value(older.kernel, older.kernel_special) == "unwritten/NaN"
