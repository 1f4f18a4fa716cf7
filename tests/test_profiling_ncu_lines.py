"""The ncu plugin's hot lines: warp-state samples per kernel.py line, from ncu's source page.

CPU tests read recorded exports (tests/fixtures/README.md); the one GPU test profiles the shipped
rmsnorm project under ncu.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("workbench_ncu") is None:  # not pip-installed: use the checkout's copy
    sys.path.insert(0, str(ROOT / "plugins" / "ncu"))

from workbench_ncu.events import ProfiledCase  # noqa: E402
from workbench_ncu.hotlines import (  # noqa: E402
    Launch,
    SourceFiles,
    SourcePageError,
    describe_hot_lines,
    hot_lines,
    kernel_stalls,
    parse_source_page,
    tie_to_launches,
)
from workbench_ncu.profiler import (  # noqa: E402
    SourceLines,
    find_ncu,
    kernel_filter,
    lines_refusal,
    ncu_command,
    read_source_lines,
    run_ncu,
    source_lines_of,
    summarize,
)
from workbench_ncu.report import parse_raw_page  # noqa: E402

from workbench.core.events import WorkerReady  # noqa: E402
from workbench.core.project.folder import Project  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
CAPTURED_KERNEL = "/work/main/projects/rmsnorm/kernel.py"  # where kernel.py was when the fixtures were recorded


def gz(name: str) -> str:
    return gzip.decompress((FIXTURES / name).read_bytes()).decode("utf-8")


@pytest.fixture
def project(tmp_path):
    """The rmsnorm project as profiled (its kernel.py then), in a folder of its own."""
    (tmp_path / "kernel.py").write_text((FIXTURES / "rmsnorm_lines_kernel.py.txt").read_text(encoding="utf-8"))
    return Project(root=tmp_path, kernel_path=tmp_path / "kernel.py")


def page_for(project: Project) -> str:
    """The recorded source page (cases 15 and 20: rmsnorm_kernel, rmsnorm_wide_kernel), kernel.py moved to `project`."""
    return gz("rmsnorm_lines_source.csv.gz").replace(CAPTURED_KERNEL, str(project.kernel_path))


def raw_rows():
    return parse_raw_page(gz("rmsnorm_lines_raw.csv.gz"))


def test_the_source_page_gives_each_files_lines_per_launch_with_their_samples_and_stall_reasons():
    blocks = parse_source_page(gz("rmsnorm_lines_source.csv.gz"))
    assert [(Path(b.file).name, b.function) for b in blocks] == [
        ("standard.py", "rmsnorm_kernel"), ("kernel.py", "rmsnorm_kernel"),
        ("standard.py", "rmsnorm_wide_kernel"), ("kernel.py", "rmsnorm_wide_kernel")]
    assert [b.samples for b in blocks] == [207, 2049, 1061, 11884]
    load = next(line for line in blocks[1].lines if line.line == 48)
    assert (load.samples, load.not_issued) == (1207, 764)
    assert load.stalls["long_sb"] == 1138 and "long_sb (Not Issued)" not in load.stalls
    # The wide kernel's blocks have a column more ("Divergent Branches"): each block is read by its own header.
    continuation = next(line for line in blocks[3].lines if line.line == 75)
    assert continuation.samples == 4194 and continuation.stalls["long_sb"] == 4159
    assert sum(continuation.stalls.values()) == continuation.samples  # every sample has its one reason


def test_blocks_are_tied_to_the_raw_pages_launches_by_their_sample_totals():
    rows = raw_rows()
    assert [(r.id, r.name, r.number("smsp__pcsamp_sample_count")) for r in rows] == [
        (0, "rmsnorm_kernel", 2256), (1, "rmsnorm_wide_kernel", 12945)]
    blocks = parse_source_page(gz("rmsnorm_lines_source.csv.gz"))
    tied = tie_to_launches(blocks, [Launch(r.id, r.name, r.number("smsp__pcsamp_sample_count")) for r in rows])
    assert [len(tied[0]), len(tied[1])] == [2, 2]
    assert sum(b.samples for b in tied[1]) == 12945
    without_totals = tie_to_launches(blocks, [Launch(0, "rmsnorm_kernel", None), Launch(1, "rmsnorm_wide_kernel", None)])
    assert [len(v) for v in without_totals.values()] == [2, 2]
    with pytest.raises(SourcePageError, match="hold 2256 warp samples, the launch 2000"):
        tie_to_launches(blocks, [Launch(0, "rmsnorm_kernel", 2000), Launch(1, "rmsnorm_wide_kernel", 12945)])
    with pytest.raises(SourcePageError, match="more blocks than the report has launches"):
        tie_to_launches(blocks, [Launch(0, "rmsnorm_kernel", 2256)])
    same_kernel_twice = blocks[:2] + blocks[:2]  # two launches of one kernel, one after the other
    tied = tie_to_launches(same_kernel_twice, [Launch(0, "rmsnorm_kernel", 2256), Launch(1, "rmsnorm_kernel", 2256)])
    assert [len(v) for v in tied.values()] == [2, 2]


def test_five_launches_of_one_kernel_in_a_row_are_told_apart(project):
    # `workbench profile projects/rmsnorm`: cases 15-19 launch rmsnorm_kernel (each its own specialisation), 20 the wide one.
    rows = parse_raw_page(gz("rmsnorm_six_raw.csv.gz"))
    assert [r.name for r in rows] == ["rmsnorm_kernel"] * 5 + ["rmsnorm_wide_kernel"]
    page = gz("rmsnorm_six_source.csv.gz").replace(CAPTURED_KERNEL, str(project.kernel_path))
    source = source_lines_of(page, rows)
    assert source.problem == ""
    for row in rows:
        assert sum(b.samples for b in source.by_launch[row.id]) == row.number("smsp__pcsamp_sample_count")
    labels = {15: "rows=8192 cols=2048", 16: "rows=8192 cols=4096", 17: "rows=8192 cols=8192",
              18: "rows=8192 cols=16384", 19: "rows=1024 cols=32768", 20: "rows=1024 cols=65536"}
    events = [ready(), *(ProfiledCase(case_index=i, label=label, nvtx_range=f"workbench case {i}")
                         for i, label in labels.items())]
    result = summarize(project, events, rows, [], project.root / "r.ncu-rep", project.root / "r.log", "2025.3.1.0",
                       False, kernel_filter(["rmsnorm_kernel", "rmsnorm_wide_kernel"]), source)
    kernels = result.metrics["kernels"]
    assert [k["case_index"] for k in kernels] == list(labels)
    assert [k["warp_samples"] for k in kernels] == [2146, 4972, 10586, 21697, 5129, 13113]
    assert [(k["hot_lines"][0]["path"], k["hot_lines"][0]["line"]) for k in kernels] == [("kernel.py", 48)] * 5 + [
        ("kernel.py", 83)]
    # The reduction Triton inlines (tl.sum) grows with the row: a share of the samples kernel.py alone would hide.
    reduce_share = [next(h["share_pct"] for h in k["hot_lines"] if (h["path"], h["line"]) ==
                         ("triton/language/standard.py", 293)) for k in kernels[:4]]
    assert reduce_share == sorted(reduce_share) and reduce_share[0] < 5 < 20 < reduce_share[-1]


def test_hot_lines_are_kernel_py_lines_with_their_share_stalls_and_statement(project):
    blocks = tie_to_launches(parse_source_page(page_for(project)), [
        Launch(r.id, r.name, r.number("smsp__pcsamp_sample_count")) for r in raw_rows()])
    hot = hot_lines(blocks[1], project.root, SourceFiles())
    assert [(h["path"], h["line"]) for h in hot] == [
        ("kernel.py", 83), ("kernel.py", 75), ("triton/language/standard.py", 293), ("kernel.py", 81),
        ("kernel.py", 78)]
    assert [h["in_project"] for h in hot] == [True, True, False, True, True]
    top = hot[0]
    assert (top["samples"], top["share_pct"]) == (6757, 52.2)  # 6757 of the launch's 12945 samples
    assert top["stalls"][0] == {"reason": "long scoreboard", "samples": 6553, "share_pct": 97.0}
    assert top["text"] == "y = x.to(tl.float32) * inv_rms * w.to(tl.float32)"
    # ncu gives the load's samples to the statement's last line; the report shows the whole statement.
    assert hot[1]["text"] == ('x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0, '
                              'eviction_policy="evict_last").to(tl.float32)')
    assert hot[2]["text"] == "return core.reduce(input, axis, _sum_combine, keep_dims=keep_dims)"  # ncu's words
    assert sum(h["share_pct"] for h in hot) <= 100.0
    everything = hot_lines(blocks[1], project.root, SourceFiles(), top=100)
    assert sum(h["samples"] for h in everything) == 12945
    assert sum(h["share_pct"] for h in everything) == pytest.approx(100.0, abs=0.5)


def test_the_kernels_stall_reasons_come_from_the_raw_pages_samples():
    first = raw_rows()[0]
    assert kernel_stalls(first.metrics) == [
        {"reason": "long scoreboard", "samples": 1310, "share_pct": 58.1},
        {"reason": "barrier", "samples": 329, "share_pct": 14.6},
        {"reason": "short scoreboard", "samples": 196, "share_pct": 8.7},
        {"reason": "drain", "samples": 109, "share_pct": 4.8}]


def ready():
    return WorkerReady(pid=1, mode="gpu", device_name="NVIDIA H100 80GB HBM3", torch_version="2.11",
                       triton_version="3.6", python_version="3.12", warmup_s=1.0)


def cases():
    return [ProfiledCase(case_index=15, label="rows=8192 cols=2048 dtype=bfloat16", nvtx_range="workbench case 15"),
            ProfiledCase(case_index=20, label="rows=1024 cols=65536 dtype=bfloat16", nvtx_range="workbench case 20")]


def profile(project, source):
    return summarize(project, [ready(), *cases()], raw_rows(), [], project.root / "r.ncu-rep",
                     project.root / "r.log", "2025.3.1.0", False, kernel_filter(["rmsnorm_kernel"]), source)


def test_the_text_report_and_the_json_carry_each_launchs_hot_lines(project):
    result = profile(project, source_lines_of(page_for(project), raw_rows()))
    text = result.summary_lines
    assert "sections SpeedOfLight, LaunchStats, Occupancy, SourceCounters" in text[0]
    case_15 = text.index("case 15  rows=8192 cols=2048 dtype=bfloat16")
    hot_at = text.index("    hot lines:", case_15)
    assert text[hot_at - 1] == ("    warp samples 2,256; stalls: long scoreboard 58%, barrier 15%, "
                                "short scoreboard 9%, drain 5%")
    assert text[hot_at + 1] == (
        "      kernel.py:48                      54% of samples  (stall: long scoreboard 94%, not selected 2%, "
        "selected (issuing) 1%)  x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, "
        "other=0.0).to(tl.float…")
    assert text[hot_at + 4].startswith("      triton/language/standard.py:263    6% of samples  (stall: short "
                                       "scoreboard 87%")
    assert len([line for line in text if "% of samples" in line]) == 10  # five lines for each launch
    record = json.loads(json.dumps(result.metrics))  # what `workbench profile --json` prints under "metrics"
    assert record["lines"] is True and "hot_lines_unavailable" not in record
    wide = record["kernels"][1]
    assert (wide["case_index"], wide["warp_samples"]) == (20, 12945)
    assert wide["hot_lines"][0]["line"] == 83 and wide["hot_lines"][0]["file"] == str(project.kernel_path)
    assert wide["stall_reasons"][0]["reason"] == "long scoreboard"


def test_without_the_source_page_the_rest_of_the_profile_stands_and_says_why(project, tmp_path):
    failing = tmp_path / "ncu"  # an ncu whose source page export fails, as an older one's would
    failing.write_text(f"#!{sys.executable}\nimport sys\nprint('==ERROR== unrecognised option \\'--print-source"
                       " cuda,sass\\'', file=sys.stderr)\nsys.exit(1)\n")
    failing.chmod(0o755)
    source = read_source_lines(str(failing), tmp_path / "r.ncu-rep", raw_rows())
    assert source.problem == ("not available: ncu could not export the source page (ncu --import r.ncu-rep failed: "
                              "==ERROR== unrecognised option '--print-source cuda,sass')")
    result = profile(project, source)
    assert result.exit_code == 0
    assert result.summary_lines.count("    hot lines: " + source.problem) == 2
    assert any(line.startswith("    time 19.90 µs") for line in result.summary_lines)
    assert result.metrics["hot_lines_unavailable"] == source.problem
    assert result.metrics["kernels"][0]["hot_lines"] is None
    mismatched = source_lines_of(page_for(project), raw_rows()[:1])
    assert mismatched.problem.startswith("not available: the source page has more blocks than the report has launches")
    empty = source_lines_of("", raw_rows())
    assert "compiled without line info" in empty.problem
    no_counters = source_lines_of('"File Path","/k.py"\n"Function Name","k"\n"Line No","Source","Address","Source"\n'
                                  '"3","x = 1","-","-"\n', raw_rows())
    assert "no warp-state samples" in no_counters.problem


def test_an_ncu_without_the_cuda_sass_view_profiles_without_lines_and_says_so(project):
    assert lines_refusal("  --print-source arg  sass\n  ptx\n  cuda\n  cuda,sass\n", "2025.3.1.0") == ""
    refusal = lines_refusal("  --print-source arg  sass\n  ptx\n", "2022.1.0")
    assert refusal == ("not available: this ncu (2022.1.0) cannot print counters per source line (its "
                       "--print-source has no cuda,sass view); a newer Nsight Compute can")
    result = profile(project, SourceLines(collected=False, problem=refusal))
    assert result.summary_lines[0].endswith("sections SpeedOfLight, LaunchStats, Occupancy")
    assert result.metrics["sections"] == ["SpeedOfLight", "LaunchStats", "Occupancy"]
    assert "    hot lines: " + refusal in result.summary_lines
    plain = profile(project, None)  # lines not asked for: nothing about them
    assert not any("hot lines" in line or "warp samples" in line for line in plain.summary_lines)
    assert plain.metrics["lines"] is False and "hot_lines" not in plain.metrics["kernels"][0]


def test_the_ncu_command_collects_source_counters_for_the_lines():
    lines = " ".join(ncu_command("ncu", Path("/r/b"), Path("/r/b.log"), "regex:^(k)$", False, lines=True,
                                 import_source=True))
    assert "--section Occupancy --section SourceCounters --import-source yes" in lines
    full = ncu_command("ncu", Path("/r/b"), Path("/r/b.log"), "regex:^(k)$", True, lines=True, import_source=False)
    assert "--set full" in " ".join(full) and "--import-source" not in full
    assert "SourceCounters" not in ncu_command("ncu", Path("/r/b"), Path("/r/b.log"), "regex:^(k)$", False)


def test_quotes_ncu_leaves_unescaped_in_a_source_line_do_not_shift_its_counters():
    page = textwrap.dedent('''\
        "File Path","/p/kernel.py"
        "Function Name","k"
        "Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","stall_long_sb","stall_wait"
        "3","y = f("a", "b")","-","-","7","5","6","1"
        "","","0x7f00","      LDG.E R2, [R4.64]","7","5","6","1"
        "","","...","...","-","-","-","-"
        "4","s = '"'","-","-","2","1","0","2"
    ''')  # handwritten in ncu's layout: its Source cells are not escaped
    (block,) = parse_source_page(page)
    assert [(line.line, line.samples, line.not_issued, line.stalls) for line in block.lines] == [
        (3, 7, 5, {"long_sb": 6, "wait": 1}), (4, 2, 1, {"wait": 2})]


def test_a_rough_share_is_called_rough():
    record = {"warp_samples": 40, "stall_reasons": [], "hot_lines": [
        {"path": "kernel.py", "line": 9, "share_pct": 60.0, "stalls": [], "text": "x = 1"}]}
    assert describe_hot_lines(record) == ["    warp samples 40", "    hot lines (only 40 samples: each share is rough):",
                                          "      kernel.py:9   60% of samples  x = 1"]


async def test_the_apps_profile_panel_shows_the_hot_lines(project):
    from textual.app import App
    from textual.widgets import Static

    from workbench.tui.widgets.profile import ProfilePanel

    result = profile(project, source_lines_of(page_for(project), raw_rows()))

    class PanelApp(App):
        def compose(self):
            yield ProfilePanel(id="profile")

    app = PanelApp()
    async with app.run_test(size=(220, 60)) as pilot:
        app.query_one(ProfilePanel).show("ncu", result)
        await pilot.pause()
        body = str(app.query_one("#profile-body", Static).render())
    assert "hot lines:" in body and "kernel.py:83" in body and "52% of samples  (stall: long scoreboard 97%" in body


@pytest.mark.gpu
def test_the_hottest_lines_of_a_shipped_project_are_its_kernel_py_lines(tmp_path):
    ncu = find_ncu()
    if ncu is None:
        pytest.skip("ncu (Nsight Compute) is not installed")
    folder = tmp_path / "rmsnorm"
    shutil.copytree(ROOT / "projects" / "rmsnorm", folder, ignore=shutil.ignore_patterns(".workbench"))
    project = Project.open(folder)
    result = run_ncu(project, {"cases": [15, 20]})  # rmsnorm_kernel, rmsnorm_wide_kernel
    assert result.exit_code == 0, result.summary_lines
    kernels = result.metrics["kernels"]
    assert sorted(k["kernel"] for k in kernels) == ["rmsnorm_kernel", "rmsnorm_wide_kernel"]
    source = project.kernel_path.read_text(encoding="utf-8").splitlines()
    for kernel in kernels:
        hot = kernel["hot_lines"]
        assert hot, result.summary_lines
        assert kernel["warp_samples"] > 0 and sum(h["share_pct"] for h in hot) <= 100.0
        assert hot[0]["in_project"] and hot[0]["path"] == "kernel.py"
        for line in hot:
            if line["in_project"]:
                assert Path(line["file"]).resolve() == project.kernel_path.resolve()
                assert " ".join(source[line["line"] - 1].split()) in line["text"]
        assert any(h["in_project"] and "tl.load" in h["text"] for h in hot)  # memory-bound: a load is hot
    assert "    hot lines:" in result.summary_lines
