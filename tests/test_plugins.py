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
    WorkbenchPluginManager,
    load_entry_point_plugins,
    loaded_plugins,
    make_plugin_manager,
    plugin_sources,
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_project_carries_its_own_plugin(make_project, cli, monkeypatch):
    project = make_project(GOOD, name="own")
    (project / "workbench_plugin.py").write_text(PROJECT_PLUGIN)
    code, out, _ = cli("plugins", project)  # the project argument makes its plugin load
    assert code == 0
    assert f"project:{project / 'workbench_plugin.py'}" in out and "project" in out.split()
    row = next(line.split() for line in out.splitlines() if line.startswith("project:"))
    file = project / "workbench_plugin.py"
    assert row == [f"project:{file}", "project", "file", str(file)]  # the file as it is: not under the cwd
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


def write_distribution(site, name, module, body, version="0.3.1", more_modules=()):
    """An installed distribution (dist-info with an entry point in group "workbench"), as pip leaves one.

    more_modules: further (module, body) of the same distribution, each an entry point after the first.
    """
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    modules = [(module, body), *more_modules]
    (dist / "entry_points.txt").write_text("[workbench]\n" + "".join(
        f"{m.removeprefix('workbench_')} = {m}\n" for m, _ in modules))
    for m, text in modules:
        (site / f"{m}.py").write_text(textwrap.dedent(text))


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
    for name in [name for name, m in sys.modules.items() if str(getattr(m, "__file__", "")).startswith(str(folder))]:
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
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")  # the CLI reads it too (it did not)
    code, out, _ = cli("plugins")
    assert code == 0 and "workbench-foo" not in out and "workbench.builtin.verifying" in out


def test_an_installed_plugin_is_loaded_by_pluggy_and_listed_with_its_distribution(site, cli, monkeypatch):
    write_distribution(site, "workbench-foo", "workbench_foo", FOO_PLUGIN)
    pm = make_plugin_manager(autoload=True)
    distinfo = {pm.get_name(plugin): (dist.project_name, dist.version) for plugin, dist in pm.list_plugin_distinfo()}
    assert distinfo["foo"] == ("workbench-foo", "0.3.1")  # pluggy's load_setuptools_entrypoints recorded it
    assert pm.get_plugin("foo") is sys.modules["workbench_foo"]
    assert not set(distinfo) & set(BUILTIN_PLUGINS)
    source = next(source for source in plugin_sources(pm) if source.name == "foo")
    assert (source.kind, source.distribution, source.version, source.entry_point) == (
        "installed", "workbench-foo", "0.3.1", "workbench_foo")

    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "0")
    code, out, _ = cli("plugins")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert rows["foo"] == ["workbench-foo", "0.3.1", "entry", "point", "workbench_foo"]
    assert rows["workbench.builtin.verifying"] == ["built-in"]
    assert "foo" not in cli("--no-plugins", "plugins")[1].split()


def test_autoload_off_loads_no_installed_plugin(site, monkeypatch):
    write_distribution(site, "workbench-foo", "workbench_foo", FOO_PLUGIN)
    assert make_plugin_manager(autoload=False).list_plugin_distinfo() == []
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    pm = make_plugin_manager()
    assert pm.list_plugin_distinfo() == [] and pm.get_plugin("foo") is None
    assert "workbench_foo" not in sys.modules


def test_a_blocked_name_stays_blocked(site):
    write_distribution(site, "workbench-foo", "workbench_foo", FOO_PLUGIN)
    write_distribution(site, "workbench-bad", "workbench_bad", "raise RuntimeError('boom')\n", version="1.0")
    pm = WorkbenchPluginManager()
    pm.set_blocked("foo")
    pm.set_blocked("bad")  # never imported, so it cannot fail
    load_entry_point_plugins(pm)
    assert pm.is_blocked("foo") and pm.get_plugin("foo") is None and pm.get_plugin("bad") is None
    assert not {dist.project_name for _, dist in pm.list_plugin_distinfo()} & {"workbench-foo", "workbench-bad"}
    assert "foo" not in dict(loaded_plugins(pm)) and "workbench_bad" not in sys.modules


def test_a_plugin_failing_after_others_loaded_is_the_one_named(site):
    # Three entry points of one distribution: the second imports but pluggy refuses its hook (an argument
    # no hookspec has), after registering its name; the error names it, not the first or the third.
    write_distribution(site, "workbench-trio", "workbench_trio_a", FOO_PLUGIN, version="2.0", more_modules=[
        ("workbench_trio_b", """
            from workbench import hookimpl

            @hookimpl
            def workbench_register_commands(register, no_such_argument):
                pass
        """),
        ("workbench_trio_c", "")])
    with pytest.raises(PluginError) as raised:
        make_plugin_manager(autoload=True)
    message = str(raised.value)
    assert message.startswith("plugin 'trio_b' from workbench-trio 2.0 (entry point 'workbench_trio_b') "
                              "failed to load: PluginValidationError: ")
    assert "no_such_argument" in message and "\n" not in message  # one line, as the CLI prints it
    assert isinstance(raised.value.__cause__, pluggy.PluginValidationError)


def test_a_misspelt_hook_of_an_installed_plugin_names_its_distribution(site):
    write_distribution(site, "workbench-typo", "workbench_typo", """
        from workbench import hookimpl

        @hookimpl
        def workbench_register_command(register):
            pass
    """, version="0.9")
    with pytest.raises(PluginError, match=r"plugin 'typo' \(workbench-typo 0\.9, entry point 'workbench_typo'\): .*"
                                          r"workbench_register_command"):
        make_plugin_manager(autoload=True)


def test_a_broken_installed_plugin_is_named_in_one_line(site, cli, monkeypatch):
    write_distribution(site, "workbench-bad", "workbench_bad", "raise RuntimeError('boom')\n", version="1.0")
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "0")
    code, out, err = cli("list")
    assert code == 3 and out == ""
    assert err == ("workbench: plugin 'bad' from workbench-bad 1.0 (entry point 'workbench_bad') failed to load: "
                   "RuntimeError: boom\n")
    assert cli("--no-plugins", "list")[0] == 0
    with pytest.raises(PluginError, match=r"^plugin 'bad' from workbench-bad 1\.0 \(entry point 'workbench_bad'\) "
                                          r"failed to load: RuntimeError: boom$") as raised:
        make_plugin_manager(autoload=True)
    assert isinstance(raised.value.__cause__, RuntimeError)  # pluggy raised the plugin's own exception


def test_the_manager_is_a_pluggy_manager_made_fresh_each_time():
    first, second = make_plugin_manager(autoload=False), make_plugin_manager(autoload=False)
    assert isinstance(first, pluggy.PluginManager) and first is not second
    first.register(Recorder(), name="only-in-first")
    assert "only-in-first" not in dict(loaded_plugins(second))
