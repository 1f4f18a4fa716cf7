"""The main screens, rendered from canned runs (no worker): snapshots, and assertions on their text.

Snapshots use pytest-textual-snapshot (SVG files under tests/__snapshots__/; update them with
`pytest --snapshot-update` after a deliberate change and look at the SVGs). Where the plugin is not
installed those tests skip, and the text assertions below still cover every screen.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from tui_helpers import (
    CONFIGS,
    app_for,
    bench_events,
    case_events,
    compile_problem,
    needs_snapshots,
    replay,
    rmsnorm_project,
    text_of,
)

from workbench.commands import hookimpl
from workbench.core.project.folder import Project
from workbench.tui.app import WorkbenchApp
from workbench.tui.messages import RunEvent
from workbench.tui.panels import PanelSpec

SIZE = (160, 45)


@pytest.fixture
def project(tmp_path) -> Project:
    return rmsnorm_project(tmp_path)


async def test_passing_gpu_run_shows_verdict_benchmark_and_autotune(project):
    app = app_for(project)
    async with app.run_test(size=SIZE) as pilot:
        await replay(app, pilot, case_events(failing=False) + bench_events())
        status = text_of(app.query_one("#status"))
        assert "NVIDIA H100 80GB HBM3" in status and "VERIFIED 5 cases" in status
        assert "verdict 0.82 s · bench 2.91 s after save" in status
        assert "✔ cache cleared" in status and "✔ done" in status
        cases = text_of(app.query_one("#cases"))
        assert cases.count("passed") == 5 and "3/3" in cases
        bench = text_of(app.query_one("#bench"))
        assert "copy ceiling 3,010 GB/s" in bench
        assert "48.1 µs" in bench and "3.56x" in bench and "93%" in bench  # time, speed-up, roofline (core/text.py)
        await pilot.press("2")
        autotune = text_of(app.query_one("#autotune"))
        assert "★ picked" in autotune and "out of resources" in autotune and "BLOCK=4096" in autotune


async def test_failing_case_detail_shows_where_it_went_wrong(project):
    app = app_for(project)
    async with app.run_test(size=SIZE) as pilot:
        await replay(app, pilot, case_events(failing=True))
        status = text_of(app.query_one("#status"))
        assert "FAILED 1 of 5 cases" in status
        detail = text_of(app.query_one("#detail"))
        assert "case 3" in detail and "rows=5 cols=4097" in detail  # the first failure is selected
        assert "155 of 20485" in detail and "worst [4, 4096]" in detail
        assert "kernel unwritten/NaN" in detail and "reference -0.7314" in detail
        assert "a boundary mask?" in detail and "█" in detail  # the pattern and the heat map
        assert "✘ rmsnorm_kernel: BLOCK=4096, num_warps=16  31 elements never written" in detail
        assert "not benchmarked: verification failed" in text_of(app.query_one("#bench"))


async def test_results_stream_in_and_the_first_failure_is_on_screen_before_the_run_ends(project):
    """Mid-run: "n of m passed so far", then at the first failing case "FAILING ... so far" with that
    case's detail selected, while the other cases are still running; the timeline notes when."""
    from tui_helpers import READY_GPU, canned_save, wait_for

    app = app_for(project)
    async with app.run_test(size=SIZE) as pilot:
        run_id = app.submit("save", save=canned_save())
        events = case_events(failing=True)
        upto_second_case = next(i for i, e in enumerate(events) if getattr(e, "case_index", None) == 2)
        for event in [READY_GPU, *events[:upto_second_case]]:
            app.post_message(RunEvent(run_id, event))
        await pilot.pause()
        assert "2 of 5 passed so far" in text_of(app.query_one("#status"))
        first_bad = next(i for i, e in enumerate(events) if getattr(e, "status", "") == "failed")
        for event in events[upto_second_case:first_bad + 1]:
            app.post_message(RunEvent(run_id, event))
        await wait_for(pilot, lambda: "FAILING" in text_of(app.query_one("#status")), 10, "the failing status")
        status = text_of(app.query_one("#status"))
        assert "FAILING 1 of 4 so far (5 cases)" in status
        assert "rows=5 cols=4097" in text_of(app.query_one("#detail"))  # the failure, selected at once
        assert [what for what, *_ in app.kept.timeline] == ["failure"]
        assert app.kept.runs[run_id].finished is None


async def test_a_compile_error_points_at_its_line_in_detail_and_log(project):
    app = app_for(project)
    async with app.run_test(size=SIZE) as pilot:
        await replay(app, pilot, [compile_problem(str(project.kernel_path))])
        assert "NOT USABLE" in text_of(app.query_one("#status"))
        detail = text_of(app.query_one("#detail"))
        assert "compile: the kernel does not compile" in detail
        marked = [line for line in detail.splitlines() if line.startswith("❱")]
        assert marked and "8" in marked[0] and "bad broadcast" in marked[0]  # the source line, marked
        await pilot.press("4")  # the Log tab
        await pilot.pause()
        log = text_of(app.query_one("#log"))
        assert "compile  kernel.py:8  the kernel does not compile" in log


async def test_a_save_in_flight_marks_the_screen_stale(project):
    app = app_for(project)
    async with app.run_test(size=SIZE) as pilot:
        await replay(app, pilot, case_events(failing=False))
        app.submit("save")  # a newer save: its run has not reported yet
        await pilot.pause()
        assert "STALE" in text_of(app.query_one("#status"))
        assert app.query_one("#cases").has_class("-stale")
        assert app.query_one("#cases").border_subtitle.startswith("stale")


async def test_too_small_terminal_says_so(project):
    app = app_for(project)
    async with app.run_test(size=(56, 14)) as pilot:
        await pilot.pause()
        message = text_of(app.query_one("#too-small"))
        assert "56×14" in message and "at least 60×16" in message
        assert not app.query_one("#main").display or app.screen.has_class("-too-small")
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        assert not app.screen.has_class("-too-small")


async def test_80x24_shows_the_verdict_the_cases_and_the_failure_with_the_tabs_one_key_away(project):
    app = app_for(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay(app, pilot, case_events(failing=True))
        assert app.screen.has_class("-compact") and not app.screen.has_class("-too-small")
        upper, tabs = app.query_one("#upper"), app.query_one("#tabs")
        assert upper.region.height >= 15 and tabs.region.height == 0  # the cases fill the screen
        assert app.query_one("#cases").region.width == 80 and app.query_one("#detail").region.width == 80
        assert "FAIL" in text_of(app.query_one("#status"))
        await pilot.press("4")  # the log: in place of the cases
        await pilot.pause()
        assert tabs.region.height >= 15 and upper.region.height == 0
        await pilot.press("escape")
        await pilot.pause()
        assert upper.region.height >= 15 and tabs.region.height == 0
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        assert not app.screen.has_class("-compact") and tabs.region.height > 0 and upper.region.height > 0


async def test_footer_keys_and_command_palette_list_the_actions(project):
    app = app_for(project)
    async with app.run_test(size=SIZE) as pilot:
        await replay(app, pilot, case_events(failing=False))
        keys = {k: a.binding.description for k, a in app.screen.active_bindings.items() if a.binding.show}
        assert {"r", "v", "b", "e", "t", "q"} <= set(keys)
        assert keys["b"] == "bench: on"
        await pilot.press("b")
        keys = {k: a.binding.description for k, a in app.screen.active_bindings.items() if a.binding.show}
        assert keys["b"] == "bench: off" and app.session.stages == ("verify",)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Rerun", "Rerun on new inputs", "Verify only", "Benchmarking on", "Open error in editor",
                      "Pin autotune config", "Quit"):
            assert title in titles


async def test_pinning_a_config_reruns_with_the_pin(project):
    app = app_for(project)
    async with app.run_test(size=SIZE) as pilot:
        await replay(app, pilot, case_events(failing=False))
        await pilot.press("t")
        await pilot.pause()
        await pilot.press("down", "enter")  # the second config
        await pilot.pause()
        assert app.session.pins == {"rmsnorm_kernel": 1}
        # The run names the config as described, not by its place in the list the app learnt: a case forces only
        # the configs its launches' pruning keeps, so that list need not be the tuner's own order.
        assert app.kept.runs[app.loop.latest].request.pins == (("rmsnorm_kernel", CONFIGS[1]),)
        assert "📌 rmsnorm_kernel#1" in text_of(app.query_one("#status"))


async def test_plugin_panels_are_tabs_and_see_every_event(project):
    from textual.widgets import Static

    class EventCounter(Static):
        seen = 0

        def workbench_event(self, event):
            EventCounter.seen += 1
            self.update(f"{EventCounter.seen} events")

    class Plugin:
        @staticmethod
        @hookimpl
        def workbench_register_panels(register):
            register(PanelSpec(id="counter", title="Counter", factory=EventCounter))

    from workbench.plugins import make_plugin_manager

    pm = make_plugin_manager(autoload=False)
    pm.register(Plugin)
    app = WorkbenchApp(project, pm=pm, live=False)
    async with app.run_test(size=SIZE) as pilot:
        run_id = app.submit("save")
        for event in case_events(failing=False)[:3]:
            app.post_message(RunEvent(run_id, event))
        await pilot.pause()
        assert app.query_one("#tab-plugin-counter")
        assert EventCounter.seen == 3


async def test_profile_key_runs_an_installed_profiler_and_shows_its_summary(project):
    from workbench.plugins import make_plugin_manager
    from workbench.profiling import Profiler, ProfileResult

    calls = []

    def run(project_arg, options):
        calls.append(project_arg.name)
        return ProfileResult(exit_code=0, summary_lines=["rmsnorm_kernel: 48.2 us, DRAM 91% of peak"],
                             report_path="/tmp/rmsnorm.ncu-rep")

    class Plugin:
        @staticmethod
        @hookimpl
        def workbench_register_profilers(register):
            register(Profiler(name="fakeprof", help="a profiler for the test", run=run))

    pm = make_plugin_manager(autoload=False)
    pm.register(Plugin)
    app = WorkbenchApp(project, pm=pm, live=False)
    async with app.run_test(size=SIZE) as pilot:
        assert "profile" in text_of(app.query_one("Footer")) or app.check_action("profile", ()) is True
        await pilot.press("p")
        for _ in range(50):
            await pilot.pause(0.05)
            if "DRAM 91%" in text_of(app.query_one("#profile-body")):
                break
        body = text_of(app.query_one("#profile-body"))
        assert calls == ["rmsnorm"]
        assert "DRAM 91% of peak" in body and "rmsnorm.ncu-rep" in body


async def test_no_profiler_installed_means_no_profile_key(project):
    app = app_for(project)
    async with app.run_test(size=SIZE):
        assert app.check_action("profile", ()) is False
        assert not app.query("#tab-profile")


def test_the_ui_never_imports_torch_or_triton():
    """Neither at import nor when a run starts: the app, the MCP server and the CLI keep torch (~450 MB resident)
    to their workers; a run's plugin checks are asked for in the parent (it loaded torch through the check registry)."""
    code = ("import sys, workbench.tui.app, workbench.builtin.watching\n"
            "from workbench.plugins import make_plugin_manager\n"
            "from workbench.core.run.session import PluginHooks\n"
            "PluginHooks(make_plugin_manager()).checks()\n"
            "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


@needs_snapshots
def test_snapshot_passing_run_with_benchmark(snap_compare, project):
    async def before(pilot):
        await replay(pilot.app, pilot, case_events(failing=False) + bench_events())

    assert snap_compare(app_for(project), terminal_size=SIZE, run_before=before)


@needs_snapshots
def test_snapshot_failing_case_detail(snap_compare, project):
    async def before(pilot):
        await replay(pilot.app, pilot, case_events(failing=True))

    assert snap_compare(app_for(project), terminal_size=SIZE, run_before=before)


@needs_snapshots
def test_snapshot_autotune_tab(snap_compare, project):
    async def before(pilot):
        await replay(pilot.app, pilot, case_events(failing=False) + bench_events())
        await pilot.press("2")

    assert snap_compare(app_for(project), terminal_size=SIZE, run_before=before)


@needs_snapshots
def test_snapshot_too_small(snap_compare, project):
    assert snap_compare(app_for(project), terminal_size=(56, 14))


@needs_snapshots
def test_snapshot_failing_case_at_80x24(snap_compare, project):
    async def before(pilot):
        await replay(pilot.app, pilot, case_events(failing=True))

    assert snap_compare(app_for(project), terminal_size=(80, 24), run_before=before)


def test_case_detail_says_which_gpu_ran_the_case_and_how_many_launches():
    from tui_helpers import render_text

    from workbench.core.events import CaseResult
    from workbench.tui.widgets.cases import result_detail

    result = CaseResult(case_index=2, label="n=4097", status="passed", numel=4097, duration_s=0.25, gpu="1",
                        launches=2)
    text = "\n".join(render_text(part) for part in result_detail(result))
    assert "0.25 s on GPU 1, 2 Triton launches per call" in text
    alone = "\n".join(render_text(part) for part in result_detail(CaseResult(case_index=0, label="n=1",
                                                                             status="passed", numel=1, launches=1)))
    assert "took" in alone and "1 Triton launch per call" in alone and "GPU" not in alone
