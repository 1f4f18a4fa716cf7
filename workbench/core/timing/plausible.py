"""Whether a measured kernel time may be posted: the rules, as pure functions (no torch, no GPU).

A time is a claim about work done. Two things make it a claim kernel.py can fake, and each withholds the
kernel's time (BenchResult.withheld says why, its notes say it in full):

- launches: the timed calls launched fewer Triton kernels per call than a checked call on inputs it had
  not seen (a launcher that hands back what it computed before, when called again on the same tensors,
  times nothing). bench.py counts through verify/launches.LaunchCounter; rotation.py rotates several
  copies of the inputs through the timed calls, so a cache of the last call misses every time;
- escapes: the timed calls launched on a stream they do not fork from and join back to the timed one, from
  another thread, or after returning; started threads; or set L2 aside for persisting accesses, which the
  flush before every call does not evict (escapes.TimedCalls watches; `escape_refusals` says why);
- plausibility: a bandwidth above this GPU's measured copy ceiling, or FLOP/s above its matmul rate, by
  more than PLAUSIBLE_MARGIN. The ceilings are the best of several copies and a bf16 matmul, timed as
  kernels are (device.py), and the timer flushes the L2 before every call: a figure past them means the
  bytes or FLOPs counted are more than one call did, or the calls did not do the work they claim.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..text import fmt_bandwidth, fmt_flops
from .stats import BYTES_FROM_KERNEL, BYTES_LOWER_BOUND, FLOPS_FROM_KERNEL

# Above the ceiling by this much: the copy ceiling is the best of several copies' medians, and a kernel
# that mostly reads (a reduction) can beat a copy's even mix of reads and writes by several percent on HBM;
# a quarter above it is past what the memory itself can deliver (an H100's HBM3 peak is ~1.15x its copy).
PLAUSIBLE_MARGIN = 0.25
# Inputs of 8 bits or fewer per element: tensor cores multiply fp8/int8 at twice the bf16 rate, 4-bit
# formats (often packed two to a byte) at four times; the FLOP/s ceiling is scaled by this for them.
NARROW_INPUT_FLOPS_FACTOR = 4.0

ROTATION_MOST = 4  # input sets the timed calls go through in turn: the original and up to 3 copies
ROTATION_SHARE = 0.25  # ... the copies taking at most this share of the free device memory

NOT_POSTED = "the kernel's time is not posted"


def withholds(note: str) -> bool:
    """Whether a note of this module's withholds the time."""
    return NOT_POSTED in note


def headline(note: str) -> str:
    """A withholding note's first clause, for BenchResult.withheld: 'implausible: 31.0 TB/s against a 3.0 TB/s
    ceiling', 'timed calls launched 0 Triton kernels per call; the checked call launched 1'."""
    return note.split(" (")[0].split(f": {NOT_POSTED}")[0]


def affordable_sets(input_bytes: int, free_bytes: int | None, most: int = ROTATION_MOST,
                    share: float = ROTATION_SHARE) -> int:
    """How many input sets the timed calls rotate through (1: the inputs alone, no copy).

    The original and as many copies as fit in `share` of `free_bytes`, at most `most` sets in all.
    No tensor in the inputs (`input_bytes` 0), or free memory unknown: 1."""
    if input_bytes <= 0 or not free_bytes or free_bytes <= 0:
        return 1
    return max(1, min(most, 1 + int(share * free_bytes) // input_bytes))


def rotation_note(sets: int, input_bytes: int, free_bytes: int | None, why_not: str = "") -> str:
    """What the notes say about the rotation ("" when there is nothing to say: several sets rotated)."""
    if why_not:
        return f"inputs not rotated ({why_not}): the timed calls reuse one input set"
    if sets > 1 or input_bytes <= 0:
        return ""
    free = f"{free_bytes / (1 << 30):.1f} GiB free" if free_bytes else "free memory unknown"
    return (f"inputs not rotated: a copy of them ({input_bytes / (1 << 30):.2f} GiB) is more than "
            f"{ROTATION_SHARE:.0%} of the device memory free ({free}); the timed calls reuse one input set")


def format_count(value: float) -> str:
    """1, 0, 0.5, 0.02: a whole number as one."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2g}"


def launches_per_call(launched: int | None, calls: int) -> float | None:
    if launched is None or calls <= 0 or launched < 0:
        return None
    return launched / calls


def launch_refusal(launched: int | None, calls: int, checked: int | None) -> str:
    """Why the time is not posted ("" to post it): the timed calls launched fewer Triton kernels per call
    than a checked call did. `launched`: launches over all `calls` timed calls (capture included: a
    CUDA graph's launches are counted when captured, its replays call nothing); `checked`: one call's.
    Nothing counted (None), or a checked call that launched none (a kernel_fn with no Triton kernel, or a
    Triton whose launches cannot be counted): nothing to compare, the time is posted."""
    per_call = launches_per_call(launched, calls)
    if per_call is None or not checked or per_call >= checked:
        return ""
    return (f"timed calls launched {format_count(per_call)} Triton kernel{'' if per_call == 1 else 's'} per call; "
            f"the checked call launched {checked}: {NOT_POSTED} (kernel_fn called again on the same tensors "
            f"did less than a call on new ones: a result kept from an earlier call?)")


def flops_ceiling_factor(element_bits: Iterable[int]) -> float:
    """How far past the bf16 matmul rate a kernel on inputs of these element widths (bits) may go."""
    return NARROW_INPUT_FLOPS_FACTOR if any(0 < bits <= 8 for bits in element_bits) else 1.0


def implausible_rates(gbps: float | None, copy_gbps: float | None, bytes_source: str,
                      tflops: float | None, matmul_tflops: float | None, flops_source: str = FLOPS_FROM_KERNEL,
                      flops_factor: float = 1.0, margin: float = PLAUSIBLE_MARGIN) -> list[str]:
    """Each rate above its ceiling by more than `margin`, as a note that withholds the time ([]: plausible). The
    note names where the bytes or FLOPs came from: a claim in kernel.py may be what is wrong. On the bytes' lower
    bound too: a kernel that reads only part of an input (a table lookup) goes past it, and declares what it
    moves with bytes_moved(); one that does not is held to the bound, which every kernel reading its inputs
    moves at least."""
    found = []
    if gbps is not None and copy_gbps and gbps > copy_gbps * (1 + margin):
        rate = f"{fmt_bandwidth(gbps)} against a {fmt_bandwidth(copy_gbps)} ceiling"
        if bytes_source == BYTES_LOWER_BOUND:
            found.append(f"implausible: {rate} (bytes from the lower bound: inputs read once + outputs written "
                         f"once), more than {margin:.0%} above the fastest copy this GPU measured: a kernel that "
                         "reads every input moves at least that much, so the timed calls did less than the work, or "
                         "it ran where the timing does not look (another stream or thread), or data stayed in the L2 "
                         "flushed before every call; a kernel that reads only part of an input (a lookup into a "
                         f"table) says how much it moves with bytes_moved() in kernel.py; {NOT_POSTED}")
        else:
            source = BYTES_FROM_KERNEL if bytes_source == BYTES_FROM_KERNEL else (bytes_source or "an unnamed source")
            found.append(f"implausible: {rate} (bytes from {source}), more than {margin:.0%} above the fastest copy "
                         "this GPU measured: bytes_moved() in kernel.py may count more than one call moves; if it "
                         "does not, the timed calls did less than the work, or data stayed in the L2 that is "
                         f"flushed before every call; {NOT_POSTED}")
    ceiling = matmul_tflops * flops_factor if matmul_tflops else None
    if tflops is not None and ceiling and tflops > ceiling * (1 + margin):
        scaled = f", {flops_factor:g}x the bf16 matmul rate for inputs of 8 bits or fewer" if flops_factor != 1 \
            else ", the bf16 matmul rate"
        found.append(f"implausible: {fmt_flops(tflops)} against a {fmt_flops(ceiling)} ceiling (FLOPs from "
                     f"{flops_source or 'an unnamed source'}{scaled}), more than {margin:.0%} above it: flops() "
                     f"may count more than one call computes; if it does not, the timed calls did less than the "
                     f"work; {NOT_POSTED}")
    return found


def _launches(n: int) -> str:
    return f"{n} launch{'' if n == 1 else 'es'}"


def escape_refusals(seen: Any) -> list[str]:
    """Why the time is not posted, one note for each way the timed calls' work escaped the timer's events
    ([]: none did). `seen`: what escapes.TimedCalls saw (escapes.Seen)."""
    found = []
    if seen.unjoined:
        found.append(f"kernel_fn launched on a stream it does not join back: {NOT_POSTED} (in a probe call, "
                     f"{_launches(seen.unjoined)} on another stream ended after the call had returned on the timed "
                     "stream, so the timer's events miss that work; make the caller's stream wait for it before "
                     "returning: torch.cuda.current_stream().wait_stream(side))")
    if seen.unforked:
        found.append(f"kernel_fn launched on a stream that does not wait for the caller's: {NOT_POSTED} (in a probe "
                     f"call, {_launches(seen.unforked)} on another stream started before the call did on the timed "
                     "stream, so its work can run before the timed region, behind the L2 flush; make the side stream "
                     "wait first: side.wait_stream(torch.cuda.current_stream()))")
    if seen.off_stream and not (seen.unjoined or seen.unforked) and not seen.probe_off_stream:
        why = f"the probe could not look: {seen.probe_note}" if seen.probe_note else \
            "the probe call launched nothing there"
        found.append(f"kernel_fn launched on another stream in its timed calls ({_launches(seen.off_stream)}), and "
                     f"whether it joins that stream back is unknown ({why}): {NOT_POSTED}")
    if seen.deferred:
        where = f"from another thread ({seen.other_thread} of them)" if seen.other_thread else "from the timing thread"
        found.append(f"Triton kernels launched while no call of kernel_fn was in progress: {NOT_POSTED} "
                     f"({_launches(seen.deferred)} {where}: work deferred past the call's return runs outside the "
                     "timer's events)")
    if seen.threads_started:
        names = ", ".join(seen.threads_started[:3]) + (" ..." if len(seen.threads_started) > 3 else "")
        found.append(f"kernel_fn started threads that outlive its calls: {NOT_POSTED} ({names}; their work runs "
                     "outside the timer's events)")
    if seen.set_aside_bytes:
        found.append(f"kernel_fn set aside L2 for persisting accesses: {NOT_POSTED} "
                     f"({seen.set_aside_bytes / (1 << 20):.1f} MiB after its timed calls; lines marked persisting "
                     "survive the L2 flush before every call, so what they hold is read from the L2, not memory)")
    return found
