"""A check written as docs/ARCHITECTURE.md's "How to add a check" says, for tests/test_check_recipe.py: every output
kernel_fn returns is contiguous in memory. Only the kernel's process sees it (the judge gets packed, contiguous
copies), so it is gathered there, as plain data, and decided in the judge. Imported by name in both processes."""

from __future__ import annotations

import workbench
from workbench.core.verify.checks import Check, PluginCheck, Unit

KEY = "contiguous_outputs"


class ContiguousOutputs(Unit):
    checks = (Check(KEY, "an output kernel_fn returns is not contiguous in memory"),)

    def called(self, calls, call, outputs):
        """In the kernel's process, right after the case's first call: the strides of each strided output."""
        if call == "first" and outputs is not None:
            calls.data.evidence[KEY] = [[name, list(t.stride())] for name, t in zip(outputs.names, outputs.tensors)
                                        if not t.is_contiguous()]

    def decide(self, verdict):
        """In the judge: failed, saying which outputs, when any is strided."""
        strided = verdict.data.evidence.get(KEY)
        if strided is None:
            return  # not gathered on this case (a forced config's call, a large-index case)
        if strided:
            verdict.result.messages.append(f"{KEY}: " + ", ".join(f"output{name} has strides {tuple(strides)}"
                                                                  for name, strides in strided)
                                           + ": return a contiguous tensor")
        verdict.result.checks[KEY] = "failed" if strided else "passed"


UNIT = ContiguousOutputs()


class Plugin:
    """The registration a check outside workbench/core/verify/checks/ makes: a PluginCheck naming the unit."""

    @workbench.hookimpl
    def workbench_register_checks(self, register):
        register(PluginCheck(key=KEY, fails_when=UNIT.checks[0].fails_when, target="check_unit_example:UNIT"))
