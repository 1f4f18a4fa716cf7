"""The benchmark scripts' own plumbing, run where CI runs: a script that drifts from the code it drives measures
nothing on the GPU (headless.py's timeline wrapper once stopped matching run_project's arguments, and the GPU
commands after that came back empty). Its commands also keep the caller's PYTHONPATH after the repository's."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def benchmark_script(name):
    """benchmarks/NAME.py as a module, imported as the script runs: beside its sibling modules (plain_scripts)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.mark.slow
def test_headless_times_a_real_verify_through_the_sessions_run_project_and_keeps_the_callers_path(tmp_path,
                                                                                                  monkeypatch):
    headless = benchmark_script("headless")
    beside = tmp_path / "beside"  # a folder of packages installed beside Python, as on a machine without a venv
    beside.mkdir()
    (beside / "beside_marker.py").write_text("")
    (tmp_path / "sitecustomize.py").write_text("import beside_marker\n")  # fails the command if `beside` is lost
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(beside), str(tmp_path)]))
    project = headless.scaffold(tmp_path, "add")
    run = headless.timed(["verify", str(project), "--json", "--case", "0"], tmp_path, "one")
    assert run["exit"] == 0, (tmp_path / "one.txt").read_text()[-2000:]
    kinds = {e["type"] for e in run["events"]}
    assert {"worker_ready", "case_result", "run_finished"} <= kinds
    assert all(e["project"] == "add" for e in run["events"])
    assert headless.breakdown(run)["first case"] is not None


@pytest.mark.slow
def test_row_split_checks_its_candidates_under_the_interpreter():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "row_split.py"), "--check"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "check: passed" in done.stdout, done.stdout + done.stderr


def test_series_cost_calls_a_shorter_warm_up_within_only_inside_the_200_ms_settings_own_spread():
    series_cost = benchmark_script("series_cost")
    found = {200.0: {"median_ms": [0.0100, 0.0102, 0.0101], "wall_s": [0.5, 0.5, 0.5]},  # spread 2%
             20.0: {"median_ms": [0.0101, 0.0102, 0.0100], "wall_s": [0.3, 0.3, 0.3]},
             0.0: {"median_ms": [0.0110, 0.0111, 0.0109], "wall_s": [0.2, 0.2, 0.2]}}
    rows = series_cost.judged(found)
    assert rows[200.0]["change_pct"] == 0 and rows[200.0]["within"]
    assert rows[20.0]["within"] and abs(rows[20.0]["change_pct"]) < 1e-9
    assert not rows[0.0]["within"] and round(rows[0.0]["change_pct"], 1) == 8.9  # 9% slower: the clocks had dropped
    assert round(rows[200.0]["spread_pct_at_200ms"], 1) == 2.0 and rows[0.0]["wall_s"] == 0.2


def test_large_index_cost_builds_each_named_scaffolds_large_index_cases(tmp_path):
    """The script scaffolds by folder name (the GEMM scaffold is `gemm`, not the `matmul` that `workbench new` also
    takes) and asks the worker's own code for the cases: one per dtype, each marked as past 2^31."""
    large_index_cost = benchmark_script("large_index_cost")
    from workbench.core.verify.large_index import is_large_index

    for name in large_index_cost.SCAFFOLDS:
        verifier, large = large_index_cost.large_cases(name, tmp_path)
        assert len(large) == 3 and all(is_large_index(case) for case in large), (name, large)
        dtypes = {str(case.params["dtype"]) for case in large}
        assert dtypes == {"torch.float32", "torch.float16", "torch.bfloat16"}, name
        assert verifier.km.path.parent == tmp_path / name


def test_headless_reads_the_plain_scripts_phase_lines():
    headless = benchmark_script("headless")
    plain_scripts = benchmark_script("plain_scripts")
    text = "VERDICT passed\nPHASE torch and triton imported 3.628\nPHASE every case 7.572\n"
    assert headless.plain_phases(text) == {"torch and triton imported": 3.628, "every case": 7.572}
    assert 'phase("torch and triton imported")' in plain_scripts.PLAIN_VERIFY
    assert 'phase("every case")' in plain_scripts.PLAIN_VERIFY


def test_a_benchmarks_child_imports_this_checkout_first_and_keeps_the_callers_path(monkeypatch, tmp_path):
    """child_env.repo_env: every benchmark's child environment (ten scripts once built it by hand, half of them
    replacing PYTHONPATH with the repository and so losing packages installed beside Python)."""
    child_env = benchmark_script("child_env")
    beside = str(tmp_path / "beside")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([beside, str(ROOT), ""]))
    env = child_env.repo_env({"EXTRA": "1"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), beside] and env["EXTRA"] == "1"
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert "WORKBENCH_DISABLE_PLUGIN_AUTOLOAD" not in child_env.repo_env(without=("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD",))
    other = tmp_path / "other-checkout"
    assert child_env.repo_env(root=other)["PYTHONPATH"].split(os.pathsep) == [str(other), beside, str(ROOT)]
    scripts = [p for p in (ROOT / "benchmarks").glob("*.py") if p.name != "child_env.py"]
    by_hand = [p.name for p in scripts if '"PYTHONPATH"' in p.read_text() or "PYTHONPATH=str(" in p.read_text()]
    assert not by_hand, f"{by_hand} build a child's PYTHONPATH by hand: use child_env.repo_env"
