"""A run is one call, whatever front end starts it (issue 42): a `Session` runs a `RunSpec` through
`run_project(project, runner, spec)`, which builds the only Job and fires the plugins' notification hooks for
every run: the CLI's, the app's live loop's, pytest --workbench's and the MCP server's alike. The session is the
one place a run's runner is chosen (tests/test_run_session.py: how)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import kernels
import pytest

import workbench
from workbench.core.events import LogLine, RunFinished, RunStarted, WorkerReady
from workbench.core.project.folder import Project
from workbench.core.run.session import PluginHooks, RunSpec, run_project
from workbench.plugins import make_plugin_manager

ROOT = Path(__file__).resolve().parents[1]


class OneRunRunner:
    """Stands in for Runner: each run reports three events and finishes; keeps the jobs it was given."""

    def __init__(self):
        self.jobs = []

    def run(self, job, on_event, timeout_s=None, interpret_timeout_s=None):
        self.jobs.append(job)
        source_hash = Project.open(job.kernel_path).source_hash()
        on_event(WorkerReady(pid=1, mode="interpreter", device_name="cpu", torch_version="t", triton_version="t",
                             python_version="p", warmup_s=0.0))
        on_event(RunStarted(kernel_path=job.kernel_path, source_hash=source_hash, mode="interpreter",
                            device_name="cpu", n_cases=0))
        finished = RunFinished(verdict="passed")
        on_event(finished)
        return finished

    def prewarm(self):
        pass

    def cancel(self):
        pass

    def close(self):
        pass


class Recorder:
    def __init__(self, fail_observing=False, fail_finishing=False):
        self.events, self.finished = [], []
        self.fail_observing, self.fail_finishing = fail_observing, fail_finishing

    @workbench.hookimpl
    def workbench_observe_event(self, event, project):
        self.events.append((type(event).__name__, project.name))
        if self.fail_observing and isinstance(event, RunStarted):
            raise RuntimeError("observer broke")

    @workbench.hookimpl
    def workbench_finish_run(self, project, finished, events):
        self.finished.append((project.name, finished.verdict, len(events)))
        if self.fail_finishing:
            raise RuntimeError("finisher broke")


def hooks_with(recorder, warnings=None):
    pm = make_plugin_manager(autoload=False)
    pm.register(recorder, name="recorder")
    return PluginHooks(pm, warn=(warnings.append if warnings is not None else None))


def test_the_spec_becomes_the_job_and_the_hooks_see_every_event_then_the_end(make_project):
    project = Project.open(make_project(kernels.GOOD, name="scale"))
    runner, recorder, seen = OneRunRunner(), Recorder(), []
    spec = RunSpec(["verify", "bench"], case_indices=[0, 2], pins={"k": 1}, timeout_s=7.0, record=False,
                   options={"x": 1})
    outcome = run_project(project, runner, spec, seen.append, hooks_with(recorder))
    job = runner.jobs[0]
    assert (job.stages, job.case_indices, job.pins, job.options) == (["verify", "bench"], [0, 2], {"k": 1}, {"x": 1})
    assert job.config["verify"]["timeout_s"] == 7.0  # the command line's --timeout, over workbench.toml's
    assert recorder.events == [("WorkerReady", "scale"), ("RunStarted", "scale"), ("RunFinished", "scale")]
    assert recorder.finished == [("scale", "passed", 3)]
    assert [type(e) for e in seen] == [WorkerReady, RunStarted, RunFinished] and outcome.record is None


def test_a_plugin_that_raises_stops_no_run(make_project):
    project = Project.open(make_project(kernels.GOOD, name="scale"))
    recorder, seen, warnings = Recorder(fail_observing=True, fail_finishing=True), [], []
    outcome = run_project(project, OneRunRunner(), RunSpec(("verify",), record=False), seen.append,
                          hooks_with(recorder, warnings))
    assert outcome.finished is not None and outcome.finished.verdict == "passed"
    said = [e.text for e in seen if isinstance(e, LogLine)]
    assert said == ["plugin observer failed: RuntimeError: observer broke"]
    assert warnings == ["a plugin's finish_run failed: RuntimeError: finisher broke"]


def test_the_mcp_servers_runs_fire_the_hooks(make_project):
    sys.path.insert(0, str(ROOT / "plugins" / "mcp"))
    try:
        from workbench_mcp.runs import open_session
    finally:
        sys.path.pop(0)
    recorder = Recorder()
    session = open_session(hooks_with(recorder), make_runner=lambda interpret: OneRunRunner())
    session.run(Project.open(make_project(kernels.GOOD, name="served")), RunSpec(("verify",)))
    assert recorder.finished == [("served", "passed", 3)]
    assert [name for name, _ in recorder.events] == ["WorkerReady", "RunStarted", "RunFinished"]


def hook_calls(path: Path) -> list[str]:
    """The notification hooks a file calls (pm.hook.workbench_observe_event(...), ...)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("workbench_observe_event", "workbench_finish_run")]


def test_only_the_run_session_fires_the_notification_hooks():
    """Every front end that runs verify or bench (the CLI, the app, pytest --workbench, the MCP server) gets them
    through run_project: none fires them itself, so none can forget to."""
    firing = {str(path.relative_to(ROOT)) for folder in ("workbench", "plugins")
              for path in (ROOT / folder).rglob("*.py") if "/build/" not in str(path) and hook_calls(path)}
    assert firing == {"workbench/core/run/session.py"}


@pytest.mark.parametrize("front_end", ["workbench/pytest_plugin.py", "plugins/mcp/workbench_mcp/server.py",
                                       "workbench/builtin/verifying.py", "workbench/tui/app.py"])
def test_every_front_end_hands_its_runs_the_plugins_hooks(front_end):
    assert "PluginHooks(" in (ROOT / front_end).read_text(encoding="utf-8")


# -- the runners a front end runs its projects with, chosen in one place ---------------------------------------

def test_a_plugins_runner_wins_else_lanes_over_the_chosen_gpus():
    from workbench.core.run.factory import choose_runners
    from workbench.core.run.gpus import GpuSelectionError

    given = OneRunRunner()
    assert choose_runners(3, ["verify"], plugin=lambda: given) == [given]
    interpreted = choose_runners(1, ["verify"], interpret=True, plugin=lambda: None)
    try:
        assert len(interpreted) == 1 and interpreted[0].interpret and interpreted[0].gpus == []
    finally:
        for runner in interpreted:
            runner.close()
    with pytest.raises(GpuSelectionError):
        choose_runners(1, ["verify"], gpus="7,9")  # no such GPUs on this machine (none at all on the CPU)


def test_only_the_factory_chooses_lanes_and_gpus():
    """The CLI, pytest --workbench and the MCP server ask choose_runners; none places GPUs or lanes itself."""
    calls = set()
    for folder in ("workbench", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            if "build" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name in ("lanes", "select_gpus"):
                        calls.add(str(path.relative_to(ROOT)))
    assert calls == {"workbench/core/run/factory.py"}


# -- one place builds a Job, one chooses a runner ------------------------------------------------------------

def package_sources():
    for folder in ("workbench", "plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "build" not in path.relative_to(ROOT).parts:
                yield str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8"))


def calls_named(tree, names):
    """The calls in `tree` of a function or class named one of `names` (job(...), run.Job(...)), each with the
    names of the functions and classes around it."""
    found = []

    def walk(node, around):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in names:
                found.append((name, around))
        inner = around + [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else around
        for child in ast.iter_child_nodes(node):
            walk(child, inner)

    walk(tree, [])
    return found


def test_only_the_run_session_builds_a_job():
    """The CLI's runs, the app's, pytest --workbench's, the MCP server's, `doctor --measure`'s and the profiler and
    sanitizer plugins' all describe their run with a RunSpec; session.py turns it into the Job."""
    building = {path for path, tree in package_sources() if calls_named(tree, {"Job"})}
    assert building == {"workbench/core/run/session.py"}


def test_only_the_session_chooses_a_runner_and_only_the_factory_builds_one():
    """Outside core/run/ nothing calls the factory (but a workbench_make_runner hook, which builds its runner over
    its own worker source: the Ray plugin's); in core/run/ the factory builds (Runner(...)) and the Session calls
    it: nowhere else in session.py."""
    factory_calls = {"make_runner", "lanes", "choose_runners", "Runner"}
    calling = {path: calls_named(tree, factory_calls) for path, tree in package_sources()}
    calling = {path: calls for path, calls in calling.items() if calls}
    assert set(calling) == {"workbench/core/run/factory.py", "workbench/core/run/session.py",
                            "plugins/ray/workbench_ray/runner.py"}
    assert {name for name, _ in calling["plugins/ray/workbench_ray/runner.py"]} == {"make_runner"}
    assert {name for name, _ in calling["workbench/core/run/factory.py"] if name == "Runner"} == {"Runner"}
    assert all(around[:1] == ["Session"] for _, around in calling["workbench/core/run/session.py"])
    assert all(name != "Runner" for path, calls in calling.items() if path != "workbench/core/run/factory.py"
               for name, _ in calls)
