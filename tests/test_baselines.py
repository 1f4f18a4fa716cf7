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
                           reference=None if reference_ms is None else timing(reference_ms),
                           kernel_compiled_key="", kernel_compiled=None, kernel_compiled_reused=False)


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


def test_torch_compile_of_the_reference_and_of_kernel_fn_are_timed_alike(monkeypatch, tmp_path):
    """The two compiled baselines share one path (baselines.Baselines._time_compiled): each compiled with what it is
    named in a failure, timed by the kernel's timer, its peak memory taken; a failure is its own note. Stand-ins for
    torch.compile and the timer (the real ones run on a GPU: test_bench_gpu)."""
    import torch

    from workbench.core.events import BenchResult
    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import Case
    from workbench.core.stage import Phases
    from workbench.core.timing import baselines as module

    compiled_what = []

    def compile_stand_in(fn, inputs, wrap=None, what="torch.compile(reference_fn)"):
        compiled_what.append(what)
        return (None, f"{what} failed: Unsupported: a graph break") if fn is broken else (fn, "")

    def broken(x):
        return x

    monkeypatch.setattr(module, "compile_reference", compile_stand_in)
    monkeypatch.setattr(module, "measure", lambda fn, config, flusher, watch, what, footprint: SimpleNamespace(
        timing=timing(0.25), notes=[f"{what}: timed"]))
    monkeypatch.setattr(module, "peak_memory", lambda fn: 4096)
    (tmp_path / "kernel.py").write_text("# the project\n")
    km = SimpleNamespace(reference_fn=lambda x: x * 2, kernel_fn=lambda x: x * 2, get_inputs=lambda: [torch.ones(4)],
                         path=tmp_path / "kernel.py")
    context = SimpleNamespace(km=km, config=SimpleNamespace(bench=BenchConfig()), emit=lambda event: None,
                              job=SimpleNamespace(live=False, reference_timings={}, kept_baselines={}))
    bench = module.Baselines(context, "a GPU", flusher=None, watch=None)
    result, phases = BenchResult(case_index=0, label="n=4", kernel=timing(0.2)), Phases()
    monkeypatch.setattr(bench, "_time_reference", lambda result, inputs, km: None)
    bench.time(result, Case(index=0, params={}), [torch.ones(4)], None, phases, km, None)
    bench.time_kernel_compiled(result, Case(index=0, params={}), [torch.ones(4)], None, phases, None)
    assert compiled_what == ["torch.compile(reference_fn)", "torch.compile(kernel_fn)"]
    assert result.compiled.median_ms == result.kernel_compiled.median_ms == 0.25
    assert result.compiled.peak_memory_bytes == result.kernel_compiled.peak_memory_bytes == 4096
    assert result.notes == ["torch.compile: timed", "torch.compile(kernel_fn): timed"]
    assert {"baselines: torch.compile(reference_fn) timed", "baselines: torch.compile(kernel_fn) timed"} <= \
        set(phases.seconds)
    km.kernel_fn = broken
    failed = BenchResult(case_index=0, label="n=4", kernel=timing(0.2))
    bench.time_kernel_compiled(failed, Case(index=0, params={}), [torch.ones(4)], None, Phases(), None)
    assert failed.kernel_compiled is None
    assert failed.kernel_compiled_note == "torch.compile(kernel_fn) failed: Unsupported: a graph break"


def test_kernel_fns_time_under_torch_compile_is_kept_until_a_project_file_changes(monkeypatch, tmp_path):
    """Its compile imports Dynamo and Inductor (seconds on a run whose checks' passes are kept): kept like the
    baselines, by a key that also hashes every Python file of the project."""
    compiles = []
    (tmp_path / "kernel.py").write_text("# version 1\n")
    run = time_kernel_compiled_in(monkeypatch, Project.open(tmp_path),
                                  lambda fn, inputs, wrap=None, what="": compiles.append(what) or (fn, ""))

    first = run()
    assert compiles == ["torch.compile(kernel_fn)"] and not first.kernel_compiled_reused and first.kernel_compiled_key
    again = run()
    assert compiles == ["torch.compile(kernel_fn)"] and again.kernel_compiled_reused
    assert again.kernel_compiled.median_ms == 0.25 and "kernel_fn under torch.compile: its time from a run at" in \
        again.notes[0]
    (tmp_path / "kernel.py").write_text("# version 2\n")  # a save: the kernel is compiled and timed again
    changed = run()
    assert compiles == ["torch.compile(kernel_fn)"] * 2 and not changed.kernel_compiled_reused
    assert changed.kernel_compiled_key != first.kernel_compiled_key


def test_a_scalar_that_reaches_the_kernel_as_fp64_under_torch_compile_is_said_beside_its_time(monkeypatch, tmp_path):
    """The bench compiles kernel_fn under torch.compile to time it: the kernels Inductor compiled then, against
    their eager compiles in the project's Triton cache, say why the two times differ; kept with the time."""
    from workbench.core.events import BenchResult
    from workbench.reports.bench import kernel_compiled_lines

    cache = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    signature = ('module {{\n  tt.func public @norm_kernel(%x_ptr: !tt.ptr<f32> loc("x_ptr"(#loc)), %eps: {} '
                 'loc("eps"(#loc))) {{\n    tt.return\n  }}\n}}\n')

    def cache_entry(name, eps_type, fp64_adds):
        (cache / name).mkdir(parents=True)
        (cache / name / "norm_kernel.ttir").write_text(signature.format(eps_type))
        (cache / name / "norm_kernel.ptx").write_text("\n".join(["\tadd.rn.f64 \t%fd3, %fd1, %fd2;"] * fp64_adds))

    cache_entry("eager", "f32", 0)  # verification's calls compiled it as called eagerly

    def compile_under_inductor(fn, inputs, wrap=None, what=""):
        if not (cache / "inductor").exists():
            cache_entry("inductor", "f64", 6)
        return fn, ""

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "kernel.py").write_text("# the project\n")
    run = time_kernel_compiled_in(monkeypatch, Project.open(tmp_path / "project"), compile_under_inductor)

    first = run()
    (note,) = first.kernel_compiled_scalars
    assert "`norm_kernel` receives `eps` as f64 (eagerly f32)" in note and "eps = eps.to(tl.float32)" in note
    again = run()  # kept: no compile, the note with the time
    assert again.kernel_compiled_reused and again.kernel_compiled_scalars == [note]
    lines = kernel_compiled_lines([first, BenchResult(case_index=1, label="n=8", kernel=timing(0.2),
                                                      kernel_compiled=timing(0.25), kernel_compiled_scalars=[note])])
    assert lines[0].startswith("  kernel_fn under torch.compile, case 0: 250 µs") and "(1.25x the eager" in lines[0]
    assert lines[1] == f"    why: {note}" and len(lines) == 3  # said once, at the first case it slows


def time_kernel_compiled_in(monkeypatch, project, compile_stand_in):
    """A run of Baselines.time_kernel_compiled on `project` with its kept baselines, torch.compile played by
    `compile_stand_in` and every timing 0.25 ms, its times then kept as a bench keeps them: a function per run."""
    import torch

    from workbench.core.events import BenchResult
    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import Case
    from workbench.core.stage import Phases
    from workbench.core.timing import baselines as module

    monkeypatch.setattr(module, "compile_reference", compile_stand_in)
    monkeypatch.setattr(module, "measure", lambda fn, config, flusher, watch, what, footprint: SimpleNamespace(
        timing=timing(0.25), notes=[]))
    monkeypatch.setattr(module, "peak_memory", lambda fn: 0)
    km = SimpleNamespace(reference_fn=lambda x: x, kernel_fn=lambda x: x, get_inputs=lambda: [],
                         path=project.kernel_path)

    def run():
        context = SimpleNamespace(km=km, config=SimpleNamespace(bench=BenchConfig()), emit=lambda event: None,
                                  job=SimpleNamespace(live=False, reference_timings={},
                                                      kept_baselines=baselines.load_baselines(project)))
        result = BenchResult(case_index=0, label="n=4", kernel=timing(0.2), reference_key="r")
        module.Baselines(context, "a GPU", None, None).time_kernel_compiled(
            result, Case(index=0, params={}), [torch.ones(4)], None, Phases(), None)
        baselines.remember_baselines(project, [result])
        return result

    return run
