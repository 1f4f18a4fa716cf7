"""A sharded run's benchmark starts when the verdict is in, beside the shards' last work, and times only
after the GPU gate opens (every verification worker gone). The CPU has no GPU to time on: the gate's
plumbing (runner -> worker's stdin -> judge -> kernel process) is tested with a stage of its own."""

import threading
import time

import kernels
import pytest
from run_helpers import ONLY_CASES

GATED_STAGE = '''
from workbench.core.events import StageChanged


def gated(context):
    context.emit(StageChanged(stage="before the gate"))
    context.wait_for_gpu()
    context.emit(StageChanged(stage="past the gate"))
    context.wait_for_gpu()  # a second call returns at once
    context.emit(StageChanged(stage="past it again"))
'''


def stages_seen(events):
    from workbench.core.events import StageChanged

    return [e.stage for e in events if isinstance(e, StageChanged)]


def start_at_the_gate(runner, job, events):
    """`runner.run(job)` on a thread (its RunFinished appended last), once its worker waits at the gate."""
    thread = threading.Thread(target=lambda: events.append(runner.run(job, events.append, timeout_s=120,
                                                                      interpret_timeout_s=120)))
    thread.start()
    deadline = time.monotonic() + 120
    while "before the gate" not in stages_seen(events):
        assert time.monotonic() < deadline and thread.is_alive(), events
        time.sleep(0.05)
    return thread


def test_a_gated_job_waits_until_the_runner_says_the_gpu_is_free(make_project, tmp_path):
    from workbench.core.run.runner import Runner
    from workbench.core.stage import Job

    (tmp_path / "gate_stage.py").write_text(GATED_STAGE)
    project = make_project(kernels.GOOD)
    runner = Runner(interpret=True, env={"PYTHONPATH": str(tmp_path)})
    events = []
    job = Job(kernel_path=str(project / "kernel.py"), stages=["gate_stage:gated"], gpu_gate=True)
    try:
        thread = start_at_the_gate(runner, job, events)
        time.sleep(0.5)
        assert "past the gate" not in stages_seen(events)
        runner.current_run.gpu_free.set()  # what a run does once the verification workers have exited
        thread.join(60)
        assert not thread.is_alive()
    finally:
        runner.close()
    seen = stages_seen(events)
    assert seen.index("before the gate") < seen.index("past the gate") < seen.index("past it again")


@pytest.mark.slow
def test_an_ungated_job_never_waits(make_project, tmp_path):
    from workbench.core.run.runner import Runner
    from workbench.core.stage import Job

    (tmp_path / "gate_stage.py").write_text(GATED_STAGE)
    runner = Runner(interpret=True, env={"PYTHONPATH": str(tmp_path)})
    events = []
    try:
        runner.run(Job(kernel_path=str(make_project(kernels.GOOD) / "kernel.py"), stages=["gate_stage:gated"]),
                   events.append, timeout_s=120, interpret_timeout_s=120)
    finally:
        runner.close()
    assert "past it again" in stages_seen(events)


@pytest.mark.slow
def test_a_sharded_run_starts_its_benchmark_as_the_verdict_lands_and_only_if_it_passed(make_project):
    from workbench.core.events import CaseResult, Problem, RunFinished, StageChanged
    from workbench.core.run.runner import Runner
    from workbench.core.stage import Job

    runner = Runner(interpret=True, parallel=2)
    try:
        for source, benchmarked in ((kernels.GOOD, True), (kernels.GRID_SHORT, False)):
            events = []
            project = make_project(source, name=f"p{len(source)}", toml=ONLY_CASES)
            finished = runner.run(Job(kernel_path=str(project / "kernel.py"), stages=["verify", "bench"]),
                                  events.append, timeout_s=120, interpret_timeout_s=120)
            kinds = [type(e).__name__ for e in events]
            verified = next(i for i, e in enumerate(events) if isinstance(e, StageChanged) and e.stage == "verified")
            # Under the interpreter the benchmark refuses at once (nothing to time): its refusal is the
            # sign that it ran, after the verdict.
            refusals = [i for i, e in enumerate(events) if isinstance(e, Problem) and "interpreter" in e.message]
            assert bool(refusals) == benchmarked, kinds
            assert all(i > verified for i in refusals)
            assert isinstance(events[-1], RunFinished) and events[-1] is finished
            assert any(isinstance(e, CaseResult) for e in events)
    finally:
        runner.close()


@pytest.mark.slow
def test_the_gate_opens_only_once_the_next_saves_spares_are_warm(make_project, tmp_path):
    """A warm runner starts the next save's spares when the verdict lands; a warming worker launches on the
    GPU, so the benchmark's gate waits for them as for the shards' exits. Every worker here takes a second
    longer to start (a launcher that sleeps first), so a gate that opened at the shards' exits would find
    the spares still warming."""
    from workbench.core.events import StageChanged
    from workbench.core.run.runner import Runner
    from workbench.core.stage import Job

    (tmp_path / "gate_stage.py").write_text(GATED_STAGE)
    project = make_project(kernels.GOOD, toml=ONLY_CASES)
    runner = Runner(interpret=True, parallel=2, keep_warm=True, env={"PYTHONPATH": str(tmp_path)},
                    launcher=["sh", "-c", 'sleep 1; exec "$@"', "sh"])
    at_the_gate = []

    def on_event(event):
        if isinstance(event, StageChanged) and event.stage == "past the gate":
            spares = runner.supply.spares
            at_the_gate.append((len(spares), [w.ready is not None for w in spares]))

    try:
        runner.run(Job(kernel_path=str(project / "kernel.py"), stages=["verify", "gate_stage:gated", "bench"]),
                   on_event, timeout_s=120, interpret_timeout_s=120)
    finally:
        runner.close()
    assert at_the_gate == [(runner.workers_per_run, [True] * runner.workers_per_run)]


@pytest.mark.slow
def test_cancel_returns_at_once_and_the_run_ends_without_waiting_for_the_exit(make_project, tmp_path, monkeypatch):
    """A save made while a worker runs kills it and starts the next run at once: the killed worker's exit
    (on a GPU, its context torn down: a few hundred ms) is waited for in the background, and by the
    next benchmark's gate (it is among the exiting workers)."""
    from workbench.core.run import workers
    from workbench.core.run.runner import Runner
    from workbench.core.stage import Job

    exit_waits = []
    slow_teardown = workers.WorkerProcess.wait_exit

    def wait_exit(self, timeout=5.0):
        time.sleep(2.0)  # as a GPU worker's exit can take
        exit_waits.append(self)
        slow_teardown(self, timeout)

    monkeypatch.setattr(workers.WorkerProcess, "wait_exit", wait_exit)
    (tmp_path / "gate_stage.py").write_text(GATED_STAGE)
    runner = Runner(interpret=True, env={"PYTHONPATH": str(tmp_path)})
    events = []
    job = Job(kernel_path=str(make_project(kernels.GOOD) / "kernel.py"), stages=["gate_stage:gated"],
              gpu_gate=True)  # it waits at the gate until cancelled
    try:
        thread = start_at_the_gate(runner, job, events)
        started = time.monotonic()
        runner.cancel()
        assert time.monotonic() - started < 0.5
        thread.join(1.0)
        assert not thread.is_alive(), "the run waited for its worker's exit"
        assert events[-1].verdict == "cancelled"
        assert len(runner.supply.exiting) == 1 and not exit_waits  # the exit is still being waited for
        runner.supply.await_exits()  # what the next benchmark's gate does
        assert len(exit_waits) >= 1 and runner.supply.exiting == []
    finally:
        runner.close()

