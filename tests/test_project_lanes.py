"""Several projects over lanes of runners: `workbench verify` of several and `pytest --workbench` share it."""

import threading
import time
from types import SimpleNamespace

import pytest

from workbench.core.run.project_lanes import ProjectLanes
from workbench.pytest_plugin import kernel_files


class FakeRunner:
    def __init__(self, name):
        self.name, self.closed = name, False

    def close(self):
        self.closed = True


def test_each_lane_runs_one_project_at_a_time_and_the_lanes_run_side_by_side():
    runners = [FakeRunner("a"), FakeRunner("b")]
    both_running = threading.Barrier(2, timeout=10)  # would time out if the lanes ran one after the other
    ran = []

    def run_one(project, runner):
        if project < 2:
            both_running.wait()
        ran.append((project, runner.name))
        return f"outcome {project}"

    lanes = ProjectLanes(runners, run_one)
    futures = [lanes.submit(n) for n in range(5)]
    assert [lanes.result(f) for f in futures] == [f"outcome {n}" for n in range(5)]
    assert sorted(p for p, _ in ran) == list(range(5)) and {r for _, r in ran} == {"a", "b"}
    lanes.close()
    assert all(r.closed for r in runners)


def test_a_run_that_raises_stops_the_lanes_and_the_projects_after_it_say_why():
    started = []

    def run_one(project, runner):
        started.append(project)
        if project == 0:
            time.sleep(0.2)  # the others are queued behind it on the one lane
            raise RuntimeError("the runner broke")
        return project

    lanes = ProjectLanes([FakeRunner("only")], run_one)
    futures = [lanes.submit(n) for n in range(3)]
    for future in futures:
        with pytest.raises(RuntimeError, match="the runner broke"):
            lanes.result(future)
    assert started == [0]
    lanes.close()


def test_closing_cancels_what_was_never_started():
    gate = threading.Event()
    lanes = ProjectLanes([FakeRunner("only")], lambda project, runner: gate.wait(10) and project)
    first, second = lanes.submit(1), lanes.submit(2)
    time.sleep(0.1)
    lanes.close()
    gate.set()
    assert lanes.result(first) == 1 and second.cancelled()


def test_pytest_finds_the_projects_it_will_collect_before_collecting_them(tmp_path):
    for folder in ("projects/a", "projects/b/nested", "projects/.hidden", "projects/venv/x", "other"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "kernel.py").write_text("")
    (tmp_path / "other" / "helper.py").write_text("")

    def config(*args):
        return SimpleNamespace(args=list(args), invocation_params=SimpleNamespace(dir=tmp_path),
                               getini=lambda name: [".*", "venv"])

    found = kernel_files(config("projects"))
    assert found == [tmp_path / "projects/a/kernel.py", tmp_path / "projects/b/nested/kernel.py"]
    assert kernel_files(config("other/kernel.py::case 0", "other/helper.py", "other")) == [tmp_path / "other/kernel.py"]
