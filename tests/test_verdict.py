"""One verdict (workbench/core/verdict.py): the rule, and every consumer reading the same word and exit code."""

import pytest

from workbench.core.events import (
    CaseResult,
    Problem,
    RunFinished,
    RunStarted,
    StageChanged,
    WorkerReady,
)
from workbench.core.verdict import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNUSABLE,
    Tally,
    Verdict,
    worst_exit,
    worst_problem,
)


@pytest.mark.parametrize("counts, kinds, later, status, code", [
    ((3, 0, 0, 0), [], [], "passed", EXIT_OK),
    ((2, 1, 0, 0), [], [], "failed", EXIT_FAILED),
    ((2, 0, 1, 0), [], [], "failed", EXIT_FAILED),
    ((2, 0, 0, 0), ["crash"], [], "failed", EXIT_FAILED),
    ((0, 0, 0, 0), ["syntax"], [], "error", EXIT_UNUSABLE),
    ((0, 0, 0, 0), ["environment"], [], "error", EXIT_ENVIRONMENT),
    ((1, 0, 0, 0), ["gpu_only"], [], "gpu_only", EXIT_ENVIRONMENT),
    ((0, 0, 0, 2), [], [], "failed", EXIT_FAILED),  # every case skipped: nothing proved
    ((0, 0, 0, 0), [], [], "error", EXIT_UNUSABLE),  # nothing ran at all
    ((3, 0, 0, 0), [], ["environment"], "passed", EXIT_ENVIRONMENT),  # verified; the benchmark refused
    ((3, 0, 0, 0), [], ["runtime"], "passed", EXIT_FAILED),  # verified; a benchmark case crashed
    ((0, 0, 0, 0), [], ["environment"], "error", EXIT_ENVIRONMENT),  # refused before anything verified
])
def test_the_rule(counts, kinds, later, status, code):
    verdict = Verdict.decide(*counts, problem_kinds=kinds, later_kinds=later)
    assert (verdict.status, verdict.exit_code) == (status, code)
    assert verdict.label == {"passed": "VERIFIED", "failed": "FAILED", "gpu_only": "GPU ONLY",
                             "error": "CANNOT RUN HERE" if code == EXIT_ENVIRONMENT else "NOT USABLE"}[status]


def test_a_tally_splits_problems_at_the_end_of_verification():
    tally = Tally()
    tally.add(CaseResult(case_index=0, label="n=1", status="passed"))
    tally.add(StageChanged(stage="benchmarking", detail="refused"))
    tally.add(Problem(kind="environment", message="benchmarking needs a CUDA GPU"))
    verdict = tally.verdict()
    assert verdict.status == "passed" and verdict.exit_code == EXIT_ENVIRONMENT
    assert verdict.after == "benchmarking needs a CUDA GPU"
    assert tally.finished(1.0).verdict == "passed"
    assert tally.finished(1.0, cancelled=True).verdict == "cancelled"


def test_old_records_and_new_ones_read_the_same():
    legacy = {"verdict": "error", "counts": {"passed": 108, "failed": 0, "errors": 0, "skipped": 0},
              "problems": [{"kind": "environment", "message": "benchmarking needs a CUDA GPU"}]}
    assert Verdict.of_record(legacy).status == "passed"  # the app said VERIFIED; now the history does too
    assert Verdict.of_record(legacy).exit_code == EXIT_ENVIRONMENT
    failed = {"verdict": "failed", "counts": {"passed": 3, "failed": 1}, "problems": []}
    assert Verdict.of_record(failed).status == "failed"
    refused = {"counts": {"passed": 2}, "problems": [{"kind": "environment", "message": "m"}],
               "after_verification": [{"kind": "environment", "message": "m"}]}
    assert Verdict.of_record(refused).status == "passed"
    assert Verdict.of_record({"verdict": "cancelled", "counts": {}}).status == "cancelled"


def test_many_runs_and_many_problems_resolve_to_the_most_serious():
    assert worst_exit([0, 1, 3, 2]) == 3 and worst_exit([]) == 0
    problems = [Problem(kind="runtime", message="a"), Problem(kind="compile", message="b"),
                Problem(kind="inputs", message="c")]
    assert worst_problem(problems) == (EXIT_UNUSABLE, problems[1])
    assert worst_problem([]) == (EXIT_OK, None)


def test_the_cli_the_history_and_the_app_say_the_same(tmp_path):
    """A verified run whose benchmark was refused: VERIFIED in the report, "passed" in the record and in the
    app's model, exit 3 for the command (issue 25: the app said VERIFIED, `workbench list` said error)."""
    from workbench.core.live.loop import RunRequest
    from workbench.core.project.folder import Project
    from workbench.core.project.history import RunRecord
    from workbench.core.run.session import RunOutcome
    from workbench.reports import summary_line
    from workbench.tui.model import RunState

    (tmp_path / "kernel.py").write_text("")
    events = [WorkerReady(pid=1, mode="interpreter", device_name="CPU", torch_version="2", triton_version="3",
                          python_version="3", warmup_s=0),
              RunStarted(kernel_path="kernel.py", source_hash="h", mode="interpreter", device_name="CPU", n_cases=2,
                         planned=[0, 1]),
              CaseResult(case_index=0, label="n=1", status="passed"),
              CaseResult(case_index=1, label="n=2", status="passed"),
              StageChanged(stage="benchmarking", detail="refused"),
              Problem(kind="environment", message="benchmarking needs a CUDA GPU")]
    outcome = RunOutcome(project=Project.open(tmp_path), source_hash="h")
    state = RunState(run_id=1, request=RunRequest(stages=("verify", "bench")))
    for event in events:
        outcome.events.append(event)
        outcome.tally.add(event)
        state.apply(event)
    finished = outcome.tally.finished(1.0)
    outcome.events.append(finished)
    outcome.tally.add(finished)
    outcome.finished = finished
    state.apply(finished)
    record = outcome.to_record()
    assert record["verdict"] == RunRecord("x", record).verdict == state.verdict == finished.verdict == "passed"
    assert record["exit_code"] == outcome.exit_code == EXIT_ENVIRONMENT
    assert summary_line(outcome).startswith("VERIFIED: 2 passed") and summary_line(outcome).endswith("(exit 3)")
    assert state.bench_problems and not state.problems
    assert isinstance(RunFinished(verdict="passed"), RunFinished)


def test_the_unit_is_the_case_with_its_configs_beside():
    """A case passed only when every result of it did (its forced configs, the recheck after timing): the
    report, the record and the app count cases, and say the configs' runs beside (issue 25: "VERIFIED 18
    cases" on screen, "108/108 passed" in the history)."""
    tally = Tally()
    tally.add(CaseResult(case_index=0, label="n=1", status="passed"))
    tally.add(CaseResult(case_index=0, label="n=1", status="passed", config="k: BLOCK=64"))
    tally.add(CaseResult(case_index=0, label="n=1", status="passed", config="k: BLOCK=128"))
    tally.add(CaseResult(case_index=1, label="n=2", status="passed"))
    tally.add(CaseResult(case_index=1, label="n=2", status="failed", config="k: BLOCK=64"))
    tally.add(CaseResult(case_index=2, label="n=3", status="skipped"))
    verdict = tally.verdict()
    assert (verdict.passed, verdict.failed, verdict.skipped) == (1, 1, 1) and verdict.status == "failed"
    assert verdict.describe_counts() == "1 passed, 1 failed, 1 skipped (3 forced-config runs, 2 passed)"
    assert verdict.counts["configs"] == {"run": 3, "passed": 2}
    record = {"verdict": verdict.status, "counts": verdict.counts, "problems": [], "after_verification": []}
    assert Verdict.of_record(record).describe_counts() == verdict.describe_counts()
