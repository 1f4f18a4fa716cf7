"""Every check of the battery, one unit a module of this package (unit.py says what a unit is; docs/ARCHITECTURE.md,
"How to add a check"): registered here by the keys it writes in a case's JSON `checks` (and in JUnit), with what
failing each means. docs/VERIFIED.md's tables list exactly these keys (tests/test_check_registry.py).

A compatibility finding (`Check.finding`) is reported beside the verdict and fails it only where the project
requires it ([verify] <key> = "require"); every other check fails the case. A plugin adds a check with the
`workbench_register_checks` hook (plugins.py).
"""

from __future__ import annotations

from . import extra_calls, input_changes, out_of_bounds, outputs, plugins, torch_ops, triton_launched, weak_inputs
from .plugins import PluginCheck
from .unit import CaseCalls, Check, Unit, Verdict

# In the order the judge decides them (their messages come in that order); the kernel's process calls their
# hooks in the same order.
UNITS: list[Unit] = []
CHECKS: dict[str, Check] = {}  # key -> its Check
OWNERS: dict[str, Unit] = {}  # key -> the unit that decides it


def register(unit: Unit) -> Unit:
    """Add a unit to the battery, after those registered before it."""
    for check in unit.checks:
        if check.key in CHECKS:
            raise ValueError(f"check {check.key!r} is registered twice")
        CHECKS[check.key], OWNERS[check.key] = check, unit
    UNITS.append(unit)
    return unit


for _module in (outputs, input_changes, triton_launched, out_of_bounds, torch_ops, extra_calls, plugins, weak_inputs):
    register(_module.UNIT)

__all__ = ["CHECKS", "OWNERS", "UNITS", "CaseCalls", "Check", "PluginCheck", "Unit", "Verdict", "register"]
