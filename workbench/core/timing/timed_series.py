"""The kernel's timed series (docs/TIMING.md): the calls `timers.measure` times, and what is counted of them.

The calls go through the inputs and, where memory allows, copies of them in turn (rotation.py: a result kept
by input address or identity then misses), each copy called once first with its Triton launches counted (what
one call launches, for the timed calls to match: plausible.launch_refusal); they are watched for work that
escapes them (escapes.TimedCalls: another stream, another thread, after returning), and a random sample of
their outputs is kept for the recheck (checking.recheck).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..events import BenchResult
from ..project.config import BenchConfig
from ..stage import Phases
from ..verify.launches import LaunchCounter
from ..verify.tensors import restore_inputs, synchronize
from .compilewatch import CompileWatch
from .escapes import CallSample, Seen, TimedCalls
from .plausible import affordable_sets, rotation_note
from .rotation import Rotation, copy_inputs, input_storage_bytes, probe_launches, why_not_copied
from .timers import L2Flusher, Measurement, measure


@dataclass
class TimedSeries:
    """The kernel's timed calls, done."""

    measured: Measurement  # timers.measure's: the timing and its notes
    launched: int  # Triton launches made during the timed calls
    calls: int  # timed calls that returned
    seen: Seen  # what the watch of the calls saw (work that escaped them)


def input_sets(result: BenchResult, kernel_fn: Callable[..., Any], inputs: list[Any], originals: list[Any] | None,
               first_launches: int, free: int | None, memory_factor: int = 1) -> Rotation:
    """The timed calls' input sets: the inputs and, where memory allows, copies of them (a result kept by
    input address or identity then misses), each copy called once with its launches counted
    (result.checked_launches: what one call launches, for the timed calls to match). `memory_factor`: how many
    times its inputs' size an input set takes while timed (modes.TimedMode.memory_factor)."""
    if originals is not None:
        restore_inputs(inputs, originals)  # every set starts from get_inputs' values
    nbytes = input_storage_bytes(inputs)
    why_not = why_not_copied(inputs)
    sets = 1 if why_not else affordable_sets(nbytes * memory_factor, free)
    copies: list[list[Any]] = []
    if sets > 1:
        try:
            copies = [copy_inputs(inputs) for _ in range(sets - 1)]
        except torch.cuda.OutOfMemoryError:
            copies = []
            torch.cuda.empty_cache()
            why_not = "copying them ran out of device memory"
    note = rotation_note(len(copies) + 1, nbytes, free, why_not)
    if note:
        result.notes.append(note)
    probed = probe_launches(kernel_fn, copies) if copies else []
    synchronize()
    # A call on a copy it has never seen launches what a call launches; without a copy (or where none
    # counted anything), the first call's launches less those of its autotuning.
    result.checked_launches = max(probed, default=0) or first_launches
    result.input_sets = len(copies) + 1
    return Rotation(kernel_fn, [inputs] + copies)


def time_series(rotation: Rotation, sample: CallSample | None, config: BenchConfig, flusher: L2Flusher,
                watch: CompileWatch, footprint_bytes: int | None, phases: Phases) -> TimedSeries:
    """The kernel timed over `rotation`, its calls watched (a probe of its streams first) and their launches
    counted; `sample`: where a random sample of their outputs is kept."""
    timed_calls = TimedCalls(rotation, rotation.uncounted, sample)
    timed_calls.probe()
    phases.done("input copies, a counted call on each, a probe of its streams")
    launched_before = LaunchCounter.count
    with timed_calls.watching():
        measured = measure(timed_calls, config, flusher, watch, "kernel", footprint_bytes)
    launched = LaunchCounter.count - launched_before
    return TimedSeries(measured, launched, rotation.calls, timed_calls.seen)
