"""The checks a kernel that only looks right must not get past (issue #9): each catches a kernel
written to fool it, with a one-line reason and its own JSON field, and lets the fixed kernel pass."""


import kernels
import pytest
from run_helpers import ONLY_CASES, failing, verify_json


def tuned(record):
    return [c for c in record["cases"] if not c["config"]]


def messages(record):
    return [m for c in failing(record) for m in c["messages"]]


def test_a_kernel_that_patches_torch_and_the_compare_module_still_fails(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.TAMPERS))
    assert code == 1
    case = next(c for c in tuned(rec) if c["case_index"] == 2)
    assert case["status"] == "failed" and case["checks"]["values"] == "failed"
    # x * 3 against x * 2: every element is off by |x|, but one that randn drew within the tolerance of 0 (about
    # 1 run in 30 has one among 4097) is rightly within it
    assert any("outside rtol" in m for m in case["messages"]) and 4090 <= case["bad_count"] <= 4097


@pytest.mark.slow
def test_verdicts_forged_in_the_kernels_process_are_errors(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.FORGES_VERDICT))
    assert code == 1
    assert rec["cases"] and not any(c["status"] == "passed" for c in rec["cases"])
    assert all("not by the judge" in c["messages"][0] for c in rec["cases"])


@pytest.mark.slow
def test_no_triton_kernel_launched_fails_unless_opted_out(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.NO_TRITON, name="torch_only"))
    assert code == 1
    assert all(c["checks"]["triton_launched"] == "failed" and c["launches"] == 0 for c in tuned(rec))
    assert all(c["messages"][0].startswith("no Triton kernel launched") for c in tuned(rec))
    code, rec = verify_json(cli, make_project(kernels.NO_TRITON, name="opted_out",
                                              toml="[verify]\nrequire_triton = false\ngenerated_cases = false\n"))
    assert code == 0, messages(rec)
    assert all(c["checks"]["triton_launched"].startswith("skipped") for c in tuned(rec))


def test_an_output_torch_computed_fails_with_the_ops_named(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.TORCH_DOES_THE_WORK, toml=ONLY_CASES))
    assert code == 1
    for case in tuned(rec):
        assert case["checks"]["triton_launched"] == "passed" and case["checks"]["torch_ops"] == "failed"
        assert any(m.startswith("kernel_fn computed with torch ops: output with torch.mul")
                   for m in case["messages"]), case["messages"]
        assert 'allow_torch_ops = ["torch.mul"]' in " ".join(case["messages"])
    code, rec = verify_json(cli, make_project(kernels.TORCH_DOES_THE_WORK, name="allowed",
                                              toml=ONLY_CASES + 'allow_torch_ops = ["mul"]\n'))
    assert code == 0, messages(rec)
    assert all(c["checks"]["torch_ops"] == "passed" for c in tuned(rec))


def test_a_store_past_the_end_of_an_output_is_caught_in_the_guard_margin(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.STORE_UNMASKED))
    assert code == 1
    case = next(c for c in tuned(rec) if c["label"].startswith("n=65") and "float16" not in c["label"])
    assert case["generated"] and case["checks"]["out_of_bounds"] == "failed"
    # BLOCK = 64 (the interpreter's autotuner keeps its first config): two blocks, 128 lanes, 65 elements
    assert case["messages"][0] == ("out-of-bounds store: 63 elements after the end of output were written "
                                   "(a missing or wrong mask on a store?)")
    exact = next(c for c in tuned(rec) if c["case_index"] == 2)  # n=4097: 64 * 65 - 4097 = 63 again
    assert exact["checks"]["out_of_bounds"] == "failed"
    fits = next(c for c in tuned(rec) if c["label"] == "n=1")
    assert fits["checks"]["out_of_bounds"] == "failed"  # 63 lanes past a 1-element output
    code, rec = verify_json(cli, make_project(kernels.STORE_UNMASKED, name="unguarded",
                                              toml="[verify]\nguard_regions = false\n"))
    assert all(c["checks"]["out_of_bounds"] == "skipped: guard_regions = false" for c in tuned(rec))


def test_a_load_past_the_end_is_reported_by_the_interpreters_check_not_the_margin(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.MISSING_MASK))
    assert code == 1
    messages_ = [m for c in failing(rec) for m in c["messages"]]
    assert any(m.startswith("kernel_fn raised") and "out-of-bounds load" in m for m in messages_), messages_


def test_outputs_a_kernel_wrote_and_torch_finished_pass(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.TORCH_FINISHES, toml=ONLY_CASES))
    assert code == 0, messages(rec)
    assert all(c["checks"]["torch_ops"] == "passed" for c in tuned(rec))


@pytest.mark.slow
def test_launches_are_counted_per_call(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.GOOD, toml=ONLY_CASES))
    assert code == 0
    assert {c["launches"] for c in rec["cases"]} == {1}
    assert all(c["checks"]["triton_launched"] == "passed" for c in tuned(rec))


@pytest.mark.slow
def test_an_output_cached_by_address_fails_on_recycled_inputs(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.CACHED_BY_ADDRESS, toml=ONLY_CASES))
    assert code == 1
    case = tuned(rec)[0]
    assert case["checks"]["repeat_recycled_addresses"] == "failed"
    assert case["checks"]["triton_launched"] == "passed"  # it launched on its first call
    assert any("data_ptr()" in m for m in case["messages"])


@pytest.mark.slow
def test_a_kernel_right_only_on_its_first_call_fails_on_fresh_inputs(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.FIRST_CALL_ONLY, toml=ONLY_CASES))
    assert code == 1
    assert tuned(rec)[0]["checks"]["repeat_fresh_inputs"] == "failed"


@pytest.mark.slow
def test_an_output_aliasing_an_input_fails_unless_inplace(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.ALIASES_INPUT, name="aliases"))
    assert code == 1
    case = tuned(rec)[0]
    assert case["checks"]["aliasing"] == "failed" and case["checks"]["values"] == "passed"
    assert case["messages"] == ["output and input #0: the output shares the input's memory (return a new tensor, "
                                "or declare [verify] inplace = true)"]
    code, rec = verify_json(cli, make_project(kernels.ALIASES_INPUT, name="inplace", toml="[verify]\ninplace = true\n"))
    assert code == 0, messages(rec)
    code, rec = verify_json(cli, make_project(kernels.PASSES_INPUT_THROUGH, name="through",
                                              toml=ONLY_CASES))
    assert code == 0, messages(rec)  # the reference returns its input too


@pytest.mark.slow
def test_wrong_output_dtype_names_expected_and_got(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.WRONG_DTYPE, toml=ONLY_CASES))
    assert code == 1
    case = next(c for c in tuned(rec) if c["case_index"] == 1)
    assert case["checks"]["dtype"] == "failed"
    assert "dtype float32, expected float16" in case["messages"][0]
    assert next(c for c in tuned(rec) if c["case_index"] == 0)["status"] == "passed"  # float32 in, float32 out


@pytest.mark.slow
def test_a_shape_that_only_broadcasts_fails(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.BROADCAST_SHAPE, toml=ONLY_CASES))
    assert code == 1
    case = next(c for c in tuned(rec) if c["case_index"] == 2)
    assert case["checks"]["shape"] == "failed" and case["messages"][0] == "shape (1, 4097), expected (4097,)"


@pytest.mark.slow
def test_a_kernel_without_masks_fails_on_a_generated_edge_shape(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.NO_MASK_ALIGNED, name="nomask"))
    if rec["mode"] != "interpreter":
        pytest.skip("on a GPU stray accesses that leave the numbers right are `workbench sanitize`'s to find")
    assert code == 1
    assert all(c["status"] == "passed" for c in rec["cases"] if not c["generated"])
    failed = [c for c in failing(rec) if c["generated"]]
    assert failed and all("(generated)" in c["label"] for c in failed)
    assert any("out-of-bounds" in m for c in failed for m in c["messages"])
    code, rec = verify_json(cli, make_project(kernels.NO_MASK_ALIGNED, name="off",
                                              toml=ONLY_CASES))
    assert code == 0 and not any(c["generated"] for c in rec["cases"])


@pytest.mark.slow
def test_constant_inputs_and_a_zero_reference_are_warned_about(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.ZERO_INPUTS, toml=ONLY_CASES))
    assert code == 0
    assert "WARNING, case 2 (n=4097): every input is constant" in out
    assert "the reference output is all zeros" in out
    code, rec = verify_json(cli, make_project(kernels.GOOD, name="random", toml=ONLY_CASES))
    assert not any(c["warnings"] for c in rec["cases"])


@pytest.mark.slow
def test_torch_compile_and_cuda_graphs_say_why_they_were_skipped_in_the_interpreter(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.GOOD, toml=ONLY_CASES))
    if rec["mode"] != "interpreter":
        pytest.skip("on a GPU they run: tests/test_verify_gpu.py")
    checks = tuned(rec)[0]["checks"]
    for key in ("torch_compile", "cuda_graph"):
        assert checks[key].startswith("skipped: the Triton interpreter compiles nothing")
    code, rec = verify_json(cli, make_project(kernels.GOOD, name="off", toml=ONLY_CASES
                                                                            + "torch_compile = false\n"))
    assert tuned(rec)[0]["checks"]["torch_compile"] == "skipped: turned off ([verify] torch_compile)"


def test_generated_cases_vary_the_sizes_and_stay_bounded():
    from workbench.core.project.config import VerifyConfig
    from workbench.core.project.contract import Case
    from workbench.core.verify.edge_cases import generate_cases

    cases = [Case(0, {"M": 256, "N": 1024, "dtype": "f16", "seed": 3}), Case(1, {"M": 4, "N": 8, "dtype": "f16", "seed": 3}),
             Case(2, {"M": 64, "N": 64, "dtype": "f32"}), Case(3, {"M": 9999, "N": 9999, "purpose": "bench"})]
    cases[3].purpose = "bench"
    made = generate_cases(cases, VerifyConfig())
    assert all(c.generated and c.index >= 4 for c in made) and len(made) <= 8
    f16 = [c.params for c in made if c.params["dtype"] == "f16"]
    assert {"M": 65, "N": 65, "dtype": "f16", "seed": 3} in f16  # the sizes from 256/1024 capped at 64, seed kept
    assert {(p["M"], p["N"]) for p in f16} == {(65, 65), (66, 66), (1, 1), (67, 67)}
    assert not generate_cases(cases, VerifyConfig(generated_cases=False))
    assert len(generate_cases(cases, VerifyConfig(max_generated_cases=3))) == 3


@pytest.mark.parametrize("name", ["rmsnorm", "swiglu", "rope", "cross_entropy", "matmul", "layernorm"])
@pytest.mark.slow
def test_correct_kernels_in_the_usual_styles_verify_unchanged(cli, make_project, name):
    import kernels_zoo

    code, rec = verify_json(cli, make_project(kernels_zoo.ZOO[name], name=name))
    assert code == 0, [(c["label"], c["config"], c["messages"]) for c in failing(rec)]
    assert not any(c["warnings"] for c in rec["cases"])
    assert any(c["generated"] and c["status"] == "passed" for c in rec["cases"])
    assert all(c["launches"] for c in rec["cases"] if c["status"] == "passed")


def test_a_case_already_wrong_on_its_first_call_skips_the_repeat_calls_and_their_hints(cli, make_project):
    """A short grid leaves elements unwritten on every call: the repeat calls would only repeat that,
    with a misleading "a result kept from an earlier call?"."""
    # One case: the worker's first, where the repeat calls run under the interpreter too.
    code, rec = verify_json(cli, make_project(kernels.GRID_SHORT, toml=ONLY_CASES),
                            "--case", "1")
    assert code == 1
    failed = [c for c in tuned(rec) if c["status"] == "failed"]
    assert failed and all(c["checks"]["unwritten"] == "failed" for c in failed)
    assert all(c["checks"]["repeat_fresh_inputs"] == "skipped: the first call already failed" for c in failed)
    assert not any(m.startswith("repeat_") for c in failed for m in c["messages"])
