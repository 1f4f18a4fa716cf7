"""An example of a check a plugin adds (workbench_register_checks, verify/checks/plugins.py): every output's largest
magnitude within a bound, as a serving stack that stores activations in a narrow format would ask. Imported by
name in the kernel's process (gather) and in the judge (decide); it never sees kernel.py."""

from __future__ import annotations

import workbench
from workbench.core.verify.checks import PluginCheck

BOUND = 1000.0


class OutputsWithinBound:
    @staticmethod
    def gather(inputs, outputs, reference):
        """In the kernel's process: plain numbers back, never tensors."""
        return {name: float(t.detach().abs().max()) for name, t in outputs.items()
                if t.is_floating_point() and t.numel()}

    @staticmethod
    def decide(evidence):
        """In the judge: the message when an output is past the bound."""
        past = {name: value for name, value in evidence.items() if value > BOUND}
        if past:
            return ", ".join(f"{name} reaches {value:g}" for name, value in past.items()) + f" (bound {BOUND:g})"
        return None


CHECK = OutputsWithinBound()


class Plugin:
    @workbench.hookimpl
    def workbench_register_checks(self, register):
        register(PluginCheck(key="outputs_within_bound", fails_when="an output's largest magnitude passes 1000",
                             target="plugin_check_example:CHECK"))
