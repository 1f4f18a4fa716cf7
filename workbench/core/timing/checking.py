"""The benchmark's checks of the kernel's outputs (docs/TIMING.md): a time is posted only if they pass.

Before timing, the judge's verdict on the first call's output (a random sample of it), handed over on a
thread while the kernel is timed (`BenchChecker.check_soon`, `hand_over`). After timing, `recheck`: one more
call on the restored inputs, and the outputs of a random sample of the timed calls (escapes.CallSample), each
compared here; only a failure goes to the judge, and it withdraws the time (`not_posted`).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import torch

from ..events import BenchResult, CaseResult
from ..project.contract import Case
from ..stage import ContextPoisoned, RunAborted
from ..verify.battery import Verifier
from ..verify.handoff import CaseData
from ..verify.judge import judge_outputs
from ..verify.references import Reference, native_of, on_cpu, rounded_of, sampled_case
from ..verify.tensors import Outputs, flatten_outputs, restore_inputs


class BenchChecker(Verifier):
    """The verification battery's comparison, for one call at a time on benchmark-sized inputs.

    The check before timing is a verdict: it goes to the judge, on a random sample of each output
    (with the whole output's shape and NaN count beside it: see verify/handoff.CaseData.sample).
    The recheck after timing compares whole outputs here; only a failure goes to the judge."""

    def call(self, inputs: list[Any], case: Case) -> Outputs:
        return flatten_outputs(self._call_kernel(inputs, "nan", case, ""))

    def check(self, case: Case, out: Outputs, ref: Reference, notes: list[str],
              messages: list[str] | None = None, phase: str = "") -> CaseResult:
        """The judge's verdict on `out` (reported by the judge). `messages`: failures found here first;
        `phase`: "after timing" for the recheck (a second result for the case, never merged with the first)."""
        return self.deliver(sampled_case(case, out, ref, notes, messages, phase))

    def check_soon(self, case: Case, out: Outputs, ref: Reference, notes: list[str]) -> "Future[CaseResult]":
        """`check`, with the judge's work done while this process goes on: the sample is drawn and copied
        to the host here and now (nothing moves on the GPU later), then handed over on a thread."""
        data = sampled_case(case, out, ref, notes)
        data.to_host()
        return hand_over(self.deliver, data)

    def compare_here(self, case: Case, out: Outputs, ref: Reference) -> CaseResult:
        """The whole outputs compared in this process: a recheck, reported only through `check`."""
        try:
            return judge_outputs(self.config, case.index, case.label, out.tensors, out.names, ref.outputs.tensors,
                                 native_of(ref), ref.outputs.names, rounded_of(ref))
        except torch.cuda.OutOfMemoryError:  # float64 comparison temporaries: compare on the host instead
            torch.cuda.empty_cache()
            return judge_outputs(self.config, case.index, case.label, on_cpu(out).tensors, out.names,
                                 on_cpu(ref.outputs).tensors, native_of(ref) and on_cpu(ref.native).tensors,
                                 ref.outputs.names, rounded_of(ref) and on_cpu(ref.rounded).tensors)

    def error(self, case: Case, exc: BaseException, when: str, phase: str = "") -> CaseResult:
        data = self._error_data(CaseData(case_index=case.index, label=case.label, phase=phase), case, exc,
                                time.perf_counter(), when)
        return self.deliver(data)


_equal = torch._C._VariableFunctions.equal  # bound before kernel.py is imported (it may rebind torch.equal)


def identical(outputs: list[Any], others: list[Any]) -> bool:
    """Whether two calls' outputs are the same tensors, element for element (NaN never equals: compared instead)."""
    return len(outputs) == len(others) and all(
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
        and a.device == b.device and _equal(a, b) for a, b in zip(outputs, others))


# The judge's check of a benchmark case runs here while the kernel is timed (one case at a time).
_CHECKS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-check")


def hand_over(deliver: Callable[[CaseData], CaseResult], data: CaseData) -> "Future[CaseResult]":
    """`deliver(data)` on the check thread; the future's result() waits for the verdict (or raises what it raised)."""
    return _CHECKS.submit(deliver, data)


def recheck(checker: BenchChecker, result: BenchResult, case: Case, inputs: list[Any], originals: list[Any] | None,
            ref: Reference, sampled: list[tuple[int, Any]], calls: int) -> None:
    """The output of one more call after the timed calls, and the outputs of a random sample of the timed
    calls (escapes.CallSample), must be right, or the time is not posted. A sampled output identical to the
    call's after them (a deterministic kernel's) is as right as it; any other is compared on its own."""
    if originals is not None:
        restore_inputs(inputs, originals)  # an in-place kernel changed them on every timed call
    samples = result.kernel.samples if result.kernel else 0
    try:
        out = checker.call(inputs, case)
    except (RunAborted, ContextPoisoned):
        raise
    except Exception as exc:  # noqa: BLE001
        failure = checker.error(case, exc, f"after {samples} timed calls", phase="after timing")
    else:
        here = checker.compare_here(case, out, ref)
        if here.status == "passed":
            _check_sampled(checker, result, case, ref, out, sampled, calls)
            return
        failure = checker.check(case, out, ref, [], [f"after {samples} timed calls: {m}" for m in here.messages],
                                phase="after timing")
        del out
    not_posted(result, failure, "its output was wrong after the timed calls")


def _check_sampled(checker: BenchChecker, result: BenchResult, case: Case, ref: Reference, after: Outputs,
                   sampled: list[tuple[int, Any]], calls: int) -> None:
    result.sampled_calls_checked, result.recheck = len(sampled), "passed"
    while sampled:
        number, raw = sampled.pop(0)
        out = flatten_outputs(raw)
        del raw
        if identical(out.tensors, after.tensors):
            continue
        here = checker.compare_here(case, out, ref)
        if here.status != "passed":
            said = f"timed call {number:,} of {calls:,} (one of {result.sampled_calls_checked} chosen at random)"
            failure = checker.check(case, out, ref, [], [f"{said}: {m}" for m in here.messages],
                                    phase="after timing")
            del out, sampled[:]
            not_posted(result, failure, "its output was wrong on a timed call")
            return


def not_posted(result: BenchResult, failure: CaseResult, why: str) -> None:
    """The recheck failed: the kernel's time is withdrawn, and the result says why."""
    result.recheck = "failed: " + (failure.messages[0] if failure.messages else failure.status)
    result.notes.append(f"the kernel's time is not posted: {why}")
    result.kernel = None
