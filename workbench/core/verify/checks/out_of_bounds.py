"""Stores outside the tensors kernel_fn was handed or allocated: each input, and each allocation of a call, sits
inside guard margins (verify/guards.py) whose bytes are read back after every call of the case and its forced
configs."""

from __future__ import annotations

from ..guards import Guards
from ..tensors import Outputs
from .unit import CaseCalls, Check, Unit, Verdict


class OutOfBounds(Unit):
    checks = (Check("out_of_bounds", "a store landed in a guard margin around an input or an allocation",
                    "guards.Guards"),)

    def prepare(self, calls: CaseCalls) -> None:
        if calls.battery.config.guard_regions:
            calls.guards = Guards()
            calls.inputs = calls.guards.guard_inputs(calls.inputs)
        else:
            calls.data.checks["out_of_bounds"] = "skipped: guard_regions = false"

    def called(self, calls: CaseCalls, call: str, outputs: Outputs | None) -> None:
        guards, data = calls.guards, calls.data
        if guards is None:
            return
        if outputs is None:
            guards.check([], [])  # margins put back: what this call wrote is not the next's
        elif call == "second":
            found = guards.check(outputs.tensors, outputs.names)
            data.out_of_bounds += [m for m in found if m not in data.out_of_bounds]
        else:
            data.out_of_bounds = guards.check(outputs.tensors, outputs.names)

    def close(self, calls: CaseCalls) -> None:
        if calls.guards is not None:
            calls.guards.close()

    def decide(self, verdict: Verdict) -> None:
        result = verdict.result
        if "out_of_bounds" in result.checks:
            return  # skipped, and said why
        if verdict.data.out_of_bounds:
            result.messages[:0] = verdict.data.out_of_bounds
            result.checks["out_of_bounds"] = "failed"
        else:
            result.checks["out_of_bounds"] = "passed"


UNIT = OutOfBounds()
