"""Exit codes, JSON and JUnit output, list/history/diff, and the contract's bad-input paths."""

import json
import xml.etree.ElementTree as ET

import kernels
import pytest


def test_syntax_error_exit_2_with_line(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.SYNTAX_ERROR))
    assert code == 2
    line = kernels.SYNTAX_ERROR.splitlines().index("def scale(x)") + 1
    assert f"kernel.py:{line}" in out and "syntax" in out


def test_missing_export_exit_2(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.MISSING_EXPORT))
    assert code == 2 and "kernel_fn" in out


def test_get_inputs_raising_exit_2_names_the_line(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.INPUTS_RAISE))
    assert code == 2
    assert "no inputs today" in out and "get_inputs" in out
    line = kernels.INPUTS_RAISE.splitlines().index("    raise RuntimeError('no inputs today')") + 1
    assert f"kernel.py:{line}" in out


def test_bad_workbench_toml_exit_2_names_the_key(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.GOOD, toml="[verify]\ntimeout_s = 'soon'\n"))
    assert code == 2 and "verify.timeout_s" in out


def test_not_a_project_exit_2(cli, tmp_path):
    code, out, err = cli("verify", tmp_path)
    assert code == 2 and "no kernel.py" in err
    code, out, err = cli("verify", tmp_path / "missing")
    assert code == 2 and "no such file" in err


def test_bad_arguments_exit_2(cli):
    import pytest

    with pytest.raises(SystemExit) as exc:
        cli("verify", "--case", "notanumber")
    assert exc.value.code == 2


@pytest.mark.slow
def test_environment_problem_exit_3(cli, make_project, monkeypatch, tmp_path):
    # A worker whose python cannot import torch: the environment, not the kernel.
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch is not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    code, out, err = cli("verify", make_project(kernels.GOOD))
    assert code == 3
    assert "torch is not installed here" in out


@pytest.mark.slow
def test_json_and_junit_are_well_formed(cli, make_project, tmp_path):
    good = make_project(kernels.GOOD, name="good")
    bad = make_project(kernels.GRID_SHORT, name="bad")
    junit = tmp_path / "reports" / "junit.xml"
    code, out, err = cli("verify", good, bad, "--json", "--junit", junit)
    assert code == 1
    record = json.loads(out)
    assert [p["project"] for p in record["projects"]] == ["good", "bad"]
    assert [p["exit_code"] for p in record["projects"]] == [0, 1]
    root = ET.parse(junit).getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["good", "bad"]
    good_cases = [c for c in suites[0].findall("testcase") if c.get("name").startswith("case ")]
    findings = [c.get("name") for c in suites[0].findall("testcase") if c not in good_cases]
    assert findings == ["compatibility: noncontiguous", "compatibility: storage_offset"]  # the layouts' findings
    generated = [c for c in good_cases if c.find("properties/property[@name='generated']").get("value") == "true"]
    assert len(good_cases) - len(generated) == 3  # one per case, its forced configs' runs inside it
    assert generated and all("(generated)" in c.get("name") for c in generated)
    first = {p.get("name"): p.get("value") for p in good_cases[0].iter("property")}
    assert first["launches"] == "1" and first["check.values"] == "passed"
    assert first["configs.run"] == first["configs.passed"] == "2"
    assert sorted(v for k, v in first.items() if k.startswith("config.")) == ["passed", "passed"]
    # One unit everywhere (issue 25): the JSON's cases are the JUnit's testcases.
    assert record["projects"][0]["counts"]["passed"] == len(good_cases) == int(suites[0].get("tests")) - len(findings)
    assert first["check.triton_launched"] == "passed" and first["check.repeat_recycled_addresses"] == "passed"
    assert int(suites[1].get("failures")) > 0
    assert suites[1].find("testcase/failure") is not None
    assert "unwritten" in suites[1].find("testcase/failure").get("type")


@pytest.mark.slow
def test_text_report_says_interpreter_and_where(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.GRID_SHORT))
    assert code == 1
    assert "interpreter" in out or "GPU" in out
    assert "never written" in out and "worst at" in out and "where:" in out


@pytest.mark.slow
def test_case_selection(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.GOOD), "--case", "2", "--json")
    cases = json.loads(out)["projects"][0]["cases"]
    assert {c["case_index"] for c in cases} == {2}


def test_unknown_case_index_exit_2(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.GOOD), "--case", "99")
    assert code == 2 and "no case 99" in out


@pytest.mark.slow
def test_history_list_and_diff(cli, make_project, monkeypatch):
    project = make_project(kernels.GOOD, name="hist")
    assert cli("verify", project)[0] == 0
    (project / "kernel.py").write_text(kernels.GRID_SHORT)
    assert cli("verify", project)[0] == 1
    code, out, err = cli("history", project)
    assert code == 0
    lines = out.strip().splitlines()
    # the verdict's word, as the report says it (issue 44: one vocabulary), then the counts
    assert len(lines) == 3 and " VERIFIED " in lines[0] and " FAILED " in lines[1]
    assert lines[2].startswith("hist: 2 runs, 2 stored sources, ")  # how much the history holds
    history_counts = lines[1].split("FAILED", 1)[1]
    code, out, err = cli("diff", project)
    assert code == 0 and "+" in out and "n // meta" in out
    monkeypatch.chdir(project.parent)
    code, out, err = cli("list", "--dir", ".")
    assert code == 0 and "hist" in out and "FAILED" in out
    assert history_counts.strip().split("  ")[0] in out  # the same counts, said the same way
    code, out, err = cli("diff", project, "nope", "-1")
    assert code == 2 and "no run" in err


def test_doctor_reports_the_machine(cli):
    code, out, err = cli("doctor")
    assert code == 0
    assert "torch" in out and "triton" in out and "mode" in out and "ncu" in out


def test_core_never_imports_textual():
    import pathlib
    import re

    core = pathlib.Path(__file__).resolve().parents[1] / "workbench" / "core"
    offenders = [p.name for p in core.glob("*.py")
                 if re.search(r"^\s*(import|from)\s+textual", p.read_text(), re.MULTILINE)]
    assert offenders == []


@pytest.mark.slow
def test_a_refused_bench_leaves_the_history_alone(cli, make_project):
    project = make_project(kernels.GOOD, name="refused")
    assert cli("verify", project)[0] == 0
    code, out, err = cli("bench", project)
    if code != 3:
        import pytest

        pytest.skip("a GPU is present: bench is not refused here")
    code, out, err = cli("history", project)
    lines = out.strip().splitlines()
    assert len(lines) == 2 and "VERIFIED" in lines[0] and "1 run, " in lines[1]  # the run, then what the history holds


@pytest.mark.slow
def test_workbench_profile_dir_profiles_each_job(cli, make_project, monkeypatch, tmp_path):
    import pstats

    monkeypatch.setenv("WORKBENCH_PROFILE_DIR", str(tmp_path / "profiles"))
    code, out, err = cli("verify", make_project(kernels.GOOD), "--case", "2")
    assert code == 0
    profiles = sorted((tmp_path / "profiles").glob("*-verify*.prof"))
    assert profiles, list((tmp_path / "profiles").iterdir())
    functions = {name for _, _, name in pstats.Stats(str(profiles[0])).stats}
    assert {"run_job", "verify_stage"} <= functions
