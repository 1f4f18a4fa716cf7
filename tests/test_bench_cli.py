"""`workbench bench` without a GPU: the refusal (exit 3), bad input (exit 2), the report, the plot, doctor."""

import builtins
import json

import kernels
import pytest

from workbench.core.events import (
    AutotuneReport,
    BenchResult,
    CaseResult,
    ConfigTiming,
    DeviceFacts,
    Problem,
    RunFinished,
    Timing,
    WorkerReady,
)
from workbench.core.project.folder import Project
from workbench.core.run.session import RunOutcome


@pytest.fixture
def no_gpu(monkeypatch):
    """Hide every GPU from the worker, so these tests mean the same on a GPU machine."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def test_bench_refuses_the_interpreter_with_exit_3(cli, make_project, no_gpu):
    code, out, err = cli("bench", make_project(kernels.GOOD))
    assert code == 3
    assert "benchmarking needs a CUDA GPU" in out and "no CUDA GPU is visible" in out
    assert "PASS" not in out, "it refuses before verifying anything"
    assert " ms" not in out and "µs" not in out, "no interpreter time is ever printed"


@pytest.mark.slow
def test_bench_refusal_as_json(cli, make_project, no_gpu):
    code, out, err = cli("bench", make_project(kernels.GOOD), "--json")
    assert code == 3
    record = json.loads(out)
    assert record["exit_code"] == 3
    project = record["projects"][0]
    assert project["cases"] == [] and "bench" not in project
    assert [p["kind"] for p in project["problems"]] == ["environment"]


def test_bench_interpret_flag_refused_at_once(cli, make_project):
    code, out, err = cli("bench", make_project(kernels.GOOD), "--interpret")
    assert code == 3 and "never timed" in err and out == ""


def test_bench_bad_input_exit_2(cli, make_project, tmp_path):
    code, out, err = cli("bench", tmp_path / "missing")
    assert code == 2 and "no such file" in err
    code, out, err = cli("bench", make_project(kernels.GOOD), "--plot", tmp_path / "plot.txt")
    assert code == 2 and ".png" in err


def test_bench_unusable_kernel_exit_2_before_refusing(cli, make_project, no_gpu):
    code, out, err = cli("bench", make_project(kernels.SYNTAX_ERROR))
    assert code == 2 and "syntax" in out


def test_bad_bench_config_names_the_key(cli, make_project):
    code, out, err = cli("bench", make_project(kernels.GOOD, toml="[bench]\nmin_samples = 0\n"))
    assert code == 2 and "bench.min_samples" in out
    code, out, err = cli("bench", make_project(kernels.GOOD, name="p2", toml="[bench]\nrep_ms = 'long'\n"))
    assert code == 2 and "bench.rep_ms" in out
    code, out, err = cli("bench", make_project(kernels.GOOD, name="p3", toml="[bench]\nl2_flush = 'hard'\n"))
    assert code == 2 and "bench.l2_flush" in out


@pytest.mark.slow
def test_doctor_measure_without_gpu_exit_3(cli, no_gpu):
    code, out, err = cli("doctor", "--measure")
    assert code == 3 and "NOT MEASURED" in out and "needs a CUDA GPU" in out


# -- the report and the plot, from events as a GPU worker sends them -------------------------

EVENTS_METHOD = "cuda events per call, L2 flushed (100 MiB write) before every call"
GRAPH_METHOD = "cuda graph replay of 57 × (flush + call), flush-only replay subtracted"


def timing(ms, method=EVENTS_METHOD):
    return Timing(median_ms=ms, q25_ms=ms * 0.99, q75_ms=ms * 1.01, min_ms=ms * 0.98, samples=1234, method=method)


def gpu_outcome(tmp_path, recheck_failed=False):
    folder = tmp_path / "rms"
    folder.mkdir()
    (folder / "kernel.py").write_text("# not run\n")
    outcome = RunOutcome(project=Project.open(folder), source_hash="abc", stages=["require_gpu", "verify", "bench"])
    facts = DeviceFacts(name="NVIDIA H100 80GB HBM3", sm_clock_mhz=1980, mem_clock_mhz=2619, temperature_c=40,
                        driver="580.159.04", torch_version="2.11.0", triton_version="3.6.0", copy_gbps=3000.0,
                        matmul_tflops=750.0, ceilings_measured_at="2026-11-21T10:00:00Z", l2_bytes=50 << 20)
    small = BenchResult(case_index=3, label="rows=64 cols=512", kernel=timing(0.008, GRAPH_METHOD),
                        reference=timing(0.020, GRAPH_METHOD), compiled=timing(0.010, GRAPH_METHOD),
                        bytes_moved=131072, bytes_source="bytes_moved() in kernel.py", gbps=16.4,
                        bandwidth_fraction=0.005, speedup_vs_reference=2.5, speedup_vs_compiled=1.25,
                        recheck="passed")
    big = BenchResult(case_index=4, label="rows=8192 cols=8192", kernel=timing(0.090), reference=timing(0.300),
                      compiled=None, compiled_note="torch.compile(reference_fn) failed: RuntimeError: no compiler",
                      bytes_moved=268435456, bytes_source="bytes_moved() in kernel.py", gbps=2982.6,
                      bandwidth_fraction=0.994, speedup_vs_reference=3.33, recheck="passed",
                      notes=["kernel: something worth knowing"])
    if recheck_failed:
        big.kernel, big.gbps, big.bandwidth_fraction = None, None, None
        big.recheck = "failed: after 1234 timed calls: 7 of 67108864 elements outside rtol=0.01 atol=0.01"
    tune = AutotuneReport(kernel="rms_kernel", key="n=8192, torch.bfloat16", picked="BLOCK=1024, num_warps=4",
                          timings=[ConfigTiming("BLOCK=512, num_warps=4", 0.095),
                                   ConfigTiming("BLOCK=1024, num_warps=4", 0.090),
                                   ConfigTiming("BLOCK=65536, num_warps=4", None, "out of resources"),
                                   ConfigTiming("BLOCK=8, num_warps=1", None, "pruned")],
                          case_index=4, tuning_s=1.5, source="listener")
    ready = WorkerReady(pid=1, mode="gpu", device_name=facts.name, torch_version="2.11.0", triton_version="3.6.0",
                        python_version="3.12", warmup_s=3.0)
    for event in (ready, facts, small, tune, big, RunFinished(verdict="passed", passed=2)):
        outcome.events.append(event)
        outcome.tally.add(event)
    outcome.finished = outcome.events[-1]
    return outcome


def test_report_shows_each_number_with_its_method(tmp_path):
    from workbench.reports import format_bench

    text = format_bench(gpu_outcome(tmp_path))
    assert "NVIDIA H100 80GB HBM3" in text and "SM 1980 MHz" in text and "driver 580.159.04" in text
    assert "copy 3000 GB/s" in text and "750 TFLOP/s" in text and "2026-11-21" in text
    assert "8.0 µs G" in text and "90.0 µs E" in text
    assert f"G = {GRAPH_METHOD}" in text and f"E = {EVENTS_METHOD}" in text
    assert "2983" in text and "99%" in text and "3.33x" in text
    assert "bytes: bytes_moved() in kernel.py" in text
    assert "no compiler" in text
    assert "out of resources" in text and "pruned" in text and "<- picked" in text
    assert "after 1.50 s of tuning" in text


def test_report_of_a_failed_recheck_posts_no_time(tmp_path):
    from workbench.reports import format_bench

    text = format_bench(gpu_outcome(tmp_path, recheck_failed=True))
    assert "RE-CHECK FAILED" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("4 "))
    assert "µs E" not in row.split("rows=8192 cols=8192")[1].split()[0]


def test_report_of_an_unverified_kernel(tmp_path):
    from workbench.reports import format_bench

    outcome = gpu_outcome(tmp_path)
    outcome.events = [e for e in outcome.events if not isinstance(e, (DeviceFacts, BenchResult, AutotuneReport))]
    outcome.tally.add(CaseResult(case_index=99, label="n=1", status="failed"))
    assert "verification failed" in format_bench(outcome)


def test_plot_is_saved_under_the_project(tmp_path):
    pytest.importorskip("matplotlib")
    from workbench.builtin.benchmarking import save_plot

    outcome = gpu_outcome(tmp_path)
    path, line = save_plot(outcome)
    assert path is not None and path.parent == outcome.project.state_dir and path.suffix == ".png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(path) in line


def test_plot_without_matplotlib_says_so(tmp_path, monkeypatch):
    from workbench.builtin.benchmarking import save_plot

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    path, line = save_plot(gpu_outcome(tmp_path))
    assert path is None and "needs matplotlib" in line


def test_problem_only_outcome_prints_no_bench_section(tmp_path):
    from workbench.reports import format_bench

    outcome = gpu_outcome(tmp_path)
    outcome.events = [Problem(kind="environment", message="no GPU")]
    outcome.tally = type(outcome.tally)()
    outcome.tally.add(outcome.events[0])
    assert format_bench(outcome) == ""


def test_report_names_a_bench_case_wrong_before_timing(tmp_path):
    from workbench.core.events import CaseResult
    from workbench.reports import format_bench

    outcome = gpu_outcome(tmp_path)
    wrong = CaseResult(case_index=5, label="rows=4096", status="failed", messages=["3 elements outside rtol"])
    outcome.events.append(wrong)
    outcome.tally.add(wrong)
    text = format_bench(outcome)
    assert "not timed: case 5, wrong before timing" in text


def test_the_reference_key_ignores_the_kernel_and_follows_the_reference(tmp_path):
    """What lets the live loop reuse a reference time across saves, and only while it still holds."""
    import kernels

    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import load_kernel
    from workbench.core.timing.baselines import reference_key

    def key(source, case=0, gpu="NVIDIA H200", config=BenchConfig()):
        path = tmp_path / f"k{len(list(tmp_path.iterdir()))}.py"
        path.write_text(source)
        km = load_kernel(path)
        return reference_key(km, km.cases[case], config, gpu)

    base = key(kernels.GOOD)
    assert key(kernels.GOOD) == base
    assert key(kernels.BAD_CONFIG) == base  # the kernel changed, the reference did not
    assert key(kernels.GOOD.replace("return x * 2", "return x * 2.0")) != base
    assert key(kernels.GOOD, case=1) != base
    assert key(kernels.GOOD, gpu="NVIDIA H100 80GB HBM3") != base
    assert key(kernels.GOOD, config=BenchConfig(l2_flush="write")) != base
