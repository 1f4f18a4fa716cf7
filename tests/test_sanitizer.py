"""The sanitizer plugin on the CPU: its parser against captured compute-sanitizer output, the
attribution of reports to cases, and its failures.

The GPU half (memcheck flagging a kernel whose numbers verify) is
`benchmarks/capture_profiler_fixtures.py`, run on a GPU machine.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("workbench_sanitizer") is None:  # not pip-installed: use the checkout's copy
    sys.path.insert(0, str(ROOT / "plugins" / "sanitizer"))

import workbench_sanitizer  # noqa: E402
from kernels import GOOD  # noqa: E402
from workbench_sanitizer.command import (  # noqa: E402
    ToolRun,
    attribute,
    format_run,
    sanitizer_command,
)
from workbench_sanitizer.events import SanitizedCase, SanitizePlan  # noqa: E402
from workbench_sanitizer.report import group_reports, parse_output  # noqa: E402

from workbench.core.events import LogLine, StageChanged, WorkerReady  # noqa: E402
from workbench.core.project.folder import Project  # noqa: E402
from workbench.plugins import make_plugin_manager  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "sanitizer"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_memcheck_reports_of_a_missing_mask():
    out = parse_output(fixture("add_nomask_memcheck.txt"))
    assert out.errors == 152 and out.unprinted == 0 and len(out.reports) == 152
    first = out.reports[0]
    assert first.headline == "Invalid __global__ read of size 4 bytes"
    assert (first.kernel, first.location) == ("add_nomask_kernel", "kernel.py:19")
    assert (first.thread, first.block) == ("(104,0,0)", "(7,0,0)")
    assert first.out_of_bounds_detail == "1 bytes after the nearest allocation of size 4,000 bytes"
    groups = group_reports(out.reports)
    assert [(g.headline, g.count) for g in groups] == [("Invalid __global__ read of size 4 bytes", 25),
                                                       ("Invalid __global__ read of size 2 bytes", 127)]
    assert groups[0].describe() == (
        "25x Invalid __global__ read of size 4 bytes in add_nomask_kernel at kernel.py:19 (first: thread "
        "(104,0,0) block (7,0,0); 1 bytes after the nearest allocation of size 4,000 bytes) -- a missing or "
        "wrong mask?")


def test_clean_runs_of_each_tool():
    for tool in ("memcheck", "initcheck"):
        out = parse_output(fixture(f"rmsnorm_{tool}.txt"))
        assert (out.errors, out.reports, out.tool_messages) == (0, [], [])
    race = parse_output(fixture("rmsnorm_racecheck.txt"))
    assert (race.hazards, race.errors, race.reports) == (0, None, [])  # racecheck counts hazards only


def test_a_racecheck_hazard():
    out = parse_output(fixture("racecheck_hazard_cuda.txt"))
    assert out.hazards == 1 and len(out.reports) == 1
    race = out.reports[0]
    assert race.headline.startswith("Error: Race reported between Write access at racy_sum")
    assert (race.kernel, race.location) == ("racy_sum(const float *, float *)", "racy.cu:5")
    assert len(race.details) == 8 and race.hint().startswith("a missing tl.debug_barrier()")


def test_host_backtraces_api_errors_and_program_output_are_told_apart():
    out = parse_output(fixture("memcheck_host_backtrace_script.txt"))
    assert out.errors == 26 and len(out.reports) == 26
    api = [r for r in out.reports if r.is_api_error]
    assert [r.headline.split(" on CUDA API call to ")[1] for r in api] == ["cudaDeviceSynchronize.",
                                                                          "cudaGetLastError."]
    oob = [r for r in out.reports if not r.is_api_error]
    assert {(r.kernel, r.location) for r in oob} == {("add_nomask", "prog_sanitize.py:9")}
    assert not any("MARK" in d for r in out.reports for d in r.details)


def test_a_tool_failure_is_a_message_not_a_report():
    out = parse_output("========= COMPUTE-SANITIZER\n"
                       "========= Error: Target application terminated before first instrumented API call\n")
    assert out.reports == [] and out.tool_messages == [
        "Error: Target application terminated before first instrumented API call"]


def stream_of(lines_by_case: dict[int, list[str]], crash_case: int | None = None) -> list:
    """The events a sanitize worker sends: each case's tool lines between its start and done events."""
    events = [WorkerReady(pid=1, mode="gpu", device_name="NVIDIA H100 80GB HBM3", torch_version="2.11",
                          triton_version="3.6", python_version="3.12", warmup_s=1.0),
              SanitizePlan(cases=list(lines_by_case), labels=[f"n={i}" for i in lines_by_case])]
    for index, lines in lines_by_case.items():
        events.append(StageChanged(stage="sanitizing", detail=f"n={index}", case_index=index))
        events += [LogLine(text=line, stream="stdout") for line in lines]
        if index == crash_case:
            break
        events.append(SanitizedCase(case_index=index, label=f"n={index}"))
    return events


def reports_by_allocation(text: str) -> dict[str, list[str]]:
    """The fixture's report blocks, keyed by the size of the allocation they overran (one per case)."""
    blocks: dict[str, list[str]] = {}
    block: list[str] = []
    for line in text.splitlines():
        if line.strip() == "=========":
            size = re.search(r"allocation at 0x[0-9a-f]+ of size ([\d,]+) bytes", " ".join(block)).group(1)
            blocks.setdefault(size, []).extend(block + [line])
            block = []
        elif "ERROR SUMMARY" not in line:
            block.append(line)
    return blocks


def test_each_report_is_tied_to_the_case_that_ran_when_the_tool_printed_it():
    blocks = reports_by_allocation(fixture("add_nomask_memcheck.txt"))
    run = ToolRun(tool="memcheck")
    plan = attribute(stream_of({0: blocks["4,000"], 1: blocks["508"], 2: [], 3: blocks["8,194"]}), run)
    assert plan == [0, 1, 2, 3]
    counts = {c.case_index: len(parse_output(c.lines).reports) for c in run.cases}
    assert counts == {0: 24, 1: 1, 2: 0, 3: 127}
    assert run.report_count == 152 and run.exit_code == 1 and run.device == "NVIDIA H100 80GB HBM3"
    project = Project(root=Path("/p/add_nomask"), kernel_path=Path("/p/add_nomask/kernel.py"))
    lines = format_run(project, run, verbose=False)
    assert lines[0] == "add_nomask: compute-sanitizer memcheck on NVIDIA H100 80GB HBM3, 4 cases"
    assert lines[1].split() == ["case", "0", "n=0", "24", "reports"]
    assert lines[3].split() == ["case", "1", "n=1", "1", "report"]
    assert lines[5].split() == ["case", "2", "n=2", "clean"]
    assert lines[-1].startswith("  memcheck: 152 reports in 3 of 4 cases")


def test_a_clean_run_exits_0_and_a_dead_worker_leaves_the_rest_of_the_plan():
    run = ToolRun(tool="memcheck")
    attribute(stream_of({0: [], 1: []}), run)
    assert run.exit_code == 0 and all(c.done for c in run.cases)
    crashed = ToolRun(tool="memcheck")
    plan = attribute(stream_of({0: [], 1: [], 2: []}, crash_case=1), crashed)
    assert plan == [0, 1, 2] and [c.case_index for c in crashed.cases if c.done] == [0]


def test_the_sanitizer_command_line():
    memcheck = sanitizer_command("compute-sanitizer", "memcheck", 100)
    assert memcheck[:3] == ["compute-sanitizer", "--tool", "memcheck"]
    assert "--destroy-on-device-error" in memcheck and "kernel" in memcheck
    assert "--show-backtrace" in memcheck and "--print-limit" in memcheck
    assert "--destroy-on-device-error" not in sanitizer_command("compute-sanitizer", "initcheck", 100)


# -- failures: one line, exit code 3 ----------------------------------------------------------------

@pytest.fixture
def sanitize_cli(plugin_cli):
    return plugin_cli(workbench_sanitizer, "sanitizer", "sanitize")


def test_compute_sanitizer_not_installed(make_project, sanitize_cli, monkeypatch, tmp_path):
    monkeypatch.delenv("WORKBENCH_COMPUTE_SANITIZER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out, err = sanitize_cli(make_project(GOOD))
    assert (code, out) == (3, "")
    # PATH holds no nvidia-smi either, so no GPU shows: both are said
    assert err == ("workbench sanitize: compute-sanitizer is not on PATH: it comes with the CUDA toolkit; install it "
                   "or set WORKBENCH_COMPUTE_SANITIZER; it checks kernels on an NVIDIA GPU, and this machine shows "
                   "none\n")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the no-GPU path")
def test_no_gpu(make_project, sanitize_cli, monkeypatch, tmp_path):
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(f"#!{sys.executable}\n" + textwrap.dedent('''
        import os, sys
        os.execv(sys.argv[-3], sys.argv[-3:])  # run the worker (python -m workbench.core.run.child.worker) as it is
    '''))
    fake.chmod(0o755)
    monkeypatch.setenv("WORKBENCH_COMPUTE_SANITIZER", str(fake))
    code, out, err = sanitize_cli(make_project(GOOD))
    assert (code, out) == (3, "")
    assert err == ("workbench sanitize: compute-sanitizer checks GPU kernels, and this machine has no CUDA GPU that "
                   "torch can see\n")


def test_not_a_project(sanitize_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_COMPUTE_SANITIZER", "/bin/true")
    code, _, err = sanitize_cli(tmp_path / "nowhere")
    assert code == 2 and err.count("\n") == 1 and "no such file or folder" in err


def test_the_plugin_adds_the_sanitize_command():
    from workbench.commands import collect_commands

    pm = make_plugin_manager(autoload=False)
    pm.register(workbench_sanitizer, name="sanitizer")
    assert collect_commands(pm)["sanitize"].name == "sanitize"
