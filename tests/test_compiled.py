"""Compiled-kernel facts, the IR and `workbench ir`: occupancy, source lines per IR line, diffs without location
noise, ptxas's resource report, the facts beside autotune timings, and compiling for sm_90 on a machine with no GPU.

The IR texts under fixtures/compiled/ were compiled for sm_90 by Triton 3.9 (fixtures/compiled/record.py): one small
kernel as written (v1), moved down three lines (moved) and with another BLOCK (block256). The h100_* files come
from an H100 with Triton 3.6 (2026-11-25): the add scaffold's PTX and the shipped rmsnorm's SASS as `workbench ir
--stage` printed them (the text right of the line labels), and the add scaffold's autotune and compiled-kernel
rows of its `workbench bench --json` record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.core.events import AutotuneReport, CompiledKernels, ConfigTiming, KernelFacts, event_from_json
from workbench.core.timing.compiled import parse_resource_usage
from workbench.core.timing.compiler_facts import (
    SM_LIMITS,
    facts_by_config,
    facts_changes,
    limits_for,
    occupancy,
)
from workbench.core.timing.ir import annotated, hottest_lines, parse_target, stage_diff

FIXTURES = Path(__file__).parent / "fixtures" / "compiled"
KERNEL_LINES = {7: "def", 8: "offsets", 9: "mask", 10: "tl.load", 11: "tl.sum", 12: "tl.store"}


def test_occupancy_follows_the_occupancy_calculator_on_sm_90():
    h100 = SM_LIMITS[(9, 0)]
    assert occupancy(h100, 8, 32, 1024).fraction == 1.0
    # 162 registers: 5376 per warp (rounded to 256), 3 warps per quarter of the register file = 12 warps;
    # 209 KiB of shared memory: one block per SM as well. Both bind.
    tight = occupancy(h100, 8, 162, 209 * 1024)
    assert (tight.blocks_per_sm, tight.fraction, tight.limiter) == (1, 8 / 64, "registers, shared memory")
    by_regs = occupancy(h100, 4, 128, 0)  # 4096 per warp: 4 warps a quarter, 16 warps, 4 blocks of 4
    assert (by_regs.blocks_per_sm, by_regs.fraction, by_regs.limiter) == (4, 0.25, "registers")
    assert occupancy(h100, 4, 256, 0).limiter == "does not fit"
    assert occupancy(h100, 1, 16, 0).limiter == "blocks"  # 32 one-warp blocks: half the warp slots
    assert limits_for(86).max_warps == 48 and limits_for(90, None) is h100 and limits_for(11) is None


def test_measured_properties_override_the_table():
    class Props:
        max_threads_per_multi_processor, regs_per_multiprocessor, shared_memory_per_multiprocessor = 1536, 65536, 1000
    limits = limits_for(90, Props())
    assert (limits.max_warps, limits.shared_bytes) == (48, 1000)


def test_resource_report_is_read_for_the_named_function():
    text = (FIXTURES / "v1.res-usage").read_text()
    assert parse_resource_usage(text, "scale_kernel") == (14, 0, 1024)
    assert parse_resource_usage(text, "other_kernel") is None


@pytest.mark.parametrize("stage", ["ttir", "ttgir", "llir", "ptx", "sass"])
def test_each_stage_maps_its_lines_to_kernel_py(stage):
    text = (FIXTURES / f"v1.{stage}").read_text()
    lines = hottest_lines(stage, text, "kernel.py")
    # every statement of the kernel has code, the inlined tl.sum body included (attributed to its call in
    # kernel.py, not to triton/language/standard.py), and no line outside the kernel is claimed
    assert set(lines) == set(KERNEL_LINES) - ({7} if stage == "sass" else set()) or set(lines) == set(KERNEL_LINES)
    assert lines[11] >= 3
    labels = {label for label, _ in annotated(stage, text, "kernel.py")}
    assert "standard.py:287" not in labels


def test_a_save_that_moves_code_shows_no_ir_difference_and_a_new_block_does():
    for stage in ("ttir", "ttgir", "llir", "ptx"):
        v1 = (FIXTURES / f"v1.{stage}").read_text()
        assert v1 != (FIXTURES / f"moved.{stage}").read_text()
        assert stage_diff(stage, v1, (FIXTURES / f"moved.{stage}").read_text()) == []
        changed = stage_diff(stage, v1, (FIXTURES / f"block256.{stage}").read_text())
        assert changed and not any(line[1:].startswith("#loc") for line in changed), stage
        if stage in ("ttir", "ttgir"):
            assert any(line.startswith("+") and "256" in line for line in changed), stage


def facts(config: str, registers: int, spills: int, occ: float, limiter: str = "", kernel: str = "k") -> KernelFacts:
    return KernelFacts(kernel=kernel, config=config, signature="*fp32:16, i32", target="sm_90", num_warps=4,
                       num_stages=3, registers=registers, spill_bytes=spills, static_shared=0, dynamic_shared=0,
                       occupancy=occ, limiter=limiter, case_indices=[0])


def test_facts_changes_between_saves():
    before = [facts("BLOCK=1024", 40, 0, 1.0), facts("BLOCK=2048", 64, 0, 0.5, "registers")]
    after = [facts("BLOCK=1024", 40, 0, 1.0), facts("BLOCK=2048", 200, 24, 0.25, "registers")]
    assert facts_changes(before, after) == ["k (BLOCK=2048): +136 registers, +24 B spills, "
                                            "occupancy 50% -> 25% (registers)"]
    assert facts_changes(before, before) == []
    assert facts_changes([], after) == []


def test_events_round_trip_and_the_worst_specialisation_shows():
    event = CompiledKernels(kernels=[facts("BLOCK=1024", 40, 0, 1.0), facts("BLOCK=1024", 56, 0, 1.0)],
                            target="sm_90", case_index=2)
    again = event_from_json(event.to_json())
    assert again == event and isinstance(again.kernels[0], KernelFacts)
    assert facts_by_config([again], 2)[("k", "BLOCK=1024")].registers == 56
    assert facts_by_config([again], 3) == {}


def test_the_autotune_report_puts_facts_beside_each_configs_time():
    from workbench.reports import autotune_lines

    report = AutotuneReport(kernel="k", key="n=4096", picked="BLOCK=1024", case_index=0,
                            timings=[ConfigTiming("BLOCK=1024", 0.01), ConfigTiming("BLOCK=2048", 0.02)])
    compiled = CompiledKernels(kernels=[facts("BLOCK=1024", 40, 0, 1.0), facts("BLOCK=2048", 64, 8, 0.5, "registers")],
                               case_index=0)
    text = "\n".join(autotune_lines([report], [compiled]))
    assert "regs" in text and "occupancy" in text
    row = next(line for line in text.splitlines() if "BLOCK=2048" in line)
    assert "64" in row and "8 B" in row and "50% (registers)" in row


def test_targets_are_parsed_and_bad_ones_refused():
    assert parse_target("sm_90") == ("cuda", 90, 32) == parse_target("90") == parse_target("sm90a")
    with pytest.raises(ValueError, match="sm_90"):
        parse_target("hopper")


def workbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def add_project(make_project):
    return make_project((REPO / "scaffolds" / "add" / "kernel.py").read_text(), name="add")


def test_ir_for_sm_90_without_a_gpu(add_project):
    """Every config of the add scaffold compiled for sm_90 on this machine: facts from ptxas's report, the PTX of
    one config with the kernel.py line of each instruction, the default choice explained."""
    project = add_project
    done = workbench("ir", str(project), "--target", "sm_90", "--stage", "ptx", "--config", "2", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(done.stdout)
    kernels = [k for event in record["compiled"] for k in event["kernels"]]
    assert len(kernels) >= 2 and all(k["target"] == "sm_90" for k in kernels)
    assert all(isinstance(k["registers"], int) and k["registers"] > 0 and k["spill_bytes"] == 0 for k in kernels)
    assert all(0 < k["occupancy"] <= 1 and Path(k["files"]["ptx"]).is_file() for k in kernels)
    assert record["compiled"][0]["compiled_here"] is False
    assert record["selected"]["config"] == kernels[1]["config"]
    source = (project / "kernel.py").read_text().splitlines()
    lines = {int(line["source_line"]) for line in record["lines"] if line["source_line"].isdigit()}
    assert any("tl.load" in source[n - 1] for n in lines) and any("tl.store" in source[n - 1] for n in lines)
    from workbench.builtin.compiling import format_compiled

    events = [CompiledKernels.from_dict({k: v for k, v in c.items() if k != "type"}) for c in record["compiled"]]
    text = format_compiled("add", events, events[0].kernels[1], "config 2, as asked")
    assert "occupancy" in text and "ptxas's resource report" in text and "2*  add_kernel" in text


def test_ir_refuses_bad_input_clearly(add_project, tmp_path):
    project = add_project
    bad_target = workbench("ir", str(project), "--target", "volta-ish")
    assert bad_target.returncode == 2 and "sm_90" in bad_target.stderr
    missing = workbench("ir", str(tmp_path / "nowhere"), "--target", "sm_90")
    assert missing.returncode == 2 and "nowhere" in missing.stderr
    import torch

    if not torch.cuda.is_available():  # with a GPU it compiles for that GPU
        no_gpu = workbench("ir", str(project))
        assert no_gpu.returncode == 3 and "--target sm_90" in no_gpu.stdout
    from workbench.builtin.compiling import choose
    from workbench.commands import CommandError

    kernels = [facts("BLOCK=1024", 40, 0, 1.0), facts("BLOCK=2048", 64, 0, 0.5)]
    with pytest.raises(CommandError, match="configs 1 to 2"):
        choose(kernels, None, "99", {})
    with pytest.raises(CommandError, match="BLOCK=1024; BLOCK=2048"):
        choose(kernels, None, "BLOCK=4096", {})
    assert choose(kernels, None, None, {(0, "k"): "BLOCK=2048"})[0] is kernels[1]  # the last benchmark's pick


def compiled_event(tmp_path: Path, version: str, case: int, configs: list[str], registers: int) -> CompiledKernels:
    """A benchmark case's compiled kernels, whose IR files are the recorded ones of `version` (in a Triton-cache
    like folder of this run: the next run's are elsewhere, as after a save)."""
    folder = tmp_path / f"cache-{version}-{case}"
    folder.mkdir()
    files = {}
    for stage in ("ttir", "ttgir", "llir", "ptx"):
        files[stage] = str(folder / f"rmsnorm_kernel.{stage}")
        Path(files[stage]).write_text((FIXTURES / f"{version}.{stage}").read_text().replace("scale_kernel", "rmsnorm_kernel"))
    kernels = [KernelFacts(kernel="rmsnorm_kernel", config=config, signature="*bf16:16, i32", target="sm_90",
                           num_warps=4, num_stages=3, registers=registers + n, spill_bytes=0, static_shared=0,
                           dynamic_shared=512, occupancy=0.5 if n else 1.0, limiter="registers" if n else "",
                           case_indices=[case], files=files) for n, config in enumerate(configs)]
    return CompiledKernels(kernels=kernels, target="sm_90", case_index=case, facts_source="the CUDA driver")


async def test_the_app_shows_facts_beside_configs_and_the_ir_with_its_difference(tmp_path):
    from tui_helpers import CONFIGS, app_for, bench_events, case_events, replay, rmsnorm_project, text_of, wait_for

    from workbench.tui.widgets.ir import IRPanel

    project = rmsnorm_project(tmp_path)
    (project.root / "kernel.py").write_text((FIXTURES / "source_kernel.py").read_text())

    def with_compiled(version: str, registers: int) -> list:
        events = []
        for event in bench_events():
            events.append(event)
            if isinstance(event, AutotuneReport):
                events.append(compiled_event(tmp_path, version, event.case_index, CONFIGS, registers))
        return events

    app = app_for(project)
    async with app.run_test(size=(180, 50)) as pilot:
        await replay(app, pilot, case_events(failing=False) + with_compiled("v1", 40))
        await pilot.press("2")
        autotune = text_of(app.query_one("#autotune"))
        assert "0.5 KiB" in autotune and "50% (registers)" in autotune and "| 41 |" in autotune
        await pilot.press("7")
        panel = app.query_one(IRPanel)
        await wait_for(pilot, lambda: panel.texts, what="the IR read")
        await pilot.pause(0.2)
        log = "\n".join(line for line in panel.query_one("#ir-text").lines)
        assert "rmsnorm_kernel" in log and "\n10 |     %x_6 = tt.load" in log  # a line of tt.load, labelled with kernel.py's line 10
        assert panel.chosen[1] == CONFIGS[1]  # the autotuner's pick first
        await pilot.press("2")
        table = app.query_one("#autotune-table")
        table.focus()
        await wait_for(pilot, lambda: table.has_focus, what="the autotune table's focus")
        table.move_cursor(row=2)  # the first report's third config
        await wait_for(pilot, lambda: panel.chosen[1] == CONFIGS[2], timeout=10,
                       what="the IR tab to follow the Autotune tab's highlighted row")
        assert panel.chosen[1] == CONFIGS[2]
        table.move_cursor(row=1)
        await wait_for(pilot, lambda: panel.chosen[1] == CONFIGS[1], timeout=10, what="the pick again")
        await pilot.press("7")
        await replay(app, pilot, case_events(failing=False) + with_compiled("block256", 60), saved_at=2000.0)
        await pilot.press("2")
        assert "since the previous run: rmsnorm_kernel" in text_of(app.query_one("#autotune"))
        assert "+20 registers" in text_of(app.query_one("#autotune"))
        await pilot.press("7")
        await wait_for(pilot, lambda: panel.texts and panel.run_id != 0 and panel.before, what="the second run's IR")
        await pilot.press("d")
        await pilot.pause(0.3)
        diff = "\n".join(panel.query_one("#ir-text").lines)
        assert "@@" in diff and "256" in diff


# -- recorded on an H100 (Triton 3.6, its nvdisasm): the formats of the GPU machine's Triton -------------------

def test_the_gpu_triton_s_ptx_and_sass_map_to_kernel_py_lines():
    """h100_add.ptx: the add scaffold's kernel; h100_rmsnorm.sass: the shipped rmsnorm's (nvdisasm -c -gi)."""
    add = (REPO / "scaffolds" / "add" / "kernel.py").read_text().splitlines()
    lines = hottest_lines("ptx", (FIXTURES / "h100_add.ptx").read_text(), "kernel.py")
    statements = {n: add[n - 1].strip() for n in lines}
    assert any(s.startswith("x = tl.load") for s in statements.values())
    assert any(s.startswith("tl.store") for s in statements.values())
    rms = (REPO / "projects" / "rmsnorm" / "kernel.py").read_text().splitlines()
    sass = hottest_lines("sass", (FIXTURES / "h100_rmsnorm.sass").read_text(), "kernel.py")
    assert sum(sass.values()) > 50 and all("def " not in rms[n - 1] or n == min(sass) for n in sass)
    assert any("tl.load" in rms[n - 1] for n in sass) and any("tl.store" in rms[n - 1] for n in sass)


def test_facts_the_h100_reported_sit_beside_each_configs_time():
    from workbench.reports import autotune_lines, compiled_lines

    record = json.loads((FIXTURES / "h100_add_bench.json").read_text())  # the records' rows carry no "type"
    reports = [AutotuneReport.from_dict(a) for a in record["autotune"]]
    compiled = [CompiledKernels.from_dict(c) for c in record["compiled"]]
    assert compiled[0].facts_source.startswith("the CUDA driver")
    table = autotune_lines(reports, compiled)
    row = next(line for line in table if "BLOCK_SIZE=4096, num_warps=4," in line)
    assert "34" in row and "75% (registers)" in row
    picked = compiled_lines(compiled, reports)
    assert len(picked) == 1 and reports[0].picked in picked[0] and "regs" in picked[0]


async def test_without_a_gpu_the_ir_tab_compiles_for_sm_90_on_asking(tmp_path):
    """`g` in the IR tab: where the workers interpret, the kernel is compiled for sm_90 in a worker that runs
    nothing (as `workbench ir --target sm_90`), and what it made is shown; a failure is said there."""
    from tui_helpers import app_for, rmsnorm_project, text_of

    from workbench.core.events import Problem, WorkerReady
    from workbench.tui.widgets.ir import IRPanel

    project = rmsnorm_project(tmp_path)
    app = app_for(project)
    started = []
    app._compile_for_target = started.append  # the worker itself: test_ir_for_sm_90_without_a_gpu
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("7")
        panel = app.query_one(IRPanel)
        await pilot.press("g")
        assert started == [] and panel.kernels == []  # no worker has said it interprets: nothing to do
        app.session.ready = WorkerReady(pid=1, mode="interpreter", device_name="CPU", torch_version="2",
                                        triton_version="3", python_version="3", warmup_s=0.1)
        await pilot.press("g")
        assert started == ["sm_90"] and "compiling for sm_90" in text_of(panel.query_one("#ir-head"))
        app._show_compiled(-1, [], [Problem(kind="compile", message="kernel.py:12: a bad tl.arange")], "sm_90")
        assert "compiling for sm_90 failed: kernel.py:12: a bad tl.arange" in text_of(panel.query_one("#ir-head"))
        app._show_compiled(-1, [compiled_event(tmp_path, "v1", 0, ["BLOCK=128"], 14)], [], "sm_90")
        assert [k.config for k in panel.kernels] == ["BLOCK=128"]


def test_a_cache_hinted_load_is_on_its_own_line_not_where_the_inline_asm_counts_to():
    """hinted_gelu.ptx: the gelu scaffold for sm_90 (Triton 3.9), whose eviction-hinted load and store Triton
    writes as inline asm, the PTX giving each line of an asm block a `.loc` counting on from the block's."""
    ptx = (FIXTURES / "hinted_gelu.ptx").read_text()
    source = (REPO / "scaffolds" / "gelu" / "kernel.py").read_text().splitlines()
    by_label = {}
    for label, line in annotated("ptx", ptx, "kernel.py"):
        by_label.setdefault(label, []).append(line)
    loads = [label for label, lines in by_label.items() if any("ld.global" in ln for ln in lines)]
    assert [source[int(label) - 1].strip()[:10] for label in loads] == ["x = tl.loa"]
    assert all(not source[int(label) - 1].strip().startswith("#") for label in by_label if label)
    stores = [label for label, lines in by_label.items() if any("st.global" in ln for ln in lines)]
    assert [source[int(label) - 1].strip()[:8] for label in stores] == ["tl.store"]
    # SASS: ptxas's line table follows those `.loc`s; a line only asm blocks name (the comment line after the
    # load) goes back to the block's. (One that real code names too, the store's three lines down, cannot be
    # told apart there: the SASS line table has no columns.)
    load_line = int(loads[0])
    assert source[load_line].strip().startswith("#")
    sass = "\n".join([f'        //## File "/p/kernel.py", line {load_line + 1}',
                      "        /*0090*/                   LDG.E.128 R4, desc[UR4][R2.64] ;",
                      f'        //## File "/p/kernel.py", line {load_line}',
                      "        /*00a0*/                   MOV R0, R4 ;"])
    assert [label for label, _ in annotated("sass", sass, "kernel.py", ptx)] == ["", str(load_line), "", str(load_line)]
    assert [label for label, _ in annotated("sass", sass, "kernel.py")][1] == str(load_line + 1)  # without the PTX


def test_a_training_kernels_ir_holds_its_backwards_kernels_too(make_project):
    """kernel_fn of a training kernel is called with its backward (as verification calls it), so the backward's
    kernels compile too and show beside the forward's."""
    project = make_project((REPO / "scaffolds" / "silu_mul_train" / "kernel.py").read_text(), name="swiglu")
    done = workbench("ir", str(project), "--target", "sm_90", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    names = {k["kernel"] for event in json.loads(done.stdout)["compiled"] for k in event["kernels"]}
    assert any("fwd" in name for name in names) and any("bwd" in name for name in names), names
