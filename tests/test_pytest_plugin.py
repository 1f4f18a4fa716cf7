"""`pytest --workbench projects/`: the projects' cases as test items, with workbench verify's verdicts."""

import os
import subprocess
import sys
from pathlib import Path

import kernels
import pytest

ROOT = Path(__file__).resolve().parents[1]
FAST = "[verify]\ngenerated_cases = false\nrepeat_calls = false\n"


def run_pytest(cwd, *args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-rA",
                           *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow
def test_projects_are_test_items_with_the_same_verdicts_and_exit_code(tmp_path, make_project):
    make_project(kernels.GOOD, name="projects/good", toml=FAST)
    make_project(kernels.GRID_SHORT, name="projects/bad", toml=FAST)
    (tmp_path / "projects" / "test_theirs.py").write_text("def test_theirs():\n    assert True\n")
    code, out = run_pytest(tmp_path, "--workbench", "projects")
    assert code == 1, out
    assert "PASSED projects/good/kernel.py::case 0: n=1" in out
    assert "FAILED projects/bad/kernel.py::case 2: n=4097" in out
    assert "never written" in out  # the verify report's failure details
    assert "; inputs: seed " in out and "draws them again" in out  # the seed that replays the failure
    assert "PASSED projects/test_theirs.py::test_theirs" in out  # the project's own tests still run

    code, out = run_pytest(tmp_path, "--workbench", "projects/good")
    assert code == 0, out


def test_without_the_option_the_plugin_is_inert(tmp_path, make_project):
    make_project(kernels.GRID_SHORT, name="projects/bad", toml=FAST)
    (tmp_path / "projects" / "test_theirs.py").write_text("def test_theirs():\n    assert True\n")
    code, out = run_pytest(tmp_path, "projects")
    assert code == 0, out
    assert "1 passed" in out and "kernel.py" not in out


@pytest.mark.slow
def test_an_unusable_project_is_a_failed_item_and_pytest_exits_1(tmp_path, make_project):
    # pytest's 2 is "interrupted" (and 3 "internal error"): the workbench's codes are not its exit status.
    make_project(kernels.SYNTAX_ERROR, name="projects/broken", toml=FAST)
    make_project(kernels.GOOD, name="projects/badtoml", toml="[tolerance.float32]\nrtol = nan\n")
    code, out = run_pytest(tmp_path, "--workbench", "projects")
    assert code == 1, out
    assert "FAILED projects/broken/kernel.py::project: syntax" in out
    assert "FAILED projects/badtoml/kernel.py::project: config" in out
    assert "[tolerance.float32.rtol]: must be a finite number, got nan" in out  # the workbench's reason
    assert "NOT USABLE (workbench verify exits 2)" in out
    assert "Interrupted" not in out and "INTERNALERROR" not in out


@pytest.mark.slow
def test_every_case_skipped_is_a_failed_item_as_workbench_verify_exits_1(tmp_path, make_project):
    make_project(kernels.GOOD, name="projects/skippy", toml=FAST + "interpret_max_elements = 0\n")
    code, out = run_pytest(tmp_path, "--workbench", "--workbench-interpret", "projects")
    assert code == 1, out
    assert "FAILED projects/skippy/kernel.py::project: not verified" in out
    assert "project: FAILED (workbench verify exits 1)" in out
