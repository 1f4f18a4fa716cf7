"""The verdict on one case, given what the kernel's process handed over (verify/handoff.py).

Where this runs (threat model)
------------------------------
kernel.py is user code, and users include people and programs iterating fast: a kernel.py that
monkeypatches ``torch.allclose``, ``torch.testing.assert_close``, ``torch.Tensor.__eq__``, this
package's compare or battery modules, or ``builtins`` at import time must not turn a wrong result
into a pass. So the verdict is not given in the process that imports kernel.py.

The worker process (run/child/worker.py) imports torch and then forks *before* anything else: the child
is the judge (run/child/judge_process.py). It never imports kernel.py or triton, owns the only channel
to the parent (the worker's stdout), reads the job (and so the project's config and tolerances)
itself, and is the only process that can produce a CaseResult. The kernel's process runs
kernel_fn and reference_fn and hands each case's tensors over a pipe (outputs of both runs, the
reference's, the inputs before and after, the extra calls); the judge compares them here with
its own torch and this module. A CaseResult event the kernel's process writes itself is turned
into an error; whatever it reports as skipped or errored is never a pass.

Defended: patching torch, the workbench's modules or builtins in the kernel's process; tensor
subclasses and torch function modes that answer for an output (packing runs under
DisableTorchFunction with C methods bound before kernel.py was imported; a subclass output fails);
forged verdicts, tolerances or config.

Not defended: code written against the hand-off itself (rewriting its captured functions or its
frames, walking the garbage collector to them); torch dispatch modes pushed through private
torch._C APIs, or ctypes writes into memory; reaching the judge through the OS (ptrace,
/proc/<pid>/fd, signals); a reference_fn that is wrong, or CASES that leave out what fails (both
are the project's own statements); which cases the kernel's process runs and what it reports as
skipped (never a pass, but a case it leaves out is not judged); the launch count, the aliasing
facts and the NaN/sentinel prefill, which happen in the kernel's process; for a benchmark-sized
case, which elements are drawn for the judge (see handoff.CaseData.sample: drawn with the bound
functions, from os.urandom, so patching torch does not choose them) and the whole-output NaN count;
the benchmark's recheck after timing (compared in the kernel's process; only a failure reaches the
judge, and a recheck that lies can only post a time). Against those, read the diff of kernel.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..events import CaseResult
from ..project.config import VerifyConfig
from .checks import UNITS, Verdict
from .checks.outputs import TF32_HINT, unwritten_mask
from .checks.torch_ops import allows_torch_op
from .handoff import CaseData
from .large_index import LARGE_INDEX
from .large_index import NOTE as LARGE_INDEX_NOTE
from .value_stress import stress_note

# Where code outside the verify package finds them (each is its check's: verify/checks/).
__all__ = ["Judge", "TF32_HINT", "allows_torch_op", "judge_outputs", "unwritten_mask"]


@dataclass
class Judge:
    """Gives CaseResults, each check's decided by its unit (verify/checks/); keeps what a check remembers across
    the cases of a run (the reference outputs seen so far, to spot identical ones)."""

    config: VerifyConfig
    memory: dict[str, Any] = field(default_factory=dict)

    def judge(self, data: CaseData, weak_inputs: bool = True) -> CaseResult:
        """The verdict on one case. `weak_inputs`: also warn about inputs that prove nothing (a digest of
        the whole reference: the recheck of a benchmark-sized output skips it)."""
        start = time.perf_counter()
        result = CaseResult(case_index=data.case_index, label=data.label, status="passed", config=data.config,
                            notes=list(data.notes), generated=data.generated, launches=data.launches,
                            checks=dict(data.checks), phase=data.phase, warnings=list(data.warnings))
        if data.status in ("error", "skipped"):
            result.status = data.status
            result.messages = list(data.messages)
            result.duration_s = data.duration_s
            return result
        result.messages = list(data.messages)
        verdict = Verdict(self.config, data, result, self.memory, weak_inputs)
        for unit in UNITS:
            unit.decide(verdict)
        result.status = "failed" if result.messages else "passed"
        if result.status == "failed":
            result.notes += verdict.if_failed
        if result.status == "failed" and data.stress == LARGE_INDEX:
            result.notes.append(LARGE_INDEX_NOTE)
        elif result.status == "failed" and data.stress:
            tf32 = self.config.tf32 and "float32" in data.expected_dtypes
            result.notes.append(stress_note(data.stress, overflow=result.non_finite, tf32=tf32))
        result.duration_s = data.duration_s + (time.perf_counter() - start)
        return result


def judge_outputs(config: VerifyConfig, case_index: int, label: str, outputs: list[Any], names: list[str],
                  reference: list[Any], native: list[Any] | None = None,
                  reference_names: list[str] | None = None, rounded: list[Any] | None = None) -> CaseResult:
    """Outputs of one call against the reference, in this process: for rechecks that are reported, never
    the verdict (no weak-input checks: those hash the whole reference)."""
    data = CaseData(case_index=case_index, label=label, first=outputs, names=names, reference=reference,
                    native=list(native or []), reference_names=list(reference_names or []),
                    rounded=list(rounded or []))
    return Judge(config).judge(data, weak_inputs=False)
