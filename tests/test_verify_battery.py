"""Each check of the verification battery catches a kernel written to break it.

These run real worker processes under the Triton interpreter (no GPU needed);
the same tests run on a GPU machine, where the worker uses the GPU.
"""


import kernels
import pytest
from run_helpers import ONLY_CASES, failing, verify_json


def test_good_kernel_passes_every_case_and_config(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.GOOD))
    assert code == 0, rec
    tuned = [c for c in rec["cases"] if not c["config"] and not c["generated"]]
    forced = [c for c in rec["cases"] if c["config"]]
    assert [c["case_index"] for c in tuned] == [0, 1, 2]  # the bench case is not a verify case
    generated = [c for c in rec["cases"] if c["generated"]]
    assert generated and all(c["status"] == "passed" and "(generated)" in c["label"] for c in generated)
    assert len(forced) == 3 * 2 and all(c["status"] == "passed" for c in forced)
    assert {c["dtype"] for c in tuned} == {"float32", "float16"}
    assert rec["mode"] in ("interpreter", "gpu")


def test_grid_one_block_short_reports_unwritten_tail(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.GRID_SHORT))
    assert code == 1
    case = next(c for c in failing(rec) if c["label"] == "n=4097" and not c["config"])
    assert any("never written" in m for m in case["messages"])
    assert "last" in case["pattern"] and "elements" in case["pattern"]
    assert case["worst"]["kernel"] is None  # the worst element was never written
    assert case["error_map"]


@pytest.mark.slow
def test_missing_mask_is_an_out_of_bounds_access(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.MISSING_MASK))
    if rec["mode"] != "interpreter":
        pytest.skip("on a GPU stray accesses that leave the numbers right are `workbench sanitize`'s to find")
    assert code == 1
    by_case = {c["case_index"]: c for c in rec["cases"] if not c["config"]}
    message = by_case[0]["messages"][0]
    assert by_case[0]["status"] == "error"
    assert "out-of-bounds load" in message and "x_ptr" in message
    line = int(message.rsplit(":", 1)[1].rstrip("]"))
    assert "tl.load(x_ptr + offs)" in kernels.MISSING_MASK.splitlines()[line - 1]


def test_mutated_input_fails(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.MUTATES_INPUT))
    assert code == 1
    assert any("input #0 changed" in m for c in failing(rec) for m in c["messages"])


@pytest.mark.slow
def test_mutated_input_allowed_when_declared_inplace(cli, make_project):
    assert 'restore_value=["x_ptr"]' in kernels.MUTATES_INPUT_RESTORED
    code, rec = verify_json(cli, make_project(kernels.MUTATES_INPUT_RESTORED, toml="[verify]\ninplace = true\n"))
    assert code == 0, failing(rec)


@pytest.mark.slow
def test_an_autotuned_kernel_that_changes_its_input_is_pointed_at_restore_value(cli, make_project):
    """On a GPU the autotuner times each config by running it again and again on the same tensors."""
    code, rec = verify_json(cli, make_project(kernels.MUTATES_INPUT, toml="[verify]\ninplace = true\n"))
    if code == 0:
        assert rec["mode"] == "interpreter"
        pytest.skip("the interpreter's autotuner ran each config once: the input changed once")
    notes = [n for c in failing(rec) for n in c["notes"]]
    assert code == 1 and any("restore_value" in n and "scale_kernel" in n for n in notes), failing(rec)


@pytest.mark.slow
def test_one_bad_autotune_config_is_named(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.BAD_CONFIG))
    assert code == 1
    forced_bad = [c for c in failing(rec) if c["config"]]
    assert len(forced_bad) == 3 and all("BLOCK=128" in c["config"] for c in forced_bad)
    assert all(c["status"] == "passed" for c in rec["cases"] if "BLOCK=64" in c["config"])


@pytest.mark.slow
def test_nan_where_reference_is_finite(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.MAKES_NAN))
    assert code == 1
    assert any("NaN/Inf" in m for c in failing(rec) for m in c["messages"])


@pytest.mark.slow
def test_systematic_error_under_atol_caught_by_error_norm(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.SMALL_BIAS))
    assert code == 1
    messages = [m for c in failing(rec) for m in c["messages"]]
    assert any("relative error norm" in m for m in messages), messages


@pytest.mark.slow
def test_nondeterminism_is_a_note_unless_asked_for(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.NONDETERMINISTIC))
    assert code == 0
    assert any("nondeterministic" in n for c in rec["cases"] for n in c["notes"])
    code, rec = verify_json(cli, make_project(kernels.NONDETERMINISTIC, name="strict",
                                              toml="[verify]\ndeterministic = true\n"))
    assert code == 1
    assert any("nondeterministic" in m for c in failing(rec) for m in c["messages"])


@pytest.mark.slow
def test_compile_error_points_at_the_line(cli, make_project):
    project = make_project(kernels.COMPILE_ERROR)
    code, rec = verify_json(cli, project)
    assert code == 2
    problem = next(p for p in rec["problems"] if p["kind"] == "compile")
    line = kernels.COMPILE_ERROR.splitlines()[problem["line"] - 1]
    assert "no_such_function" in line
    assert problem["file"].endswith("kernel.py")


@pytest.mark.slow
def test_hang_times_out_and_the_other_cases_still_run(cli, make_project):
    # No generated cases: the value stresses of case 1 (n=1000) would hang too, 4 s each, and say nothing more.
    project = make_project(kernels.HANGS, toml="[verify]\ntimeout_s = 4\ninterpret_timeout_s = 4\n"
                                                "generated_cases = false\n")
    code, rec = verify_json(cli, project)
    assert code == 1
    by_case = {c["case_index"]: c for c in rec["cases"] if not c["config"]}
    assert by_case[1]["status"] == "error" and "timed out" in by_case[1]["messages"][0]
    assert by_case[0]["status"] == by_case[2]["status"] == "passed"


@pytest.mark.slow
def test_hang_time_out_from_the_command_line(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.HANGS), "--timeout", "4", "--case", "1")
    assert code == 1 and "timed out after 4 s" in out


@pytest.mark.slow
def test_crash_is_that_cases_failure_and_verification_goes_on(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.CRASHES, toml=ONLY_CASES))  # case 1's stresses crash too
    assert code == 1
    by_case = {c["case_index"]: c for c in rec["cases"] if not c["config"]}
    assert by_case[1]["status"] == "error" and "SIGSEGV" in by_case[1]["messages"][0]
    assert by_case[0]["status"] == by_case[2]["status"] == "passed"


@pytest.mark.slow
def test_one_worker_and_a_shape_that_crashes_with_its_stresses_still_give_every_case_a_verdict(cli, make_project,
                                                                                                monkeypatch):
    # Case 1 (n=1000) crashes, and so do its four value stresses: five restarts of the one worker, each finishing a
    # case. Every case is in the record, each crashed stress marked generated like the stresses that ran.
    monkeypatch.setenv("WORKBENCH_WORKERS", "1")
    code, rec = verify_json(cli, make_project(kernels.CRASHES))
    assert code == 1
    tuned = [c for c in rec["cases"] if not c["config"]]
    crashed = [c for c in tuned if c["status"] == "error"]
    assert len(crashed) == 5 and all("SIGSEGV" in c["messages"][0] for c in crashed)
    assert [c["generated"] for c in crashed] == [False, True, True, True, True]
    assert all("n=1000" in c["label"] for c in crashed)
    assert all(c["status"] == "passed" for c in tuned if c not in crashed)
    indices = sorted(c["case_index"] for c in tuned)  # case 3 is for the benchmark alone
    assert indices == [i for i in range(indices[-1] + 1) if i != 3] and len(indices) > 5


@pytest.mark.slow
def test_plain_contract_verifies_unchanged(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.PLAIN_CONTRACT))
    assert code == 0
    # the one case, and beside it the value-stress cases (a plain contract has no sizes to vary)
    assert [c["label"] for c in rec["cases"]] == ["get_inputs()"] + [
        f"get_inputs() [{s}] (generated)" for s in ("values x64", "values x1/1024", "offset", "outliers")]


@pytest.mark.slow
def test_kernel_file_path_works_too(cli, make_project):
    project = make_project(kernels.PLAIN_CONTRACT)
    code, rec = verify_json(cli, project / "kernel.py")
    assert code == 0


@pytest.mark.gpu
def test_illegal_memory_access_poisons_only_that_worker(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.ILLEGAL_ACCESS))
    assert code == 1
    by_case = {c["case_index"]: c for c in rec["cases"] if not c["config"]}
    assert by_case[1]["status"] == "error"
    assert any(p["kind"] == "crash" for p in rec["problems"])
    assert by_case[0]["status"] == by_case[2]["status"] == "passed"


def test_sharded_verification_is_one_run(make_project):
    """Verification split over workers reads as one run: one ready, one start, global progress."""
    from workbench.core.events import CaseResult, RunStarted, StageChanged, WorkerReady
    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    events = []
    runner = Runner(parallel=2)
    try:
        outcome = run_project(Project.open(make_project(kernels.CRASHES, toml=ONLY_CASES)),
                              runner, RunSpec(("verify",)), events.append)
    finally:
        runner.close()
    assert sum(isinstance(e, WorkerReady) for e in events) == 1
    started = [e for e in events if isinstance(e, RunStarted)]
    assert len(started) == 1 and started[0].planned == [0, 1, 2]
    progress = [e for e in events if isinstance(e, StageChanged) and e.stage == "verifying"]
    assert {e.total for e in progress} == {3}
    tuned = {e.case_index: e.status for e in events if isinstance(e, CaseResult) and not e.config}
    assert tuned == {0: "passed", 1: "error", 2: "passed"}  # the crash stays in its shard
    assert outcome.exit_code == 1


@pytest.mark.slow
def test_sharded_verification_says_verified_once_before_the_benchmark(make_project):
    """The verdict is complete when the last shard is past its cases, not when the bench worker is up."""
    from workbench.core.events import CaseResult, Problem, RunStarted, StageChanged
    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    events = []
    runner = Runner(parallel=2)
    try:
        run_project(Project.open(make_project(kernels.GOOD)), runner, RunSpec(("verify", "bench")), events.append)
    finally:
        runner.close()
    stages = [(n, e.stage) for n, e in enumerate(events) if isinstance(e, StageChanged)]
    verified = [n for n, stage in stages if stage == "verified"]
    assert len(verified) == 1
    planned = set(next(e for e in events if isinstance(e, RunStarted)).planned)
    assert verified[0] > max(n for n, e in enumerate(events) if isinstance(e, CaseResult) and e.case_index in planned)
    assert "precompiling" not in {stage for _, stage in stages}  # a shard's own business
    # What follows the verdict is the benchmark: timed on a GPU, refused by the interpreter.
    after = events[verified[0] + 1:]
    assert any(isinstance(e, StageChanged) and e.stage == "benchmarking" for e in after) or \
        any(isinstance(e, Problem) and e.kind == "environment" for e in after)


def test_the_screen_knows_the_verdict_at_verified_and_files_later_problems_under_the_benchmark():
    from workbench.core.events import CaseResult, Problem, StageChanged
    from workbench.core.live.loop import RunRequest
    from workbench.tui.model import RunState

    run = RunState(run_id=1, request=RunRequest(stages=("verify", "bench")))
    run.apply(CaseResult(case_index=0, label="n=1", status="passed"))
    assert not run.verdict_known and run.verdict == "running"
    run.apply(StageChanged(stage="verified"))
    assert run.verdict_known and run.verdict == "passed" and run.phase == "bench"
    run.apply(Problem(kind="crash", message="the bench worker died"))
    assert run.verdict == "passed" and run.bench_problems and not run.problems


def test_reports_list_cases_in_case_order_whatever_order_the_shards_finished(tmp_path):
    from workbench.core.events import CaseResult
    from workbench.core.project.folder import Project
    from workbench.core.run.session import RunOutcome

    (tmp_path / "kernel.py").write_text(kernels.GOOD)
    outcome = RunOutcome(project=Project.open(tmp_path), source_hash="x")
    for index, config in ((2, ""), (0, ""), (0, "BLOCK=64"), (1, ""), (0, "BLOCK=128")):
        outcome.events.append(CaseResult(case_index=index, label=f"case {index}", status="passed", config=config))
    assert [(c["case_index"], c["config"]) for c in outcome.to_record()["cases"]] == \
        [(0, ""), (0, "BLOCK=64"), (0, "BLOCK=128"), (1, ""), (2, "")]


@pytest.mark.slow
def test_a_warm_runner_keeps_a_worker_per_shard_and_one_for_the_benchmark(make_project):
    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    runner = Runner(parallel=2, keep_warm=True)
    try:
        runner.prewarm()
        assert runner.workers_per_run == 3 and len(runner.supply.spares) == 3
        run_project(Project.open(make_project(kernels.GOOD)), runner, RunSpec(("verify", "bench")))
        assert sum(w.proc.poll() is None for w in runner.supply.spares) == 3  # refilled for the next save
    finally:
        runner.close()
    assert Runner(parallel=1).workers_per_run == 1


@pytest.mark.slow
def test_what_the_kernel_prints_reaches_the_log_even_though_the_exit_is_not_waited_for(make_project):
    from workbench.core.events import LogLine
    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    chatty = kernels.kernel_source(launcher=kernels.LAUNCHER.replace(
        "    return out", "    print('kernel_fn says hello', x.numel(), flush=True)\n    return out"))
    events = []
    runner = Runner()
    try:
        run_project(Project.open(make_project(chatty)), runner, RunSpec(("verify",)), events.append)
    finally:
        runner.close()
    said = [e.text for e in events if isinstance(e, LogLine) and "kernel_fn says hello" in e.text]
    assert any(text.endswith(" 4097") for text in said), said  # the last case's print, too


@pytest.mark.slow
def test_under_a_launcher_the_run_ends_when_the_launcher_is_done(make_project, tmp_path):
    """A profiler or sanitizer writes its report after the worker exits: the run must not cut it off."""
    import shlex

    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    report = tmp_path / "report.txt"
    launcher = ["sh", "-c", f'"$@"; sleep 0.5; echo written > {shlex.quote(str(report))}', "launcher"]
    runner = Runner(launcher=launcher)
    try:
        outcome = run_project(Project.open(make_project(kernels.GOOD)), runner, RunSpec(("verify",)))
    finally:
        runner.close()
    assert outcome.exit_code == 0
    assert report.read_text().strip() == "written"


def test_forced_configs_are_the_ones_the_autotuners_pruning_keeps_for_each_case(cli, make_project):
    """A config the early prune drops for a case's launch (a tile narrower than the row: wrong there) is not
    forced on that case, and a tuner the case never launches forces nothing on it; each case says so."""
    code, rec = verify_json(cli, make_project(kernels.ROW_TILE_PRUNED))
    assert code == 0, failing(rec)
    forced = {}
    for c in rec["cases"]:
        if c["config"]:
            forced.setdefault(c["case_index"], []).append(c["config"].split(",")[0])  # the tile, not the warps
    assert forced == {
        0: [f"center_rows_kernel: BLOCK={b}" for b in (64, 128, 512)],  # 50 columns: every tile holds a row
        1: [f"center_rows_kernel: BLOCK={b}" for b in (128, 512)],
        2: ["center_rows_kernel: BLOCK=512"],
        3: [f"center_wide_rows_kernel: BLOCK={b}" for b in (128, 256)],  # the wide rows' kernel alone
    }
    notes = {c["case_index"]: c["notes"] for c in rec["cases"] if not c["config"] and not c["generated"]}
    assert not any(n.startswith("configs not forced") for n in notes[0] if "center_rows_kernel" in n)
    assert any("1 of center_rows_kernel's 3" in n and "prune_configs_by" in n for n in notes[1]), notes[1]
    assert any("2 of center_rows_kernel's 3" in n for n in notes[2]), notes[2]
    assert any("does not launch center_wide_rows_kernel" in n for n in notes[0]), notes[0]
    assert any("does not launch center_rows_kernel" in n for n in notes[3]), notes[3]
    code, out, _ = cli("verify", make_project(kernels.ROW_TILE_PRUNED, name="again"))
    assert "each on the cases its tuner's pruning keeps it for" in out, out


def test_a_pinned_config_is_found_by_its_description(cli, make_project):
    """The app pins a config as described: that config alone runs, whatever its place in the tuner's list."""
    from workbench.core.project.config import VerifyConfig
    from workbench.core.project.contract import describe_config, find_autotuners, load_kernel
    from workbench.core.verify.battery import Verifier

    del cli
    project = make_project(kernels.ROW_TILE_PRUNED)
    km = load_kernel(project / "kernel.py", "pinned_kernel")
    second = describe_config(find_autotuners(km.module)["center_rows_kernel"].configs[1])  # "BLOCK=128, num_warps=..."
    verifier = Verifier(km, VerifyConfig(), lambda event: None, True, pins={"center_rows_kernel": second,
                                                                            "center_wide_rows_kernel": 1})
    assert [c.kwargs["BLOCK"] for c in verifier.autotuners["center_rows_kernel"].configs] == [128]
    assert [c.kwargs["BLOCK"] for c in verifier.autotuners["center_wide_rows_kernel"].configs] == [256]


def test_a_pinned_tuner_records_its_pinned_config_alone_for_the_compile_processes(make_project):
    """The pins apply before the worker records what its cases compile: a pinned tuner's other configs are
    neither compiled nor waited for (the live loop pins a config to iterate on it faster)."""
    import torch

    from workbench.core.project.contract import describe_config, find_autotuners, load_kernel
    from workbench.core.timing.compiled import compile_only
    from workbench.core.verify.battery import apply_pins

    km = load_kernel(make_project(kernels.ROW_TILE_PRUNED) / "kernel.py", "pinned_before_recording")
    tuners = find_autotuners(km.module)
    tuner = tuners["center_rows_kernel"]
    pinned = describe_config(tuner.configs[2])
    compiled = []
    tuner.fn.run = lambda *args, **kwargs: compiled.append(kwargs["BLOCK"])
    with compile_only():
        km.kernel_fn(torch.randn(4, 50))  # nothing runs: the inputs' device does not matter
    assert compiled == [64, 128, 512]
    apply_pins(tuners, {"center_rows_kernel": pinned})
    apply_pins(tuners, {"center_rows_kernel": pinned})  # the Verifier applies them again: nothing changes
    compiled.clear()
    with compile_only():
        km.kernel_fn(torch.randn(4, 50))
    assert compiled == [512] and [describe_config(c) for c in tuner.configs] == [pinned]
