"""The plugin API on the CPU: hookspecs documented, the manager factory, and plugins seeing runs."""

from __future__ import annotations

import inspect
import sys
import textwrap

import pluggy
import pytest
from kernels import GOOD

import workbench
from workbench import hookspecs
from workbench.cli import main
from workbench.commands import Command, collect_commands
from workbench.core.events import CaseResult, RunFinished, RunStarted, WorkerReady
from workbench.plugins import (
    BUILTIN_PLUGINS,
    PluginError,
    loaded_plugins,
    make_plugin_manager,
)


def hookspec_functions():
    return [(name, fn) for name, fn in vars(hookspecs).items()
            if inspect.isfunction(fn) and hasattr(fn, "workbench_spec")]


def test_every_hookspec_is_named_and_documented():
    specs = hookspec_functions()
    assert len(specs) >= 6
    for name, fn in specs:
        assert name.startswith("workbench_") and name.count("_") >= 2, f"{name}: not workbench_<verb>_<noun>"
        doc = inspect.getdoc(fn) or ""
        assert "When:" in doc, f"{name}: the docstring must say when the hook is called"
        assert "Result:" in doc, f"{name}: the docstring must say what becomes of its result"
        for param in inspect.signature(fn).parameters:
            assert f"{param}:" in doc, f"{name}: parameter {param!r} is not documented"
        says_first = "firstresult" in doc or "first non-None" in doc
        assert says_first or "every implementation is called" in doc, f"{name}: first-result or not?"
        assert bool(fn.workbench_spec.get("firstresult")) == ("firstresult=True" in doc)


def test_every_hookimpl_of_a_builtin_matches_a_spec():
    pm = make_plugin_manager(autoload=False)
    pm.check_pending()  # raises for a hookimpl whose name is no spec
    assert [name for name, _ in loaded_plugins(pm)] == list(BUILTIN_PLUGINS)
    assert {origin for _, origin in loaded_plugins(pm)} == {"built-in"}


def test_builtin_commands_come_through_the_hook():
    commands = collect_commands(make_plugin_manager(autoload=False))
    assert {"new", "verify", "list", "doctor", "plugins", "profile"} <= set(commands)


class Recorder:
    """A throwaway plugin: one command, and every run event it is shown."""

    def __init__(self):
        self.events, self.finished = [], []

    @workbench.hookimpl
    def workbench_register_commands(self, register):
        register(Command("hello", "say hello", lambda parser: parser.add_argument("who"),
                         lambda args, context: print(f"hello {args.who}") or 0))

    @workbench.hookimpl
    def workbench_observe_event(self, event, project):
        self.events.append((event, project.name))

    @workbench.hookimpl
    def workbench_finish_run(self, project, finished, events):
        self.finished.append((project.name, finished, len(events)))


def test_a_throwaway_plugin_adds_a_command_and_sees_run_events(make_project, capsys):
    project = make_project(GOOD, name="scale")
    pm = make_plugin_manager(autoload=False)
    recorder = Recorder()
    pm.register(recorder, name="recorder")

    assert main(["hello", "world"], pm=pm) == 0
    assert capsys.readouterr().out.strip() == "hello world"

    assert main(["verify", str(project), "--interpret"], pm=pm) == 0
    kinds = [type(event) for event, _ in recorder.events]
    assert kinds[0] is WorkerReady and RunStarted in kinds and CaseResult in kinds and kinds[-1] is RunFinished
    assert {name for _, name in recorder.events} == {"scale"}
    assert len(recorder.finished) == 1
    name, finished, n_events = recorder.finished[0]
    assert (name, finished.verdict, n_events) == ("scale", "passed", len(recorder.events))


def test_a_command_name_cannot_be_registered_twice():
    pm = make_plugin_manager(autoload=False)

    class Clash:
        @workbench.hookimpl
        def workbench_register_commands(self, register):
            register(Command("verify", "shadow", lambda p: None, lambda a, c: 0))

    pm.register(Clash())
    with pytest.raises(ValueError, match="'verify' is registered twice"):
        collect_commands(pm)


PROJECT_PLUGIN = '''
from pathlib import Path

from workbench import Command, hookimpl


@hookimpl
def workbench_register_commands(register):
    register(Command("where", "say where", lambda parser: None, lambda args, context: print("here") or 0))


@hookimpl
def workbench_finish_run(project, finished):
    (Path(__file__).parent / "finished.txt").write_text(finished.verdict)
'''


def test_a_project_carries_its_own_plugin(make_project, cli, monkeypatch):
    project = make_project(GOOD, name="own")
    (project / "workbench_plugin.py").write_text(PROJECT_PLUGIN)
    code, out, _ = cli("plugins", project)  # the project argument makes its plugin load
    assert code == 0
    assert f"project:{project / 'workbench_plugin.py'}" in out and "project" in out.split()
    assert cli("verify", project, "--interpret")[0] == 0
    assert (project / "finished.txt").read_text() == "passed"
    monkeypatch.chdir(project)  # no argument: the plugin of the project in the current folder
    assert cli("where") == (0, "here\n", "")
    with pytest.raises(SystemExit) as exited:  # built-ins only: "where" is no command then
        cli("--no-plugins", "where")
    assert exited.value.code == 2


def test_a_broken_project_plugin_is_one_line_and_exit_3(make_project, cli):
    project = make_project(GOOD, name="broken")
    (project / "workbench_plugin.py").write_text("import no_such_module_here\n")
    code, out, err = cli("verify", project)
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and "project plugin failed to load: ModuleNotFoundError" in err


def test_a_misspelt_hook_is_refused_by_name(make_project, cli):
    project = make_project(GOOD, name="typo")
    (project / "workbench_plugin.py").write_text(textwrap.dedent('''
        from workbench import hookimpl

        @hookimpl
        def workbench_register_command(register):
            pass
    '''))
    code, _, err = cli("list", "--dir", project.parent, project)
    assert code == 3 and "workbench_register_command" in err and err.count("\n") == 1


def write_distribution(site, name, module, body, version="0.3.1"):
    """An installed distribution (dist-info with an entry point in group "workbench"), as pip leaves one."""
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist / "entry_points.txt").write_text(f"[workbench]\n{module.removeprefix('workbench_')} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(body))


FOO_PLUGIN = '''
    from workbench import Command, hookimpl
    from workbench.profiling import Profiler, ProfileResult

    @hookimpl
    def workbench_register_commands(register):
        register(Command("foo", "the foo command", lambda parser: None, lambda args, context: print("foo!") or 0))

    @hookimpl
    def workbench_register_profilers(register):
        register(Profiler("foo-prof", "a profiler from a third party", lambda project, options: ProfileResult(0, [])))
'''


@pytest.fixture
def site(tmp_path, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in [m for m in sys.modules if m.startswith("workbench_foo") or m.startswith("workbench_bad")]:
        del sys.modules[name]


def test_an_installed_plugin_loads_through_its_entry_point(site, cli, monkeypatch):
    write_distribution(site, "workbench-foo", "workbench_foo", FOO_PLUGIN)
    pm = make_plugin_manager(autoload=True)
    assert ("foo", "workbench-foo 0.3.1") in loaded_plugins(pm)
    assert "foo" in collect_commands(pm)
    from workbench.profiling import collect_profilers

    assert "foo-prof" in collect_profilers(pm)
    assert "foo" not in dict(loaded_plugins(make_plugin_manager(autoload=False)))
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")  # (the cli fixture sets it too)
    assert "foo" not in dict(loaded_plugins(make_plugin_manager()))
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "0")
    assert cli("foo") == (0, "foo!\n", "")
    code, out, _ = cli("plugins")
    assert code == 0 and "workbench-foo 0.3.1" in out


def test_a_broken_installed_plugin_is_named_in_one_line(site, cli, monkeypatch):
    write_distribution(site, "workbench-bad", "workbench_bad", "raise RuntimeError('boom')\n", version="1.0")
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "0")
    code, out, err = cli("list")
    assert code == 3 and out == ""
    assert err == ("workbench: plugin 'bad' from workbench-bad 1.0 (entry point 'workbench_bad') failed to load: "
                   "RuntimeError: boom\n")
    assert cli("--no-plugins", "list")[0] == 0
    with pytest.raises(PluginError):
        make_plugin_manager(autoload=True)


def test_the_manager_is_a_pluggy_manager_made_fresh_each_time():
    first, second = make_plugin_manager(autoload=False), make_plugin_manager(autoload=False)
    assert isinstance(first, pluggy.PluginManager) and first is not second
    first.register(Recorder(), name="only-in-first")
    assert "only-in-first" not in dict(loaded_plugins(second))
