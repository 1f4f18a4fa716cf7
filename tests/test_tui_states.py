"""Each state of the app says what it is, and no number on screen is ever cut.

The real app (`WorkbenchApp(live=False)`, driven by Pilot) fed canned runs, read as the terminal shows it
(`screen_text`) at the narrowest supported width (100 columns) and a common one (140); and the model directly.
"""

import re

import pytest
from tui_helpers import (
    READY_GPU,
    app_for,
    canned_save,
    needs_snapshots,
    replay,
    rmsnorm_project,
    screen_text,
    text_of,
)

from workbench.core.events import (
    CaseResult,
    LogLine,
    Problem,
    RunFinished,
    RunStarted,
    StageChanged,
)
from workbench.core.live.loop import RunRequest
from workbench.core.project.folder import Project
from workbench.core.text import fmt_count, fmt_part
from workbench.tui.messages import RunBegan, RunEvent
from workbench.tui.model import CaseRow, RunState
from workbench.tui.widgets.cases import KEY_COLUMNS, cell_len, shorten_params

NARROW, WIDE = (100, 30), (140, 40)


@pytest.fixture
def project(tmp_path) -> Project:
    return rmsnorm_project(tmp_path)


def status_lines(app) -> str:
    return "\n".join(screen_text(app).splitlines()[:2])


# -- numbers are never cut ------------------------------------------------------------------------------

LONG_GENERATED = "batch=2 heads=16 seq_len=4097 head_dim=128 dtype=bfloat16 (generated)"


def big_count_events() -> list:
    """Bad counts as wide as a 37x1000 case and a 1M-element one, a case that raised (no result dtype), and
    generated cases, one with a long label."""
    results = [
        CaseResult(case_index=0, label="rows=37 cols=1000 dtype=float32", status="failed", dtype="float32",
                   numel=37000, bad_count=36628, max_abs_err=0.12, max_rel_err=0.01),
        CaseResult(case_index=1, label="rows=37 cols=1000 dtype=float16", status="failed", dtype="float16",
                   numel=37000, bad_count=1000, max_abs_err=0.09, max_rel_err=0.01),
        CaseResult(case_index=2, label="rows=1024 cols=1024 dtype=bfloat16", status="failed", dtype="bfloat16",
                   numel=1048576, bad_count=1048575, max_abs_err=0.5, max_rel_err=0.2),
        CaseResult(case_index=3, label="rows=5 cols=4097 dtype=float16", status="error",
                   messages=["kernel_fn raised in rmsnorm(): ZeroDivisionError: boom [kernel.py:8]"]),
        CaseResult(case_index=4, label="rows=38 cols=65 dtype=bfloat16 (generated)", status="passed",
                   dtype="bfloat16", numel=2470, generated=True, max_abs_err=0.01, max_rel_err=0.004),
        CaseResult(case_index=5, label=LONG_GENERATED, status="passed", dtype="bfloat16", numel=16785408,
                   generated=True, max_abs_err=0.01, max_rel_err=0.004),
    ]
    return [RunStarted(kernel_path="kernel.py", source_hash="3f2a91c04b1e7d22", mode="gpu",
                       device_name=READY_GPU.device_name, n_cases=6, planned=list(range(6))), *results]


def table_cells(table) -> dict[str, dict[str, str]]:
    """Row key -> column key -> the cell's text, for the columns shown."""
    columns = [c.key.value for c in table.ordered_columns]
    return {str(row.key.value): {column: str(cell) for column, cell in zip(columns, table.get_row(row.key))}
            for row in table.ordered_rows}


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["100", "140"])
async def test_the_case_table_never_cuts_a_number(project, size):
    app = app_for(project)
    async with app.run_test(size=size) as pilot:
        await replay(app, pilot, big_count_events())
        await pilot.pause()
        table = app.query_one("#cases")
        shown = [c.key.value for c in table.ordered_columns]
        assert shown[:len(KEY_COLUMNS)] == list(KEY_COLUMNS)  # case, inputs, dtype, verdict, bad: always there
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= table.scrollable_content_region.width
        for column in table.ordered_columns:  # every cell whole in its column
            for row in table.ordered_rows:
                assert cell_len(table.get_cell(row.key, column.key)) <= column.width, (column.key.value, row.key)
        cells = table_cells(table)
        assert [cells[k]["bad"] for k in "0123"] == ["36628/37000", "1000/37000", "<1.05M/1.05M", "-"]
        assert cells["3"]["inputs"] == "rows=5 cols=4097" and cells["3"]["dtype"] == "float16"  # it raised
        assert cells["4"]["inputs"].startswith("rows=38 cols=65 (gen")  # generated, said so
        assert cells["5"]["inputs"].endswith(" … (gen)") and cells["5"]["inputs"].startswith("batch=2 ")
        assert not re.search(r"[\w.]…", cells["5"]["inputs"])  # whole parameters, then the ellipsis
        screen = screen_text(app)
        for number in ("36628/37000", "1000/37000", "<1.05M/1.05M", "rows=37 cols=1000", "rows=1024 cols=1024"):
            assert number in screen
        if size == WIDE:  # room for the error magnitudes too
            assert {"max abs", "max rel"} <= set(shown)


async def test_the_case_detail_says_counts_as_the_table_does(project):
    app = app_for(project)
    async with app.run_test(size=WIDE) as pilot:
        await replay(app, pilot, big_count_events())
        table = app.query_one("#cases")
        table.move_cursor(row=2, animate=False)
        await pilot.pause()
        assert "bad elements   <1.05M of 1.05M" in text_of(app.query_one("#detail"))


def test_counts_are_exact_or_honestly_abbreviated():
    assert [fmt_count(n) for n in (0, 7, 36628, 99999, 100000, 412345, 999600, 1048576, 16785408)] == \
        ["0", "7", "36628", "99999", "100k", "412k", "1.00M", "1.05M", "16.8M"]
    assert fmt_part(36628, 37000) == "36628/37000" and fmt_part(412, 1048576) == "412/1.05M"
    assert fmt_part(1048575, 1048576) == "<1.05M/1.05M"  # short of all is never shown as all
    assert fmt_part(1048576, 1048576) == "1.05M/1.05M" and fmt_part(3, 5, " of ") == "3 of 5"


def test_shortened_inputs_keep_whole_values():
    assert shorten_params("batch=2 heads=16 seq_len=4097", 18) == "batch=2 heads=16 …"
    assert shorten_params("batch=2 heads=16 seq_len=4097", 17) == "batch=2 …"  # never "heads=1…"
    assert shorten_params("shape=(3, 100, 7) n=5", 16) == "shape=(3, 100,…"
    assert shorten_params("seq_len=4097", 10) == "seq_len=…" and shorten_params("n=5", 3) == "n=5"


# -- each state says what it is ---------------------------------------------------------------------------

async def test_before_the_first_run_reports_the_app_says_starting_not_stale(project):
    app = app_for(project)
    async with app.run_test(size=WIDE) as pilot:
        app.submit("start")
        await pilot.pause()
        status = status_lines(app)
        assert "starting" in status and "STALE" not in status
        assert not app.query_one("#cases").has_class("-stale") and not app.query_one("#status").has_class("-stale")
        await replay(app, pilot, big_count_events()[:2])  # once a run has reported, a newer save makes it stale
        app.submit("save")
        await pilot.pause()
        assert "STALE" in status_lines(app)


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["100", "140"])
async def test_a_syntax_error_stops_the_stage_bar_at_import(project, size):
    app = app_for(project)
    async with app.run_test(size=size) as pilot:
        await replay(app, pilot, [StageChanged(stage="importing", detail="kernel.py"),
                                  Problem(kind="syntax", message="kernel.py has a syntax error: expected ':'",
                                          file=str(project.kernel_path), line=3)],
                     finished=RunFinished(verdict="error"))
        status = status_lines(app)
        assert "✘ import: syntax error" in status and "■ stopped" in status and "NOT USABLE" in status
        assert "– verify" in status and "– bench" in status  # not reached
        for passed in ("✔ compile", "✔ verify", "✔ done"):
            assert passed not in status


async def test_a_bad_workbench_toml_stops_the_run_before_it_starts(project):
    app = app_for(project)
    async with app.run_test(size=WIDE) as pilot:
        await replay(app, pilot, [Problem(kind="config", message="workbench.toml [verify.deterministic]: expected "
                                          "bool, got str 'maybe'", file=str(project.root / "workbench.toml"))],
                     ready=False, finished=RunFinished(verdict="error"))
        status = status_lines(app)
        assert "✘ start: bad workbench.toml" in status and "– compile" in status and "■ stopped" in status
        assert "✔" not in status.splitlines()[1]  # nothing was done: not even the cache cleared


def erroring_events(passed: int, failed: int, errors: int) -> list:
    total = passed + failed + errors
    events: list = [RunStarted(kernel_path="kernel.py", source_hash="3f2a91c04b1e7d22", mode="gpu",
                               device_name=READY_GPU.device_name, n_cases=total, planned=list(range(total)))]
    for index in range(total):
        status = "passed" if index < passed else "failed" if index < passed + failed else "error"
        events.append(CaseResult(case_index=index, label=f"n={index + 1} dtype=float32", status=status,
                                 dtype="float32" if status != "error" else "", numel=index + 1,
                                 bad_count=index + 1 if status == "failed" else 0,
                                 messages=["kernel_fn raised: ZeroDivisionError"] if status == "error" else []))
    return events


@pytest.mark.parametrize("passed, failed, errors, said", [
    (6, 0, 17, "FAILED 17 of 23 cases (17 errors)"),
    (5, 3, 2, "FAILED 5 of 10 cases (3 wrong, 2 errors)"),
    (4, 1, 0, "FAILED 1 of 5 cases (1 wrong)"),
])
async def test_the_status_line_says_what_the_bad_cases_are(project, passed, failed, errors, said):
    app = app_for(project)
    async with app.run_test(size=NARROW) as pilot:
        await replay(app, pilot, erroring_events(passed, failed, errors),
                     finished=RunFinished(verdict="failed", passed=passed, failed=failed, errors=errors))
        assert said in status_lines(app)  # whole, at 100 columns
        await pilot.press("4")
        await pilot.pause()
        log = text_of(app.query_one("#log"))
        assert f"{passed} passed, {failed} failed" + (f", {errors} errors" if errors else "") in log


async def test_a_cancelled_run_says_so_in_the_log(project):
    app = app_for(project)
    async with app.run_test(size=WIDE) as pilot:
        first = app.submit("save", save=canned_save())
        app.post_message(RunBegan(first, app.kept.runs[first].request))
        await pilot.pause()
        second = app.submit("save", save=canned_save())  # overtakes the first before it said anything
        app.post_message(RunBegan(second, app.kept.runs[second].request))
        app.post_message(RunEvent(second, LogLine(text="compiling...")))
        await pilot.pause()
        third = app.submit("rerun")  # overtakes the second after it printed
        app.post_message(RunBegan(third, app.kept.runs[third].request))
        for event in [READY_GPU, *erroring_events(3, 0, 0), RunFinished(verdict="passed", passed=3)]:
            app.post_message(RunEvent(third, event))
        await pilot.pause()
        await pilot.press("4")
        await pilot.pause()
        log = text_of(app.query_one("#log")).splitlines()
        headers = [line for line in log if line.startswith("run ") and " · " in line]
        assert len(headers) == 3, log
        assert headers[0].startswith(f"run {first} · save of kernel.py")
        assert "(cancelled: overtaken by a save)" in headers[0]
        assert headers[1].startswith(f"run {second} ·") and "cancelled" not in headers[1]  # written as it printed
        assert any(line.startswith(f"run {second} cancelled: overtaken by a rerun") for line in log)
        assert headers[2].startswith(f"run {third} · rerun") and "cancelled" not in headers[2]
        assert any(line.startswith("run finished: VERIFIED (3 passed, 0 failed)") for line in log)


def gpu_only_events(kernel_path: str) -> list:
    return [RunStarted(kernel_path="kernel.py", source_hash="3f2a91c04b1e7d22", mode="interpreter",
                       device_name="CPU", n_cases=3, planned=[0, 1, 2]),
            StageChanged(stage="verifying", detail="n=1 dtype=float32", current=1, total=3, case_index=0),
            Problem(kind="gpu_only", message="the Triton interpreter cannot run `libdevice.jn`; this kernel is "
                    "checkable on a GPU only", file=kernel_path, line=8, case_index=0)]


async def test_a_gpu_only_case_is_shown_as_gpu_only_not_as_an_error(project):
    app = app_for(project)
    async with app.run_test(size=NARROW) as pilot:
        await replay(app, pilot, gpu_only_events(str(project.kernel_path)), finished=RunFinished(verdict="gpu_only"))
        cells = table_cells(app.query_one("#cases"))
        assert cells["0"]["verdict"] == "gpu only" and cells["0"]["mark"] == "◇"
        assert cells["0"]["inputs"] == "n=1" and cells["0"]["dtype"] == "float32"
        assert [cells[k]["verdict"] for k in "12"] == ["not run", "not run"]
        assert "error" not in {row["verdict"] for row in cells.values()}
        status = status_lines(app)
        assert "GPU ONLY" in status and "✘ verify: GPU only (case 0)" in status and "✔ verify" not in status
        assert "GPU ONLY  case 0" in text_of(app.query_one("#detail"))


def test_the_model_keeps_a_case_s_verdict_from_the_tally():
    run = RunState(run_id=1, request=RunRequest(stages=("verify",)))
    run.apply(Problem(kind="gpu_only", message="cannot run libdevice.jn", case_index=0))
    run.apply(CaseResult(case_index=1, label="n=2", status="passed"))
    run.apply(CaseResult(case_index=1, label="n=2", status="error", config="k: BLOCK=64"))  # a config raised
    run.apply(CaseResult(case_index=2, label="n=3 dtype=float16", status="error"))
    assert run.rows[0].status == "gpu only"
    assert run.rows[1].status == "error" == run.tally.case_status(1)  # the worst of its results, as counted
    assert run.rows[2].dtype == "float16" and run.rows[2].params == "n=3"
    assert CaseRow(index=3, label="n=4 (generated)").generated


def test_a_value_stress_case_keeps_its_stress_where_the_inputs_are_cut():
    from workbench.tui.widgets.cases import inputs_text

    row = CaseRow(index=10, label="rows=8 cols=300 dtype=float16 [values x64] (generated)")
    assert row.generated and row.stress == "values x64" and row.params == "rows=8 cols=300" and row.dtype == "float16"
    assert inputs_text(row, 0).plain == "rows=8 cols=300 [values x64]"
    assert inputs_text(row, 22).plain == "rows=8 cols=300 [x64]"  # the short mark before a parameter goes
    assert inputs_text(row, 14).plain.endswith("[x64]")
    assert CaseRow(index=3, label="n=4 (generated)").stress == ""


@needs_snapshots
def test_snapshot_narrow_case_table_with_large_counts(snap_compare, project):
    async def before(pilot):
        await replay(pilot.app, pilot, big_count_events())

    assert snap_compare(app_for(project), terminal_size=NARROW, run_before=before)


async def test_a_training_kernel_shows_its_forward_verdict_while_its_gradients_are_checked(project):
    import time

    from tui_helpers import canned_save

    from workbench.tui.messages import RunEvent

    labels = ["rows=9 cols=127", "rows=1 cols=1"]
    app = app_for(project)
    async with app.run_test(size=WIDE) as pilot:
        save = canned_save(saved_at=time.time())
        app.session.last_save = save
        run_id = app.submit("save", save=save)

        async def feed(*events):
            for event in events:
                app.post_message(RunEvent(run_id, event))
            await pilot.pause()
            app.render_all()
            await pilot.pause()

        await feed(READY_GPU, RunStarted(kernel_path="kernel.py", source_hash="3f2a91c04b1e7d22", mode="gpu",
                                         device_name=READY_GPU.device_name, n_cases=2, planned=[0, 1]),
                   StageChanged(stage="verifying", detail=labels[0], current=1, total=2, case_index=0, phase="forward"),
                   CaseResult(case_index=0, label=labels[0], status="passed", phase="forward", output="out"))
        run = app.kept.runs[run_id]
        assert run.forward_verdict() is None and "verify forward 1/2" in status_lines(app)
        await feed(StageChanged(stage="verifying", detail=labels[1], current=2, total=2, case_index=1, phase="forward"),
                   CaseResult(case_index=1, label=labels[1], status="passed", phase="forward"),
                   StageChanged(stage="verifying", detail=labels[0], current=1, total=2, case_index=0))
        assert run.forward_verdict() == (2, 0) and run.forward_at is not None
        status = status_lines(app)
        assert "FORWARD VERIFIED 2" in status and "gradients 0 of 2" in status and "forward 0/" not in status
        assert [row.status for row in run.ordered_rows()] == ["forward ok", "forward ok"]
        assert "the gradients are not judged yet" in text_of(app.query_one("#detail"))
        # a wrong gradient is the verdict the moment it lands, whatever the forward said
        await feed(CaseResult(case_index=0, label=labels[0], status="failed", messages=["output['grad x']: wrong"]))
        assert "FAILING 1 of 1 so far" in status_lines(app) and "forward ✔" in status_lines(app)
        assert run.rows[0].status == "failed"
        await feed(CaseResult(case_index=1, label=labels[1], status="passed"), RunFinished(verdict="failed", passed=1,
                                                                                          failed=1))
        assert "FAILED 1 of 2 cases" in status_lines(app) and run.rows[1].status == "passed"
