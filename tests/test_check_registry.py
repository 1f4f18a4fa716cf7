"""Every check has one entry in workbench/core/verify/checks.py, its key the one the judge writes, and the
README's tables list exactly the registered keys (issue 42: one obvious place for each check)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from workbench.core.verify.checks import CHECKS
from workbench.core.verify.layouts import LAYOUTS

ROOT = Path(__file__).resolve().parents[1]
VERIFY = ROOT / "workbench" / "core" / "verify"


def keys_the_code_writes() -> set[str]:
    judge = (VERIFY / "judge.py").read_text(encoding="utf-8")
    battery = (VERIFY / "battery.py").read_text(encoding="utf-8")
    compat = (VERIFY / "compat.py").read_text(encoding="utf-8")
    keys = set(re.findall(r'result\.checks\["(\w+)"\]', judge))
    keys |= set(re.findall(r'data\.checks\["(\w+)"\]', battery))
    keys |= set(re.findall(r'ExtraRun\("(\w+)"', battery + compat))  # the extra runs: checks[run.name]
    return keys | set(LAYOUTS)


def keys_the_readme_lists() -> set[str]:
    """The backticked keys in the first cell of the two check tables of "What verified means"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
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
    """"judge.Judge._outputs (a remark)" -> the attribute, under workbench.core.verify (project.x: workbench.core)."""
    parts = where.split(" ")[0].split(".")
    count = 2 if parts[0] == "project" else 1
    prefix = "workbench.core" if parts[0] == "project" else "workbench.core.verify"
    target = importlib.import_module(".".join([prefix, *parts[:count]]))
    for attr in parts[count:]:
        target = getattr(target, attr)
    return target


def test_each_check_names_code_that_exists():
    for check in CHECKS.values():
        assert check.fails_when and resolve(check.gathered) and resolve(check.decided)


def test_the_compatibility_findings_are_the_compat_and_layout_runs():
    assert {c.key for c in CHECKS.values() if c.finding} == {"torch_compile", "cuda_graph", *LAYOUTS}
