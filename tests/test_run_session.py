"""The one owner of a front end's runs (issue 42): `Session` chooses the runner of each run, runs one at a time with a
cancel (the live loop, the MCP server, the profilers) or several over lanes (verify and bench of several projects,
pytest --workbench), and closes what it holds. No worker starts here: the runners are stand-ins."""

from __future__ import annotations

import threading

import kernels
import pytest

from workbench.core.events import RunFinished, RunStarted, WorkerReady
from workbench.core.project.folder import Project
from workbench.core.run import session as session_module
from workbench.core.run.session import RunSpec, Session


class FakeRunner:
    """Stands in for Runner: a run says it started and finishes; `gate`, when set, holds the run before its first
    event; keeps the jobs, the time-outs, the cancels and the closes."""

    def __init__(self, name="runner", gate: threading.Event | None = None):
        self.name, self.gate = name, gate
        self.jobs, self.limits, self.calls = [], [], []
        self.entered = threading.Event()

    def run(self, job, on_event, timeout_s=None, interpret_timeout_s=None):
        self.jobs.append(job)
        self.limits.append((timeout_s, interpret_timeout_s))
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        self.calls.append("event")
        on_event(WorkerReady(pid=1, mode="interpreter", device_name="cpu", torch_version="t", triton_version="t",
                             python_version="p", warmup_s=0.0))
        if job.kernel_path:
            on_event(RunStarted(kernel_path=job.kernel_path, source_hash=Project.open(job.kernel_path).source_hash(),
                                mode="interpreter", device_name="cpu", n_cases=0))
        finished = RunFinished(verdict="passed")
        on_event(finished)
        return finished

    def prewarm(self):
        self.calls.append("prewarm")

    def cancel(self):
        self.calls.append("cancel")

    def close(self):
        self.calls.append("close")


@pytest.fixture
def made(monkeypatch):
    """factory.make_runner as the session calls it: the keyword arguments of each runner made, and the runners."""
    calls: list[tuple[dict, FakeRunner]] = []

    def make_runner(**kwargs):
        runner = FakeRunner(f"made {len(calls)}")
        calls.append((kwargs, runner))
        return runner

    monkeypatch.setattr(session_module, "make_runner", make_runner)
    return calls


def test_a_given_runner_runs_every_run_and_is_closed_with_the_session(make_project):
    project = Project.open(make_project(kernels.GOOD))
    runner = FakeRunner()
    with Session(runners=[runner]) as session:
        assert session.runner(interpret=True) is runner  # chosen for one mode: the mode asked changes nothing
        outcome = session.run(project, RunSpec(("verify",), record=False))
    assert outcome.finished.verdict == "passed" and runner.jobs[0].stages == ["verify"]
    assert runner.calls[-1] == "close"


def test_without_a_runner_one_per_mode_is_made_on_first_use_and_kept(make_project, made):
    project = Project.open(make_project(kernels.GOOD))
    session = Session(keep_warm=True)
    assert made == []
    session.run(project, RunSpec(("verify",), record=False), interpret=True)
    session.run(project, RunSpec(("verify",), record=False), interpret=True)
    session.prewarm(interpret=False)
    assert [kwargs for kwargs, _ in made] == [{"interpret": True, "keep_warm": True}, {"interpret": False, "keep_warm": True}]
    assert len(made[0][1].jobs) == 2 and made[1][1].calls == ["prewarm"]
    session.close()
    session.close()  # once is enough
    assert [runner.calls.count("close") for _, runner in made] == [1, 1]


def test_a_tools_run_gets_a_runner_of_its_own_and_leaves_the_projects_cache(make_project, made, tmp_path):
    """The profilers' way: the spec names the launcher and the environment; the run's worker is alone under the
    tool, its Triton cache its own; the project's cache, which the live loop's runs use, is left as it is."""
    project = Project.open(make_project(kernels.GOOD))
    kept = project.triton_cache_dir / "kept"
    kept.mkdir(parents=True)
    spec = RunSpec(("tool_stage",), case_indices=[1], timeout_s=9.0, record=False, launcher=["tool", "--flag"],
                   env={"X": "1"}, cache_dir=str(tmp_path / "tool-cache"), options={"all_cases": True})
    with Session() as session:
        outcome = session.run(project, spec)
    ((kwargs, runner),) = made
    assert kwargs == {"interpret": False, "env": {"X": "1"}, "launcher": ("tool", "--flag"), "parallel": 1}
    job = runner.jobs[0]
    assert (job.stages, job.case_indices, job.cache_dir, job.options) == (["tool_stage"], [1],
                                                                          str(tmp_path / "tool-cache"),
                                                                          {"all_cases": True})
    assert runner.limits == [(9.0, 9.0)] and runner.calls[-1] == "close"  # closed once its run is over
    assert kept.is_dir() and outcome.record is None and outcome.finished.verdict == "passed"


def test_a_stage_about_the_machine_is_a_job_with_no_kernel(made):
    events = []
    Session(interpret=True).run_stage("measure_ceilings", events.append, timeout_s=300.0)
    ((kwargs, runner),) = made
    assert kwargs == {"interpret": True, "parallel": 1}
    assert (runner.jobs[0].kernel_path, runner.jobs[0].stages) == ("", ["measure_ceilings"])
    assert runner.limits == [(300.0, None)] and runner.calls[-1] == "close"
    assert [type(e) for e in events] == [WorkerReady, RunFinished]


def test_one_run_at_a_time_and_a_cancel_reaches_a_run_whose_runner_has_not_started(make_project):
    project = Project.open(make_project(kernels.GOOD))
    gate = threading.Event()
    runner = FakeRunner(gate=gate)
    session = Session(runners=[runner])
    second_done = threading.Event()
    first = threading.Thread(target=session.run, args=(project, RunSpec(("verify",), record=False)))
    second = threading.Thread(target=lambda: (session.run(project, RunSpec(("verify",), record=False)),
                                              second_done.set()))
    first.start()
    assert runner.entered.wait(5)
    second.start()
    session.cancel()  # the first run's runner is told now, and again at the run's first event
    assert not second_done.wait(0.2)  # the second waits for the first
    gate.set()
    first.join(5)
    second.join(5)
    assert second_done.is_set() and len(runner.jobs) == 2
    first_run = runner.calls[:runner.calls.index("event", runner.calls.index("event") + 1)]
    assert first_run[0] == "cancel" and first_run.count("cancel") >= 2  # before, then at its events
    assert "cancel" not in runner.calls[len(first_run):]  # the cancel was the first run's: the next one runs
    session.cancel()  # no run in progress: nothing to stop
    assert "cancel" not in runner.calls[len(first_run):]


def test_several_projects_over_the_lanes_in_order_each_reported_before_its_result(make_project):
    projects = [Project.open(make_project(kernels.GOOD, name=f"p{n}")) for n in range(4)]
    lanes = [FakeRunner("a"), FakeRunner("b")]
    started, done, events = [], [], []
    session = Session(runners=lanes)
    outcomes = session.run_many(projects, RunSpec(("verify",), record=False),
                                on_event=lambda project, event: events.append(project.name),
                                on_start=lambda project: started.append(project.name),
                                on_done=lambda index, outcome: done.append((index, outcome.project.name)))
    assert [o.project.name for o in outcomes] == ["p0", "p1", "p2", "p3"]
    assert sorted(started) == ["p0", "p1", "p2", "p3"] and sorted(done) == [(n, f"p{n}") for n in range(4)]
    assert sorted(set(events)) == ["p0", "p1", "p2", "p3"]
    assert sum(len(r.jobs) for r in lanes) == 4
    session.close()
    assert [r.calls.count("close") for r in lanes] == [1, 1]


def test_the_session_chooses_a_plugins_runner_before_lanes():
    given = FakeRunner("plugin's")
    session = Session.choose(3, ["verify"], plugin=lambda: given)
    assert session.runners == [given]


def test_a_session_kept_for_many_runs_keeps_its_heap_flat(make_project, monkeypatch):
    """A long-lived session (the live loop's, the MCP server's) caps glibc's arenas when it opens and hands back
    what each run freed when the run ends (core/heap.py: the app's and the server's RSS rose with the runs);
    a session for one command does neither."""
    from workbench.core import heap

    calls = []
    monkeypatch.setattr(heap, "limit_arenas", lambda count=heap.ARENAS: calls.append(("limit", count)) or True)
    monkeypatch.setattr(heap, "give_back_freed", lambda: calls.append("trim") or True)
    project = Project.open(make_project(kernels.GOOD))
    kept = Session(None, [FakeRunner()], keep_warm=True)
    assert calls == [("limit", 2)]
    kept.run(project, RunSpec(("verify",), record=False))
    kept.run(project, RunSpec(("verify",), record=False))
    assert calls == [("limit", 2), "trim", "trim"]
    calls.clear()
    once = Session(None, [FakeRunner()])
    once.run(project, RunSpec(("verify",), record=False))
    assert calls == []


def test_the_heap_calls_reach_glibc_here():
    """On Linux with glibc (this suite's machines) the calls are real, not no-ops."""
    import sys

    from workbench.core import heap

    if not sys.platform.startswith("linux") or heap._glibc() is None:
        pytest.skip("not glibc")
    assert heap.limit_arenas() is True
    heap.give_back_freed()  # True or False (nothing to hand back) but no error
