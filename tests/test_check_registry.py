"""Every check is one unit of workbench/core/verify/checks/, registered there by the keys it writes; its key the one
the code writes, and docs/VERIFIED.md's tables list exactly the registered keys (issue 42: one obvious place for
each check)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from workbench.core.verify.checks import CHECKS, OWNERS, UNITS, Unit
from workbench.core.verify.layouts import LAYOUTS

ROOT = Path(__file__).resolve().parents[1]
VERIFY = ROOT / "workbench" / "core" / "verify"


def keys_written_by(text: str) -> set[str]:
    """The keys a module writes: checks["key"] (a CaseResult's or a CaseData's), ExtraRun("key") (checks[run.name])."""
    return set(re.findall(r'checks\["(\w+)"\]', text)) | set(re.findall(r'ExtraRun\("(\w+)"', text))


def keys_the_code_writes() -> set[str]:
    sources = [*sorted((VERIFY / "checks").glob("*.py")), VERIFY / "battery.py", VERIFY / "compat.py"]
    keys = set().union(*(keys_written_by(path.read_text(encoding="utf-8")) for path in sources))
    return keys | set(LAYOUTS)  # layouts.py: an ExtraRun per layout, by name


def keys_the_readme_lists() -> set[str]:
    """The backticked keys in the first cell of the two check tables of "What verified means"."""
    text = (ROOT / "docs" / "VERIFIED.md").read_text(encoding="utf-8")
    start = text.index("| check (JSON `checks` key) | fails when | off with |")
    end = text.index("**Refusals.**", start)
    compat_start = text.index("| check | finding |")
    compat_end = text.index("\n\n", compat_start)
    keys = set()
    for table in (text[start:end], text[compat_start:compat_end]):
        for row in [line for line in table.splitlines()[2:] if line.startswith("|")]:
            first = row.split("|")[1]
            if "(`generated" in first or "(`judge`)" in first:  # case kinds and the judge itself, not checks
                continue
            keys |= set(re.findall(r"`(\w+)`", first.split("(")[0]))
    return keys


def test_every_check_the_code_writes_is_registered_and_none_is_stale():
    assert keys_the_code_writes() == set(CHECKS)


def test_the_readme_lists_exactly_the_registered_checks():
    assert keys_the_readme_lists() == set(CHECKS)


def resolve(where: str) -> object:
    """"compat.compat_runs" -> the attribute, under workbench.core.verify (project.x: under workbench.core)."""
    parts = where.split(".")
    count = 2 if parts[0] == "project" else 1
    prefix = "workbench.core" if parts[0] == "project" else "workbench.core.verify"
    target = importlib.import_module(".".join([prefix, *parts[:count]]))
    for attr in parts[count:]:
        target = getattr(target, attr)
    return target


def test_each_check_is_decided_in_its_units_module_which_writes_its_key_or_names_what_does():
    """A check's unit decides it (its own decide), and its module writes the key, or the code its Check names as
    gathering it does (compat.py, layouts.py: an ExtraRun of that name)."""
    for key, check in CHECKS.items():
        unit = OWNERS[key]
        assert check.fails_when and type(unit).decide is not Unit.decide, key
        written = keys_written_by(inspect.getsource(inspect.getmodule(unit)))
        if check.gathered:
            gatherer = inspect.getmodule(resolve(check.gathered))
            written |= keys_written_by(inspect.getsource(gatherer)) | (set(LAYOUTS) if gatherer.__name__.endswith(
                ".layouts") else set())
        assert key in written, key


def test_every_unit_is_registered_once_and_owns_its_keys():
    assert len({id(unit) for unit in UNITS}) == len(UNITS)
    assert {key for unit in UNITS for key in (c.key for c in unit.checks)} == set(CHECKS)


def test_the_parents_list_of_built_in_keys_is_the_registrys():
    """The parent process refuses a plugin check on a taken key from check_keys.BUILTIN_KEYS (checks/ imports torch,
    which the app and the MCP server never load): the two name the same keys."""
    from workbench.core.verify.check_keys import BUILTIN_KEYS

    assert BUILTIN_KEYS == set(CHECKS)


def test_the_compatibility_findings_are_the_compat_and_layout_runs():
    assert {c.key for c in CHECKS.values() if c.finding} == {"torch_compile", "cuda_graph", *LAYOUTS}


# -- a check a plugin adds -----------------------------------------------------------------------------------

def verify_with(pm, project, capsys):
    import json

    from workbench.cli import main

    capsys.readouterr()
    code = main(["verify", str(project), "--interpret", "--json"], pm=pm)
    return code, json.loads(capsys.readouterr().out)["projects"][0]


def test_a_plugins_check_runs_on_every_case_and_fails_only_what_it_should(make_project, monkeypatch, capsys):
    """The example plugin (tests/plugin_check_example.py) bounds every output's magnitude: a correct kernel of
    small outputs passes it; the same kernel scaled past the bound, with its reference, is right by every
    built-in check and fails this one, with its message and key."""
    import os

    import kernels
    import plugin_check_example

    from workbench.plugins import make_plugin_manager

    tests = str(Path(__file__).resolve().parent)  # the kernel's process and the judge import the check by name
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    pm = make_plugin_manager(autoload=False)
    pm.register(plugin_check_example.Plugin(), name="bound")
    fast = "[verify]\ngenerated_cases = false\nrepeat_calls = false\n"

    code, record = verify_with(pm, make_project(kernels.GOOD, name="small", toml=fast), capsys)
    main_cases = [c for c in record["cases"] if not c["config"]]
    assert code == 0 and main_cases and all(c["checks"]["outputs_within_bound"] == "passed" for c in main_cases)

    scaled = kernels.GOOD.replace("y = x * 2.0", "y = x * 5000.0").replace("return x * 2", "return x * 5000")
    code, record = verify_with(pm, make_project(scaled, name="large", toml=fast), capsys)
    failed = [c for c in record["cases"] if c["status"] == "failed"]
    assert code == 1 and failed
    for case in failed:
        assert case["checks"]["outputs_within_bound"] == "failed" and case["checks"]["values"] == "passed"
        assert any(m.startswith("outputs_within_bound: output reaches") and "(bound 1000)" in m
                   for m in case["messages"])


def test_a_plugins_check_may_not_take_a_built_in_key(make_project, capsys):
    import kernels

    import workbench
    from workbench.core.verify.checks import PluginCheck
    from workbench.plugins import make_plugin_manager

    class Clash:
        @workbench.hookimpl
        def workbench_register_checks(self, register):
            register(PluginCheck(key="values", fails_when="", target="x:y"))

    pm = make_plugin_manager(autoload=False)
    pm.register(Clash(), name="clash")
    code, record = verify_with(pm, make_project(kernels.GOOD), capsys)
    assert code == 2 and "a plugin's check: check 'values' is registered twice" in record["problems"][0]["message"]
