"""Theoretical occupancy of a compiled kernel, and what changed in the compiler's output between runs.

Occupancy is what the CUDA occupancy calculator computes: how many blocks of the kernel one SM can hold
at once, limited by warps, registers, shared memory and the SM's block slots, as a fraction of the SM's
warp slots. The SM's limits come from a table by compute capability (the CUDA programming guide's
"Compute Capabilities" table); on a GPU the measured properties torch reports override the table.

Pure Python, no torch or triton: the parent process (reports, the app) uses it as well as the worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable

from ..text import MISSING


@dataclass(frozen=True)
class SmLimits:
    """What one SM offers a kernel (a compute capability's row of the programming guide's table)."""

    max_warps: int  # resident warps per SM
    max_blocks: int  # resident blocks per SM
    registers: int  # 32-bit registers per SM
    shared_bytes: int  # shared memory per SM usable by blocks
    reserved_shared_bytes: int = 1024  # the system's share of each block's shared memory (sm_80 and later)
    register_unit: int = 256  # registers are allocated per warp, in units of this many
    max_registers_per_thread: int = 255
    shared_unit: int = 128  # shared memory is allocated per block in units of this many bytes


# Compute capability (major, minor) -> limits. Values from the CUDA C++ Programming Guide, table
# "Technical Specifications per Compute Capability" (12.x).
SM_LIMITS: dict[tuple[int, int], SmLimits] = {
    (7, 0): SmLimits(max_warps=64, max_blocks=32, registers=65536, shared_bytes=96 * 1024, reserved_shared_bytes=0),
    (7, 5): SmLimits(max_warps=32, max_blocks=16, registers=65536, shared_bytes=64 * 1024, reserved_shared_bytes=0),
    (8, 0): SmLimits(max_warps=64, max_blocks=32, registers=65536, shared_bytes=164 * 1024),
    (8, 6): SmLimits(max_warps=48, max_blocks=16, registers=65536, shared_bytes=100 * 1024),
    (8, 7): SmLimits(max_warps=48, max_blocks=16, registers=65536, shared_bytes=164 * 1024),
    (8, 9): SmLimits(max_warps=48, max_blocks=24, registers=65536, shared_bytes=100 * 1024),
    (9, 0): SmLimits(max_warps=64, max_blocks=32, registers=65536, shared_bytes=228 * 1024),
    (10, 0): SmLimits(max_warps=64, max_blocks=32, registers=65536, shared_bytes=228 * 1024),
    (10, 3): SmLimits(max_warps=64, max_blocks=32, registers=65536, shared_bytes=228 * 1024),
    (12, 0): SmLimits(max_warps=48, max_blocks=32, registers=65536, shared_bytes=100 * 1024),
}


def limits_for(arch: int, props: Any = None) -> SmLimits | None:
    """The SM limits of compute capability `arch` (90 = sm_90), with a GPU's measured properties (torch's
    `get_device_properties`) where it reports them. None for a capability not in the table and no properties."""
    major, minor = divmod(int(arch), 10)
    limits = SM_LIMITS.get((major, minor)) or SM_LIMITS.get((major, 0))
    if props is None:
        return limits
    threads = getattr(props, "max_threads_per_multi_processor", None)
    registers = getattr(props, "regs_per_multiprocessor", None)
    shared = getattr(props, "shared_memory_per_multiprocessor", None)
    if limits is None:
        if not (threads and registers and shared):
            return None
        limits = SmLimits(max_warps=threads // 32, max_blocks=32, registers=registers, shared_bytes=shared)
    changes = {k: v for k, v in (("max_warps", threads and threads // 32), ("registers", registers),
                                 ("shared_bytes", shared)) if v}
    return replace(limits, **changes)


@dataclass(frozen=True)
class Occupancy:
    fraction: float  # resident warps over the SM's warp slots
    blocks_per_sm: int
    limiter: str  # "warps", "registers", "shared memory", "blocks"; "does not fit" when no block fits


def occupancy(limits: SmLimits, warps_per_block: int, registers_per_thread: int | None,
              shared_bytes_per_block: int) -> Occupancy:
    """How many blocks of this kernel one SM holds, and what stops it holding more.

    The rules of the CUDA occupancy calculator: registers are allocated per warp, rounded up to the
    allocation unit, from four sub-partitions of the register file each serving a quarter of the warps;
    shared memory per block is rounded up to its unit and includes the system's reserved share."""
    warps = max(1, int(warps_per_block))
    by = {"warps": limits.max_warps // warps, "blocks": limits.max_blocks}
    if registers_per_thread:
        per_warp = _round_up(registers_per_thread * 32, limits.register_unit)
        if registers_per_thread > limits.max_registers_per_thread:
            by["registers"] = 0
        else:
            warps_by_registers = (limits.registers // 4 // per_warp) * 4
            by["registers"] = warps_by_registers // warps
    per_block_shared = _round_up(int(shared_bytes_per_block) + limits.reserved_shared_bytes, limits.shared_unit)
    if shared_bytes_per_block:
        by["shared memory"] = limits.shared_bytes // per_block_shared if per_block_shared else by["blocks"]
    # Every resource that allows no more blocks is named (the block slots only when nothing else binds).
    order = ["registers", "shared memory", "warps", "blocks"]
    blocks = min(by.values())
    tied = [name for name in order if by.get(name) == blocks]
    limiter = ", ".join(name for name in tied if name != "blocks") or "blocks"
    if blocks <= 0:
        return Occupancy(fraction=0.0, blocks_per_sm=0, limiter="does not fit")
    fraction = min(1.0, blocks * warps / limits.max_warps)
    return Occupancy(fraction=fraction, blocks_per_sm=blocks, limiter=limiter if fraction < 1.0 else "")


def _round_up(value: int, unit: int) -> int:
    return int(math.ceil(value / unit) * unit) if unit else value


# -- what changed between two runs' compiled kernels --------------------------------------------------------


def _identity(facts: Any) -> tuple[str, str, str]:
    return (facts.kernel, facts.config, facts.signature)


def facts_changes(before: Iterable[Any], after: Iterable[Any]) -> list[str]:
    """One line per compiled kernel whose registers, spills, shared memory or occupancy changed since the
    earlier run, e.g. "_rmsnorm (BLOCK=1024, num_warps=4): +24 B spills, occupancy 50% -> 25% (registers)".
    Kernels are matched by function, config and specialisation; those in one run only are not listed."""
    earlier = {_identity(f): f for f in before}
    lines = []
    for new in after:
        old = earlier.get(_identity(new))
        if old is None:
            continue
        parts = []
        for field_name, unit, label in (("registers", "", "registers"), ("spill_bytes", " B", "spills"),
                                        ("static_shared", " B", "static shared"),
                                        ("dynamic_shared", " B", "shared memory")):
            a, b = getattr(old, field_name), getattr(new, field_name)
            if a is not None and b is not None and a != b:
                parts.append(f"{b - a:+d}{unit} {label}")
        if old.occupancy is not None and new.occupancy is not None and round(old.occupancy, 3) != round(new.occupancy, 3):
            why = f" ({new.limiter})" if new.limiter else ""
            parts.append(f"occupancy {old.occupancy:.0%} -> {new.occupancy:.0%}{why}")
        if parts:
            lines.append(f"{new.kernel} ({new.config}): " + ", ".join(parts))
    return list(dict.fromkeys(lines))


def fmt_occupancy(facts: Any) -> str:
    """"50% (registers)", "100%", "?" (not known)."""
    if facts.occupancy is None:
        return "?"
    return f"{facts.occupancy:.0%}" + (f" ({facts.limiter})" if facts.limiter else "")


def facts_cells(facts: Any) -> tuple[str, str, str, str]:
    """A compiled kernel's registers, spills, shared memory and occupancy as table cells (all unknown: None)."""
    if facts is None:
        return (MISSING,) * 4
    shared = (facts.static_shared or 0) + facts.dynamic_shared
    return (str(facts.registers) if facts.registers is not None else MISSING,
            f"{facts.spill_bytes} B" if facts.spill_bytes is not None else MISSING,
            f"{shared / 1024:.1f} KiB", fmt_occupancy(facts))


def describe_facts(facts: Any) -> str:
    """One compiled kernel's facts in a line: "40 regs, 0 B spills, 16.0 KiB smem, occupancy 50% (registers)"."""
    parts = []
    if facts.registers is not None:
        parts.append(f"{facts.registers} regs")
    if facts.spill_bytes is not None:
        parts.append(f"{facts.spill_bytes} B spills")
    shared = (facts.static_shared or 0) + (facts.dynamic_shared or 0)
    parts.append(f"{shared / 1024:.1f} KiB smem" if shared else "no smem")
    if facts.occupancy is not None:
        parts.append(f"occupancy {fmt_occupancy(facts)}")
    return ", ".join(parts)


def facts_by_config(events: Iterable[Any], case_index: int | None = None) -> dict[tuple[str, str], Any]:
    """(kernel, config) -> its KernelFacts, from CompiledKernels events (of one case, when given). A config
    compiled for several specialisations keeps the one with the most registers (the worst case shows)."""
    found: dict[tuple[str, str], Any] = {}
    for event in events:
        if case_index is not None and event.case_index != case_index:
            continue
        for facts in event.kernels:
            key = (facts.kernel, facts.config)
            held = found.get(key)
            if held is None or (facts.registers or 0) > (held.registers or 0):
                found[key] = facts
    return found


def picked_facts(compiled: Iterable[Any], autotune: Iterable[Any]) -> list[tuple[int | None, Any]]:
    """(case, facts) of what each benchmark case ran: the picked config of an autotuned kernel (AutotuneReport),
    every compiled kernel of one without an autotuner."""
    reports = list(autotune)
    found = []
    for event in compiled:
        picked = {a.kernel: a.picked for a in reports if a.case_index == event.case_index}
        for facts in event.kernels:
            if facts.kernel not in picked or picked[facts.kernel] == facts.config:
                found.append((event.case_index, facts))
    return found
