"""One error model for every comparison (verify/error_model.py): an output may be off the float64 truth by the
larger of its dtype's floor and `error_factor` times torch's own error in the inputs' dtype; integer outputs
match either reference; outputs are matched by name. The kernels are in tests/kernels_numerics.py."""

import kernels_numerics as num
import pytest
import torch
from run_helpers import failing, verify_json

from workbench.core.project.config import DEFAULT_TOLERANCES, ConfigError, ProjectConfig, Tolerance, VerifyConfig
from workbench.core.verify.compare import compare
from workbench.core.verify.error_model import torch_error
from workbench.core.verify.handoff import CaseData, ExtraRun
from workbench.core.verify.judge import Judge
from workbench.core.verify.structure import paired_by_name

BF16 = DEFAULT_TOLERANCES["bfloat16"]
FP32 = DEFAULT_TOLERANCES["float32"]


def rounded_like_torch(ref64: torch.Tensor, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """A result that rounds as accurately as torch but differently: each element one way or the other."""
    low = ref64.to(dtype)
    generator = torch.Generator().manual_seed(seed)
    step = torch.nextafter(low.double(), torch.where(torch.rand(ref64.shape, generator=generator) < 0.5,
                                                     torch.full_like(ref64, float("inf")),
                                                     torch.full_like(ref64, -float("inf")))).to(dtype)
    return torch.where((low.double() - ref64).abs() < 1e-300, low, step)


# -- the model itself --------------------------------------------------------------------------------------

def test_a_kernel_rounding_as_accurately_as_torch_but_elsewhere_passes_per_output_not_per_element():
    torch.manual_seed(0)
    ref = torch.randn(4096, dtype=torch.float64) * 3
    native = ref.float() + torch.randn(4096) * 3e-5  # torch's own float32 error, element by element
    kernel = (ref.float() + torch.randn(4096) * 3e-5).float()  # as large, at other elements
    tight = Tolerance(rtol=1e-7, atol=1e-7, rel_norm=1e-7)
    c = compare(kernel, ref, tight, native=native)
    assert c.passed, c.messages
    assert c.multiple is not None and 0.5 < c.multiple < 2.0
    assert c.within_torch > 1000  # past the floor, inside 2x torch's own error
    # one element truly wrong (100x torch's error) still fails, named with the budget it broke
    wrong = kernel.clone()
    wrong[17] += 1e-2
    w = compare(wrong, ref, tight, native=native)
    assert w.bad_count == 1 and w.worst.index == [17]
    assert "past 2x torch's own float32 error" in w.messages[0] and "outside rtol=1e-07 atol=1e-07 (the float32 floor)" in w.messages[0]


def test_the_floor_holds_where_torch_is_exact_and_the_factor_is_the_projects():
    ref = torch.linspace(1, 2, 100).double()  # float32 values: torch's float32 result can be exact
    exact = ref.float()
    kernel = (ref * (1 + 5e-6)).float()  # within float32's floor (1e-5)
    assert compare(kernel, ref, FP32, native=exact).passed
    off = (ref * (1 + 1e-4)).float()
    assert not compare(off, ref, FP32, native=exact).passed
    assert "torch's own float32 result is exact there" in compare(off, ref, FP32, native=exact).messages[0]
    native = (ref * (1 + 3e-5)).float()  # torch 3e-5 off: 2x allows 6e-5, not 1e-4
    assert not compare(off, ref, FP32, native=native).passed
    assert compare(off, ref, FP32, native=native, factor=4.0).passed


def test_elements_near_zero_are_scaled_by_the_outputs_median_magnitude():
    # a gradient that is a difference of near-equal terms: some elements nearly 0, torch's error absolute
    torch.manual_seed(1)
    ref = torch.randn(1000, dtype=torch.float64)
    ref[::10] = 1e-9
    native = ref + torch.randn(1000, dtype=torch.float64) * 1e-3
    kernel = ref + torch.randn(1000, dtype=torch.float64) * 1e-3
    assert compare(kernel.to(torch.bfloat16), ref, Tolerance(1e-4, 1e-4, 1e-3), native=native).passed


def test_an_output_that_is_zero_in_exact_arithmetic_takes_torchs_noise_as_its_budget():
    ref = torch.zeros(2, dtype=torch.float64)  # a one-column LayerNorm's dx: 0 in exact arithmetic
    native = torch.tensor([3e-5, -2e-5], dtype=torch.float64)  # torch's own float32 rounding noise
    kernel = torch.tensor([-4e-5, 1e-5])
    own = torch_error(ref, native)
    assert own is not None and own.absolute_max == pytest.approx(3e-5)
    assert compare(kernel, ref, FP32, native=native).passed
    assert not compare(torch.tensor([1e-3, 0.0]), ref, FP32, native=native).passed


def test_the_norm_bound_follows_torchs_own_error_norm():
    torch.manual_seed(2)
    ref = torch.rand(4096, dtype=torch.float64) + 1
    bias = 4e-3  # an error everywhere, inside the floor element by element, past the norm's
    tol = Tolerance(rtol=1e-2, atol=1e-2, rel_norm=1e-3)
    sloppy = ref * (1 + bias * torch.sign(torch.randn(4096, dtype=torch.float64)))
    assert not compare(sloppy, ref, tol, native=ref.to(torch.bfloat16)).passed
    assert compare(sloppy, ref, tol, native=sloppy.clone()).passed  # torch itself that far off: allowed


def test_an_overflow_torch_makes_in_the_same_dtype_is_no_kernel_error():
    ref = torch.tensor([1.0, 7e4, 2.0], dtype=torch.float64)  # past float16's largest finite value
    native = ref.to(torch.float16)  # inf where torch computes in float16 too
    kernel = torch.tensor([1.0, float("inf"), 2.0], dtype=torch.float16)
    assert compare(kernel, ref, DEFAULT_TOLERANCES["float16"], native=native).passed
    assert compare(kernel, ref, DEFAULT_TOLERANCES["float16"]).nan_mismatch == 1  # no native result: a mismatch
    wrong = torch.tensor([float("inf"), float("inf"), 2.0], dtype=torch.float16)
    assert compare(wrong, ref, DEFAULT_TOLERANCES["float16"], native=native).nan_mismatch == 1


def _weight_grad(x, dy, stats_dtype=None, rstd_scale=1.0):
    """dW = sum over rows of dy * (x - mean) * rstd, in float64, with mean and rstd rounded to `stats_dtype` as a
    kernel that saves its statistics in the inputs' dtype does (the forward's saved mean and rstd)."""
    x64, dy64 = x.double(), dy.double()
    mean = x64.mean(1, keepdim=True)
    rstd = (x64.var(1, unbiased=False, keepdim=True) + 1e-5).rsqrt() * rstd_scale
    if stats_dtype is not None:
        mean, rstd = mean.to(stats_dtype).double(), rstd.to(stats_dtype).double()
    return (dy64 * (x64 - mean) * rstd).sum(0)


def test_rounding_in_the_middle_is_budgeted_by_the_inputs_rounded_once_more():
    """A LayerNorm weight gradient from float16 saved statistics: torch keeps them in float32 and rounds once, so
    its own error is the final rounding alone; the kernel's is the statistics' rounding summed over the rows,
    past twice torch's on some draws (an H200 run of the fixture: 3.5x on one element of 300). That is what one
    more float16 rounding of the inputs costs this output, so it passes on every draw; a 2% error in rstd (a
    wrong eps, a float16 accumulation) fails on every draw."""
    from workbench.core.verify.error_model import rounded_once_more

    tol = DEFAULT_TOLERANCES["float16"]
    past_torch_alone = 0
    for seed in range(32):
        torch.manual_seed(seed)
        x = torch.randn(33, 300).half()
        dy = (torch.randint(1, 16, (33, 300)) / 8.0 * (torch.randint(0, 2, (33, 300)) * 2 - 1)).half()
        r = _weight_grad(x, dy)
        native = r.half()  # torch: float32 statistics, one rounding at the end
        p = _weight_grad(*rounded_once_more([x, dy]))
        kernel = _weight_grad(x, dy, torch.float16).half()
        past_torch_alone += not compare(kernel, r, tol, native=native).passed
        cmp = compare(kernel, r, tol, native=native, rounded=p)
        assert cmp.passed, (seed, cmp.messages)
        wrong = compare(_weight_grad(x, dy, torch.float16, rstd_scale=1.02).half(), r, tol, native=native, rounded=p)
        assert not wrong.passed, seed
        assert "the error one more float16 rounding of the inputs and intermediates makes" in wrong.messages[0]
    assert past_torch_alone  # the draws where torch's own error alone is too small a budget


def test_inputs_rounded_once_more_move_each_float_by_at_most_its_unit_roundoff():
    from workbench.core.verify.error_model import rounded_once_more

    x, idx, eps = torch.randn(64, 64).bfloat16(), torch.arange(4), 1e-6
    moved = rounded_once_more([x, idx, eps])
    assert moved[0].dtype == torch.float64 and moved[1] is idx and moved[2] == eps
    relative = ((moved[0] - x.double()) / x.double()).abs()
    assert float(relative.max()) <= 2.0 ** -8 and float(relative.mean()) > 2.0 ** -11  # up to u, not a no-op
    assert torch.equal(moved[0], rounded_once_more([x])[0])  # the same on every run


def test_each_op_that_rounds_is_moved_by_at_most_float32s_unit_and_the_exact_ones_not_at_all():
    """RoundEachOp: the results of arithmetic (forward, backward, in place) move by up to float32's unit roundoff,
    differently on another draw and the same on the same one; a max, a where, an index, a copy stay exact, so a
    mask built on them does not flip."""
    from workbench.core.verify.error_model import INTERMEDIATE_UNIT, RoundEachOp

    def run(draw):
        x = torch.linspace(0.5, 2.0, 96, dtype=torch.float64).reshape(8, 12).requires_grad_()
        with RoundEachOp(draw):
            y = (x.exp() * 3).sum(-1)
            top = x.max(-1, keepdim=True).values
            hit = torch.where(x == top, 1.0, 0.0)
            picked = x[:, 3].clone()
            z = x.detach().clone()
            z.mul_(5.0)
            grad, = torch.autograd.grad(y.sum(), [x])
        return x.detach(), y, hit, picked, z, grad

    x, y, hit, picked, z, grad = run(0)
    exact = (x.exp() * 3).sum(-1)
    for moved, truth in ((y, exact), (z, 5 * x), (grad, 3 * x.exp())):
        relative = ((moved.detach() - truth) / truth).abs()
        assert 0 < float(relative.max()) <= 4 * INTERMEDIATE_UNIT  # a few roundings deep at most
    assert float(hit.sum()) == 8 and torch.equal(picked, x[:, 3])
    assert torch.equal(y, run(0)[1]) and not torch.equal(y, run(1)[1])


def _layer_norm_written_out(x, w):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + 1e-5) * w


def _layer_norm_fused(x, w):  # one aten op forward and backward: RoundEachOp runs its decomposition
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=1e-5) * w


@pytest.mark.parametrize("layer_norm", [_layer_norm_written_out, _layer_norm_fused])
def test_a_difference_exact_in_torchs_order_is_budgeted_by_its_terms_rounding(layer_norm):
    """A one-column LayerNorm's dx is 0 (to float64's rounding) and so is torch's float32 result; a kernel off by
    one rounding of the terms (times rstd) passes on the intermediates' rounding, and one off by 1e-3 does not;
    the same with the reference written out and with F.layer_norm, whose backward is one aten op."""
    from workbench.core.verify.error_model import RoundEachOp

    def dx(x, w, dy):
        x = x.detach().requires_grad_()
        return torch.autograd.grad(layer_norm(x, w), [x], dy)[0]

    generator = torch.Generator().manual_seed(4)
    x, w, dy = (torch.randn(64, 1, generator=generator, dtype=torch.float64) for _ in range(3))
    r, native = dx(x, w, dy), dx(x.float(), w.float(), dy.float())
    assert float(r.abs().max()) < 1e-12 and float(native.abs().max()) < 1e-12
    with RoundEachOp():
        p = dx(x, w, dy)
    kernel = (w * dy - (w * dy).float().double()) * 1e-5 ** -0.5  # the product's rounding, times rstd
    tol = DEFAULT_TOLERANCES["float32"]
    assert float(kernel.abs().max()) > tol.atol and not compare(kernel.float(), r, tol, native=native).passed
    assert compare(kernel.float(), r, tol, native=native, rounded=p).passed
    assert not compare(torch.full((64, 1), 1e-3), r, tol, native=native, rounded=p).passed


def test_a_few_elements_that_jump_under_the_perturbation_set_no_budget():
    """An output with steps (a fake quantiser's float output) jumps a whole step at the few elements the
    perturbation carries across one: those are not the dtype's error, and a kernel a step off stays failed."""
    torch.manual_seed(0)
    r = torch.randn(4096, dtype=torch.float64).mul(8).round().div(8)
    p = r.clone()
    p[:5] += 0.125  # five elements carried across a rounding step
    wrong = r.clone()
    wrong[100:300] += 0.125  # a quantiser that truncates where it should round
    cmp = compare(wrong.float(), r, DEFAULT_TOLERANCES["float32"], native=r.float(), rounded=p)
    assert not cmp.passed and cmp.bad_count == 200


def test_integer_outputs_match_either_reference_and_say_which_they_differ_from():
    ref = torch.tensor([2, 3, 4, 5], dtype=torch.int8)  # the float64 reference's rounding of .5 ties
    native = torch.tensor([2, 2, 4, 4], dtype=torch.int8)  # at the inputs' precision the ties went to even
    assert compare(native.clone(), ref, DEFAULT_TOLERANCES["int8"], native=native).passed
    wrong = torch.tensor([2, 3, 4, 6], dtype=torch.int8)
    c = compare(wrong, ref, DEFAULT_TOLERANCES["int8"], native=native)
    assert c.bad_count == 1 and "both the float64 reference and reference_fn at the inputs' own precision" in \
        c.messages[0]
    assert "integer output" in compare(wrong, ref, DEFAULT_TOLERANCES["int8"]).messages[0]


def test_error_factor_is_a_project_setting_at_least_one():
    assert VerifyConfig().error_factor == 2.0
    assert ProjectConfig.from_dict({"verify": {"error_factor": 3}}).verify.error_factor == 3.0
    with pytest.raises(ConfigError, match="at least 1"):
        ProjectConfig.from_dict({"verify": {"error_factor": 0.5}})


# -- every comparison: the extra runs judge by the same model ------------------------------------------------

def test_the_repeat_calls_and_forced_configs_are_held_to_the_same_budget():
    torch.manual_seed(3)
    ref = torch.randn(2048, dtype=torch.float64)
    native = rounded_like_torch(ref, torch.bfloat16, seed=1)
    kernel = rounded_like_torch(ref, torch.bfloat16, seed=2)  # an ulp away where torch was not
    tight = VerifyConfig(tolerances={**DEFAULT_TOLERANCES, "bfloat16": Tolerance(1e-6, 1e-6, 1e-6)})
    run = ExtraRun("repeat_fresh_inputs", outputs=[kernel], names=[""], reference=[ref], reference_names=[""],
                   native=[native])
    data = CaseData(case_index=0, label="c", first=[kernel], names=[""], reference=[ref], reference_names=[""],
                    native=[native], extra_runs=[run], launches=1)
    result = Judge(tight).judge(data)
    assert result.status == "passed", result.messages
    assert result.checks["repeat_fresh_inputs"] == "passed"
    entry = result.compared[0]
    assert entry["torch_dtype"] == "bfloat16" and entry["factor"] == 2.0 and entry["multiple"] <= 2.0
    forced = CaseData(case_index=0, label="c", config="k: BLOCK=64", first=[kernel], names=[""], reference=[ref],
                      reference_names=[""], native=[native], launches=1)
    assert Judge(tight).judge(forced).status == "passed"


# -- outputs matched by name ---------------------------------------------------------------------------------

def test_outputs_pair_by_name_and_a_structure_mismatch_says_what_differs():
    assert paired_by_name(["['gate']", "['y']"], ["['y']", "['gate']"], 2, 2) == ([1, 0], [])
    order, problems = paired_by_name(["['out']"], ["['y']"], 1, 1)
    assert order == [None] and "missing 'y'" in problems[0] and "not in the reference: 'out'" in problems[0]
    _, problems = paired_by_name(["[0]"], [""], 1, 1)
    assert "kernel_fn returned 1 tensors ([0]), reference_fn a plain tensor" in problems[0]


@pytest.mark.slow
def test_a_dict_in_another_key_order_verifies(cli, make_project):
    code, rec = verify_json(cli, make_project(num.DICT_OUTPUTS, name="dict_order"))
    assert code == 0, failing(rec)
    assert {e["output"] for e in rec["cases"][0]["compared"]} == {"y", "gate"}


@pytest.mark.parametrize("source, words", [(num.DICT_WRONG_KEY, "missing 'y'"),
                                           (num.TUPLE_FOR_TENSOR, "reference_fn a plain tensor")])
def test_a_result_of_another_structure_fails_saying_so(cli, make_project, source, words):
    code, rec = verify_json(cli, make_project(source, name="structure"), "--case", "0")
    assert code == 1
    case = failing(rec)[0]
    assert case["checks"]["structure"] == "failed" and any(words in m for m in case["messages"])


# -- correct kernels written as libraries write them, and broken ones ------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["HF_ADD_RMSNORM", "LAYERNORM_16BIT_STATS", "INT8_QUANT"])
def test_correct_kernels_at_torchs_own_error_verify(cli, make_project, name):
    code, rec = verify_json(cli, make_project(getattr(num, name), name=name.lower(), toml=num.WORKBENCH_TOML.get(name)))
    assert code == 0, [(c["label"], c["config"], c["messages"]) for c in failing(rec)] + rec["problems"]
    judged = [c for c in rec["cases"] if c["status"] == "passed" and not c["config"]]
    assert judged and all(c["compared"] for c in judged)
    if name == "LAYERNORM_16BIT_STATS":  # the gradients are named among the outputs compared
        assert {"output", "grad x", "grad weight", "grad bias"} <= {e["output"] for e in judged[0]["compared"]}


@pytest.mark.slow
@pytest.mark.parametrize("name, words", [("RMSNORM_16BIT_PARTIALS", "past 2x the error one more bfloat16 rounding"),
                                         ("INT8_QUANT_TRUNCATES", "both the float64 reference and reference_fn")])
def test_broken_kernels_past_their_dtypes_error_fail(cli, make_project, name, words):
    code, rec = verify_json(cli, make_project(getattr(num, name), name=name.lower()), "--case", "0")
    assert code == 1
    assert any(words in m for c in failing(rec) for m in c["messages"]), failing(rec)


def test_what_was_compared_is_said_once_per_output_at_its_worst():
    from workbench.core.verify.compared import describe_compared

    def entry(output, multiple, dtype="bfloat16", rtol=1e-2):
        return {"output": output, "dtype": dtype, "passed": True, "max_abs_err": 1e-3, "torch_error": 1e-3,
                "torch_dtype": dtype, "multiple": multiple, "factor": 2.0, "rtol": rtol, "atol": rtol}

    rounded = {**entry("grad w", 0.9, "float16", 1e-3), "source": "inputs"}
    text = describe_compared([entry("y", 1.2), entry("y", 1.6), entry("grad x", None, "float32", 1e-5),
                              entry("idx", None, "int64", 0.0), rounded])
    assert text.startswith("compared: y 1.6x torch's own bfloat16 error, grad x within the float32 floor, "
                           "idx exact (int64), grad w 0.9x a float16 rounding of the inputs and intermediates")
    assert ("budget: 2x the inputs' dtype's own error, torch's or one more rounding of the inputs' and "
            "intermediates', never below the dtype's floor") in text
    assert describe_compared([]) == ""
    nan = {**entry("y", None, "float32", 1e-5), "passed": False}  # failed on NaN: no multiple to give
    assert describe_compared([nan]).startswith("compared: y failed (see above)")


# -- value stress (verify/value_stress.py) --------------------------------------------------------------------

def test_stress_cases_take_the_smallest_big_enough_case_of_each_dtype():
    from workbench.core.project.contract import Case
    from workbench.core.verify.value_stress import STRESSES, stress_cases

    cases = [Case(0, {"rows": 1, "cols": 1}), Case(1, {"rows": 8, "cols": 300}), Case(2, {"rows": 64, "cols": 4096}),
             Case(3, {"rows": 4, "cols": 1000, "dtype": "float16"}), Case(4, {"rows": 9, "cols": 9}, purpose="bench")]
    made = stress_cases(cases, VerifyConfig(), first_index=5)
    assert [(c.index, c.params["rows"], c.stress) for c in made] == \
        [(5 + i, rows, s) for i, (rows, s) in enumerate((r, s) for r in (8, 4) for s in STRESSES)]
    assert made[0].label == "rows=8 cols=300 [values x64] (generated)" and all(c.generated for c in made)
    assert stress_cases(cases, VerifyConfig(value_stress=False), 5) == []
    assert stress_cases(cases, VerifyConfig(generated_cases=False), 5) == []


def test_stress_changes_float_tensors_only_and_keeps_grad_leaves():
    from workbench.core.verify.value_stress import stressed

    x = torch.randn(4, 256, requires_grad=True)
    idx, w = torch.arange(4), torch.randn(256, dtype=torch.bfloat16)
    out = stressed([x, idx, w, 1e-5], "offset", ["x", "idx", "w", "eps"], True)
    assert torch.equal(out[0], x.detach() + 1000) and out[0].requires_grad and out[0].is_leaf
    assert out[1] is idx and out[3] == 1e-5
    assert torch.equal(out[2], w + 16)  # bfloat16 keeps a few bits below its offset
    only_w = stressed([x, idx, w, 1e-5], "values x64", ["x", "idx", "w", "eps"], ["w"])
    assert only_w[0] is x and torch.equal(only_w[2], w * 64)
    outliers = stressed([x], "outliers", ["x"], True)[0]
    assert int((outliers != x.detach()).sum()) == 2  # one in 512


def test_value_stress_is_a_setting():
    assert ProjectConfig.from_dict({"verify": {"value_stress": ["x"]}}).verify.value_stress == ["x"]
    with pytest.raises(ConfigError, match="list of input names"):
        ProjectConfig.from_dict({"verify": {"value_stress": 3}})


@pytest.mark.slow
@pytest.mark.parametrize("name, stress, words", [("SOFTMAX_NO_MAX", "[values x64]", "an overflow: an exp"),
                                                 ("LAYERNORM_ONE_PASS_VARIANCE", "[offset]", "E[x^2] - E[x]^2")])
def test_numerical_bugs_randn_hides_fail_under_value_stress(cli, make_project, name, stress, words):
    code, rec = verify_json(cli, make_project(getattr(num, name), name=name.lower()))
    assert code == 1
    bad = failing(rec)
    assert bad and all("[" in c["label"] for c in bad)  # every failure is a stressed case: randn passes
    hit = [c for c in bad if stress in c["label"]]
    assert hit and any(words in n for n in hit[0]["notes"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SOFTMAX_STABLE", "LAYERNORM_TWO_PASS"])
def test_correct_kernels_verify_under_value_stress(cli, make_project, name):
    code, rec = verify_json(cli, make_project(getattr(num, name), name=name.lower()))
    assert code == 0, failing(rec)
    assert sum("[" in c["label"] for c in rec["cases"]) == 8  # four stresses, two dtypes


def test_the_median_and_the_percentile_are_torchs_own_whichever_device_picks_them():
    """kth_smallest selects on the CPU and sorts on a GPU (kthvalue/median hand a whole tensor to one thread
    block there): both the k-th smallest, the median torch's lower one."""
    import torch

    from workbench.core.verify.error_model import kth_smallest, typical_magnitude

    for n in (1, 2, 7, 100, 1001):
        values = torch.randn(n, dtype=torch.float64)
        for k in {1, max(1, int(0.99 * n)), (n + 1) // 2, n}:
            assert kth_smallest(values, k) == float(torch.kthvalue(values, k).values) \
                == float(torch.sort(values).values[k - 1])
        assert typical_magnitude(values) == float(values.abs().median())
    with_inf = torch.tensor([1.0, -3.0, float("inf"), 2.0, float("nan")], dtype=torch.float64)
    assert typical_magnitude(with_inf) == 2.0  # the finite |r|: 1, 2, 3


@pytest.mark.gpu
def test_on_a_gpu_the_sorted_selection_agrees_with_the_cpus():
    import torch

    from workbench.core.verify.error_model import kth_smallest

    values = torch.randn(3_000_001, dtype=torch.float64)
    for k in (1, 1_500_001, 2_970_000, 3_000_001):
        assert kth_smallest(values.cuda(), k) == kth_smallest(values, k)


def test_where_torch_overflows_everywhere_one_more_rounding_of_the_inputs_still_budgets_the_output():
    """reference_fn in float16 overflowed at every element (an intermediate past 65504: torch itself is no measure
    here), but the float64 reference on the inputs rounded once more still says how sensitive the output is."""
    ref = torch.linspace(1, 2, 1000, dtype=torch.float64)
    native = torch.full((1000,), float("inf"), dtype=torch.float16)
    rounded = ref * (1 + 3e-3 * torch.sin(torch.arange(1000, dtype=torch.float64)))  # the op moves 0.3% per rounding
    err = torch_error(ref, native, rounded=rounded)
    assert err is not None and err.source == "inputs" and float(err.per_element.max()) > 1e-3
    assert torch_error(ref, native) is None  # nothing to measure the dtype's error by: the floor alone
    kernel = (ref * (1 + 4e-3)).to(torch.float16)  # 0.4% off: past the float16 floor, within 2x what rounding costs
    assert not compare(kernel, ref, DEFAULT_TOLERANCES["float16"]).passed
    assert compare(kernel, ref, DEFAULT_TOLERANCES["float16"], native=native, rounded=rounded).passed


@pytest.mark.parametrize("zero", [0.0, 1e-170])
def test_an_output_of_mostly_zeros_is_scaled_by_its_values_not_by_zero(zero):
    """dq of attention on large scores: most rows' softmax is one-hot, their dq 0 in float16 (1e-170 in float64:
    an exp that underflowed), and torch in float16 is exact there (its weight rounds to 1). The typical magnitude
    leaves out what is zero at the output's precision, so a correct kernel's rounding residue at a zero (3e-3
    beside values of ~3) passes; a value of the output's size there does not."""
    from workbench.core.verify.error_model import typical_magnitude

    r = torch.full((1000,), zero, dtype=torch.float64)
    r[:300] = torch.linspace(-6, 6, 300, dtype=torch.float64)
    assert typical_magnitude(r, torch.float16) == float(r[:300].abs().median())
    assert typical_magnitude(torch.zeros(10, dtype=torch.float64), torch.float16) == 0.0
    native = r.to(torch.float16)
    rounded = r * (1 + 1e-3 * torch.sin(torch.arange(1000, dtype=torch.float64)))
    residue = r.clone()
    residue[500] = 3e-3
    assert compare(residue.to(torch.float16), r, DEFAULT_TOLERANCES["float16"], native=native, rounded=rounded).passed
    garbage = r.clone()
    garbage[500] = 2.0
    assert not compare(garbage.to(torch.float16), r, DEFAULT_TOLERANCES["float16"], native=native,
                       rounded=rounded).passed


def test_one_more_rounding_leaves_infinities_as_they_are():
    """A causal mask's -inf moved by a negative fraction of itself would be -inf + inf = NaN, and a p of NaN
    measures nothing: the rows of a causal softmax stay finite under RoundEachOp, and the infinities infinite."""
    from workbench.core.verify.error_model import RoundEachOp

    x = torch.tensor([-float("inf"), 1.5, float("inf"), -2.0], dtype=torch.float64)
    scores = torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for draw in range(4):
        with RoundEachOp(draw):
            y = x * 1.0
            masked = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -float("inf")) * 1.0
            probs = torch.softmax(masked, -1)
        assert y[0] == -float("inf") and y[2] == float("inf") and torch.isfinite(y[1::2]).all()
        assert torch.isfinite(probs).all() and not torch.equal(probs, torch.softmax(masked, -1).detach() * 0)


def test_tf32_inputs_are_rounded_once_more_by_tf32s_unit_and_16_bit_ones_by_their_own():
    from workbench.core.verify.error_model import TF32_UNIT, rounded_once_more

    x32, x16 = torch.randn(64, 64), torch.randn(64, 64).half()
    for tf32, unit32 in ((False, 2.0 ** -24), (True, TF32_UNIT)):
        moved32, moved16 = rounded_once_more([x32, x16], tf32=tf32)
        rel32 = ((moved32 - x32.double()) / x32.double()).abs()
        rel16 = ((moved16 - x16.double()) / x16.double()).abs()
        assert float(rel32.max()) <= unit32 and float(rel32.mean()) > unit32 / 8
        assert float(rel16.max()) <= 2.0 ** -11 and float(rel16.mean()) > 2.0 ** -14


def _attention(q, k, v, causal):
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        seq = q.shape[-2]
        scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), -float("inf"))
    return torch.softmax(scores, -1) @ v


def _flash_attention(q, k, v, causal, block=32, tf32=False, scale_error=1.0):
    """A correct float32 kernel in another order than torch's: key blocks, a running max and sum, exp2 of scores
    in log2 units (FlashAttention's forward). `tf32`: its products' inputs rounded to TF32 first (tl.dot's
    default for float32); `scale_error`: a softmax scale off by that factor (a wrong kernel)."""
    if tf32:
        q, k, v = (((t.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32) for t in (q, k, v))
    seq, dim = q.shape[-2], q.shape[-1]
    scale = dim ** -0.5 * 1.4426950408889634 * scale_error
    row_max = torch.full(q.shape[:-1], -float("inf"))
    row_sum, acc = torch.zeros(q.shape[:-1]), torch.zeros_like(q)
    rows = torch.arange(seq)[:, None]
    for start in range(0, seq, block):
        kb, vb = k[..., start:start + block, :], v[..., start:start + block, :]
        qk = (q @ kb.transpose(-2, -1)) * scale
        if causal:
            qk = qk.masked_fill(torch.arange(start, start + kb.shape[-2])[None, :] > rows, -float("inf"))
        new_max = torch.maximum(row_max, qk.amax(-1))
        p, correction = torch.exp2(qk - new_max[..., None]), torch.exp2(row_max - new_max)
        row_sum = row_sum * correction + p.sum(-1)
        acc = acc * correction[..., None] + p @ vb
        row_max = new_max
    return acc / row_sum[..., None]


# Draws on which the model before each element's own move was a floor (and before -inf stayed -inf under one more
# rounding) failed the correct kernel: 5-9% of 150 draws at these shapes, against 0 of 300 now (causal and not)
FALSE_ALARMS_BEFORE = {True: [1, 2, 7, 38, 46, 71], False: [1, 7, 13, 21, 38, 55]}


@pytest.mark.parametrize("causal", [True, False])
def test_a_flash_attention_in_float32_at_64x_the_values_passes_and_tf32_or_a_wrong_scale_do_not(causal):
    """At 64x the values (the value stress) attention's scores are thousands apart and a near-tie row turns on the
    last bit of a product: a correct float32 kernel in FlashAttention's order was off by up to 17x torch's own
    error there while the output's typical element was exact. Each element's own move under one more rounding
    (the farthest of STRESSED_ROUNDING_DRAWS draws) is its floor: those draws pass; a kernel whose products run
    in TF32 still fails on every one, and one whose scale is off by 1e-3 on some."""
    from workbench.core.verify.error_model import STRESSED_ROUNDING_DRAWS, RoundEachOp, farthest, rounded_once_more

    failed = {"correct": [], "tf32": [], "scale": []}
    seeds = FALSE_ALARMS_BEFORE[causal]
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(1, 2, 65, 32, generator=generator) * 64 for _ in range(3))
        r = _attention(*(t.double() for t in (q, k, v)), causal)
        n = _attention(q, k, v, causal)
        draws = []
        for draw in range(STRESSED_ROUNDING_DRAWS):
            with RoundEachOp(draw):
                draws.append(_attention(*rounded_once_more([q, k, v], draw), causal))
        p = farthest(r, draws)
        assert torch.isfinite(p).all()
        for name, out in (("correct", _flash_attention(q, k, v, causal)),
                          ("tf32", _flash_attention(q, k, v, causal, tf32=True)),
                          ("scale", _flash_attention(q, k, v, causal, scale_error=1.001))):
            if not compare(out, r, FP32, native=n, rounded=p).passed:
                failed[name].append(seed)
    assert failed["correct"] == [], failed
    assert failed["tf32"] == seeds and failed["scale"], failed


def test_a_tf32_projects_float32_failure_under_large_values_names_tf32():
    from workbench.core.verify.value_stress import stress_note

    assert "input_precision" in stress_note("values x64", overflow=False, tf32=True)
    assert "TF32" not in stress_note("values x64", overflow=False)
    assert "TF32" not in stress_note("values x64", overflow=True, tf32=True)  # an overflow is an overflow


class _SettledOnFlashInputs:
    """KernelCalls.settle_rounding on the flash fixture's inputs of draw 13 (one of FALSE_ALARMS_BEFORE[False]:
    one draw of p is not enough there): `runs` lists each further rounded_reference call's keywords."""

    def __init__(self, monkeypatch):
        from pathlib import Path

        from workbench.core.project.contract import KernelModule
        from workbench.core.verify import calls as calls_module
        from workbench.core.verify.calls import KernelCalls

        self.km = KernelModule(path=Path("kernel.py"), module=None, kernel_fn=_flash_attention,
                               reference_fn=_attention, get_inputs=None, cases=[])
        self.calls = KernelCalls(self.km, VerifyConfig(), lambda event: None, interpret=True)
        self.runs = []
        real = calls_module.rounded_reference
        monkeypatch.setattr(calls_module, "rounded_reference", lambda *a, **k: self.runs.append(k) or real(*a, **k))
        generator = torch.Generator().manual_seed(13)
        self.inputs = [torch.randn(1, 2, 65, 32, generator=generator) * 64 for _ in range(3)] + [False]

    def passes(self, out, stress="values x64"):
        """`out` judged on the stress case (or a plain generated case) after settle_rounding."""
        from workbench.core.project.contract import Case
        from workbench.core.verify.references import upcast_reference
        from workbench.core.verify.tensors import flatten_outputs

        case = Case(0, {}, generated=True, stress=stress)
        ref = upcast_reference(self.km, self.inputs, case, lambda event: None, native=True)
        data = CaseData(case_index=0, label=case.label, reference=ref.outputs.tensors,
                        reference_names=ref.outputs.names, native=ref.native.tensors, rounded=ref.rounded.tensors)
        self.calls.settle_rounding(data, case, flatten_outputs(out), self.inputs, ref)
        return compare(out, data.reference[0], FP32, native=data.native[0], rounded=data.rounded[0]).passed


def test_a_stress_cases_further_draws_are_taken_only_where_one_draw_does_not_pass(monkeypatch):
    """KernelCalls.settle_rounding: on a value-stress case, a kernel output within one draw's budget keeps that
    draw (no more reference runs); one outside it gets p from STRESSED_ROUNDING_DRAWS draws, which is what
    passes the correct flash attention on a draw that one draw fails (8 of 300 non-causal draws at these shapes,
    4 of 300 causal)."""
    settled = _SettledOnFlashInputs(monkeypatch)
    inputs = settled.inputs
    assert settled.passes(_attention(*inputs)) and settled.runs == []  # torch's own result: one draw holds
    assert settled.passes(_flash_attention(*inputs))
    assert [run["stressed"] for run in settled.runs] == [True] and settled.runs[0]["taken"] is not None
    assert not settled.passes(_flash_attention(*inputs), stress="") and len(settled.runs) == 1  # one draw


def test_the_stressed_draws_go_on_from_the_draw_already_taken():
    """rounded_reference(stressed=True, taken=the unstressed result) runs reference_fn only for the draws not yet
    taken, and gives what all the draws taken afresh give."""
    from pathlib import Path

    from workbench.core.project.contract import KernelModule
    from workbench.core.verify.error_model import STRESSED_ROUNDING_DRAWS
    from workbench.core.verify.references import rounded_reference
    from workbench.core.verify.tensors import flatten_outputs

    calls = []

    def counted(*args):
        calls.append(1)
        return _attention(*args)

    km = KernelModule(path=Path("kernel.py"), module=None, kernel_fn=_flash_attention, reference_fn=counted,
                      get_inputs=None, cases=[])
    generator = torch.Generator().manual_seed(13)
    inputs = [torch.randn(1, 2, 65, 32, generator=generator) * 64 for _ in range(3)] + [False]
    truth = flatten_outputs(_attention(*[x.double() if isinstance(x, torch.Tensor) else x for x in inputs]))
    first = rounded_reference(km, inputs, truth)
    assert len(calls) == 1
    afresh = rounded_reference(km, inputs, truth, stressed=True)
    assert len(calls) == 1 + STRESSED_ROUNDING_DRAWS
    went_on = rounded_reference(km, inputs, truth, stressed=True, taken=first)
    assert len(calls) == 1 + 2 * STRESSED_ROUNDING_DRAWS - 1
    assert torch.equal(went_on.tensors[0], afresh.tensors[0])


def test_a_stress_case_far_past_its_budget_takes_no_further_draws(monkeypatch):
    """A kernel off by far more than further draws could budget (a wrong softmax scale at 64x the values: rows
    whose winner changes) or with NaN where the reference has numbers costs no further reference runs."""
    settled = _SettledOnFlashInputs(monkeypatch)
    inputs = settled.inputs
    for out in (_flash_attention(*inputs[:3], False, scale_error=1.1), torch.full_like(inputs[0], float("nan"))):
        assert not settled.passes(out)
    assert settled.runs == []
