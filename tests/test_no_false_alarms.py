"""Issue #23: correct kernels written the way well-known libraries write them verify green; the broken
kernels beside them still fail; the compatibility checks are findings beside the verdict.

The kernels are in tests/kernels_libraries.py. Their GPU side is tests/test_verify_gpu.py.
"""

import json
import xml.etree.ElementTree as ET

import kernels_libraries as lib
import pytest
from run_helpers import failing, verify_json

from workbench.core.events import CaseResult, RunFinished, WorkerReady
from workbench.core.project.config import ConfigError, ProjectConfig, VerifyConfig
from workbench.core.project.contract import Case


def passed_cases(record):
    return [c for c in record["cases"] if c["status"] == "passed"]


@pytest.mark.parametrize("name", sorted(lib.CORRECT))
@pytest.mark.slow
def test_correct_kernels_written_as_libraries_write_them_verify(cli, make_project, name):
    code, rec = verify_json(cli, make_project(lib.CORRECT[name], name=name))
    assert code == 0, [(c["label"], c["config"], c["messages"]) for c in failing(rec)] + rec["problems"]
    assert passed_cases(rec) and all(c["launches"] for c in passed_cases(rec))
    # issue 24: every one takes its pointers from the tensor, so a storage offset is no problem
    assert rec["compatibility"]["storage_offset"]["status"] == "passed"
    assert any(c["generated"] and c["status"] == "passed" for c in rec["cases"]) or name == "refuses_odd_sizes"


# -- 2: launches the counter must see -----------------------------------------------------------------------

@pytest.mark.slow
def test_a_kernel_compiled_with_warmup_and_launched_directly_counts_its_launches(cli, make_project):
    code, rec = verify_json(cli, make_project(lib.TUTORIAL_SOFTMAX, name="softmax_tutorial"))
    assert code == 0, failing(rec)
    assert {c["launches"] for c in rec["cases"] if not c["config"]} == {1}
    assert all(c["checks"]["triton_launched"] == "passed" for c in rec["cases"])


# -- 4: torch's own error in the inputs' dtype (verify/error_model.py; more in tests/test_error_model.py) ------

def test_an_output_computed_from_a_16_bit_intermediate_is_held_to_torchs_own_error(cli, make_project):
    code, rec = verify_json(cli, make_project(lib.FUSED_ADD_RMSNORM, name="fused_add_rmsnorm"))
    assert code == 0, failing(rec)
    bf16 = next(c for c in rec["cases"] if c["case_index"] == 0)
    rstd = next(e for e in bf16["compared"] if e["output"] == "output[2]")
    assert rstd["torch_dtype"] == "float32" and rstd["multiple"] is not None and rstd["multiple"] <= 2


@pytest.mark.slow
def test_a_wrong_kernel_still_fails_with_the_budget_it_broke(cli, make_project):
    code, out, err = cli("verify", make_project(lib.FUSED_ADD_RMSNORM_WRONG, name="wrong"), "-v")
    assert code == 1
    assert "output[2]:" in out and "outside rtol=1e-05 atol=1e-05 (the float32 floor)" in out
    assert "past 2x torch's own float32 error" in out  # the budget it was held to, in the failure


# -- 5: refusal or crash ------------------------------------------------------------------------------------

def test_an_explicit_refusal_before_any_launch_drops_the_shape(cli, make_project):
    code, rec = verify_json(cli, make_project(lib.REFUSES_ODD_SIZES, name="refuses"))
    assert code == 0
    dropped = [c for c in rec["cases"] if c["generated"] and "[" not in c["label"]]  # shapes; not value stress
    assert dropped and all(c["status"] == "skipped" for c in dropped)
    assert all("refuses this generated shape" in c["notes"][0] and "ValueError" in c["notes"][0] for c in dropped)


@pytest.mark.slow
def test_a_crash_on_a_generated_shape_fails_the_case(cli, make_project):
    code, rec = verify_json(cli, make_project(lib.CRASHES_ON_SMALL_SIZES, name="crashes"))
    assert code == 1
    crashed = [c for c in failing(rec) if c["generated"]]
    assert crashed and all("ZeroDivisionError" in c["messages"][0] for c in crashed)
    assert all(c["label"].startswith("n=1 ") for c in crashed)  # n // 64 == 0


def test_a_refusal_is_an_explicit_raise_or_assert_in_the_projects_own_code(tmp_path):
    from workbench.core.verify.failures import is_refusal

    (tmp_path / "proj").mkdir()
    kernel = tmp_path / "proj" / "kernel.py"
    kernel.write_text("def refuse(n):\n    raise ValueError('n must be even')\n\n"
                      "def check(n):\n    assert n % 2 == 0, 'even sizes only'\n\n"
                      "def divide(n):\n    return 64 // (n // 64)\n\n"
                      "def index(n):\n    return [1, 2][n]\n\n"
                      "def convert(n):\n    return int('x' * n)\n")
    namespace = {}
    exec(compile(kernel.read_text(), str(kernel), "exec"), namespace)

    def raised(name, n=1):
        try:
            namespace[name](n)
        except Exception as exc:  # noqa: BLE001
            return exc
        raise AssertionError(f"{name} did not raise")

    assert is_refusal(raised("refuse"), kernel) and is_refusal(raised("check"), kernel)
    assert not is_refusal(raised("divide"), kernel)  # ZeroDivisionError
    assert not is_refusal(raised("index", 5), kernel)  # IndexError
    assert not is_refusal(raised("convert"), kernel)  # a ValueError nobody raised on purpose
    elsewhere = tmp_path / "proj2" / "kernel.py"  # a sibling folder whose name starts the same
    assert not is_refusal(raised("refuse"), elsewhere)  # not the project's code


# -- 6: every size varies, tuples too; fixed_params holds -------------------------------------------------------

def test_every_integer_size_varies_and_tuple_shapes_too():
    from workbench.core.verify.edge_cases import generate_cases

    cases = [Case(0, {"M": 33, "N": 40, "K": 64, "dim": 8, "groups": 4, "seed": 7}),
             Case(1, {"shape": (3, 100, 7), "dtype": "float16"})]
    made = generate_cases(cases, VerifyConfig(max_generated_cases=10))
    matmul = [c.params for c in made if "K" in c.params]
    assert {"M": 34, "N": 41, "K": 65, "dim": 9, "groups": 5, "seed": 7} in matmul
    assert all(p["seed"] == 7 for p in matmul)
    shapes = [c.params["shape"] for c in made if "shape" in c.params]
    assert shapes == [(4, 65, 8), (5, 66, 9), (1, 1, 1), (5, 67, 11), (2, 63, 6)]
    held = generate_cases(cases, VerifyConfig(fixed_params=["K", "dim"]))
    assert all(c.params["K"] == 64 and c.params["dim"] == 8 for c in held if "K" in c.params)


def test_fixed_params_is_a_list_of_names(tmp_path):
    assert ProjectConfig.from_dict({"verify": {"fixed_params": ["k"]}}).verify.fixed_params == ["k"]
    with pytest.raises(ConfigError, match=r"\[verify.fixed_params\]"):
        ProjectConfig.from_dict({"verify": {"fixed_params": "k"}})


@pytest.mark.parametrize("name", [pytest.param("matmul_unmasked_k", marks=pytest.mark.slow), "shapes_unmasked"])
def test_a_kernel_right_only_on_the_sizes_in_cases_fails_on_a_generated_one(cli, make_project, name):
    code, rec = verify_json(cli, make_project(lib.BROKEN[name], name=name))
    if rec["mode"] != "interpreter":
        pytest.skip("on a GPU stray accesses that leave the numbers right are `workbench sanitize`'s to find")
    assert code == 1
    assert all(c["status"] == "passed" for c in rec["cases"] if not c["generated"])
    assert any("out-of-bounds" in m for c in failing(rec) for m in c["messages"])


@pytest.mark.slow
def test_the_libdevice_kernel_with_a_wrong_constant_still_fails(cli, make_project):
    code, rec = verify_json(cli, make_project(lib.UNSLOTH_GEGLU_WRONG, name="geglu_wrong"))
    assert code == 1
    assert all(c["checks"]["values"] == "failed" for c in failing(rec))


# -- 1: compatibility is a finding of its own -------------------------------------------------------------

@pytest.mark.parametrize("value, mode", [(True, "check"), (False, "off"), ("check", "check"),
                                         ("require", "require"), ("off", "off")])
def test_compatibility_modes(value, mode):
    verify = ProjectConfig.from_dict({"verify": {"torch_compile": value, "cuda_graph": value}}).verify
    assert verify.torch_compile == mode and verify.cuda_graph == mode
    assert ProjectConfig.from_dict(ProjectConfig(verify=verify).to_dict()).verify == verify  # through a job


def test_a_bad_compatibility_mode_names_the_key():
    with pytest.raises(ConfigError, match=r"\[verify.cuda_graph\].*\"require\""):
        ProjectConfig.from_dict({"verify": {"cuda_graph": "always"}})


def outcome_with_findings(tmp_path, required: bool):
    from workbench.core.project.folder import Project
    from workbench.core.run.session import RunOutcome

    (tmp_path / "kernel.py").write_text("")
    outcome = RunOutcome(project=Project.open(tmp_path), source_hash="x")
    error = "InductorError: CompilationError: at 50:28:\n    acc = loop(\n    ^\nraised from ValueError: the reason"
    status = "failed" if required else "passed"
    for index, compat in ((0, {"torch_compile": {"status": "failed", "required": required, "error": error},
                               "cuda_graph": {"status": "passed", "required": False, "error": ""}}),
                          (1, {}), (2, {"cuda_graph": {"status": "passed", "required": False, "error": ""}})):
        result = CaseResult(case_index=index, label=f"n={index}", status=status if index == 0 else "passed",
                            compat=compat, checks={"torch_compile": "failed" if required else "warning"})
        outcome.events.append(result)
        outcome.tally.add(result)
    ready = WorkerReady(pid=1, mode="gpu", device_name="H100", torch_version="2", triton_version="3",
                        python_version="3", warmup_s=0)
    outcome.events.insert(0, ready)
    outcome.finished = RunFinished(verdict=outcome.tally.verdict, passed=outcome.tally.passed,
                                   failed=outcome.tally.failed)
    return outcome


def test_a_compatibility_finding_is_reported_on_its_own_line_with_the_whole_error(tmp_path):
    from workbench.reports import format_outcome

    outcome = outcome_with_findings(tmp_path, required=False)
    assert outcome.exit_code == 0
    text = format_outcome(outcome)
    assert "compatibility: torch.compile(fullgraph=True) FAILED on case 0 (n=0); not required" in text
    assert "raised from ValueError: the reason" in text  # the whole error, not its first line
    assert "compatibility: CUDA graph capture and replay passed (cases 0, 2)" in text
    assert text.rstrip().endswith("(exit 0)")
    record = outcome.to_record()
    json.dumps(record)
    finding = record["compatibility"]["torch_compile"]
    assert finding["status"] == "failed" and finding["required"] is False
    assert finding["cases"][0]["error"].endswith("the reason")
    assert record["compatibility"]["cuda_graph"]["status"] == "passed"


def test_compatibility_in_junit_fails_only_when_required(tmp_path):
    from workbench.reports import junit_tree

    for required in (False, True):
        folder = tmp_path / str(required)
        folder.mkdir()
        suite = junit_tree([outcome_with_findings(folder, required)]).getroot()[0]
        case = next(c for c in suite if c.get("name") == "compatibility: torch_compile")
        props = {p.get("name"): p.get("value") for p in case.find("properties")}
        assert props["status"] == "failed" and props["required"] == str(required).lower()
        if required:
            assert case.find("failure").text.endswith("the reason")
        else:
            assert case.find("failure") is None and case.find("system-out").text.endswith("the reason")
        ET.tostring(suite)


# -- 3: what the interpreter cannot run is said as such ----------------------------------------------------------

@pytest.mark.parametrize("name, what, line", [("inline_ptx", "inline_asm", "tl.inline_asm_elementwise"),
                                              ("bessel_jn", "`libdevice.jn`", "libdevice.jn(2, x)")])
@pytest.mark.slow
def test_what_the_interpreter_cannot_run_is_a_gpu_only_verdict_at_its_line(cli, make_project, name, what, line):
    project = make_project(lib.GPU_ONLY[name], name=name)
    code, rec = verify_json(cli, project)
    if rec["mode"] != "interpreter":
        pytest.skip("on a GPU it runs: tests/test_verify_gpu.py")
    assert code == 3 and rec["verdict"] == "gpu_only"
    problem = rec["problems"][0]
    assert problem["kind"] == "gpu_only" and what in problem["message"]
    assert "checkable on a GPU only" in problem["message"]
    assert line in (project / "kernel.py").read_text().splitlines()[problem["line"] - 1]
    code, out, err = cli("verify", project)
    assert code == 3 and "GPU ONLY:" in out and "does not compile" not in out
    assert out.rstrip().endswith("(exit 3)") and "GPU ONLY: 0 passed" in out
