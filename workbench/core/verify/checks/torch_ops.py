"""Outputs torch computed, with no data a Triton kernel wrote in them: the torch ops of each case's second call,
followed through a torch function mode (verify/torchops.py; the first call may include the autotuner's timing
runs, each of whose launches would be compared byte for byte around it)."""

from __future__ import annotations

from ...project.config import VerifyConfig
from ..tensors import Outputs
from ..torchops import AUTOGRAD, TorchOpRecorder, base_name
from .unit import CaseCalls, Check, Unit, Verdict


class TorchOps(Unit):
    checks = (Check("torch_ops", "an output holds no data a Triton kernel wrote and torch functions computed it",
                    "torchops.TorchOpRecorder"),)

    def prepare(self, calls: CaseCalls) -> None:
        config = calls.battery.config
        if calls.case.stress:  # values are what a stress case is for: one call, its torch ops not followed
            calls.data.torch_ops_unknown = "a value-stress case: followed on the case whose values it varies"
        elif config.allow_torch_ops is not True and config.require_triton:  # else every op is allowed
            calls.recorder = TorchOpRecorder()

    def called(self, calls: CaseCalls, call: str, outputs: Outputs | None) -> None:
        recorder = calls.recorder
        if call != "second" or recorder is None or outputs is None:
            return
        calls.data.torch_ops = recorder.computed_by_torch(outputs.tensors, outputs.names)
        calls.data.torch_ops_unknown = recorder.unknown
        calls.recorder = None  # the storages it kept alive

    def decide(self, verdict: Verdict) -> None:
        result, data, config = verdict.result, verdict.data, verdict.config
        if data.config or data.phase:
            return  # followed in the case's second call only
        if data.torch_ops_unknown:
            result.checks["torch_ops"] = f"skipped: {data.torch_ops_unknown}"
            return
        if data.launches == 0:
            return  # "no Triton kernel launched" says it
        if config.allow_torch_ops is True or not config.require_triton:
            result.checks["torch_ops"] = "skipped: " + ("allow_torch_ops = true" if config.allow_torch_ops is True
                                                        else "require_triton = false")
            return
        found = []
        for line in data.torch_ops:
            output, _, ops = line.partition(": ")
            refused = [op for op in ops.split(", ") if op and not allows_torch_op(config, op)]
            if refused:
                found.append((output, refused))
        if not found:
            result.checks["torch_ops"] = "passed" if data.launches is not None else "skipped: not followed"
            return
        gradients = [output for output, refused in found if refused == [AUTOGRAD]]
        found = [(output, refused) for output, refused in found if refused != [AUTOGRAD]]
        if gradients:
            result.messages.append(
                f"{', '.join(gradients)}: torch autograd computed {'it' if len(gradients) == 1 else 'them'}: the "
                "backward launched no Triton kernel and read nothing a Triton kernel wrote in the forward (give the "
                "torch.autograd.Function a backward that launches Triton kernels, or save for it the gradient a "
                f'forward kernel writes); if torch is meant to, [verify] allow_torch_ops = ["{AUTOGRAD}"]')
        if found:
            ops = sorted({op for _, refused in found for op in refused})
            where = "; ".join(f"{output} with {', '.join(refused)}" for output, refused in found)
            allow = ", ".join(f'"{op}"' for op in ops)
            result.messages.append(f"kernel_fn computed with torch ops: {where} (no Triton kernel wrote any of it); "
                                   f"if torch is meant to, [verify] allow_torch_ops = [{allow}]")
        result.checks["torch_ops"] = "failed"


UNIT = TorchOps()


def allows_torch_op(config: VerifyConfig, name: str) -> bool:
    """torch.add is allowed by allow_torch_ops = true, ["torch.add"], ["add"], ["add_"] or ["aten.add"]."""
    if isinstance(config.allow_torch_ops, bool):
        return config.allow_torch_ops
    return any(allowed == name or base_name(allowed) == base_name(name) for allowed in config.allow_torch_ops)
