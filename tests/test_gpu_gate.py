"""A sharded run's benchmark starts when the verdict is in, beside the shards' last work, and times only
after the GPU gate opens (every verification worker gone). The CPU has no GPU to time on: the gate's
plumbing (runner -> worker's stdin -> judge -> kernel process) is tested with a stage of its own."""

import threading
import time

import kernels
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


def test_a_gated_job_waits_until_the_runner_says_the_gpu_is_free(make_project, tmp_path):
    from workbench.core.run.runner import Runner
    from workbench.core.stage import Job

    (tmp_path / "gate_stage.py").write_text(GATED_STAGE)
    project = make_project(kernels.GOOD)
    runner = Runner(interpret=True, env={"PYTHONPATH": str(tmp_path)})
    events = []
    job = Job(kernel_path=str(project / "kernel.py"), stages=["gate_stage:gated"], options={"gpu_gate": True})
    thread = threading.Thread(target=runner.run, args=(job, events.append), kwargs={"timeout_s": 120,
                                                                                    "interpret_timeout_s": 120})
    try:
        thread.start()
        deadline = time.monotonic() + 120
        while "before the gate" not in stages_seen(events):
            assert time.monotonic() < deadline and thread.is_alive(), events
            time.sleep(0.05)
        time.sleep(0.5)
        assert "past the gate" not in stages_seen(events)
        runner._gpu_free.set()  # what run() does once the verification workers have exited
        thread.join(60)
        assert not thread.is_alive()
    finally:
        runner.close()
    seen = stages_seen(events)
    assert seen.index("before the gate") < seen.index("past the gate") < seen.index("past it again")


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
