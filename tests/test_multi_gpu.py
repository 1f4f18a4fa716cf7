"""Many GPUs on one machine: discovery without torch, placement of workers, the GPU in every report,
and a lost worker's cases re-queued. The CPU has no GPU: two are faked (the interpreter worker ignores
its CUDA_VISIBLE_DEVICES; the runner's placement and the reports are what is tested)."""

import json
import xml.etree.ElementTree as ET

import kernels
import pytest
from run_helpers import ONLY_CASES

from workbench.core.run.gpus import (
    GpuSelectionError,
    GpuSlot,
    discover_gpus,
    select_gpus,
)

# These tests count cases per GPU and per re-queue: the project's CASES alone, no generated edge shapes.
SMI = ["0, GPU-aaaa-0000, NVIDIA H200", "1, GPU-bbbb-1111, NVIDIA H200", "2, GPU-cccc-2222, NVIDIA H100 80GB HBM3"]
FAKE = [GpuSlot("0", "Fake GPU", "GPU-fake-0"), GpuSlot("1", "Fake GPU", "GPU-fake-1")]
# GOOD, and get_inputs says which GPU its worker was given.
SAYS_ITS_GPU = kernels.GOOD.replace(
    "def get_inputs(n=1000, dtype=torch.float32):\n",
    "def get_inputs(n=1000, dtype=torch.float32):\n"
    "    import sys; print('visible:', os.environ.get('CUDA_VISIBLE_DEVICES'), file=sys.stderr)\n")


def test_discovery_reads_nvidia_smi_and_respects_cuda_visible_devices():
    every = discover_gpus(lambda: SMI, env={})
    assert [(g.id, g.name, g.visible) for g in every] == [
        ("0", "NVIDIA H200", "GPU-aaaa-0000"), ("1", "NVIDIA H200", "GPU-bbbb-1111"),
        ("2", "NVIDIA H100 80GB HBM3", "GPU-cccc-2222")]
    assert [g.id for g in discover_gpus(lambda: SMI, env={"CUDA_VISIBLE_DEVICES": "2,0"})] == ["2", "0"]
    assert [g.id for g in discover_gpus(lambda: SMI, env={"CUDA_VISIBLE_DEVICES": "GPU-bbbb"})] == ["1"]
    assert discover_gpus(lambda: SMI, env={"CUDA_VISIBLE_DEVICES": ""}) == []
    assert [g.id for g in discover_gpus(lambda: SMI, env={"CUDA_VISIBLE_DEVICES": "1,7,0"})] == ["1"]  # as CUDA
    assert discover_gpus(lambda: [], env={}) == []  # no nvidia-smi: a CPU machine


def test_gpus_option_counts_among_the_visible_ones():
    visible = discover_gpus(lambda: SMI, env={"CUDA_VISIBLE_DEVICES": "1,2"})
    assert [g.id for g in select_gpus("all", lambda: visible)] == ["1", "2"]
    assert [g.id for g in select_gpus("1", lambda: visible)] == ["2"]
    with pytest.raises(GpuSelectionError, match=r"no GPU 2 \(visible: 1 \(NVIDIA H200\), 2 "):
        select_gpus("0,2", lambda: visible)
    with pytest.raises(GpuSelectionError, match="numbers"):
        select_gpus("first", lambda: visible)
    assert select_gpus("all", lambda: []) == []


def test_shards_are_placed_one_gpu_each_and_every_result_names_its_gpu(make_project):
    from workbench.core.events import CaseResult, LogLine
    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    runner = Runner(parallel=1, gpus=FAKE)
    assert runner.parallel == 2  # at least a shard per GPU
    try:
        outcome = run_project(Project.open(make_project(SAYS_ITS_GPU, toml=ONLY_CASES)), runner, RunSpec(("verify",)))
    finally:
        runner.close()
    assert outcome.exit_code == 0
    results = outcome.of_type(CaseResult)
    assert {r.gpu for r in results} == {"0", "1"}
    tuned = {r.case_index: r.gpu for r in results if not r.config and not r.generated}
    assert tuned == {0: "0", 1: "1", 2: "0"}  # shard k on GPU k mod 2
    seen = {e.text.split()[-1] for e in outcome.of_type(LogLine) if e.text.startswith("visible:")}
    assert seen == {"GPU-fake-0", "GPU-fake-1"}  # each worker saw its one GPU


@pytest.mark.slow
def test_a_warm_runner_keeps_its_spares_on_their_gpus():
    from workbench.core.run.runner import Runner

    runner = Runner(parallel=2, gpus=FAKE, keep_warm=True)
    try:
        assert runner.run_gpus() == [FAKE[0], FAKE[1], FAKE[0], FAKE[1]]  # shards, then a bench worker per GPU
        runner.prewarm()
        assert sorted(w.gpu.id for w in runner.supply.spares) == ["0", "0", "1", "1"]
    finally:
        runner.close()


@pytest.fixture
def two_gpus(monkeypatch):
    import workbench.core.run.gpus as gpus

    monkeypatch.setattr(gpus, "discover_gpus", lambda *a, **k: list(FAKE))


@pytest.mark.slow
def test_verify_spreads_projects_over_gpus_and_reports_say_where(cli, make_project, two_gpus, tmp_path):
    first, second = make_project(kernels.GOOD, name="first", toml=ONLY_CASES), make_project(kernels.GOOD, name="second", toml=ONLY_CASES)
    code, out, err = cli("verify", first, second, "--json")
    assert code == 0, out + err
    records = json.loads(out)["projects"]
    assert [r["project"] for r in records] == ["first", "second"]  # in the order asked, whichever finished first
    # Two projects, two GPUs: a lane each, so each project's cases ran on one GPU.
    assert sorted({c["gpu"] for c in r["cases"]}.pop() for r in records) == ["0", "1"]

    # One project: its shards over both GPUs, and the table says which ran each case.
    junit = tmp_path / "junit.xml"
    code, out, err = cli("verify", first, "--gpus", "0,1", "--junit", junit)
    assert code == 0, out + err
    header = out.splitlines()[2].split()
    assert header[0] == "case" and header[-1] == "gpu"
    assert {line.split()[-1] for line in out.splitlines()[3:] if "(tuned)" in line} == {"0", "1"}
    props = [p.get("value") for p in ET.parse(junit).iter("property") if p.get("name") == "gpu"]
    assert sorted(set(props)) == ["0", "1"]


def test_gpus_that_are_not_there_exit_2_naming_those_that_are(cli, make_project, two_gpus):
    code, out, err = cli("verify", make_project(kernels.GOOD, toml=ONLY_CASES), "--gpus", "0,5")
    assert code == 2 and "no GPU 5" in err and "0 (Fake GPU)" in err


@pytest.mark.slow
def test_a_lost_worker_s_cases_are_re_queued_and_recorded_once(make_project):
    """A worker whose GPU or machine went away (marked `lost`) is not the kernel's fault: the case in
    flight and those after it run in another worker; a result that came back is not run again."""
    from workbench.core.events import CaseResult, Requeued, StageChanged
    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    runner = Runner(parallel=1)
    lost = []

    def on_event(event):
        if isinstance(event, StageChanged) and event.stage == "verifying" and event.case_index == 1 and not lost:
            (worker,) = runner.supply.active
            worker.lost = "GPU 0 fell off the bus"
            lost.append(worker)
            worker.kill()

    try:
        outcome = run_project(Project.open(make_project(kernels.GOOD, toml=ONLY_CASES)), runner, RunSpec(("verify",)), on_event)
    finally:
        runner.close()
    requeued = outcome.of_type(Requeued)
    assert len(requeued) == 1 and requeued[0].cases == [1, 2] and "fell off the bus" in requeued[0].reason
    tuned = [(r.case_index, r.status) for r in outcome.of_type(CaseResult) if not r.config and not r.generated]
    assert sorted(tuned) == [(0, "passed"), (1, "passed"), (2, "passed")]
    keys = [(r.case_index, r.config) for r in outcome.of_type(CaseResult)]
    assert len(keys) == len(set(keys))
    assert outcome.exit_code == 0 and not outcome.tally.problems

    from workbench.reports import format_outcome

    assert "re-queued: GPU 0 fell off the bus; cases 1, 2 re-run elsewhere" in format_outcome(outcome)


def test_benchmarks_on_several_kinds_of_gpu_are_shown_side_by_side(tmp_path):
    from workbench.core.events import BenchResult, DeviceFacts, Timing
    from workbench.core.project.folder import Project
    from workbench.core.run.session import RunOutcome
    from workbench.reports import format_bench

    (tmp_path / "kernel.py").write_text(kernels.GOOD)
    outcome = RunOutcome(project=Project.open(tmp_path), source_hash="x", stages=["bench"])

    def timed(ms):
        return Timing(median_ms=ms, q25_ms=ms, q75_ms=ms, min_ms=ms, samples=100, method="cuda events, L2 flushed")

    outcome.events += [
        DeviceFacts(name="NVIDIA H100 80GB HBM3", gpu="10.0.0.1/0 H100", copy_gbps=2900.0),
        DeviceFacts(name="NVIDIA A100-SXM4-80GB", gpu="10.0.0.2/0 A100", copy_gbps=1700.0),
        BenchResult(case_index=3, label="n=1048576", kernel=timed(0.0041), bandwidth_fraction=0.71, gpu="10.0.0.1/0 H100"),
        BenchResult(case_index=3, label="n=1048576", kernel=timed(0.0066), bandwidth_fraction=0.75, gpu="10.0.0.2/0 A100"),
    ]
    text = format_bench(outcome)
    assert "per GPU kind" in text
    header = next(line for line in text.splitlines() if "% ceiling" in line)
    assert header.index("NVIDIA A100-SXM4-80GB") < header.index("NVIDIA H100 80GB HBM3")
    row = next(line for line in text.splitlines() if line.strip().startswith("3") and "75%" in line)
    assert "71%" in row and "[10.0.0.2/0 A100]" in text


@pytest.mark.slow
def test_no_spare_starts_on_the_gpus_while_a_benchmark_is_timed(make_project):
    """A warm runner refills its spares when it takes a worker, except the one that will benchmark:
    on placed GPUs that spare starts after the run, not beside the timing."""
    from workbench.core.run.runner import Runner

    runner = Runner(parallel=1, gpus=FAKE[:1], keep_warm=True)
    started = []
    new_worker = runner.source.new_worker
    runner.source.new_worker = lambda gpu=None: started.append(gpu) or new_worker(gpu)
    try:
        worker = runner.take_worker(FAKE[0], timed=True)
        assert started == [FAKE[0]]  # the worker itself, no spare beside it
        runner.supply.release(worker)
        runner.take_worker(FAKE[0])
        assert started == [FAKE[0], FAKE[0], FAKE[0]]  # untimed work: its replacement starts at once
    finally:
        runner.close()


@pytest.mark.slow
def test_a_worker_lost_while_verifying_a_bench_job_benchmarks_only_after_every_verdict(make_project):
    """One worker verifying then benchmarking is lost mid-verification: the re-queued worker verifies the
    rest, and the benchmark comes after, in a worker of its own, as after sharded verification."""
    from workbench.core.events import CaseResult, Problem, Requeued, StageChanged
    from workbench.core.project.folder import Project
    from workbench.core.run.runner import Runner
    from workbench.core.run.session import RunSpec, run_project

    runner = Runner(parallel=1)
    events = []

    def on_event(event):
        events.append(event)
        if isinstance(event, StageChanged) and event.stage == "verifying" and event.case_index == 2 and \
                not any(isinstance(e, Requeued) for e in events):
            (worker,) = runner.supply.active
            worker.lost = "node gone"
            worker.kill()

    try:
        run_project(Project.open(make_project(kernels.GOOD, toml=ONLY_CASES)), runner, RunSpec(("verify", "bench")), on_event)
    finally:
        runner.close()
    (requeued,) = [e for e in events if isinstance(e, Requeued)]
    assert requeued.cases == [2] and requeued.stage == "verifying"
    last_verdict = max(n for n, e in enumerate(events) if isinstance(e, CaseResult))
    bench = [n for n, e in enumerate(events) if (isinstance(e, StageChanged) and e.stage == "benchmarking") or
             (isinstance(e, Problem) and e.kind == "environment")]  # timed on a GPU; refused by the interpreter
    assert bench and min(bench) > last_verdict


def test_a_benchmark_on_several_gpus_gives_each_its_share_of_the_sweep():
    from workbench.core.run.runner import Runner
    from workbench.core.run.strategies import RunInFlight, WorkerJobs
    from workbench.core.stage import Job, shard_of

    calls = []

    class Recording(WorkerJobs):
        def with_restarts(self, run, job, relay, gpu=None, after_send=None):
            calls.append((job.stages, job.bench_shard, gpu.id if gpu else None))

    jobs = Recording(Runner(gpus=FAKE))
    bench = Job(kernel_path="k.py", stages=["bench"])
    jobs.after_verification(RunInFlight(job=bench, relay=print, limits=(None, None)), bench, print)
    assert sorted(calls) == [(["bench"], [0, 2], "0"), (["bench"], [1, 2], "1")]
    assert shard_of([3, 4, 5], [0, 2]) == [3, 5] and shard_of([3, 4, 5], [1, 2]) == [4]
    calls.clear()
    profile = Job(kernel_path="k.py", stages=["profile"])
    jobs.after_verification(RunInFlight(job=profile, relay=print, limits=(None, None)), profile, print)
    assert calls == [(["profile"], None, None)]  # only a benchmark is spread (on the first GPU)


def test_a_benchmarks_recheck_is_never_taken_for_a_repeat_of_the_cases_verdict():
    """The runner drops a re-queued job's repeat of a result; the recheck after timing is a second result
    for the same case, and a failing one must reach the report (it did not: `workbench bench` exited 0)."""
    from workbench.core.events import CaseResult
    from workbench.core.run.relay import result_key

    verdict = CaseResult(case_index=3, label="n=1048576", status="passed")
    recheck = CaseResult(case_index=3, label="n=1048576", status="failed", phase="after timing")
    repeat = CaseResult(case_index=3, label="n=1048576", status="passed")
    assert result_key(recheck) != result_key(verdict) and result_key(repeat) == result_key(verdict)


def test_verification_alone_shares_each_gpu_between_projects_and_a_benchmark_never_does(monkeypatch):
    from workbench.core.run.factory import PROJECTS_PER_GPU_ENV, lanes, verify_lanes_per_gpu

    monkeypatch.setenv(PROJECTS_PER_GPU_ENV, "3")
    assert verify_lanes_per_gpu() == 3
    shared = lanes(12, FAKE[:1], per_gpu=verify_lanes_per_gpu())
    benched = lanes(12, FAKE[:1])
    spread = lanes(5, FAKE, per_gpu=2)
    try:
        assert [[g.id for g in r.gpus] for r in shared] == [["0"], ["0"], ["0"]]  # three projects at once
        assert [[g.id for g in r.gpus] for r in benched] == [["0"]]  # a benchmark has its GPU alone
        assert [[g.id for g in r.gpus] for r in spread] == [["0"], ["1"], ["0"], ["1"]]
        assert len(lanes(2, FAKE[:1], per_gpu=4)) == 2  # never more lanes than projects
        assert len(lanes(3, [], per_gpu=4)) == 1  # no GPU (the interpreter): one lane
        # the torch.compile check's own process: for a lane alone, not for lanes whose projects overlap already
        assert [r.check_beside for r in shared] == [False] * 3 and [r.check_beside for r in benched] == [True]
    finally:
        for runner in shared + benched + spread:
            runner.close()
    monkeypatch.delenv(PROJECTS_PER_GPU_ENV)
    assert 1 <= verify_lanes_per_gpu() <= 4


def test_lanes_share_the_machines_cores_out_rather_than_one_runs_cap(monkeypatch):
    """8 lanes (2 GPUs, 4 projects each) on 32 cores: 2 workers each, the machine's 16 shared out; before, one
    run's cap of 8 was shared and each lane compiled with 1 (attention_train took 67 s there against 37 s on one
    GPU's 4 lanes of 2). One lane keeps one run's cap; WORKBENCH_WORKERS is the machine's total."""
    from workbench.core.run import factory, runner

    monkeypatch.delenv("WORKBENCH_WORKERS", raising=False)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 32)
    made = []
    monkeypatch.setattr(factory, "make_runner", lambda **kw: made.append(kw) or kw)
    factory.lanes(16, FAKE, per_gpu=4)
    assert [kw["parallel"] for kw in made] == [2] * 8
    made.clear()
    factory.lanes(16, FAKE[:1], per_gpu=4)
    assert [kw["parallel"] for kw in made] == [4] * 4
    made.clear()
    factory.lanes(1, FAKE[:1], per_gpu=4)
    assert [kw["parallel"] for kw in made] == [8]  # one run's cap
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 16)
    made.clear()
    factory.lanes(16, FAKE[:1], per_gpu=4)
    assert [kw["parallel"] for kw in made] == [2] * 4  # the 16-core GPU machine: as before
    monkeypatch.setenv("WORKBENCH_WORKERS", "4")
    made.clear()
    factory.lanes(16, FAKE, per_gpu=4)
    assert [kw["parallel"] for kw in made] == [1] * 8
