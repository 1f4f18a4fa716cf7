"""The inputs kernel_fn changed, and the outputs that share an input's memory (both allowed by [verify] inplace).

The inputs before the first call and after it are what every case carries (battery.Verifier._verify_case:
`before`, `after`); which outputs share an input's memory is gathered here, right after the first call, less
those reference_fn itself returns as views of its inputs (references.native_reference).
"""

from __future__ import annotations

from ..tensors import Outputs, shared_memory
from ..compare import tensors_equal_bitwise
from .unit import CaseCalls, Check, Unit, Verdict


class InputChanges(Unit):
    checks = (
        Check("mutated_input", "an input changed", "battery.Verifier._verify_case"),
        Check("aliasing", "an output shares an input's memory", "tensors.shared_memory"),
    )

    def called(self, calls: CaseCalls, call: str, outputs: Outputs | None) -> None:
        if call == "first" and outputs is not None:
            calls.data.aliases = shared_memory(outputs, calls.inputs, calls.reference_aliases)

    def decide(self, verdict: Verdict) -> None:
        """The input and aliasing checks; a case that fails having changed an input ("#1"), declared or not, says
        why an autotuned kernel may (data.mutation_hints)."""
        result, data, config = verdict.result, verdict.data, verdict.config
        mutated = [f"#{i}" for i, (now, before) in enumerate(zip(data.after, data.before))
                   if now is not None and before is not None
                   and (now.shape != before.shape or not bool(tensors_equal_bitwise(now, before).all()))]
        if mutated and not config.inplace:
            result.messages.append(f"input {', '.join(mutated)} changed by the kernel "
                                   "(declare [verify] inplace = true if that is intended)")
            result.checks["mutated_input"] = "failed"
        if data.aliases and not config.inplace:
            result.messages += [f"{alias}: the output shares the input's memory (return a new tensor, or declare "
                                "[verify] inplace = true)" for alias in data.aliases]
            result.checks["aliasing"] = "failed"
        result.checks.setdefault("mutated_input", "passed" if not config.inplace else "skipped: inplace = true")
        result.checks.setdefault("aliasing", "passed" if not config.inplace else "skipped: inplace = true")
        if mutated:
            verdict.if_failed += data.mutation_hints


UNIT = InputChanges()
