"""The ncu plugin on the CPU: its parsers against captured ncu output, its command line, its failures.

The GPU half (a real profile) is `benchmarks/capture_profiler_fixtures.py`, run on a GPU machine.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("workbench_ncu") is None:  # not pip-installed: use the checkout's copy
    sys.path.insert(0, str(ROOT / "plugins" / "ncu"))

import workbench_ncu  # noqa: E402
from kernels import GOOD  # noqa: E402
from workbench_ncu.events import ProfiledCase  # noqa: E402
from workbench_ncu.profiler import (
    failure_of_run,
    kernel_filter,
    ncu_command,
    run_ncu,
    summarize,
    triton_kernel_names,  # noqa: E402
)
from workbench_ncu.report import (
    diagnose_log,
    first_sentence,
    occupancy_limiter,
    parse_raw_page,
    parse_rules,  # noqa: E402
)

from workbench.core.events import Problem, WorkerReady  # noqa: E402
from workbench.core.project.folder import Project  # noqa: E402
from workbench.plugins import make_plugin_manager  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
CASES = {15: "rows=8192 cols=2048 dtype=bfloat16", 16: "rows=8192 cols=4096 dtype=bfloat16",
         17: "rows=8192 cols=8192 dtype=bfloat16", 18: "rows=8192 cols=16384 dtype=bfloat16",
         19: "rows=1024 cols=65536 dtype=bfloat16"}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_the_raw_page_gives_one_row_per_launch_with_metrics_in_base_units():
    rows = parse_raw_page(fixture("rmsnorm_raw.csv"))
    assert [r.id for r in rows] == [0, 1, 2, 3, 4]
    assert {r.name for r in rows} == {"rmsnorm_kernel"}
    assert [r.case_range for r in rows] == [f"workbench case {i}" for i in CASES]
    first = rows[0]
    assert first.duration_us == pytest.approx(20.0)  # "20,000" ns
    assert first.grid == "(8192, 1, 1)" and first.block == "(128, 1, 1)"
    assert first.number("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed") == pytest.approx(69.06)
    assert first.number("sm__throughput.avg.pct_of_peak_sustained_elapsed") == pytest.approx(31.94)
    assert first.number("sm__warps_active.avg.pct_of_peak_sustained_active") == pytest.approx(85.04)
    assert first.number("launch__registers_per_thread") == 32
    assert first.number("launch__shared_mem_per_block_dynamic") == 16
    assert first.number("sm__sass_inst_executed_op_local_st.sum") == 0
    assert occupancy_limiter(first) == ""  # theoretical occupancy is 100%: nothing limits it
    assert [round(r.duration_us, 1) for r in rows] == [20.0, 41.5, 86.7, 175.8, 132.2]


def test_the_details_page_gives_the_limiter_rule_of_each_kernel():
    rules = parse_rules(fixture("rmsnorm_details.csv"))
    bottleneck = {r.kernel_id: r for r in rules if r.rule == "SOLBottleneck"}
    assert sorted(bottleneck) == [0, 1, 2, 3, 4]
    assert first_sentence(bottleneck[0].text) == ("Memory is more heavily utilized than Compute: Look at the Memory "
                                                  "Workload Analysis section to identify the DRAM bottleneck.")
    assert bottleneck[0].section == "SpeedOfLight" and bottleneck[0].kind == "OPT"
    assert any(r.rule == "AchievedOccupancy" for r in rules)


def test_an_occupancy_limit_is_named_when_occupancy_is_limited():
    row = parse_raw_page(fixture("rmsnorm_raw.csv"))[0]
    row.metrics["sm__maximum_warps_per_active_cycle_pct"] = 50.0
    row.metrics["launch__occupancy_limit_registers"] = 8.0
    assert occupancy_limiter(row) == "registers"


def profiled_cases():
    warps = {15: 4, 16: 8, 17: 16, 18: 32, 19: 8}
    return [ProfiledCase(case_index=i, label=label, nvtx_range=f"workbench case {i}",
                         kernels=[{"name": "rmsnorm_kernel", "num_warps": w, "registers": 32, "spilled": 0,
                                   "shared_bytes": 16, "autotune_pick": ""}
                                  for w in sorted(set(warps.values()))])
            for i, label in CASES.items()]


def test_the_summary_puts_each_kernel_under_its_case(tmp_path):
    project = Project(root=tmp_path, kernel_path=tmp_path / "kernel.py")
    events = [WorkerReady(pid=1, mode="gpu", device_name="NVIDIA H100 80GB HBM3", torch_version="2.11",
                          triton_version="3.6", python_version="3.12", warmup_s=1.0), *profiled_cases()]
    result = summarize(project, events, parse_raw_page(fixture("rmsnorm_raw.csv")),
                       parse_rules(fixture("rmsnorm_details.csv")), tmp_path / "r.ncu-rep", tmp_path / "r.log",
                       "2025.3.1.0", False, kernel_filter(["rmsnorm_kernel"]))
    assert result.exit_code == 0 and result.report_path == str(tmp_path / "r.ncu-rep")
    kernels = result.metrics["kernels"]
    assert [k["case_index"] for k in kernels] == list(CASES)
    assert [k["spilled_registers"] for k in kernels] == [0] * 5
    assert kernels[3]["duration_us"] == pytest.approx(175.808) and kernels[3]["block"] == "(1024, 1, 1)"
    text = "\n".join(result.summary_lines)
    assert "Nsight Compute 2025.3.1.0 on NVIDIA H100 80GB HBM3" in text and "--clock-control none" in text
    case_15 = result.summary_lines.index(f"case 15  {CASES[15]}")
    assert result.summary_lines[case_15 + 1].startswith("  rmsnorm_kernel  grid (8192, 1, 1)  block (128, 1, 1)")
    assert result.summary_lines[case_15 + 2] == ("    time 20.00 µs   DRAM 69.1%   SM 31.9% of peak   occupancy "
                                                 "85.0% achieved of 100.0% theoretical")
    assert result.summary_lines[case_15 + 3] == ("    32 registers/thread, 0 spilled, shared memory 0 B static + "
                                                 "16 B dynamic per block")
    assert result.summary_lines[case_15 + 4].startswith("    limiter (ncu): Memory is more heavily utilized")
    assert "outside the cases" not in text


def test_kernel_names_come_from_the_source_without_importing_it(tmp_path):
    (tmp_path / "kernel.py").write_text(textwrap.dedent('''
        import triton
        from triton import jit
        from helpers import other_kernel

        @triton.autotune(configs=[], key=[])
        @triton.jit
        def first_kernel(x): pass

        @jit(do_not_specialize=["n"])
        def second_kernel(x, n): pass

        def launcher(x): pass
    '''))
    (tmp_path / "helpers.py").write_text("import triton\n\n@triton.jit\ndef other_kernel(x): pass\n")
    names = triton_kernel_names(tmp_path / "kernel.py")
    assert names == ["first_kernel", "second_kernel", "other_kernel"]
    assert kernel_filter(names) == "regex:^(first_kernel|second_kernel|other_kernel)$"
    (tmp_path / "kernel.py").write_text("def broken(:\n")
    with pytest.raises(SyntaxError):
        triton_kernel_names(tmp_path / "kernel.py")


def test_the_ncu_command_scopes_to_the_profiled_call():
    command = ncu_command("ncu", Path("/r/base"), Path("/r/base.log"), "regex:^(k)$", full=False)
    joined = " ".join(command)
    assert "--profile-from-start off" in joined and "--clock-control none" in joined and "--nvtx" in joined
    assert "-k regex:^(k)$" in joined and "-o /r/base" in joined and "--log-file /r/base.log" in joined
    assert "--section SpeedOfLight --section LaunchStats --section Occupancy" in joined and "--set" not in command
    full = ncu_command("ncu", Path("/r/base"), Path("/r/base.log"), "regex:^(k)$", full=True)
    assert "--set full" in " ".join(full) and "--section" not in full


def test_what_a_failed_run_says_comes_from_the_log_first_then_the_worker():
    ready = WorkerReady(pid=1, mode="gpu", device_name="H100", torch_version="", triton_version="",
                        python_version="", warmup_s=0.0)
    died = Problem(kind="crash", message="the worker exited with status 1")
    denied = failure_of_run([ready, died], fixture("ERR_NVGPUCTRPERM.handwritten.log"), "regex:^(k)$")
    assert denied.exit_code == 3 and "ERR_NVGPUCTRPERM" in denied.summary_lines[0]
    assert failure_of_run([ready, died], fixture("rmsnorm_ncu.log"), "regex:^(k)$").summary_lines == [died.message]
    compile_error = Problem(kind="compile", message="the kernel does not compile", file="/p/kernel.py", line=12)
    failed = failure_of_run([ready, compile_error], fixture("no_kernels_ncu.log"), "regex:^(k)$")
    assert (failed.exit_code, failed.summary_lines) == (2, ["the kernel does not compile [/p/kernel.py:12]"])
    assert failure_of_run([ready], fixture("no_kernels_ncu.log"), "regex:^(k)$").exit_code == 3
    assert failure_of_run([ready], fixture("rmsnorm_ncu.log"), "regex:^(k)$") is None


def test_the_log_says_what_went_wrong():
    assert diagnose_log(fixture("rmsnorm_ncu.log"), "regex:^(k)$") is None
    code, line = diagnose_log(fixture("ERR_NVGPUCTRPERM.handwritten.log"), "regex:^(k)$")
    assert code == 3 and line.startswith("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM)")
    code, line = diagnose_log(fixture("no_kernels_ncu.log"), "regex:^(unused_kernel)$")
    assert code == 3 and line == ("ncu profiled no kernel: none launched in the profiled call matched "
                                  "regex:^(unused_kernel)$ (it launched: vectorized_elementwise_kernel)")


# -- failures, each one line and exit code 3 (or 2 for a project that cannot be used) ----------------

def fake_tool(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return folder


PASS_THROUGH = '''
import os, sys
os.execv(sys.argv[-3], sys.argv[-3:])  # run the worker (python -m workbench.core.run.child.worker) as it is
'''

NO_PERMISSION = '''
import sys
log = sys.argv[sys.argv.index("--log-file") + 1]
open(log, "w").write(open(sys.argv[0] + ".log").read())
sys.exit(1)
'''

needs_no_gpu = pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="checks the no-GPU path")


@pytest.fixture
def ncu_cli(plugin_cli):
    return plugin_cli(workbench_ncu, "ncu", "profile")


def test_ncu_not_installed(make_project, ncu_cli, monkeypatch, tmp_path):
    project = make_project(GOOD)
    monkeypatch.delenv("WORKBENCH_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out, err = ncu_cli(project)
    assert (code, out) == (3, "")
    # PATH holds no nvidia-smi either, so no GPU shows: both are said
    assert err == ("workbench profile: ncu (Nsight Compute) is not on PATH: install Nsight Compute (it comes with the "
                   "CUDA toolkit) or set WORKBENCH_NCU; it profiles an NVIDIA GPU, and this machine shows none\n")


@needs_no_gpu
def test_no_gpu(make_project, ncu_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(fake_tool(tmp_path / "bin", "ncu", PASS_THROUGH)))
    code, out, err = ncu_cli(make_project(GOOD))
    assert (code, out) == (3, "")
    assert err == ("workbench profile: Nsight Compute profiles GPU kernels, and this machine has no CUDA GPU that "
                   "torch can see\n")


def test_counters_not_permitted(make_project, ncu_cli, monkeypatch, tmp_path):
    bin_dir = fake_tool(tmp_path / "bin", "ncu", NO_PERMISSION)
    (bin_dir / "ncu.log").write_text(fixture("ERR_NVGPUCTRPERM.handwritten.log"))
    monkeypatch.setenv("WORKBENCH_NCU", str(bin_dir / "ncu"))
    code, out, err = ncu_cli(make_project(GOOD))
    assert (code, out) == (3, "")
    assert err.count("\n") == 1 and "(ERR_NVGPUCTRPERM): run as root" in err


def test_a_project_ncu_cannot_profile(make_project, monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_NCU", str(fake_tool(tmp_path / "bin", "ncu", PASS_THROUGH) / "ncu"))
    no_jit = Project.open(make_project("import torch\n\ndef kernel_fn(x):\n    return x\n", name="plain"))
    result = run_ncu(no_jit, {})
    assert result.exit_code == 2 and result.summary_lines[0].endswith(
        "no @triton.jit function in kernel.py or beside it, so nothing for ncu to profile")
    broken = Project.open(make_project("def oops(:\n", name="broken"))
    result = run_ncu(broken, {})
    assert result.exit_code == 2 and "kernel.py:1: kernel.py has a syntax error" in result.summary_lines[0]
    assert len(result.summary_lines) == 1


def test_the_plugin_registers_the_ncu_profiler():
    from workbench.profiling import collect_profilers

    pm = make_plugin_manager(autoload=False)
    pm.register(workbench_ncu, name="ncu")
    assert list(collect_profilers(pm)) == ["ncu"]
