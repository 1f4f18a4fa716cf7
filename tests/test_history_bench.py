"""Run records with benchmark results: atomic writes, what `history` and `diff` show (no GPU)."""

import json
import os

import pytest

from workbench.core.events import (
    BenchResult,
    DeviceFacts,
    RunFinished,
    Timing,
    WorkerReady,
    event_from_json,
)
from workbench.core.project.history import append_record, history_dir, read_records
from workbench.core.run.session import RunOutcome
from workbench.reports import timing_change


def bench_outcome(project, medians):
    outcome = RunOutcome(project=project, source_hash="0123456789abcdef", stages=["require_gpu", "verify", "bench"])
    events = [WorkerReady(pid=1, mode="gpu", device_name="NVIDIA H100 80GB HBM3", torch_version="2.11.0",
                          triton_version="3.6.0", python_version="3.12", warmup_s=2.0),
              DeviceFacts(name="NVIDIA H100 80GB HBM3", sm_clock_mhz=1980, driver="580.159.04", copy_gbps=3000.0,
                          matmul_tflops=750.0, ceilings_measured_at="2026-11-21T10:00:00Z")]
    for i, ms in enumerate(medians):
        kernel = Timing(median_ms=ms, q25_ms=ms, q75_ms=ms, min_ms=ms, samples=500, method="cuda events per call")
        events.append(BenchResult(case_index=10 + i, label=f"rows={1024 << i}", kernel=kernel, recheck="passed",
                                  gbps=1000.0 * (i + 1), bandwidth_fraction=(i + 1) / 3, speedup_vs_reference=2.0,
                                  sm_clock_mhz=1980, temperature_c=45))
    events.append(RunFinished(verdict="passed", passed=len(medians)))
    for event in events:
        outcome.events.append(event)
        outcome.tally.add(event)
    outcome.finished = events[-1]
    return outcome


@pytest.fixture
def project(placeholder_project):
    return placeholder_project


def test_record_carries_bench_facts_and_summary(project):
    record = bench_outcome(project, [0.1, 0.2]).to_record()
    assert [b["case_index"] for b in record["bench"]] == [10, 11]
    assert [b["median_ms"] for b in record["bench"]] == [0.1, 0.2]
    assert record["bench"][0]["kernel"]["method"] == "cuda events per call"
    assert record["bench"][1]["sm_clock_mhz"] == 1980 and record["bench"][1]["temperature_c"] == 45
    assert record["device_facts"]["driver"] == "580.159.04"
    assert record["device_facts"]["ceilings_measured_at"].startswith("2026-11-21")
    assert record["bench_summary"].startswith("bench 2 cases") and "2000 GB/s" in record["bench_summary"]
    json.dumps(record, allow_nan=False)  # a record is strict JSON


def test_verify_only_record_has_no_bench_fields(project):
    outcome = RunOutcome(project=project, source_hash="0123456789abcdef", stages=["verify"])
    assert "bench" not in outcome.to_record() and "bench_summary" not in outcome.to_record()


def test_bench_events_round_trip_as_json(project):
    result = bench_outcome(project, [0.3]).events[2]
    again = event_from_json(result.to_json())
    assert again == result and isinstance(again.kernel, Timing)
    facts = DeviceFacts(name="x", notes=["ceilings measured"])
    assert event_from_json(facts.to_json()) == facts


def test_diff_shows_the_time_change_between_two_bench_runs(project, cli):
    append_record(project, bench_outcome(project, [0.100, 0.200]).to_record(), "# kernel\n")
    append_record(project, bench_outcome(project, [0.080, 0.220]).to_record(), "# kernel\n")
    older, newer = read_records(project)
    lines = timing_change(older.data, newer.data)
    assert "case 10" in lines[0] and "-20.0%" in lines[0]
    assert "case 11" in lines[1] and "+10.0%" in lines[1]
    code, out, err = cli("diff", project.root)
    assert code == 0 and "-20.0%" in out
    code, out, err = cli("history", project.root)
    assert code == 0 and out.count("bench 2 cases") == 2


def test_append_is_atomic_when_the_write_fails(project, monkeypatch):
    append_record(project, bench_outcome(project, [0.1]).to_record(), "# kernel\n")

    def broken_replace(src, dst):
        raise OSError("disk full")

    with monkeypatch.context() as patched, pytest.raises(OSError):
        patched.setattr(os, "replace", broken_replace)
        append_record(project, bench_outcome(project, [0.2]).to_record(), "# kernel\n")
    records = read_records(project)
    assert len(records) == 1 and records[0].data["bench"][0]["median_ms"] == 0.1
    assert sorted(p.name for p in history_dir(project).iterdir()) == [f"{records[0].id}.json"]


def test_readers_skip_temp_and_corrupt_files(project):
    append_record(project, bench_outcome(project, [0.1]).to_record(), "# kernel\n")
    folder = history_dir(project)
    (folder / ".20990101-000000.json.tmp123").write_text('{"half": ')
    (folder / "20990101-000000-000000-00000.json").write_text('{"half": ')
    records = read_records(project)
    assert len(records) == 1 and records[0].data["bench_summary"]
