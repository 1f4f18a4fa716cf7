"""Every known way to fake a benchmark time, run on a GPU (marker `gpu`): each is caught, and nowhere posts a
time (the JSON row, the summary line). The sources: tests/kernels_hacks.py; how each is caught: docs/TIMING.md.
Kernels doing the same things honestly (a second stream forked and joined) are timed
as the plain kernel is."""

import json

import kernels_hacks as hacks
import pytest

pytestmark = pytest.mark.gpu

QUICK = "[bench]\nwarmup_ms = 50\nrep_ms = 200\ncompare_torch_compile = false\n"
# Verification's torch.compile and CUDA-graph checks reject most of these already; the benchmark's own
# checks are what is tested here.
NO_COMPAT = "[verify]\ntorch_compile = false\ncuda_graph = false\n"


@pytest.fixture(scope="module")
def ceilings_dir(tmp_path_factory):
    """One cache for the module: this GPU's ceilings are measured once, not for every kernel."""
    return tmp_path_factory.mktemp("cache")


HONEST_ROWS: dict = {}


@pytest.fixture
def bench(cli, make_project, ceilings_dir, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(ceilings_dir))

    def run(source, name):
        if source is hacks.HONEST and HONEST_ROWS:
            return HONEST_ROWS["run"]
        code, out, err = cli("bench", make_project(source, name=name, toml=QUICK + NO_COMPAT), "--json", "--no-plot")
        try:
            record = json.loads(out)["projects"][0]
        except ValueError:
            pytest.fail(f"workbench bench exited {code} without a JSON record: {out[-2000:]} {err[-2000:]}")
        record["_said"] = out[-3000:] + err[-2000:]  # for the assertions' messages
        found = code, record, (record.get("bench") or [None])[-1]
        if source is hacks.HONEST:
            HONEST_ROWS["run"] = found
        return found

    return run


def not_posted(record, row):
    """No time anywhere: no kernel time, rate or speed-up in the row, none in the summary line."""
    if row is not None:
        assert row["kernel"] is None and row["median_ms"] is None and row["gbps"] is None
        assert row["speedup_vs_reference"] is None and row["speedup_vs_compiled"] is None
    assert "x torch" not in (record.get("bench_summary") or "")


@pytest.mark.parametrize("name, withheld", [
    ("KEEPS_BY_POINTER", "timed calls launched 0 Triton kernels per call; the checked call launched 1"),
    ("SIDE_STREAM_UNJOINED", "kernel_fn launched on a stream it does not join back"),
    ("SIDE_STREAM_UNFORKED", "kernel_fn launched on a stream that does not wait for the caller's"),
    ("STARTS_THREADS", "kernel_fn started threads that outlive its calls"),
    ("PERSISTING_L2", "kernel_fn set aside L2 for persisting accesses"),
])
def test_a_hack_that_verifies_posts_no_time(bench, name, withheld):
    code, record, row = bench(getattr(hacks, name), name.lower())
    assert code == 0 and row is not None, record["_said"]
    assert row["recheck"] == "passed" and row["withheld"] == withheld, (row["withheld"], row["notes"])
    not_posted(record, row)
    assert "TIME NOT POSTED" in record["bench_summary"]


def test_work_deferred_to_a_thread_posts_no_time(bench):
    code, record, row = bench(hacks.DEFERRED_TO_A_THREAD, "deferred")
    not_posted(record, row)
    if code == 0 and row is not None and row["recheck"] == "passed":  # else verification caught it first
        assert row["withheld"] == "Triton kernels launched while no call of kernel_fn was in progress", row


@pytest.mark.parametrize("name, failure", [
    ("NAN_OUTPUTS", "NaN"),
    ("LAZY_SUBCLASS", ""),
    ("LIBRARY_CALL", ""),
    ("LIBRARY_CALL_ONLY", "no Triton kernel launched"),
    ("IDENTITY_ON_NORMAL", ""),
])
def test_a_hack_that_is_wrong_fails_verification_and_is_never_timed(bench, name, failure):
    code, record, row = bench(getattr(hacks, name), name.lower())
    assert code != 0, record
    not_posted(record, row)
    assert failure in json.dumps(record)


def test_a_kernel_wrong_only_on_calls_made_back_to_back_is_caught_on_its_timed_calls(bench):
    code, record, row = bench(hacks.RIGHT_ONLY_WHEN_NOT_HURRIED, "hurried")
    failing = [(c["label"], c.get("phase"), c["messages"][:2]) for c in record["cases"] if c["status"] != "passed"]
    assert code == 1 and row is not None, (failing, record["_said"])
    not_posted(record, row)
    # caught on a sampled timed call ("timed call 7 of 412 (one of 32 chosen at random)"), or, when the call
    # after the timing came back to back too, by that one ("after 50 timed calls"): tests/test_timing_escapes.py
    # shows the sample alone catching it
    assert "timed call" in row["recheck"], (row["recheck"], failing)


@pytest.mark.parametrize("name", ["TIMER_PATCHED_PYTHON", "TIMER_PATCHED_C"])
def test_a_patched_timer_changes_no_figure(bench, name):
    _, _, honest = bench(hacks.HONEST, "honest")
    code, record, row = bench(getattr(hacks, name), name.lower())
    assert code == 0 and row is not None, record["_said"]
    assert row["withheld"] == "", row["notes"]
    ratio = row["median_ms"] / honest["median_ms"]
    assert 0.8 < ratio < 1.25, (row["median_ms"], honest["median_ms"])


def test_a_second_stream_forked_and_joined_is_timed_as_the_device_sees_it(bench):
    _, _, honest = bench(hacks.HONEST, "honest")
    code, record, row = bench(hacks.SIDE_STREAM_JOINED, "joined")
    assert code == 0 and row is not None, record["_said"]
    assert row["withheld"] == "", row["notes"]
    assert row["timed_launches_per_call"] == 1
    ratio = row["median_ms"] / honest["median_ms"]
    assert 0.8 < ratio < 1.25, (row["median_ms"], honest["median_ms"])
