"""The real app, the real watcher and real worker processes (Triton interpreter on the CPU).

Each test opens the app on a small project, saves kernel.py the way an editor does, and
reads what the screen says.
"""

import kernels
import pytest
from tui_helpers import editor_save, text_of, wait_for

from workbench.core.project.folder import Project
from workbench.tui.app import WorkbenchApp

pytestmark = pytest.mark.slow

SIZE = (160, 45)


@pytest.fixture
def project(make_project) -> Project:
    return Project.open(make_project(kernels.GOOD, name="scale", toml="[verify]\ngenerated_cases = false\n"))


def verdict_of(app, source_hash: str) -> str | None:
    """The verdict on screen for `source_hash`, once one is shown and not stale."""
    run = app.session.current
    if run is None or run.source_hash != source_hash or not run.verdict_known or app.session.stale:
        return None
    return run.verdict


async def saved_and_judged(app, pilot, project: Project, source: str, timeout: float = 60.0) -> str:
    editor_save(project.kernel_path, source)
    source_hash = project.source_hash()
    await wait_for(pilot, lambda: verdict_of(app, source_hash) is not None, timeout, "the verdict of the save")
    await wait_for(pilot, lambda: finished(app), timeout, "the end of the run")  # so the history records it
    return verdict_of(app, source_hash)


def finished(app) -> bool:
    return app.session.current.finished is not None and app.session.current.run_id in app.kept.recorded


async def test_a_breaking_save_shows_the_failure_and_where_then_a_fix_shows_the_pass(project):
    app = WorkbenchApp(project)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: verdict_of(app, project.source_hash()) == "passed", what="the first run")
        await wait_for(pilot, lambda: finished(app), what="the first run's record")
        assert "VERIFIED" in text_of(app.query_one("#status"))
        assert "benchmarking unavailable" in text_of(app.query_one("#bench"))  # no GPU: said, not failed

        assert await saved_and_judged(app, pilot, project, kernels.COMPILE_ERROR) == "error"
        assert "NOT USABLE" in text_of(app.query_one("#status"))
        detail = text_of(app.query_one("#detail"))
        assert "does not compile" in detail and "no_such_function" in detail
        line = next(n for n, text in enumerate(kernels.COMPILE_ERROR.splitlines(), 1) if "no_such_function" in text)
        marked = [ln for ln in detail.splitlines() if ln.startswith("❱")]
        assert marked and str(line) in marked[0] and "no_such_function" in marked[0]

        assert await saved_and_judged(app, pilot, project, kernels.GRID_SHORT) == "failed"
        detail = text_of(app.query_one("#detail"))
        assert "never written" in detail and "grid one block short" in detail
        assert "FAILED" in text_of(app.query_one("#status"))

        assert await saved_and_judged(app, pilot, project, kernels.GOOD) == "passed"
        assert "VERIFIED 3 cases" in text_of(app.query_one("#status"))
        await pilot.press("3")  # what changed: this source against the last run
        changes = lambda: text_of(app.query_one("#changes"))  # noqa: E731
        await wait_for(pilot, lambda: "+++ kernel.py @ this save" in changes(), what="the diff")
        previous, passing = changes().split("vs last passing run")
        assert "-    scale_kernel[lambda meta: (max(1, n // meta" in previous  # against the failing save
        assert "+    scale_kernel[lambda meta: (triton.cdiv(n" in previous
        assert "the same source" in passing  # back to the source that passed first


async def test_rapid_saves_produce_one_current_result(project):
    app = WorkbenchApp(project)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: verdict_of(app, project.source_hash()) == "passed", what="the first run")
        shown_before = len(app.kept.timeline)
        for n in range(6):  # an editor's burst, then a user saving again and again
            editor_save(project.kernel_path, kernels.GRID_SHORT + f"\n# save {n}\n")
            await pilot.pause(0.02)
        final = kernels.GOOD + "\n# final\n"
        editor_save(project.kernel_path, final)
        final_hash = project.source_hash()
        await wait_for(pilot, lambda: verdict_of(app, final_hash) is not None, what="the last save's verdict")
        await pilot.pause(1.0)  # nothing older may turn up afterwards
        assert verdict_of(app, final_hash) == "passed"
        shown = app.kept.timeline[shown_before:]
        assert [entry[2] for entry in shown if entry[0] == "verdict"][-1] == final_hash
        assert all(entry[2] == final_hash for entry in shown[-1:])
        assert app.session.current.source_hash == final_hash


async def test_a_crashing_kernel_leaves_the_app_alive(project):
    app = WorkbenchApp(project)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: verdict_of(app, project.source_hash()) == "passed", what="the first run")
        assert await saved_and_judged(app, pilot, project, kernels.CRASHES) == "failed"
        cases = text_of(app.query_one("#cases"))
        assert cases.count("passed") == 2 and "error" in cases  # the other cases ran in a fresh worker
        assert "SIGSEGV" in text_of(app.query_one("#detail"))
        assert await saved_and_judged(app, pilot, project, kernels.GOOD + "\n# fixed\n") == "passed"
        assert app.is_running


async def test_n_runs_again_on_new_inputs_and_keeps_that_seed_for_the_saves_after(project):
    app = WorkbenchApp(project, seed=41)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: verdict_of(app, project.source_hash()) == "passed", what="the first run")
        assert "seed 41 (n: new)" in text_of(app.query_one("#status"))
        first = app.session.current.run_id
        await pilot.press("n")
        await wait_for(pilot, lambda: app.session.current.run_id != first and app.session.current.started is not None
                       and app.session.current.finished is not None, what="the run on new inputs")
        drawn = app.session.current.started.seed
        assert drawn == app.loop.seed != 41
        assert f"seed {drawn} (n: new)" in text_of(app.query_one("#status"))
        assert await saved_and_judged(app, pilot, project, kernels.GOOD + "\n# saved\n") == "passed"
        assert app.session.current.started.seed == drawn  # the saves after it draw alike
