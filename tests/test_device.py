"""The ceilings cache (per GPU, atomic, corrupt files refused) and GPU-state parsing; no GPU needed."""

import json
import os
import sys

import pytest

from workbench.core.timing import device
from workbench.core.timing.device import (
    Ceilings,
    CeilingsCacheError,
    ceilings_path,
    gpu_slug,
    parse_nvidia_smi,
    read_ceilings,
    write_ceilings,
)

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def ceilings(gpu=H100, **changes):
    values = dict(gpu=gpu, copy_gbps=3010.5, matmul_tflops=745.0, measured_at="2026-11-21T10:00:00Z",
                  torch_version="2.11.0", triton_version="3.6.0", driver="580.159.04", method="test")
    values.update(changes)
    return Ceilings(**values)


def test_slug_is_a_safe_file_name():
    assert gpu_slug(H100) == "nvidia-h100-80gb-hbm3"
    assert gpu_slug("NVIDIA GeForce RTX 4090 / test") == "nvidia-geforce-rtx-4090-test"
    assert gpu_slug("***") == "unknown-gpu"


def test_cache_dir_override_and_default(cache_dir, monkeypatch, tmp_path):
    assert ceilings_path(H100) == cache_dir / "ceilings" / "nvidia-h100-80gb-hbm3.json"
    monkeypatch.delenv("WORKBENCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ceilings_path(H100) == tmp_path / "xdg" / "kernel-workbench" / "ceilings" / "nvidia-h100-80gb-hbm3.json"


def test_round_trip_keeps_date_and_versions():
    path = write_ceilings(ceilings())
    data = json.loads(path.read_text())
    assert data["measured_at"] == "2026-11-21T10:00:00Z" and data["torch_version"] == "2.11.0"
    assert data["driver"] == "580.159.04" and data["version"] == device.CEILINGS_VERSION
    assert read_ceilings(H100) == ceilings()


def test_never_measured_is_none():
    assert read_ceilings(H100) is None


def test_each_gpu_has_its_own_file():
    write_ceilings(ceilings())
    write_ceilings(ceilings(gpu="NVIDIA H200", copy_gbps=4300.0))
    assert read_ceilings(H100).copy_gbps == 3010.5
    assert read_ceilings("NVIDIA H200").copy_gbps == 4300.0


@pytest.mark.parametrize("content, words", [
    ("{not json", "not a ceilings record"),
    ('{"gpu": "NVIDIA H100 80GB HBM3"}', "not a ceilings record"),
    ('{"gpu": "NVIDIA H100 80GB HBM3", "copy_gbps": 1, "matmul_tflops": 1, "measured_at": "x", "surprise": 1}',
     "not a ceilings record"),
    ('[1, 2]', "not a ceilings record"),
])
def test_corrupt_files_are_refused_with_the_path(content, words):
    path = ceilings_path(H100)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(CeilingsCacheError) as exc:
        read_ceilings(H100)
    assert words in str(exc.value) and str(path) in str(exc.value)


def test_non_positive_or_foreign_records_are_refused():
    write_ceilings(ceilings(copy_gbps=0.0))
    with pytest.raises(CeilingsCacheError, match="copy_gbps"):
        read_ceilings(H100)
    path = ceilings_path(H100)
    path.write_text(json.dumps({**vars(ceilings()), "gpu": "NVIDIA A100"}))
    with pytest.raises(CeilingsCacheError, match="A100"):
        read_ceilings(H100)
    path.write_text(json.dumps({**vars(ceilings()), "version": 99}))
    with pytest.raises(CeilingsCacheError, match="another version"):
        read_ceilings(H100)


def test_write_is_atomic(monkeypatch):
    write_ceilings(ceilings())
    path = ceilings_path(H100)

    def broken_replace(src, dst):
        raise OSError("disk full")

    with monkeypatch.context() as patched, pytest.raises(OSError):
        patched.setattr(os, "replace", broken_replace)
        write_ceilings(ceilings(copy_gbps=1.0))
    # The old record is whole, and no temp file is left beside it.
    assert read_ceilings(H100).copy_gbps == 3010.5
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_parse_nvidia_smi():
    state = parse_nvidia_smi("1980, 2619, 41, 580.159.04\n")
    assert (state.sm_clock_mhz, state.mem_clock_mhz, state.temperature_c, state.driver) == (1980, 2619, 41,
                                                                                             "580.159.04")
    missing = parse_nvidia_smi("[N/A], [N/A], 40, [Not Supported]\n")
    assert missing.sm_clock_mhz is None and missing.temperature_c == 40 and missing.driver == ""
    assert parse_nvidia_smi("").sm_clock_mhz is None
    assert parse_nvidia_smi("garbage").driver == ""


def test_gpu_state_without_nvml_or_nvidia_smi(monkeypatch):
    monkeypatch.setattr(device, "_nvml_state", lambda uuid: None)
    monkeypatch.setattr(device.shutil, "which", lambda name: None)
    state = device.gpu_state("GPU-1234")
    assert state.sm_clock_mhz is None and state.driver == ""


def test_nvml_comes_up_once_per_process_and_reads_the_clocks_each_time(monkeypatch):
    import functools
    import types

    calls = {"init": 0, "clock": 0, "lookup": 0}
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: calls.__setitem__("init", calls["init"] + 1),
        nvmlDeviceGetHandleByUUID=lambda uuid: calls.__setitem__("lookup", calls["lookup"] + 1) or uuid,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlSystemGetDriverVersion=lambda: b"580.159.04",
        nvmlDeviceGetClockInfo=lambda handle, which: calls.__setitem__("clock", calls["clock"] + 1) or 1980 - which,
        nvmlDeviceGetTemperature=lambda handle, which: 41)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    # a fresh once-per-process cache for this test (the real one is put back after it)
    monkeypatch.setattr(device, "_nvml_module", functools.cache(device._nvml_module.__wrapped__))
    monkeypatch.setattr(device, "_nvml_handle", functools.cache(device._nvml_handle.__wrapped__))
    states = [device.gpu_state("GPU-1234") for _ in range(3)]
    assert calls["init"] == 1 and calls["clock"] == 6 and calls["lookup"] == 1  # the handle looked up once
    assert (states[-1].sm_clock_mhz, states[-1].mem_clock_mhz, states[-1].temperature_c, states[-1].driver) == \
        (1980, 1979, 41, "580.159.04")


def test_cache_module_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys; import workbench.core.timing.device, workbench.core.timing.stats, workbench.core.run.session, "
            "workbench.builtin.benchmarking, workbench.reports; "
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]; print(*bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(__file__)))
    assert done.returncode == 0, f"the parent side imported {done.stdout} {done.stderr}"


def test_the_copy_ceiling_says_which_copy_set_it():
    from workbench.core.timing.device import describe_ceilings

    text = describe_ceilings(ceilings(copy_method="triton copy BLOCK=8192 num_warps=8"))
    assert "copy 3010 GB/s by triton copy BLOCK=8192 num_warps=8" in text
    assert "by" not in describe_ceilings(ceilings()).split(",")[0]  # an older record names no method


def test_the_copy_ceiling_is_the_best_of_several_copies():
    import torch

    from workbench.core.timing.copy_kernels import TRITON_COPY_CONFIGS, copy_methods
    from workbench.core.timing.device import CopyMeasurement

    labels = [label for label, _ in copy_methods(torch.zeros(4), torch.zeros(4))]
    assert labels[0] == "torch copy_" and len(labels) == 1 + len(TRITON_COPY_CONFIGS)
    measured = CopyMeasurement(nbytes=1 << 30, gbps={"torch copy_": 3026.2, "triton copy": 2973.0},
                               flush_label="L2 flushed")
    assert measured.best == "torch copy_" and measured.best_gbps == 3026.2


def test_a_benchmark_measures_the_ceilings_only_once_the_gpu_is_its_own_and_reads_kept_ones_at_once(monkeypatch):
    """A benchmark started beside its verification's last workers (Job.gpu_gate) waits at the gate before it
    measures: copies beside theirs would set the GPU's kept copy ceiling too low. Kept ceilings need no gate."""
    from types import SimpleNamespace

    import torch

    from workbench.core.project.config import ProjectConfig
    from workbench.core.timing import bench

    order = []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: H100)
    monkeypatch.setattr(device, "measure_ceilings", lambda config: order.append("measured") or ceilings())
    context = SimpleNamespace(config=ProjectConfig.from_dict({}), emit=lambda event: order.append(event.detail),
                              wait_for_gpu=lambda: order.append("gate"))
    measured, notes = bench.gpu_ceilings(context)
    assert order == ["gate", "measuring this GPU's ceilings (once per GPU)", "measured"]
    assert measured.copy_gbps == 3010.5 and "measured and cached" in notes[0]
    order.clear()
    kept, _ = bench.gpu_ceilings(context)
    assert order == [] and kept.copy_gbps == 3010.5  # from the cache: no wait, nothing measured
