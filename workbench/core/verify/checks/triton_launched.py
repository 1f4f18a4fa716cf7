"""Whether kernel_fn launched a Triton kernel at all: the launches of one call, counted where Triton reports them
(launches.LaunchCounter) by the battery for every call it makes (CaseData.launches, shown in the report too)."""

from __future__ import annotations

from .unit import Check, Unit, Verdict

NO_TRITON = ("no Triton kernel launched: kernel_fn ran no @triton.jit kernel (a torch computation, or "
             "reference_fn?); set [verify] require_triton = false if that is intended")


class TritonLaunched(Unit):
    checks = (Check("triton_launched", "kernel_fn launched no Triton kernel", "launches.LaunchCounter"),)

    def decide(self, verdict: Verdict) -> None:
        result, data = verdict.result, verdict.data
        if data.launches is None:
            return
        if data.launches == 0:
            if verdict.config.require_triton:
                result.messages.insert(0, NO_TRITON)
                result.checks["triton_launched"] = "failed"
            else:
                result.notes.append("no Triton kernel launched (require_triton = false)")
                result.checks["triton_launched"] = "skipped: require_triton = false"
        else:
            result.checks["triton_launched"] = "passed"


UNIT = TritonLaunched()
