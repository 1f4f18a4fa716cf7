"""Comparisons between runs that know the noise: cases matched across records, baselines (a run or a file),
`workbench bench --baseline/--fail-slower` and its exit code 4, and the Changes tab's rendering.

No worker runs: the bench command's runs are fabricated outcomes (as run_project records them), so these
tests take well under a second each."""

import json
import random
import re
from dataclasses import replace

import pytest

from workbench.builtin import benchmarking
from workbench.commands import EXIT_FAILED, EXIT_OK, EXIT_SLOWER, EXIT_UNUSABLE
from workbench.core.events import BenchResult, CaseResult, DeviceFacts, RunFinished, WorkerReady
from workbench.core.live.changes import (
    BaselineError,
    case_timings,
    compare_timings,
    compare_with_history,
    load_baseline,
    previous_timed,
    speed_change,
    timings_of,
)
from workbench.core.live.loop import RunRequest
from workbench.core.project.folder import Project
from workbench.core.project.history import append_record, history_dir, read_records
from workbench.core.run.session import RunOutcome
from workbench.core.timing.noise import FASTER, NO_INTERVAL, SLOWER, WITHIN_NOISE
from workbench.core.timing.stats import summarize
from workbench.core.verdict import EXIT_ENVIRONMENT, with_gate

GPU = "NVIDIA H100 80GB HBM3"


def timed(ms: float, seed: int, spread: float = 0.004, n: int = 400):
    rng = random.Random(seed)
    return summarize([ms * rng.lognormvariate(0.0, spread) for _ in range(n)], "cuda events per call")


def outcome_of(project: Project, medians: dict[int, float], seed: int = 0, verdict: str = "passed",
               device: str = GPU, keep_samples: bool = True) -> RunOutcome:
    """A benchmark run as the worker's events would make it: case index -> the kernel's median."""
    outcome = RunOutcome(project=project, source_hash="0123456789abcdef", stages=["require_gpu", "verify", "bench"])
    events = [WorkerReady(pid=1, mode="gpu", device_name=device, torch_version="2.11.0", triton_version="3.6.0",
                          python_version="3.12", warmup_s=2.0)]
    if verdict == "passed":
        events += [CaseResult(case_index=i, label=f"rows={1024 << i}", status="passed") for i in medians]
        events.append(DeviceFacts(name=device, copy_gbps=3000.0, matmul_tflops=750.0))
        for i, ms in medians.items():
            kernel = timed(ms, seed * 100 + i)
            if not keep_samples:
                kernel.samples_ms = []
            events.append(BenchResult(case_index=i, label=f"rows={1024 << i}", kernel=kernel, recheck="passed"))
        events.append(RunFinished(verdict="passed", passed=len(medians)))
    else:
        events += [CaseResult(case_index=0, label="rows=1024", status="failed"),
                   RunFinished(verdict="failed", failed=1)]
    for event in events:
        outcome.events.append(event)
        outcome.tally.add(event)
    outcome.finished = events[-1]
    return outcome


def record(project: Project, medians: dict[int, float], **kwargs):
    outcome = outcome_of(project, medians, **kwargs)
    outcome.record = append_record(project, outcome.to_record(), "# kernel\n")
    return outcome.record


@pytest.fixture
def project(placeholder_project):
    return placeholder_project


# -- cases matched across runs ----------------------------------------------------------------------

def test_cases_are_matched_by_index_and_parameters_and_the_rest_reported(project):
    before = record(project, {0: 0.100, 1: 0.200, 2: 0.300}, seed=1)
    after = outcome_of(project, {0: 0.110, 1: 0.200, 3: 0.400}, seed=2)
    speed = speed_change(case_timings(before.data), timings_of(after.of_type(BenchResult)))
    assert [c.name for c in speed.matched] == ["case 0 rows=1024", "case 1 rows=2048"]
    assert [c.change.label for c in speed.matched] == [SLOWER, WITHIN_NOISE]
    assert [(c.name, c.only_in) for c in speed.unmatched] == [("case 2 rows=4096", "the earlier run"),
                                                             ("case 3 rows=8192", "this run")]
    assert speed.counts == {SLOWER: 1, WITHIN_NOISE: 1}
    assert speed.describe_counts() == "2 cases: 1 slower, 1 within noise"
    assert [c.name for c in speed.slower_than(0.05)] == ["case 0 rows=1024"] and speed.slower_than(0.2) == []
    renamed = [replace(t, label="rows=9999") if t.case_index == 1 else t for t in case_timings(before.data).values()]
    moved = speed_change({t.key: t for t in renamed}, timings_of(after.of_type(BenchResult)))
    unmatched = [c.name for c in moved.unmatched]
    assert "case 1 rows=2048" in unmatched and "case 1 rows=9999" in unmatched, "one index, other parameters"


def test_a_record_keeps_the_kernels_samples_only(project):
    data = record(project, {0: 0.1}).data
    row = data["bench"][0]
    assert len(row["kernel"]["samples_ms"]) == 200 and row["kernel"]["samples"] == 400
    assert len(case_timings(data)[(0, "rows=1024", "")].samples_ms) == 200


def test_an_old_record_without_samples_compares_without_an_interval(project):
    old = record(project, {0: 0.100}, keep_samples=False)
    del old.data["bench"][0]["kernel"]["samples_ms"]  # as written before samples were kept
    now = outcome_of(project, {0: 0.150}, seed=3)
    comparison = compare_timings("previous timed run", old, timings_of(now.of_type(BenchResult)))
    change = comparison.speed.matched[0].change
    assert change.label == NO_INTERVAL and change.percent == pytest.approx(50, abs=2)
    assert "no interval: the earlier run kept no samples" in change.describe()
    assert comparison.speed.slower_than(0.05) == []


def test_a_baseline_timed_on_another_gpu_is_noted(project):
    other = record(project, {0: 0.1}, device="NVIDIA H200")
    now = outcome_of(project, {0: 0.1}, seed=2)
    comparison = compare_timings("baseline", other, timings_of(now.of_type(BenchResult)), GPU)
    assert comparison.notes == [f"the earlier run ran on NVIDIA H200, this run on {GPU}: the change is partly "
                                "the GPU's"]
    assert comparison.to_dict()["device"] == "NVIDIA H200"


# -- baselines -------------------------------------------------------------------------------------------

def test_a_baseline_by_run_id_prefix_index_or_file(project, tmp_path):
    first = record(project, {0: 0.1})
    record(project, {0: 0.2})
    verify_only = append_record(project, outcome_of(project, {}, verdict="failed").to_record(), "# kernel\n")
    records = read_records(project)
    assert load_baseline(project, first.id, records) == (first, f"run {first.id}")
    assert load_baseline(project, "0", records)[0].id == first.id
    assert previous_timed(records).id != verify_only.id and previous_timed(records, exclude="x").id == records[1].id
    json_output = tmp_path / "main.json"
    json_output.write_text(json.dumps({"exit_code": 0, "projects": [
        {**outcome_of(project, {0: 0.3}).to_record(), "project": "other"},
        outcome_of(project, {0: 0.05}).to_record()]}))
    loaded, where = load_baseline(project, str(json_output), records)
    assert case_timings(loaded.data)[(0, "rows=1024", "")].median_ms == pytest.approx(0.05, rel=0.01)
    assert where == str(json_output)
    record_file = history_dir(project) / f"{first.id}.json"
    assert load_baseline(project, str(record_file), [])[0].data["id"] == first.id


@pytest.mark.parametrize("ref, message", [
    ("missing.json", "no such file"),
    ("nosuchrun", "no run 'nosuchrun' in the history"),
    ("{folder}", "a folder"),
    ("{bad}", "not a JSON file"),
    ("{alien}", "neither a `workbench bench --json` output nor a run record"),
    ("-1", "timed no benchmark case"),
])
def test_a_baseline_that_cannot_be_used_says_why(project, tmp_path, ref, message):
    append_record(project, outcome_of(project, {}, verdict="failed").to_record(), "# kernel\n")
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "alien.json").write_text("[1, 2]")
    ref = ref.format(folder=tmp_path, bad=tmp_path / "bad.json", alien=tmp_path / "alien.json")
    with pytest.raises(BaselineError, match=re.escape(message)):
        load_baseline(project, ref, read_records(project))


# -- the bench command: comparisons, the gate, exit 4 ----------------------------------------------------

@pytest.fixture
def bench_runs(monkeypatch):
    """`workbench bench` without workers: each call runs the next fabricated outcome, recorded as run_project
    records it. Returns the list to fill (medians, or an outcome maker) and the calls made."""
    planned: list = []
    calls: list = []

    def fake_run_many(args, context, stages):
        calls.append(args)
        outcomes = []
        for path in args.projects:
            project = Project.open(path)
            outcome = planned.pop(0)(project)
            outcome.record = append_record(project, outcome.to_record(), "# kernel\n")
            outcomes.append(outcome)
        return outcomes

    monkeypatch.setattr(benchmarking, "run_many", fake_run_many)
    return planned, calls


def test_fail_slower_exits_4_when_a_case_is_slower_beyond_noise(project, cli, bench_runs):
    planned, _ = bench_runs
    record(project, {0: 0.100, 1: 0.200}, seed=1)
    planned.append(lambda p: outcome_of(p, {0: 0.110, 1: 0.201}, seed=2))
    code, out, err = cli("bench", project.root, "--no-plot", "--fail-slower", "5%")
    assert code == EXIT_SLOWER == 4
    assert "vs previous timed run" in out and "over 2 cases: 1 slower, 1 within noise" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("case 0 rows=1024"))
    assert "+10." in line and "[+" in line and line.rstrip().endswith("slower")
    assert "regression gate (--fail-slower 5%): FAILED: case 0 rows=1024 +10." in out


def test_a_slowdown_under_the_threshold_passes_the_gate(project, cli, bench_runs):
    planned, _ = bench_runs
    record(project, {0: 0.100}, seed=1)
    planned.append(lambda p: outcome_of(p, {0: 0.110}, seed=2))
    code, out, err = cli("bench", project.root, "--no-plot", "--fail-slower", "15")
    assert code == EXIT_OK and "slower" in out and "regression gate (--fail-slower 15%): passed" in out


def test_the_gate_reads_the_baseline_not_the_previous_run(project, cli, bench_runs):
    planned, _ = bench_runs
    base = record(project, {0: 0.100}, seed=1)
    record(project, {0: 0.120}, seed=2)
    planned.append(lambda p: outcome_of(p, {0: 0.121}, seed=3))
    code, out, err = cli("bench", project.root, "--no-plot", "--baseline", base.id[:20], "--fail-slower", "5")
    assert code == EXIT_SLOWER
    assert f"vs baseline (run {base.id})" in out and "vs previous timed run" in out
    planned.append(lambda p: outcome_of(p, {0: 0.121}, seed=4))
    code, out, err = cli("bench", project.root, "--no-plot", "--baseline", "-1", "--fail-slower", "5")
    assert code == EXIT_OK, "against the run just before (-1, read before this one ran), nothing is slower"


def test_bench_json_carries_the_comparisons_and_the_gate(project, cli, bench_runs, tmp_path):
    planned, _ = bench_runs
    base_file = tmp_path / "base.json"
    base_file.write_text(json.dumps({"exit_code": 0, "projects": [outcome_of(project, {0: 0.1}, seed=1).to_record()]}))
    planned.append(lambda p: outcome_of(p, {0: 0.09}, seed=2))
    code, out, err = cli("bench", project.root, "--no-plot", "--json", "--baseline", base_file, "--fail-slower", "5%")
    assert code == EXIT_OK
    result = json.loads(out)
    assert result["exit_code"] == 0
    previous, baseline = result["projects"][0]["comparisons"]
    assert previous["against"] is None and previous["notes"] == ["no previous timed run to compare with"]
    assert baseline["against"] == str(base_file) and baseline["device"] == GPU
    case = baseline["speed"]["cases"][0]
    assert case["finding"] == FASTER and case["interval_percent"][1] < 0 and case["label"] == "rows=1024"
    assert result["projects"][0]["regression_gate"] == {"threshold_percent": 5.0, "against": str(base_file),
                                                        "failed": []}


def test_a_failed_verification_still_exits_1_under_the_gate(project, cli, bench_runs):
    planned, _ = bench_runs
    record(project, {0: 0.100}, seed=1)
    planned.append(lambda p: outcome_of(p, {}, verdict="failed"))
    code, out, err = cli("bench", project.root, "--no-plot", "--fail-slower", "5%")
    assert code == EXIT_FAILED and "this run timed no case" in out
    assert [with_gate(c, True) for c in (EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE, EXIT_ENVIRONMENT)] == [4, 1, 2, 3]
    assert with_gate(EXIT_OK, False) == EXIT_OK


def test_an_unusable_baseline_stops_before_anything_runs(project, cli, bench_runs, tmp_path):
    planned, calls = bench_runs
    record(project, {0: 0.1})
    before = sorted(p.name for p in history_dir(project).iterdir())
    code, out, err = cli("bench", project.root, "--no-plot", "--baseline", tmp_path / "nope.json")
    assert code == EXIT_UNUSABLE and "--baseline" in err and "no such file" in err
    assert calls == [] and sorted(p.name for p in history_dir(project).iterdir()) == before


@pytest.mark.parametrize("value", ["abc", "-5", "nan", "inf", "5%%", ""])
def test_a_bad_threshold_is_refused(project, cli, bench_runs, capsys, value):
    _, calls = bench_runs
    with pytest.raises(SystemExit) as exited:  # argparse's refusal, with the bad-usage code
        cli("bench", project.root, "--fail-slower", value)
    err = capsys.readouterr().err
    assert exited.value.code == EXIT_UNUSABLE and "--fail-slower" in err and "not a percentage" in err
    assert calls == []


def test_a_threshold_accepts_a_percent_sign_or_none():
    assert benchmarking.percent_argument("5%") == benchmarking.percent_argument(" 5 ") == 0.05
    assert benchmarking.percent_argument("0") == 0.0 and benchmarking.percent_argument("2.5%") == 0.025


def test_workbench_diff_says_the_interval(project):
    from workbench.reports import timing_change

    older, newer = record(project, {0: 0.100}, seed=1), record(project, {0: 0.080}, seed=2)
    line, = timing_change(older.data, newer.data)
    assert line.startswith("  case 0 rows=1024: 0.10") and "-20." in line and "[-" in line and line.endswith("faster")


# -- the Changes tab -------------------------------------------------------------------------------------

def plain(text) -> str:
    return text.plain


def test_the_changes_tab_shows_each_change_with_its_interval(project):
    from workbench.tui.model import RunState
    from workbench.tui.widgets.changes import comparison_head

    earlier = record(project, {0: 0.100, 1: 0.200}, seed=1)
    run = RunState(run_id=1, request=RunRequest(stages=("verify", "bench")))
    for event in outcome_of(project, {0: 0.090, 1: 0.200, 2: 0.3}, seed=2).events:
        run.apply(event)
    comparisons = compare_with_history([earlier], "# kernel\n", lambda h: "# kernel\n", {}, run.case_timings())
    previous = comparisons[0]
    assert previous.speed.counts == {FASTER: 1, WITHIN_NOISE: 1}
    assert comparisons[1].speed is previous.speed, "the previous run is the last passing one: compared once"
    head = plain(comparison_head(previous))
    assert "vs previous run" in head
    speed_line = next(x for x in head.splitlines() if x.startswith("speed"))
    assert "[" in speed_line and "(2 cases: 1 faster, 1 within noise)" in speed_line
    assert "case 0 rows=1024  -10." in head and head.split("case 0 rows=1024")[1].splitlines()[0].endswith("faster")
    assert "case 2 rows=4096  timed in this run only" in head


def test_the_changes_tab_says_when_the_earlier_run_kept_no_samples(project):
    from workbench.tui.widgets.changes import comparison_head

    earlier = record(project, {0: 0.100}, keep_samples=False)
    now = outcome_of(project, {0: 0.200}, seed=2)
    previous, _ = compare_with_history([earlier], "", lambda h: "", {}, timings_of(now.of_type(BenchResult)))
    head = plain(comparison_head(previous))
    assert "% (no interval: the earlier run kept no samples)" in head and "(1 case: 1 no interval)" in head
    assert "+99." in head or "+100." in head


def test_the_changes_tab_before_any_timing(project):
    from workbench.tui.widgets.changes import comparison_head

    earlier = record(project, {}, verdict="failed")
    now = outcome_of(project, {0: 0.2})
    previous, passing = compare_with_history([earlier], "", lambda h: "", {}, timings_of(now.of_type(BenchResult)))
    assert "the earlier run timed no benchmark case" in plain(comparison_head(previous))
    assert passing.record is None and "none yet" in plain(comparison_head(passing))


def test_a_run_in_progress_offers_its_samples(project):
    from workbench.tui.model import RunState

    run = RunState(run_id=1, request=RunRequest(stages=("verify", "bench")))
    for event in outcome_of(project, {0: 0.1}).events:
        run.apply(event)
    (timing,) = run.case_timings().values()
    assert timing.median_ms == pytest.approx(0.1, rel=0.01) and len(timing.samples_ms) == 200
