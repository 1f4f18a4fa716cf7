"""What one check is: a `Unit`, one module of this package (docs/ARCHITECTURE.md, "How to add a check").

A unit names the keys it writes in a case's JSON `checks` (each a `Check`: the key, what failing it means),
gathers its evidence in the kernel's process through the hooks battery.Verifier calls on each case's `CaseCalls`
(each optional), and decides it in the judge from the case's `Verdict`. Evidence crosses the pipe in the case's
`CaseData` (verify/handoff.py): plain data under `evidence[key]`, or the tensors every case carries (`first`,
`second`, `reference`, `before`, `after` ...). No verdict is ever given in the kernel's process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from ...events import CaseResult
from ...project.config import Tolerance, VerifyConfig
from ...project.contract import Case
from ..compare import Comparison, compare
from ..guards import Guards
from ..handoff import CaseData
from ..tensors import Outputs
from ..torchops import TorchOpRecorder


@dataclass(frozen=True)
class Check:
    """One key of a case's JSON `checks` (and of JUnit's `check.<key>`)."""

    key: str
    fails_when: str  # its one-line doc (docs/VERIFIED.md's table says it at length)
    gathered: str = ""  # code outside its unit that collects its evidence ("compat.compat_runs"), if any
    finding: bool = False  # a compatibility finding: fails the case only where [verify] <key> = "require"


@dataclass
class CaseCalls:
    """One case's calls of kernel_fn in the kernel's process, as the units see them (battery.Verifier): the first
    (its allocations NaN-filled), the second (sentinel-filled), and each forced autotuner config's."""

    battery: Any  # the battery.Verifier running them: its km, config, interpret, emit, anchors, plugin_checks
    case: Case
    data: CaseData  # what the judge gets: a unit's evidence goes here
    inputs: list[Any]  # what kernel_fn is called on
    originals: list[Any] = field(default_factory=list)  # the inputs' values before any call
    reference_aliases: set[int] = field(default_factory=set)  # outputs reference_fn returns as views of its inputs
    guards: Guards | None = None  # margins around the inputs and every allocation of a call (out_of_bounds.py)
    recorder: TorchOpRecorder | None = None  # follows the torch ops of the second call (torch_ops.py)

    def call(self, args: list[Any], label: str) -> Any:
        """kernel_fn(*args) once more, its allocations NaN-filled, as the battery calls it (what it returns)."""
        return self.battery._call_kernel(args, "nan", self.case, label)


@dataclass
class Verdict:
    """One case in the judge: what the kernel's process handed over (`data`), the result being given (`result`:
    a unit writes result.checks[key] and its messages, any of which fails the case) and the project's config."""

    config: VerifyConfig
    data: CaseData
    result: CaseResult
    memory: dict[str, Any]  # the judge's, kept across the cases of its run (a unit's under its key)
    weak_inputs: bool = True  # Judge.judge's: the whole reference is here, to be digested
    if_failed: list[str] = field(default_factory=list)  # notes said only when the case fails

    def compare(self, out: torch.Tensor, expected: torch.Tensor, own: tuple[Any, Any], tol: Tolerance,
                unwritten: torch.Tensor | None = None) -> Comparison:
        """Every comparison the judge makes goes through here: one error model (verify/error_model.py). `own`:
        (native, rounded), the results that measure the dtype's own error (own_error_of)."""
        native, rounded = own
        return compare(out, expected, tol, unwritten, native, self.config.error_factor, rounded)


class Unit:
    """A check, or the checks one piece of evidence decides together. Every hook is optional."""

    checks: ClassVar[tuple[Check, ...]] = ()

    # -- in the kernel's process -------------------------------------------------------------------------------

    def prepare(self, calls: CaseCalls) -> None:
        """Before kernel_fn's first call on the case (calls.inputs may be replaced)."""

    def called(self, calls: CaseCalls, call: str, outputs: Outputs | None) -> None:
        """Right after a call: "first", "second" or "config" (a forced config: calls.data is its own), with its
        outputs as returned (None: a forced config's call raised). A value-stress case has a first call only."""

    def finish(self, calls: CaseCalls) -> None:
        """After the case's first and second calls, before it goes to the judge (kernel_fn may be called again)."""

    def close(self, calls: CaseCalls) -> None:
        """The case is done, however it ended."""

    # -- in the judge ------------------------------------------------------------------------------------------

    def decide(self, verdict: Verdict) -> None:
        """Write result.checks[key] ("passed", "failed", "warning" or "skipped: why"), with a message per failure."""


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def own_error_of(holder: Any, j: int) -> tuple[Any, Any]:
    """(native, rounded) of reference output j of a CaseData or an ExtraRun: reference_fn on the inputs' own dtype
    and in float64 on them rounded once more (None where it has none)."""
    return (holder.native[j] if j < len(holder.native) else None,
            holder.rounded[j] if j < len(holder.rounded) else None)


def no_tolerance(dtype: str) -> str:
    """Why an output of `dtype` cannot be judged: no tolerance for it (project/config.DEFAULT_TOLERANCES)."""
    return (f"no tolerance for {dtype} outputs: the workbench has no default for {dtype}; give one in "
            f"workbench.toml ([tolerance.{dtype}] rtol, atol, rel_norm)")
