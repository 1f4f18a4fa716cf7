"""A worker that dies mid-job: the case it was on is reported, and verification resumes with the rest."""

import time

from workbench.core.events import CaseResult, Problem, RunStarted, StageChanged
from workbench.core.run.protocol import JOB_DONE
from workbench.core.run.pump import resume_after
from workbench.core.stage import CHECKING, RECORDING, Job


def test_a_crash_while_a_cases_launcher_is_recorded_is_that_cases_and_the_others_still_run():
    # On a GPU the worker runs every case's launcher once, ahead, to learn what it compiles (compile_pool.ahead):
    # a launcher that hangs or crashes there must not take the other cases' verdicts with it.
    job = Job(kernel_path="kernel.py", stages=["verify", "bench"])
    said = []
    again = resume_after(job, planned=[0, 1, 2], done=set(), at=(1, "n=1000 float16"),
                         stage=RECORDING, relay=said.append, message="the worker was killed by SIGSEGV")
    (result,) = said
    assert isinstance(result, CaseResult) and result.case_index == 1 and result.status == "error"
    assert "SIGSEGV" in result.messages[0]
    assert again is not None and again.case_indices == [0, 2] and again.stages == ["verify"]


def test_past_verification_nothing_resumes():
    job = Job(kernel_path="kernel.py", stages=["verify", "bench"])
    said = []
    assert resume_after(job, [0, 1], {0, 1}, (None, ""), "benchmarking", said.append, "killed") is None
    assert said == []


class FakeWorker:
    """A worker's end as the pump reads it: (kind, payload) on a queue, fed by a thread on a schedule."""

    def __init__(self, schedule):
        import queue
        import threading

        self.queue, self.killed, self.lost = queue.Queue(), False, ""

        def feed():
            for delay, event in schedule:
                time.sleep(delay)
                if self.killed:
                    return
                self.queue.put(("event", event))

        threading.Thread(target=feed, daemon=True).start()

    def kill(self):
        self.killed = True

    def drain_log(self, timeout=None):
        return []


STARTED = RunStarted(kernel_path="kernel.py", source_hash="", mode="gpu", device_name="", n_cases=2, planned=[0, 1])


def _pump(schedule, limit):
    import threading

    from workbench.core.run.pump import pump

    said = []
    job = Job(kernel_path="kernel.py", stages=["verify"])
    again = pump(FakeWorker(schedule), job, said.append, limit, threading.Event())
    return again, said


def test_the_torch_compile_check_has_its_own_allowance_not_the_cases_time_out(monkeypatch):
    import workbench.core.run.pump as pump_module

    monkeypatch.setattr(pump_module, "CHECK_TIMEOUT_S", 2.0)
    case = CaseResult(case_index=0, label="n=1", status="passed")
    schedule = [(0, STARTED),
                (0, StageChanged(stage="verifying", detail="n=1", case_index=0)),
                (0, StageChanged(stage=CHECKING, detail="the torch.compile check", case_index=0)),
                (0.6, case),  # Dynamo's cold start: longer than the case's 0.3 s, inside the check's allowance
                (0, StageChanged(stage=JOB_DONE, current=0))]
    again, said = _pump(schedule, limit=0.3)
    assert again is None and case in said and not [e for e in said if isinstance(e, Problem)]


def test_a_check_that_hangs_past_its_allowance_is_named_and_the_other_cases_go_on(monkeypatch):
    import workbench.core.run.pump as pump_module

    monkeypatch.setattr(pump_module, "CHECK_TIMEOUT_S", 0.5)
    schedule = [(0, STARTED),
                (0, StageChanged(stage="verifying", detail="n=1", case_index=0)),
                (0, StageChanged(stage=CHECKING, detail="the torch.compile check", case_index=0)),
                (5, StageChanged(stage=JOB_DONE, current=0))]
    started = time.monotonic()
    again, said = _pump(schedule, limit=0.2)
    assert time.monotonic() - started < 3
    (problem,) = [e for e in said if isinstance(e, Problem)]
    assert problem.kind == "timeout" and problem.case_index == 0
    assert "in case 0, the torch.compile check (a hang?)" in problem.message
    (result,) = [e for e in said if isinstance(e, CaseResult)]
    assert result.case_index == 0 and result.label == "n=1" and result.status == "error"
    assert again is not None and again.case_indices == [1]
