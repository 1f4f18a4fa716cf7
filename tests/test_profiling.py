"""`workbench profile` and the Profiler interface, with profilers registered in a fresh manager."""

from __future__ import annotations

import json

import pytest
from kernels import GOOD

import workbench
from workbench.cli import main
from workbench.plugins import make_plugin_manager
from workbench.profiling import Profiler, ProfileResult, collect_profilers


class FakeProfilers:
    """Two profilers that record what they were asked."""

    def __init__(self, exit_code=0):
        self.calls = []
        self.exit_code = exit_code

    def run(self, project, options):
        self.calls.append((project.name, options))
        if self.exit_code:
            return ProfileResult.failure(self.exit_code, "the tool is not there")
        return ProfileResult(0, ["line one", "line two"], report_path="/tmp/r.ncu-rep", metrics={"kernels": []})

    @workbench.hookimpl
    def workbench_register_profilers(self, register):
        register(Profiler("first", "the first one", self.run))
        register(Profiler("second", "the second one", self.run))


@pytest.fixture
def project(make_project):
    return make_project(GOOD, name="scale")


def manager_with(*plugins):
    pm = make_plugin_manager(autoload=False)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def test_the_first_registered_profiler_is_the_default_and_names_are_unique():
    profilers = collect_profilers(manager_with(FakeProfilers()))
    assert list(profilers) == ["first", "second"]
    with pytest.raises(ValueError, match="'first' is registered twice"):
        collect_profilers(manager_with(FakeProfilers(), FakeProfilers()))


def test_no_profiler_installed_is_one_line_and_exit_3(project, capsys):
    assert collect_profilers(make_plugin_manager(autoload=False)) == {}
    assert main(["profile", str(project)], pm=manager_with()) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "no profiler is installed" in err and "plugins/ncu" in err


def test_profile_runs_the_default_profiler_with_the_options(project, capsys):
    fake = FakeProfilers()
    assert main(["profile", str(project), "--case", "3", "--case", "0", "--full"], pm=manager_with(fake)) == 0
    assert capsys.readouterr().out == "line one\nline two\nreport: /tmp/r.ncu-rep\n"
    (name, options), = fake.calls
    assert name == "scale" and options["cases"] == [3, 0] and options["full"] is True and callable(
        options["on_event"])


def test_profile_picks_a_profiler_by_name_and_refuses_an_unknown_one(project, capsys):
    fake = FakeProfilers()
    pm = manager_with(fake)
    assert main(["profile", str(project), "--profiler", "second", "--json"], pm=pm) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["profiler"] == "second" and data["report_path"] == "/tmp/r.ncu-rep" and data["exit_code"] == 0
    assert main(["profile", str(project), "--profiler", "third"], pm=pm) == 2
    assert capsys.readouterr().err == "workbench profile: no profiler named 'third'; installed: first, second\n"


def test_a_failed_profile_prints_its_reason_and_exits_with_its_code(project, capsys):
    assert main(["profile", str(project)], pm=manager_with(FakeProfilers(exit_code=3))) == 3
    out, err = capsys.readouterr()
    assert out == "" and err == "workbench profile: the tool is not there\n"


def test_profile_list(capsys):
    assert main(["profile", "--list"], pm=manager_with(FakeProfilers())) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("first") and lines[0].endswith("(default)") and "(default)" not in lines[1]
