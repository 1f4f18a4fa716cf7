"""The run history stays bounded (project/history.py): the oldest runs go past [history] keep_runs / keep_mb as
runs are recorded, never a pinned run nor the newest, and the sources no run names go with them; sources are
stored compressed, older uncompressed ones still read; `workbench history` says how much it holds, --prune,
--pin and --unpin."""

import base64
import json
import os

import kernels
import pytest

from workbench.core.project.config import ConfigError, HistoryConfig, ProjectConfig
from workbench.core.project.folder import Project
from workbench.core.project.history import (
    append_record,
    holding,
    pins,
    prune,
    read_records,
    read_source,
    set_pin,
    sources_dir,
)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "kernel.py").write_text(kernels.GOOD)
    return Project.open(tmp_path)


def record(project, n, limits=None, big=0):
    noise = base64.b64encode(os.urandom(big)).decode() if big else ""  # does not compress away
    source = f"# version {n}\n" + noise
    return append_record(project, {"id": f"run-{n:04d}", "source_hash": f"{n:016x}", "status": "passed",
                                   "stages": ["verify"]}, source, limits=limits)


def test_the_oldest_runs_go_past_keep_runs_and_their_sources_with_them(project):
    for n in range(12):
        record(project, n, HistoryConfig(keep_runs=5, keep_mb=0))
    ids = [r.id for r in read_records(project)]
    assert ids == [f"run-{n:04d}" for n in range(7, 12)]
    assert sorted(p.name for p in sources_dir(project).iterdir()) == [f"{n:016x}.py.gz" for n in range(7, 12)]
    assert read_source(project, f"{11:016x}") == "# version 11\n"
    assert holding(project).runs == 5 and holding(project).sources == 5
    for n in range(12, 40):  # a bigger limit is brought down to 90% of it when passed: pruned now and then
        record(project, n, HistoryConfig(keep_runs=20, keep_mb=0))
    assert holding(project).runs in range(18, 21)


def test_keep_mb_bounds_the_bytes_and_the_newest_run_always_stays(project):
    for n in range(8):
        record(project, n, HistoryConfig(keep_runs=0, keep_mb=0.1), big=30_000)  # ~40 kB a source
    held = holding(project)
    assert held.nbytes <= 0.1 * 2**20 and 1 <= held.runs < 8, held
    assert read_records(project)[-1].id == "run-0007"
    prune(project, keep_runs=0, keep_mb=1e-9)
    assert [r.id for r in read_records(project)] == ["run-0007"]  # however small the limit


def test_pinned_runs_and_baselines_are_never_removed(project):
    for n in range(4):
        record(project, n)
    set_pin(project, "run-0000", "pinned")
    set_pin(project, "run-0001", "a --baseline")
    assert prune(project, keep_runs=1, keep_mb=0) == ["run-0002"]
    assert [r.id for r in read_records(project)] == ["run-0000", "run-0001", "run-0003"]
    set_pin(project, "run-0000", None)
    assert pins(project) == {"run-0001": "a --baseline"}
    assert prune(project, keep_runs=1, keep_mb=0) == ["run-0000"]


def test_a_source_written_before_compression_still_reads(project):
    folder = sources_dir(project)
    folder.mkdir(parents=True)
    (folder / "abc.py").write_text("old = 1\n")
    assert read_source(project, "abc") == "old = 1\n"
    assert read_source(project, "missing") is None


def test_the_limits_are_a_workbench_toml_table_and_bad_ones_are_refused():
    config = ProjectConfig.from_dict({"history": {"keep_runs": 50, "keep_mb": 10}}, strict=True)
    assert config.history == HistoryConfig(keep_runs=50, keep_mb=10)
    with pytest.raises(ConfigError, match="history.keep_runs"):
        ProjectConfig.from_dict({"history": {"keep_runs": -1}}, strict=True)
    with pytest.raises(ConfigError, match="did you mean keep_runs"):
        ProjectConfig.from_dict({"history": {"keep_run": 5}}, strict=True)


def test_history_says_what_it_holds_and_prunes_and_pins_on_asking(cli, project):
    for n in range(6):
        record(project, n)
    (project.root / "workbench.toml").write_text("[history]\nkeep_runs = 3\n")
    code, out, err = cli("history", project.root, "--pin", "run-0000")
    assert code == 0 and "run run-0000 pinned" in out and "[pinned]" in out
    assert "6 runs, 6 stored sources" in out
    code, out, err = cli("history", project.root, "--prune")
    assert code == 0 and "removed 3 runs (run-0001 .. run-0003)" in out, out
    assert [r.id for r in read_records(project)] == ["run-0000", "run-0004", "run-0005"]
    code, out, err = cli("history", project.root, "--pin", "nope")
    assert code == 2 and "no run 'nope'" in err
    assert json.loads((project.state_dir / "pins.json").read_text()) == {"run-0000": "pinned"}
