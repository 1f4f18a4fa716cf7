"""The checks plugins add (`workbench_register_checks`): a `PluginCheck` names, by "module:attribute", an object
importable in the kernel's process and in the judge, so that no verdict is ever given in the kernel's. Either a
`Unit` (unit.py: run as the built-in ones are), or an object with two methods, one per process:

    gather(inputs, outputs, reference) -> evidence   in the kernel's process, after each case's first call: the
                                                     inputs as they were, the outputs and the float64
                                                     reference's by name ({"output": tensor, ...}); plain data
                                                     back (what json.dumps takes)
    decide(evidence) -> str | None                   in the judge: the failure's message, or None (passed)
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any, Iterator

from ..structure import output_label
from ..tensors import Outputs, owned
from .unit import CaseCalls, Unit, Verdict


@dataclass(frozen=True)
class PluginCheck:
    """A check a plugin adds: its JSON key, what failing it means, and "module:attr" of its Unit or gather/decide
    object, importable in the worker and in the judge."""

    key: str
    fails_when: str
    target: str


def load_check(target: str) -> Any:
    """The object a PluginCheck names ("module:attribute")."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def gather_evidence(target: str, inputs: list[Any], outputs: dict[str, Any], reference: dict[str, Any]) -> list[Any]:
    """In the kernel's process: a gather/decide object's evidence, ["ok", evidence], or ["error", why] when gather
    raised or gave what is not plain data."""
    try:
        evidence = load_check(target).gather(inputs, outputs, reference)
        json.dumps(evidence)
        return ["ok", evidence]
    except Exception as exc:  # noqa: BLE001 - the check fails, saying why; the case goes on
        return ["error", f"{type(exc).__name__}: {exc}"]


def decide(target: str, status: str, evidence: Any) -> str | None:
    """In the judge: a gather/decide object's failure message, or None when it passed."""
    if status == "error":
        return f"the check could not gather its evidence: {evidence}"
    try:
        return load_check(target).decide(evidence)
    except Exception as exc:  # noqa: BLE001
        return f"the check's decide raised {type(exc).__name__}: {exc}"


class GatherDecide(Unit):
    """A plugin's gather/decide object as a unit: gathered after the case's first call, decided from that."""

    def __init__(self, key: str, target: str):
        self.key, self.target = key, target

    def called(self, calls: CaseCalls, call: str, outputs: Outputs | None) -> None:
        if call != "first" or outputs is None:
            return
        mine = owned(outputs)  # the kernel's own tensors stay as the battery's other checks see them
        data = calls.data
        data.evidence[self.key] = gather_evidence(
            self.target, calls.originals, dict(zip(map(output_label, mine.names), mine.tensors)),
            dict(zip(map(output_label, data.reference_names), data.reference)))

    def decide(self, verdict: Verdict) -> None:
        status, evidence = verdict.data.evidence.get(self.key) or ["error", "none was handed over"]
        message = decide(self.target, status, evidence)
        verdict.result.checks[self.key] = "failed" if message else "passed"
        if message:
            verdict.result.messages.append(f"{self.key}: {message}")


def as_unit(key: str, target: str) -> Unit:
    """The Unit a PluginCheck names, or its gather/decide object as one (which says why, where it does not load)."""
    try:
        found = load_check(target)
    except Exception:  # noqa: BLE001 - GatherDecide loads it again, and says why it cannot
        return GatherDecide(key, target)
    return found if isinstance(found, Unit) else GatherDecide(key, target)


class PluginChecks(Unit):
    """Every plugin's check, in the order registered: named to this process by the job (battery.Verifier's
    plugin_checks, {"key", "target"}), to the judge by the case (CaseData.added_checks, {key: target})."""

    @staticmethod
    def added(calls: CaseCalls) -> Iterator[tuple[str, str, Unit]]:
        for spec in calls.battery.plugin_checks:
            yield spec["key"], spec["target"], as_unit(spec["key"], spec["target"])

    def prepare(self, calls: CaseCalls) -> None:
        for _, _, unit in self.added(calls):
            unit.prepare(calls)

    def called(self, calls: CaseCalls, call: str, outputs: Outputs | None) -> None:
        for key, target, unit in self.added(calls):
            if call == "first" and outputs is not None:  # from here on, the judge decides it
                calls.data.added_checks[key] = target
            unit.called(calls, call, outputs)

    def finish(self, calls: CaseCalls) -> None:
        for _, _, unit in self.added(calls):
            unit.finish(calls)

    def close(self, calls: CaseCalls) -> None:
        for _, _, unit in self.added(calls):
            unit.close(calls)

    def decide(self, verdict: Verdict) -> None:
        for key, target in verdict.data.added_checks.items():
            as_unit(key, target).decide(verdict)


UNIT = PluginChecks()
