"""The timing path on a real GPU (marker `gpu`: skipped without CUDA)."""

import json

import kernels
import pytest

pytestmark = pytest.mark.gpu

QUICK = "[bench]\nwarmup_ms = 50\nrep_ms = 200\ncompare_torch_compile = {compile}\n"
# For kernels that keep state in the launcher or patch torch: torch.compile and CUDA graphs reject those
# in verification already, and these tests are about the benchmark's own checks.
NO_COMPAT = "[verify]\ntorch_compile = false\ncuda_graph = false\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def quick_config():
    from workbench.core.project.config import BenchConfig

    return BenchConfig(warmup_ms=50.0, rep_ms=200.0)


def test_flush_buffer_is_at_least_twice_the_l2():
    import torch

    from workbench.core.timing.timers import L2Flusher

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for mode in ("read", "write"):
        flusher = L2Flusher(l2, mode)
        assert flusher.nbytes >= 2 * l2
        assert flusher.buffer.numel() * flusher.buffer.element_size() == flusher.nbytes
        flusher()
        assert mode in flusher.label
    with pytest.raises(ValueError):
        L2Flusher(l2, "sideways")


def test_events_time_a_copy_at_a_plausible_bandwidth(quick_config):
    import torch

    from workbench.core.timing.stats import summarize
    from workbench.core.timing.timers import L2Flusher, time_with_events

    src = torch.randn(64 << 20, device="cuda")  # 256 MiB
    dst = torch.empty_like(src)
    samples = time_with_events(lambda: dst.copy_(src), quick_config, L2Flusher(None))
    timing = summarize(samples, "events")
    gbps = 2 * src.numel() * 4 / (timing.median_ms * 1e-3) / 1e9
    assert timing.samples >= quick_config.min_samples
    assert 200 < gbps < 20000, f"{gbps:.0f} GB/s is not a GPU copy"
    assert (timing.q75_ms - timing.q25_ms) / timing.median_ms < 0.10


def test_slow_host_launches_stay_out_of_the_samples(quick_config):
    import time

    import torch

    from workbench.core.timing.timers import LaunchPad, time_with_events

    x = torch.randn(4096, device="cuda")

    def slow_launcher():  # 200 µs of Python before a kernel of a few µs
        time.sleep(0.0002)
        x.mul_(1.0)

    samples = sorted(time_with_events(slow_launcher, quick_config))
    median = samples[len(samples) // 2]
    assert median < 0.05, (f"the host's 200 µs leaked into the GPU time: median {median * 1e3:.1f} µs, "
                           f"spin rate {LaunchPad.cycles_per_ms():.0f} cycles/ms")


def test_short_calls_are_timed_by_graph_replay(quick_config):
    import torch

    from workbench.core.timing.compilewatch import CompileWatch
    from workbench.core.timing.timers import L2Flusher, measure

    x = torch.randn(4096, device="cuda")
    measured = measure(lambda: x * 2, quick_config, L2Flusher(None), CompileWatch(), "tiny")
    assert measured.timing is not None
    assert measured.timing.method.startswith("cuda graph"), measured.notes
    assert 0 < measured.timing.median_ms < 0.02
    assert any("per-call events gave" in n for n in measured.notes)


def test_a_call_that_syncs_falls_back_to_events(quick_config):
    import dataclasses

    import torch

    from workbench.core.timing.compilewatch import CompileWatch
    from workbench.core.timing.timers import L2Flusher, measure

    x = torch.randn(4096, device="cuda")
    graph_everything = dataclasses.replace(quick_config, cuda_graph_below_us=1e6)
    measured = measure(lambda: float(x.sum()), graph_everything, L2Flusher(None), CompileWatch(), "syncs")
    assert measured.timing.method.startswith("cuda events")
    assert any("synchronizes with the host" in n for n in measured.notes), measured.notes
    torch.randn(4, device="cuda")  # no capture was attempted, so nothing was left broken


def test_a_failed_capture_is_recovered_from(quick_config):
    import torch

    from workbench.core.timing.timers import L2Flusher, time_with_graph
    from workbench.core.verify.compat import recover_from_failed_capture

    x = torch.randn(4096, device="cuda")
    with pytest.raises(Exception):
        time_with_graph(lambda: float(x.sum()), quick_config, L2Flusher(None))
    recover_from_failed_capture()
    assert torch.randn(4, device="cuda").isfinite().all()  # random ops work again


def test_compile_watch_sees_a_compile_inside_the_region():
    import torch
    import triton
    import triton.language as tl

    from workbench.core.timing.compilewatch import CompileWatch

    @triton.jit
    def fresh_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(16, device="cuda")
    with CompileWatch([fresh_kernel]) as watch:
        fresh_kernel[(1,)](x, 16, BLOCK=16)
    assert watch.compiled >= 1
    with CompileWatch([fresh_kernel]) as watch:
        fresh_kernel[(1,)](x, 16, BLOCK=16)
    assert watch.compiled == 0


def test_ceilings_are_measured_once_then_read_from_the_cache(cache_dir, quick_config):
    from workbench.core.timing.device import ceilings_path, load_or_measure

    measured_now = []
    first, notes = load_or_measure(quick_config, on_measure=lambda: measured_now.append(1))
    assert measured_now == [1] and "cached in" in notes[0]
    assert 200 < first.copy_gbps < 20000 and 10 < first.matmul_tflops < 5000
    assert ceilings_path(first.gpu).is_file() and first.measured_at and first.torch_version
    again, notes = load_or_measure(quick_config, on_measure=lambda: measured_now.append(2))
    assert again == first and measured_now == [1]
    ceilings_path(first.gpu).write_text("{broken")
    fixed, notes = load_or_measure(quick_config)
    assert "ignored and re-measured" in notes[0] and fixed.copy_gbps > 0


def test_bench_end_to_end(cli, make_project, cache_dir):
    project = make_project(kernels.GOOD, toml=QUICK.format(compile="true"))
    code, out, err = cli("bench", project, "--json", "--no-plot")
    assert code == 0, out
    record = json.loads(out)["projects"][0]
    (row,) = record["bench"]  # GOOD has one case with purpose "bench"
    assert row["case_index"] == 3 and row["recheck"] == "passed"
    assert row["median_ms"] > 0 and row["kernel"]["samples"] >= 30
    assert row["reference"]["median_ms"] > 0
    assert row["compiled"] is not None or row["compiled_note"]
    assert row["kernel_compiled"]["median_ms"] > 0, row["kernel_compiled_note"]  # kernel_fn under torch.compile
    assert "kernel_fn under torch.compile, case 3: " in format_bench_of(cli, project)
    assert row["bytes_moved"] == 2 * (1 << 20) * 4 and row["bytes_source"].startswith("lower bound")
    assert row["gbps"] > 0 and row["bandwidth_fraction"] > 0
    facts = record["device_facts"]
    assert facts["name"] and facts["torch_version"] and facts["copy_gbps"] > 0 and facts["l2_bytes"] > 0
    tunings = [a for a in record["autotune"] if a["case_index"] == 3]
    assert tunings and {t["config"] for t in tunings[0]["timings"]} == {"BLOCK=64, num_warps=4, num_stages=3",
                                                                          "BLOCK=128, num_warps=4, num_stages=3"}
    assert record["bench_summary"].startswith("bench 1 case")
    assert any(c["case_index"] == 3 and c["status"] == "passed" for c in record["cases"])
    # a correct kernel is posted: one launch per timed call, as on a copy of the inputs it had not seen,
    # its inputs rotated through 4 sets (4 MiB each: copies fit), a rate under the copy ceiling
    assert row["withheld"] == "" and row["timed_launches_per_call"] == 1 and row["checked_launches"] == 1
    assert row["input_sets"] == 4 and row["gbps"] < facts["copy_gbps"] * 1.1


def format_bench_of(cli, project):
    code, out, err = cli("bench", project, "--no-plot")
    assert code == 0, out
    return out


def test_the_baselines_times_are_kept_across_runs_until_asked_again(cli, make_project, cache_dir):
    project = make_project(kernels.GOOD, toml=QUICK.format(compile="true"))

    def compiled_row(*extra):
        code, out, err = cli("bench", project, "--json", "--no-plot", *extra)
        assert code == 0, out
        (row,) = json.loads(out)["projects"][0]["bench"]
        assert row["compiled"] is not None, row["compiled_note"]
        return row

    first = compiled_row()
    assert not first["compiled_reused"] and first["compiled_key"] and not first["reference_reused"]
    second = compiled_row()
    assert second["compiled_reused"] and second["compiled"] == first["compiled"]
    assert second["reference_reused"] and second["reference"] == first["reference"]
    # kernel_fn under torch.compile (the compiled context's column): kept the same way, Dynamo not imported for it
    assert first["kernel_compiled_key"] and not first["kernel_compiled_reused"], first["kernel_compiled_note"]
    assert second["kernel_compiled_reused"] and second["kernel_compiled"] == first["kernel_compiled"]
    assert any("torch.compile: its time from a run at" in note for note in second["notes"])
    assert any("reference_fn: its time from a run at" in note for note in second["notes"])
    third = compiled_row("--fresh-baselines")
    assert not third["compiled_reused"] and third["compiled_key"] == first["compiled_key"]
    assert not third["reference_reused"] and third["reference_key"] == first["reference_key"]
    assert not third["kernel_compiled_reused"] and third["kernel_compiled_key"] == first["kernel_compiled_key"]


# Not autotuned: Triton's autotuner times configs with torch.cuda.Event.elapsed_time, which the rebinding
# would send into ~1e11 calls (the kernel's own doing, a hang the time-out reports, not this test's subject).
NOT_TUNED = kernels.kernel_source(
    kernel=kernels.KERNEL.replace(
        '@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])\n', ''),
    launcher=kernels.LAUNCHER.replace('scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)',
                                      'scale_kernel[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)'))
REBINDS_TIMING = NOT_TUNED + '''
torch.cuda.Event.elapsed_time = lambda self, end: 1e-9  # every call "takes" a picosecond
_real_replay = torch.cuda.CUDAGraph.replay
torch.cuda.CUDAGraph.replay = lambda self: None
'''


def test_a_kernel_py_that_rebinds_the_timers_posts_a_real_time(cli, make_project, cache_dir):
    project = make_project(REBINDS_TIMING, toml=QUICK.format(compile="false") + NO_COMPAT)
    code, out, err = cli("bench", project, "--json", "--no-plot")
    assert code == 0, out
    (row,) = json.loads(out)["projects"][0]["bench"]
    # 8 MiB through HBM: microseconds, never the picosecond the rebinding says, nor a zero-length replay
    assert row["kernel"]["median_ms"] > 1e-3 and row["gbps"] < 10_000, row["kernel"]
    assert row["reference"]["median_ms"] > 1e-3


def test_bench_text_report_and_plot(cli, make_project, cache_dir):
    pytest.importorskip("matplotlib")
    project = make_project(kernels.GOOD, toml=QUICK.format(compile="false"))
    code, out, err = cli("bench", project)
    assert code == 0, out
    assert "benchmark" in out and "GB/s" in out and ("E = cuda events" in out or "G = cuda graph" in out)
    plot = next(line.split("plot: ")[1] for line in out.splitlines() if "plot: " in line)
    assert plot.endswith(".png") and ".workbench" in plot


def test_failing_kernel_is_never_timed(cli, make_project, cache_dir):
    code, out, err = cli("bench", make_project(kernels.GRID_SHORT, toml=QUICK.format(compile="false")), "--json")
    assert code == 1, out
    record = json.loads(out)["projects"][0]
    assert "bench" not in record and "device_facts" not in record


# Right on its first calls with benchmark-sized inputs, wrong from the fourth on. (Counted in the launcher:
# calls replayed from a CUDA graph never reach it, so the count is of Python calls, which the recheck makes.)
WRONG_AFTER_REPETITION = kernels.kernel_source(launcher=kernels.LAUNCHER.replace(
    "    return out",
    "    if n >= (1 << 20):\n"
    "        scale.calls = getattr(scale, 'calls', 0) + 1\n"
    "    return out + 1 if getattr(scale, 'calls', 0) > 3 else out"))


def test_kernel_wrong_under_repetition_posts_no_time(cli, make_project, cache_dir):
    project = make_project(WRONG_AFTER_REPETITION, toml=QUICK.format(compile="false") + NO_COMPAT)
    code, out, err = cli("bench", project, "--json")
    assert code == 1, out
    record = json.loads(out)["projects"][0]
    (row,) = record["bench"]
    assert row["recheck"].startswith("failed") and row["median_ms"] is None and row["kernel"] is None
    assert any(c["status"] == "failed" and "timed calls" in " ".join(c["messages"]) for c in record["cases"])
    assert "RE-CHECK FAILED" in record["bench_summary"]


# Right on every verification case, wrong on the benchmark case (n = 2^20), and patching the comparison.
TAMPERS_AT_BENCH_SIZE = kernels.kernel_source(launcher=kernels.LAUNCHER.replace(
    "    return out", "    return out + 1 if n >= (1 << 20) else out")) + kernels.TAMPER_PATCHES


def test_the_benchmark_case_is_judged_out_of_the_kernels_reach(cli, make_project, cache_dir):
    project = make_project(TAMPERS_AT_BENCH_SIZE, toml=QUICK.format(compile="false") + NO_COMPAT)
    code, out, err = cli("bench", project, "--json")
    assert code == 1, out
    record = json.loads(out)["projects"][0]
    bench_case = [c for c in record["cases"] if c["label"] == "n=1048576"]
    assert bench_case and all(c["status"] == "failed" for c in bench_case), bench_case
    assert not record.get("bench") or all(row["kernel"] is None for row in record["bench"])


ZEROED_OUTPUT = kernels.kernel_source(launcher=kernels.LAUNCHER.replace("torch.empty_like(x)", "torch.zeros_like(x)"))


def test_compile_only_compiles_every_config_and_launches_nothing(make_project, tmp_path, monkeypatch):
    """What the verification shards do with the benchmark cases: fill the cache, run nothing, pick nothing."""
    import torch

    from workbench.core.project.contract import load_kernel
    from workbench.core.timing.compiled import compile_only

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    km = load_kernel(make_project(ZEROED_OUTPUT) / "kernel.py")
    x = torch.randn(4097, device="cuda")
    with compile_only():
        out = km.kernel_fn(x)
    torch.cuda.synchronize()
    assert torch.count_nonzero(out) == 0  # nothing ran
    assert len(list((tmp_path / "triton").rglob("*.cubin"))) == 2  # both autotune configs compiled
    tuner = km.module.scale_kernel
    assert not tuner.cache  # no pick: the benchmark makes it, alone on the GPU
    torch.testing.assert_close(km.kernel_fn(x), x * 2)  # outside the block, launches are real again


# Hands back the output it made for the same tensor, unchanged since (its address, its version counter), and
# launches nothing: right on every call verification makes (fresh tensors, or the same ones refilled in place,
# which bumps the version), while the benchmark's timed calls, on unchanged inputs, would time no kernel.
KEEPS_ITS_OUTPUTS = kernels.kernel_source(launcher=kernels.KEEPS_BY_POINTER_LAUNCHER)


def test_a_launcher_that_keeps_its_outputs_posts_no_time(cli, make_project, cache_dir):
    project = make_project(KEEPS_ITS_OUTPUTS, toml=QUICK.format(compile="false") + NO_COMPAT)
    code, out, err = cli("bench", project, "--json", "--no-plot")
    assert code == 0, out  # it verifies: the verdict is the verification's, the time is what is refused
    record = json.loads(out)["projects"][0]
    (row,) = record["bench"]
    assert row["recheck"] == "passed" and row["kernel"] is None and row["median_ms"] is None
    assert row["timed_launches_per_call"] == 0 and row["checked_launches"] == 1 and row["input_sets"] >= 2
    assert row["withheld"] == "timed calls launched 0 Triton kernels per call; the checked call launched 1"
    assert any(n.startswith("timed calls launched 0 Triton kernels per call; the checked call launched 1: "
                            "the kernel's time is not posted") for n in row["notes"]), row["notes"]
    assert row["gbps"] is None and row["speedup_vs_reference"] is None
    assert row["reference"]["median_ms"] > 0  # the baselines are still timed
    assert "TIME NOT POSTED on case 3" in record["bench_summary"]


# Keeps the output of its last call only: the timed calls go through several copies of the inputs in turn,
# so it launches on every one of them and its time is a real one.
KEEPS_ITS_LAST_OUTPUT = kernels.kernel_source(launcher='''
_last = []


def scale(x):
    if _last and _last[0] is x and _last[1] == x._version:
        return _last[2]
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    _last[:] = [x, x._version, out]
    return out
''')


def test_rotated_inputs_make_a_launcher_keeping_its_last_output_launch_every_call(cli, make_project, cache_dir):
    project = make_project(KEEPS_ITS_LAST_OUTPUT, toml=QUICK.format(compile="false") + NO_COMPAT)
    code, out, err = cli("bench", project, "--json", "--no-plot")
    assert code == 0, out
    (row,) = json.loads(out)["projects"][0]["bench"]
    assert row["input_sets"] >= 2 and row["timed_launches_per_call"] == 1 and row["withheld"] == ""
    assert row["median_ms"] > 1e-3 and row["kernel"]["samples"] >= 30  # 8 MiB through HBM: microseconds


CLAIMS_100X_BYTES = kernels.GOOD + '''


def bytes_moved(x):
    return 100 * 2 * x.numel() * x.element_size()  # x read and the output written: a hundred times over
'''


def test_a_bytes_moved_past_the_copy_ceiling_is_implausible(cli, make_project, cache_dir):
    project = make_project(CLAIMS_100X_BYTES, toml=QUICK.format(compile="false"))
    code, out, err = cli("bench", project, "--json", "--no-plot")
    assert code == 0, out
    record = json.loads(out)["projects"][0]
    (row,) = record["bench"]
    assert row["bytes_source"] == "bytes_moved() in kernel.py" and row["bytes_moved"] == 100 * 2 * (1 << 20) * 4
    assert row["recheck"] == "passed" and row["kernel"] is None and row["gbps"] is None
    assert row["timed_launches_per_call"] == 1  # it launches: the figure, not the work, is what is wrong
    assert row["withheld"].startswith("implausible: ") and "TB/s ceiling" in row["withheld"]
    note = next(n for n in row["notes"] if n.startswith("implausible: "))
    assert "(bytes from bytes_moved() in kernel.py)" in note and "not posted" in note
    assert "TIME NOT POSTED on case 3" in record["bench_summary"]


# Issue 28: a training kernel timed in each mode; the RMSNorm of tests/kernels_training.py with a benchmark case.
TRAINING_BENCH = __import__("kernels_training").RMSNORM_TRAIN.replace(
    '\n\n\ndef get_inputs', '\nCASES.append({"purpose": "bench", "rows": 4096, "cols": 1024, "dtype": "bfloat16"})\n\n\ndef get_inputs')


@pytest.mark.parametrize("mode,launches", [("", 2), ("fwd", 1), ("bwd", 1)])
def test_a_training_kernel_is_timed_in_its_mode_with_its_baselines_and_peak_memory(cli, make_project, cache_dir,
                                                                                    mode, launches):
    project = make_project(TRAINING_BENCH, name="rms_train_bench",
                           toml=QUICK.format(compile="true") + "[verify]\nnoncontiguous = \"off\"\n")
    code, out, err = cli("bench", project, "--json", "--no-plot", *(["--mode", mode] if mode else []))
    assert code == 0, out
    (row,) = json.loads(out)["projects"][0]["bench"]
    assert row["mode"] == (mode or "full") and row["recheck"] == "passed" and row["withheld"] == ""
    assert row["kernel"]["median_ms"] > 0 and row["reference"]["median_ms"] > 0
    assert row["compiled"] is not None, row["compiled_note"]
    # one call of the mode: the forward's launch and the backward's (full), or one of them; in bwd the forward
    # each input set needs runs uncounted, so a timed call launches what a checked call does
    assert row["timed_launches_per_call"] == launches and row["checked_launches"] == launches
    assert row["kernel"]["peak_memory_bytes"] > 0 and row["compiled"]["peak_memory_bytes"] > 0
    assert any(f"timed in mode {mode or 'full'}" in note for note in row["notes"])


def test_a_backward_asked_of_a_forward_only_kernel_is_refused(cli, make_project, cache_dir):
    code, out, err = cli("bench", make_project(kernels.GOOD, toml=QUICK.format(compile="false")), "--mode", "bwd")
    assert code == 2, out
    assert "no backward to time" in out
