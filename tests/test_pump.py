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
    again = resume_after(job, planned=[0, 1, 2], done=set(), at=(1, "n=1000 float16", False),
                         stage=RECORDING, relay=said.append, message="the worker was killed by SIGSEGV")
    (result,) = said
    assert isinstance(result, CaseResult) and result.case_index == 1 and result.status == "error"
    assert "SIGSEGV" in result.messages[0]
    assert again is not None and again.case_indices == [0, 2] and again.stages == ["verify"]


def test_past_verification_nothing_resumes():
    job = Job(kernel_path="kernel.py", stages=["verify", "bench"])
    said = []
    assert resume_after(job, [0, 1], {0, 1}, (None, "", False), "benchmarking", said.append, "killed") is None
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


class ScriptedWorkers:
    """WorkerJobs.once as a script: each worker runs (says RunStarted, finishes `finishes` cases, then dies), the
    job it returns being the cases it never reached."""

    def __init__(self, finishes_per_worker, labels, hangs=False):
        self.finishes = list(finishes_per_worker)
        self.hangs = hangs
        self.labels = labels
        self.workers = 0

    def once(self, run, job, relay, gpu, after_send=None):
        self.workers += 1
        cases = job.case_indices if job.case_indices is not None else sorted(self.labels)
        relay(RunStarted(kernel_path="kernel.py", source_hash="", mode="interpreter", device_name="", n_cases=5,
                         planned=cases, labels=[self.labels[i] for i in cases],
                         generated=[i for i in cases if "(generated)" in self.labels[i]]))
        n = self.finishes.pop(0) if self.finishes else 0
        for index in cases[:n]:
            relay(CaseResult(case_index=index, label=self.labels[index], status="error", messages=["SIGSEGV"]))
        left = cases[n:]
        if self.hangs:
            relay(Problem(kind="timeout", message=f"timed out after 60 s in case {left[0]} (a hang?)"))
        return Job(kernel_path="kernel.py", stages=["verify"], case_indices=left) if left else None


def _with_restarts(script, monkeypatch, **limits):
    """WorkerJobs.with_restarts over `script.once` (a ScriptedWorkers, or any object with such a `once`)."""
    import threading

    from workbench.core.run import strategies

    for name, value in limits.items():
        monkeypatch.setattr(strategies, name, value)

    class Runner:
        cancelled = False
        cancel_event = threading.Event()

        def gpu_for(self, shard):
            return None

    jobs = strategies.WorkerJobs(Runner())
    monkeypatch.setattr(jobs, "once", script.once)
    said = []
    jobs.with_restarts(None, Job(kernel_path="kernel.py", stages=["verify"]), said.append)
    return said


LABELS = {0: "n=1", 1: "n=1000", 2: "n=1000 [values x64] (generated)", 3: "n=1000 [offset] (generated)",
          4: "n=4097"}


def test_restarts_that_finish_cases_go_on_until_every_case_has_its_verdict(monkeypatch):
    # One crash per worker, five cases: five restarts, more than the limit on restarts that finish nothing.
    script = ScriptedWorkers([1, 1, 1, 1, 1], LABELS)
    said = _with_restarts(script, monkeypatch, MAX_IDLE_RESTARTS=1, MAX_RESTARTS=12)
    assert sorted(e.case_index for e in said if isinstance(e, CaseResult)) == [0, 1, 2, 3, 4]
    assert not [e for e in said if isinstance(e, Problem)]


def test_a_run_that_stops_restarting_names_each_case_it_never_ran(monkeypatch):
    # The first worker finishes a case, then every worker dies before finishing any: given up after two in a row.
    script = ScriptedWorkers([1, 0, 0, 0, 0, 0], LABELS)
    said = _with_restarts(script, monkeypatch, MAX_IDLE_RESTARTS=2, MAX_RESTARTS=12)
    assert script.workers == 4
    (problem,) = [e for e in said if isinstance(e, Problem)]
    assert "stopped after 3 worker restarts in a row without a case finished; 4 cases not run" in problem.message
    results = {e.case_index: e for e in said if isinstance(e, CaseResult)}
    assert sorted(results) == [0, 1, 2, 3, 4]
    for index in (1, 2, 3, 4):
        assert results[index].status == "error" and results[index].label == LABELS[index]
        assert results[index].messages[0].startswith("not run: the run stopped after 3 worker restarts")
        assert results[index].generated == (index in (2, 3))


def test_restarts_have_a_ceiling_even_when_each_finishes_a_case(monkeypatch):
    script = ScriptedWorkers([1] * 5, LABELS)
    said = _with_restarts(script, monkeypatch, MAX_IDLE_RESTARTS=3, MAX_RESTARTS=2)
    assert script.workers == 3
    results = {e.case_index: e for e in said if isinstance(e, CaseResult)}
    assert sorted(results) == [0, 1, 2, 3, 4]
    assert results[3].messages[0] == "not run: the run stopped after 2 worker restarts"


def test_hangs_are_given_up_sooner_than_crashes(monkeypatch):
    # Each hang waits out a whole time-out: after two, the cases left are named, not run.
    script = ScriptedWorkers([1] * 5, LABELS, hangs=True)
    said = _with_restarts(script, monkeypatch, MAX_IDLE_RESTARTS=3, MAX_RESTARTS=12, MAX_HANGS=2)
    assert script.workers == 3
    results = {e.case_index: e for e in said if isinstance(e, CaseResult)}
    assert sorted(results) == [0, 1, 2, 3, 4]
    assert "3 cases that hung" in results[4].messages[0]


def test_workers_that_die_before_knowing_their_cases_are_given_up_without_a_count(monkeypatch):
    class DiesImporting:
        workers = 0

        def once(self, run, job, relay, gpu, after_send=None):
            self.workers += 1
            return job  # the whole job again: it never said RunStarted

    script = DiesImporting()
    said = _with_restarts(script, monkeypatch, MAX_IDLE_RESTARTS=2)
    assert script.workers == 3
    (problem,) = said
    assert problem.message == "stopped after 3 worker restarts in a row without a case finished"
