"""torch.compile(reference_fn)'s and reference_fn's times kept across runs (core/project/kept.py): what is kept, what is
never kept, and that a damaged file is a miss, not an error. (The reuse itself, on a GPU: test_bench_gpu.)"""

from types import SimpleNamespace

from workbench.core.events import Timing
from workbench.core.project import kept as baselines
from workbench.core.project.folder import Project


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, q25_ms=ms, q75_ms=ms, min_ms=ms, samples=30, method="cuda events")


def result(key: str, ms: float | None, reused: bool = False, reference_key: str = "",
           reference_ms: float | None = None, reference_reused: bool = False) -> SimpleNamespace:
    return SimpleNamespace(compiled_key=key, compiled=None if ms is None else timing(ms), compiled_reused=reused,
                           reference_key=reference_key, reference_reused=reference_reused,
                           reference=None if reference_ms is None else timing(reference_ms))


def project_at(tmp_path) -> Project:
    (tmp_path / "kernel.py").write_text("x = 1\n")
    project = Project.open(tmp_path)
    project.ensure_state_dir()
    return project


def test_measured_times_are_kept_and_read_back(tmp_path):
    project = project_at(tmp_path)
    baselines.remember_baselines(project, [result("a", 1.5), result("b", None), result("", 2.0)])
    kept = baselines.load_baselines(project)
    assert set(kept) == {"a"} and kept["a"]["timing"]["median_ms"] == 1.5 and kept["a"]["measured_at"] > 0


def test_a_reused_time_is_not_written_again_as_new(tmp_path):
    project = project_at(tmp_path)
    baselines.remember_baselines(project, [result("a", 1.5)])
    when = baselines.load_baselines(project)["a"]["measured_at"]
    baselines.remember_baselines(project, [result("a", 9.0, reused=True)])
    assert baselines.load_baselines(project)["a"] == {"timing": baselines._plain(timing(1.5)), "measured_at": when,
                                                      "of": "torch.compile"}


def test_a_damaged_file_is_a_miss_and_is_replaced_whole(tmp_path):
    project = project_at(tmp_path)
    path = project.state_dir / baselines.BASELINES_FILE
    path.write_text('{"a": {"timing": ')  # cut short
    assert baselines.load_baselines(project) == {}
    path.write_text('["not", "a", "mapping"]')
    assert baselines.load_baselines(project) == {}
    baselines.remember_baselines(project, [result("b", 3.0)])
    assert set(baselines.load_baselines(project)) == {"b"}


def test_only_the_newest_entries_are_kept(tmp_path, monkeypatch):
    project = project_at(tmp_path)
    monkeypatch.setattr(baselines, "MAX_ENTRIES", 3)
    for n in range(5):
        baselines.remember_baselines(project, [result(f"k{n}", float(n + 1))])
    assert set(baselines.load_baselines(project)) == {"k2", "k3", "k4"}


def test_the_references_time_is_kept_beside_torch_compiles_and_a_reused_one_is_not_new(tmp_path):
    project = project_at(tmp_path)
    baselines.remember_baselines(project, [result("c1", 1.5, reference_key="r1", reference_ms=4.0),
                                           result("", None, reference_key="r2", reference_ms=None)])
    kept = baselines.load_baselines(project)
    assert set(kept) == {"c1", "r1"} and kept["r1"]["timing"]["median_ms"] == 4.0
    assert (kept["r1"]["of"], kept["c1"]["of"]) == ("reference_fn", "torch.compile")
    baselines.remember_baselines(project, [result("c1", 9.0, True, reference_key="r1", reference_ms=9.0,
                                                  reference_reused=True)])
    assert baselines.load_baselines(project) == kept


def test_a_kept_baseline_is_read_back_with_a_note_saying_when():
    from workbench.core.events import BenchResult
    from workbench.core.timing.baselines import Baselines

    timer = SimpleNamespace(kept_baselines={"r1": {"timing": baselines._plain(timing(4.0)), "measured_at": 0.0}})
    result = BenchResult(case_index=0, label="n=8")
    assert Baselines._kept(timer, result, "r2", "reference_fn", "timing method") is None and not result.notes
    kept = Baselines._kept(timer, result, "r1", "reference_fn", "timing method")
    assert kept == timing(4.0)
    assert result.notes[0].startswith("reference_fn: its time from a run at ")
    assert "torch and timing method); `workbench bench --fresh-baselines` measures it again" in result.notes[0]
