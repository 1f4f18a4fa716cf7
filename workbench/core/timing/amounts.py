"""What one call of a benchmark case moves and computes, and the rates from them (docs/TIMING.md).

Bytes and FLOPs come from kernel.py's `bytes_moved`/`flops` where it has them (called in a training kernel's
mode where they take one), else the bytes' lower bound from the inputs and outputs; the rates, the fractions of
this GPU's measured ceilings and the speed-ups are derived from them and the posted times.
"""

from __future__ import annotations

from typing import Any, Callable

from ..events import BenchResult, DeviceFacts
from ..project.contract import KernelModule, first_line
from ..verify.tensors import Outputs
from .modes import takes_mode
from .stats import (
    BYTES_FROM_KERNEL,
    BYTES_LOWER_BOUND,
    FLOPS_FROM_KERNEL,
    fraction,
    lower_bound_bytes,
    rate_per_s,
    speedup,
)


def count_amounts(result: BenchResult, km: KernelModule, inputs: list[Any], outputs: Outputs) -> None:
    """Bytes and FLOPs of one call: from kernel.py when it says, else the bytes' lower bound."""
    result.bytes_moved, result.bytes_source = None, ""
    bytes_moved, flops = counted(result, km, "bytes_moved"), counted(result, km, "flops")
    if bytes_moved is not None:
        try:
            result.bytes_moved, result.bytes_source = int(bytes_moved(*inputs)), BYTES_FROM_KERNEL
        except Exception as exc:  # noqa: BLE001
            result.notes.append(f"bytes_moved() raised {type(exc).__name__}: {first_line(exc)}; "
                                "using the lower bound")
    if result.bytes_moved is None:
        result.bytes_moved = lower_bound_bytes(inputs, outputs.tensors)
        result.bytes_source = BYTES_LOWER_BOUND
    if flops is not None:
        try:
            result.flops, result.flops_source = int(flops(*inputs)), FLOPS_FROM_KERNEL
        except Exception as exc:  # noqa: BLE001
            result.notes.append(f"flops() raised {type(exc).__name__}: {first_line(exc)}")


def counted(result: BenchResult, km: KernelModule, name: str) -> Callable[..., Any] | None:
    """kernel.py's bytes_moved or flops for this case's mode: called with mode=... where it takes one; a
    training kernel's without one counts only its forward, so it is not used for bwd or full (noted)."""
    fn = getattr(km, name)
    if fn is None or not result.mode:
        return fn
    if takes_mode(fn):
        return lambda *inputs: fn(*inputs, mode=result.mode)
    if result.mode == "fwd":
        return fn
    result.notes.append(f"{name}() takes no mode argument, so it counts the forward only: not used for mode "
                        f"{result.mode} (give it `mode=\"full\"`: \"fwd\", \"bwd\" or \"full\")")
    return None


def derive_rates(result: BenchResult, facts: DeviceFacts) -> None:
    """Bandwidth, FLOP rate, their fractions of this GPU's ceilings and the speed-ups, from the posted times."""
    bytes_per_s = rate_per_s(result.bytes_moved, result.kernel)
    flops_per_s = rate_per_s(result.flops, result.kernel)
    result.gbps = bytes_per_s / 1e9 if bytes_per_s is not None else None
    result.tflops = flops_per_s / 1e12 if flops_per_s is not None else None
    result.bandwidth_fraction = fraction(result.gbps, facts.copy_gbps)
    result.compute_fraction = fraction(result.tflops, facts.matmul_tflops)
    result.speedup_vs_reference = speedup(result.reference, result.kernel)
    result.speedup_vs_compiled = speedup(result.compiled, result.kernel)
