"""The seed of a run's inputs: every case's get_inputs draws from it, the report says it, and `--seed N` (or
workbench.toml's [verify] seed) draws the same inputs again, so that a failure seen once can be seen again."""

import json
import xml.etree.ElementTree as ET

import pytest

import kernels
from run_helpers import ONLY_CASES, verify_json
from workbench.core.events import RunStarted
from workbench.core.project.config import ConfigError, ProjectConfig, inputs_seed
from workbench.core.verify.compat import finding_key
from workbench.core.live.loop import RunRequest
from workbench.tui.model import LiveSession, RunState
from workbench.tui.widgets.status import identity_line

# A kernel off by 1% of its output, which is 1e-4 * randn: its largest error is a function of the inputs drawn.
DRAWN = kernels.SMALL_BIAS


def errors(record):
    return [c["max_abs_err"] for c in record["cases"]]


def test_the_same_seed_draws_the_same_inputs_and_another_seed_others(cli, make_project):
    project = make_project(DRAWN, toml=ONLY_CASES)
    _, first = verify_json(cli, project, "--seed", "7")
    _, again = verify_json(cli, project, "--seed", "7")
    _, other = verify_json(cli, project, "--seed", "8")
    assert first["seed"] == again["seed"] == 7 and other["seed"] == 8
    assert all(e is not None for e in errors(first))
    assert errors(first) == errors(again)
    assert errors(first) != errors(other)
    _, history, _ = cli("history", project)  # a failure in the history names the seed that replays it
    assert [ln.split("seed ")[1].split()[0] for ln in history.splitlines() if " seed " in ln] == ["7", "7", "8"]


def test_a_run_without_a_seed_draws_one_says_it_and_that_seed_replays_it(cli, make_project, tmp_path):
    project = make_project(DRAWN, toml=ONLY_CASES)
    code, out, _ = cli("verify", project, "--junit", tmp_path / "junit.xml")
    assert code == 1
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("inputs: seed "))
    seed = int(line.split()[2])
    assert f"`--seed {seed}` draws them again" in line
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite.find("properties/property[@name='seed']").get("value") == str(seed)  # CI's report says it too
    _, drawn = verify_json(cli, project)
    _, replayed = verify_json(cli, project, "--seed", str(drawn["seed"]))
    assert errors(replayed) == errors(drawn)


def test_workbench_toml_names_the_seed_and_the_command_line_wins(cli, make_project):
    project = make_project(DRAWN, toml=ONLY_CASES + "seed = 11\n")
    _, from_toml = verify_json(cli, project)
    _, over = verify_json(cli, project, "--seed", "12")
    assert from_toml["seed"] == 11 and over["seed"] == 12  # the worker seeds from it as from --seed (above)
    assert errors(from_toml) != errors(over)


def test_one_command_draws_one_seed_for_all_its_projects(cli, make_project):
    one = make_project(DRAWN, name="one", toml=ONLY_CASES)
    two = make_project(DRAWN, name="two", toml=ONLY_CASES)
    _, out, _ = cli("verify", one, two, "--json")
    first, second = json.loads(out)["projects"]
    assert first["seed"] == second["seed"] is not None
    assert errors(first) == errors(second)  # the same kernel on the same draw


@pytest.mark.parametrize("bad", ["-1", "1.5", "x", str(2 ** 32)])
def test_a_bad_seed_on_the_command_line_is_refused_before_anything_runs(capsys, make_project, bad):
    from workbench.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["verify", str(make_project(kernels.GOOD)), f"--seed={bad}"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert "argument --seed: expected a whole number from 0 to 4294967295" in err


@pytest.mark.parametrize("bad", [True, -1, 1.5, "7", 2 ** 32])
def test_a_bad_seed_in_workbench_toml_names_the_key(bad):
    with pytest.raises(ConfigError, match=r"verify\.seed.*whole number"):
        ProjectConfig.from_dict({"verify": {"seed": bad}})


def test_the_seed_travels_with_the_job_and_an_unset_one_stays_unset():
    assert ProjectConfig.from_dict(ProjectConfig.from_dict({"verify": {"seed": 5}}).to_dict()).verify.seed == 5
    assert ProjectConfig.from_dict(ProjectConfig().to_dict()).verify.seed is None


def test_each_case_draws_from_its_own_seed():
    seeds = {inputs_seed(7, index) for index in range(1000)}
    assert len(seeds) == 1000  # no two cases of a run draw the same inputs
    assert inputs_seed(7, 3) == inputs_seed(7, 3) != inputs_seed(8, 3)


def test_a_kept_compatibility_pass_does_not_depend_on_the_seed(tmp_path):
    from workbench.core.project.contract import Case

    (tmp_path / "kernel.py").write_text("")
    km = type("KM", (), {"path": tmp_path / "kernel.py"})()
    case = Case(index=0, params={"n": 4})
    keys = {finding_key(km, case, ProjectConfig.from_dict({"verify": {"seed": s}}).verify, "cuda_graph")
            for s in (1, 2)}
    assert len(keys) == 1
    other = ProjectConfig.from_dict({"verify": {"error_factor": 3.0}}).verify
    assert finding_key(km, case, other, "cuda_graph") not in keys  # the other settings still count


def test_the_app_shows_the_seed_of_the_run_on_screen():
    session = LiveSession(project_name="p", kernel_name="kernel.py")
    run = RunState(run_id=1, request=RunRequest(stages=("verify",)))
    run.apply(RunStarted(kernel_path="kernel.py", source_hash="h", mode="interpreter", device_name="cpu", n_cases=1,
                         seed=482913))
    session.current = run
    assert "seed 482913" in identity_line(session).plain
