"""Inputs that prove nothing: every input constant, a reference of all zeros, or one identical to another case's.
A warning beside the verdict, never a failure; decided from the inputs and the reference every case carries."""

from __future__ import annotations

import hashlib

import torch

from ..compare import tensors_equal_bitwise
from .unit import Check, Unit, Verdict

WEAK_MIN_ELEMENTS = 8  # fewer elements than this cannot be called "all zeros" by design rather than chance


class WeakInputs(Unit):
    checks = (Check("inputs", "a warning: every input is constant, the reference is all zeros, or it equals another "
                    "case's"),)

    def decide(self, verdict: Verdict) -> None:
        data = verdict.data
        if not verdict.weak_inputs or data.config or data.generated or data.sampled_from:
            return  # a recheck, a forced config, a generated or a sampled case: its own case says it
        seen = verdict.memory.setdefault("inputs", {})  # digest of a reference -> label of the first case
        warnings = []
        tensors = [t for t in data.before if t is not None and t.numel() >= WEAK_MIN_ELEMENTS]
        if tensors and all(is_constant(t) for t in tensors):
            warnings.append("every input is constant (all elements equal): such inputs prove little; "
                            "use random values in get_inputs")
        big = [t for t in data.reference if t.numel() >= WEAK_MIN_ELEMENTS]
        if big and all(not bool(torch.any(t != 0)) for t in big):
            warnings.append("the reference output is all zeros: a kernel that writes nothing but zeros passes")
        if data.reference and not warnings:
            digest = reference_digest(data.reference)
            first = seen.setdefault(digest, data.label)
            if first != data.label:
                warnings.append(f"the reference output is identical to case {first}'s: the cases test the same thing")
        if warnings:
            verdict.result.warnings += warnings
            verdict.result.checks["inputs"] = "warning"
        else:
            verdict.result.checks["inputs"] = "passed"


UNIT = WeakInputs()


def is_constant(t: torch.Tensor) -> bool:
    flat = t.reshape(-1)
    return bool(tensors_equal_bitwise(flat, flat[:1].expand_as(flat)).all())


def reference_digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha1()
    for t in tensors:
        c = t.detach().contiguous().cpu()
        h.update(f"{c.dtype}{tuple(c.shape)}".encode())
        if c.numel():
            h.update(c.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
