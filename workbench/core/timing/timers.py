"""Timers that run in the worker (docs/ARCHITECTURE.md, "What a timing means").

- `L2Flusher`: reads (or overwrites) a buffer of at least twice the L2 between calls,
  so every call starts from a cold cache, as it would inside a model.
- `time_with_events`: a CUDA event pair around every call, flush outside the pair;
  warm-up first, for as long as `warmup_ms` of GPU time, so boost clocks settle; a GPU-side
  spin keeps the launches queued ahead of the events when the host is the slower side.
- `time_with_graph`: for calls too short for per-call events (launch gaps are
  comparable to the kernel): a CUDA graph of N × (flush + call) replayed, minus a
  graph of N × flush alone; warmed up only briefly when it follows the call's own per-call series.
- `measure`: the method chosen by the call's length and footprint, with the notes that explain it.

Per-call events end when the call's last store reaches L2, not DRAM: up to an L2's worth of
output is still to be written back, and the next call pays for it. For a call moving a few L2s
of data that is a real share of its time (H100, 64 MiB copied: 22 µs by events, 28 µs with the
write-back), enough to put a kernel "above" the copy ceiling. So calls moving under
WRITEBACK_L2S L2s are timed by graph replay, which counts the write-back, as short calls are.
Such a call is known to need graph replay before it is timed at all (its footprint, and one
flush + call under WRITEBACK_BELOW_MS), so its per-call series is a brief one (`min_samples`):
it is shown beside the graph's figure, never posted, unless graph replay turns out impossible.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..events import Timing
from ..project.config import BenchConfig
from ..project.contract import first_line
from ..text import fmt_ms
from ..verify.compat import host_sync, recover_from_failed_capture
from . import primitives as cuda
from .compilewatch import CompileWatch
from .stats import median_half_width, summarize

MIB = 1 << 20
FALLBACK_FLUSH_BYTES = 256 * MIB  # when the L2 size is unknown: more than any GPU's L2 today
MIN_FLUSH_BYTES = 64 * MIB
ESTIMATE_CALLS = 5
GRAPH_REPLAY_MS = 2.0  # target length of one graph replay: long enough that event resolution is moot
GRAPH_MAX_CALLS = 200
WRITEBACK_L2S = 16  # calls moving fewer bytes than this many L2s are timed with their write-back ...
WRITEBACK_BELOW_MS = 2.0  # ... unless longer than this: a few µs of write-back is then under 0.3%
STABLE_MIN_MS = 100.0  # a series runs at least this much GPU time (the live loop's whole series) before it may stop
CHECK_EVERY_MS = 20.0  # GPU time between two looks at a series that may stop early
REWARM_MS = 20.0  # a graph replayed right after its call's per-call series: the clocks are up already


class L2Flusher:
    """A pass over at least twice the L2 between calls: nothing of the last call stays cached.

    mode "read" (the default) reads the buffer: the lines it leaves in L2 are clean, so the
    timed call starts as under Nsight Compute's cache control, from a cold L2 with nothing to
    write back. mode "write" overwrites it, as triton.testing.do_bench does: the timed call
    then also pays for writing back the flush's own dirty lines (a few µs on an H100/H200).
    """

    def __init__(self, l2_bytes: int | None, mode: str = "read"):
        if mode not in ("read", "write"):
            raise ValueError(f"L2 flush mode {mode!r}: expected 'read' or 'write'")
        wanted = 2 * l2_bytes if l2_bytes else FALLBACK_FLUSH_BYTES
        self.l2_bytes = l2_bytes
        self.nbytes = math.ceil(max(wanted, MIN_FLUSH_BYTES) / MIB) * MIB
        self.mode = mode
        self.buffer = torch.zeros(self.nbytes // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        if self.mode == "read":
            self.buffer.sum(dtype=torch.int32)  # the result is dropped; the reads are the point
        else:
            self.buffer.zero_()

    @property
    def label(self) -> str:
        return f"L2 flushed ({self.nbytes // MIB} MiB {self.mode}) before every call"


def _no_flush() -> None:
    pass


def _clamp(value: float, low: int, high: int) -> int:
    return int(min(max(value, low), max(low, high)))


def estimate_ms(fn: Callable[[], Any], flush: Callable[[], None]) -> float:
    """GPU time of one (flush + call), from a few calls between two events.

    One untimed call first: a first launch may load its module (lazy loading), milliseconds
    that would make a host-bound call look GPU-bound and leave it unpadded.
    """
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    stream = cuda.current_stream()
    flush()
    fn()
    cuda.synchronize()
    cuda.record(start, stream)
    for _ in range(ESTIMATE_CALLS):
        flush()
        fn()
    cuda.record(end, stream)
    cuda.synchronize()
    return max(cuda.elapsed_time(start, end) / ESTIMATE_CALLS, 1e-4)


class SeriesStop:
    """When a timed series may end before `rep_ms` ([bench] median_within_pct): once its median is known to within
    that share (median_half_width), after at least STABLE_MIN_MS of GPU time and min_samples samples. A steady
    kernel's median settles within a tenth of a second; a noisy one runs the whole rep_ms as before.

    The samples are enqueued a chunk (CHECK_EVERY_MS) at a time and each chunk is read while the next one runs,
    so the GPU never waits on the host's look; the series may run one chunk past the sample that settled it.
    The kernel cannot tell when its series will end: a look reads only the events' times, and the calls sampled
    for the recheck are drawn over however many calls there were (escapes.CallSample)."""

    def __init__(self, config: BenchConfig, sample_ms: float, most: int, brief: bool = False):
        self.within = 0.0 if brief else config.median_within_pct / 100
        self.most = most
        self.least = min(most, max(config.min_samples, math.ceil(STABLE_MIN_MS / max(sample_ms, 1e-6))))
        self.chunk = max(1, math.ceil(CHECK_EVERY_MS / max(sample_ms, 1e-6))) if self.within else most

    def settled(self, samples: list[float]) -> bool:
        return bool(self.within) and len(samples) >= self.least and median_half_width(sorted(samples)) <= self.within

    def run(self, enqueue: Callable[[int], Any], read: Callable[[Any], list[float]]) -> list[float]:
        """The series: `enqueue(k)` puts k samples' work and events on the stream and returns a handle;
        `read(handle)` waits for that chunk's last event and gives its samples."""
        samples: list[float] = []
        pending: list[Any] = []
        enqueued = 0
        while enqueued < self.most:
            k = min(self.chunk, self.most - enqueued)
            pending.append(enqueue(k))
            enqueued += k
            if len(pending) == 2:
                samples += read(pending.pop(0))
                if self.settled(samples):
                    break
        for handle in pending:
            samples += read(handle)
        return samples


def time_with_events(fn: Callable[[], Any], config: BenchConfig, flush: Callable[[], None] = _no_flush,
                     watch: CompileWatch | None = None, brief: bool = False,
                     per_iteration: float | None = None) -> list[float]:
    """Milliseconds per call, one CUDA event pair around each call, the flush outside the pair.

    The host must stay ahead of the GPU, or the start event fires while the call is still
    being launched and the launch lands in the sample. When the host's share of an iteration
    (flush, events, the Python launcher) outlasts the GPU's, a GPU-side spin before each
    start event pads the GPU's share, so every call is queued before its start event fires.
    `brief`: `min_samples` samples, not `rep_ms` of them (a series shown beside a graph replay's).
    `per_iteration`: `estimate_ms(fn, flush)` when the caller has it already.
    """
    if per_iteration is None:
        per_iteration = estimate_ms(fn, flush)
    pad = LaunchPad.for_iteration(fn, flush, per_iteration)
    per_iteration += pad.ms
    for _ in range(_clamp(config.warmup_ms / per_iteration, 1, 1_000_000)):
        flush()
        pad()
        fn()
    n = config.min_samples if brief else _clamp(config.rep_ms / per_iteration, config.min_samples, config.max_samples)
    # Recorded on this stream, named once: Event.record() with no stream builds a Stream object per
    # call (about 0.15 ms on an H100 host, 2 per sample), host time that can outlast a short call.
    stream = cuda.current_stream()

    def enqueue(k: int) -> list[tuple[Any, Any]]:
        pairs = [(cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)) for _ in range(k)]
        for start, end in pairs:
            flush()
            pad()
            cuda.record(start, stream)
            fn()
            cuda.record(end, stream)
        return pairs

    def read(pairs: list[tuple[Any, Any]]) -> list[float]:
        cuda.wait_for(pairs[-1][1])
        return [cuda.elapsed_time(start, end) for start, end in pairs]

    cuda.synchronize()
    with watch if watch is not None else _Nothing():
        samples = SeriesStop(config, per_iteration, n, brief).run(enqueue, read)
        cuda.synchronize()
    return samples


class LaunchPad:
    """A GPU-side spin (torch.cuda._sleep) that keeps the GPU's queue ahead of the host's launches."""

    HOST_SHARE = 0.5  # a host taking under half the GPU's time per iteration stays ahead unaided
    HOST_MARGIN = 1.5  # else the spin alone lasts this many times the host's share
    HOST_PROBE_CALLS = 10
    _cycles_per_ms: float | None = None

    def __init__(self, ms: float):
        self.ms = ms
        self.cycles = int(ms * self.cycles_per_ms()) if ms > 0 else 0

    def __call__(self) -> None:
        if self.cycles:
            cuda.sleep(self.cycles)

    @classmethod
    def for_iteration(cls, fn: Callable[[], Any], flush: Callable[[], None], gpu_ms: float) -> "LaunchPad":
        """Measure the host's time to enqueue one iteration; pad the GPU's share to outlast it.

        `gpu_ms` (from `estimate_ms`) is itself stretched by launch gaps when the host is the
        slower side, so it cannot say how much shorter the GPU's own work is: the spin is sized
        on the host's time alone.
        """
        events = [cuda.Event(enable_timing=True) for _ in range(2 * cls.HOST_PROBE_CALLS)]
        stream = cuda.current_stream()
        cuda.synchronize()
        started = time.perf_counter()
        for i in range(cls.HOST_PROBE_CALLS):
            flush()
            cuda.record(events[2 * i], stream)
            fn()
            cuda.record(events[2 * i + 1], stream)
        host_ms = (time.perf_counter() - started) * 1e3 / cls.HOST_PROBE_CALLS
        cuda.synchronize()
        return cls(0.0 if host_ms < cls.HOST_SHARE * gpu_ms else cls.HOST_MARGIN * host_ms)

    @classmethod
    def cycles_per_ms(cls) -> float:
        """The spin's rate, measured once per process: it counts SM clock cycles.

        Read at idle clocks the rate comes out low and every later spin short (an idle
        H200 runs its SMs at a sixth of boost), so a long spin raises the clocks first,
        and the fastest of three readings wins: a spin too long costs only time.
        """
        if cls._cycles_per_ms is None:
            cycles = 2_000_000
            events = [cuda.Event(enable_timing=True) for _ in range(6)]
            cuda.sleep(15 * cycles)  # 8 ms at boost, 45 ms at idle clocks: they rise meanwhile
            for start, end in zip(events[::2], events[1::2]):
                cuda.record(start)
                cuda.sleep(cycles)
                cuda.record(end)
            cuda.synchronize()
            cls._cycles_per_ms = max(cycles / max(cuda.elapsed_time(s, e), 1e-3)
                                     for s, e in zip(events[::2], events[1::2]))
        return cls._cycles_per_ms


def time_with_graph(fn: Callable[[], Any], config: BenchConfig, flush: Callable[[], None],
                    watch: CompileWatch | None = None, warm: bool = False) -> tuple[list[float], int]:
    """Milliseconds per call from CUDA-graph replays; returns (samples, calls per replay).

    One graph holds N × (flush + call), another N × flush; each sample is the
    difference of one replay of each, over N. Replays alternate, so a clock drift
    lands on both. Unlike per-call events, the difference also holds the write-back
    of the call's output, which the next flush evicts from L2 (measured on an H200:
    22 µs by graph against 19 µs by per-call events for an rmsnorm writing 32 MB).
    Capture fails for a call that synchronizes with the host: `host_sync` is asked first.
    `fn` runs N times while captured (at least 10): one that takes input sets in turn (rotation.Rotation)
    puts each set in the graph, and its Triton launches are counted then (replays run no Python).
    `warm`: the GPU has just run `fn`'s own per-call series, warm-up and all (`measure`), so the replays are
    warmed up for REWARM_MS, not `warmup_ms` again: over the rmsnorm scaffold's benchmark cases on an H200 the
    medians moved under 0.2%, within the spread of a full warm-up's own rounds (benchmarks/series_cost.py,
    RESULTS.md 3x), and each graph-timed call took 0.2 s less.
    """
    per_iteration = estimate_ms(fn, flush)
    calls = _clamp(GRAPH_REPLAY_MS / per_iteration, 10, GRAPH_MAX_CALLS)
    work, flush_only = cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(work):
        for _ in range(calls):
            flush()
            fn()
    with cuda.graph(flush_only):
        for _ in range(calls):
            flush()
    replay_ms = per_iteration * calls
    warmup_ms = min(config.warmup_ms, REWARM_MS) if warm else config.warmup_ms
    for _ in range(_clamp(warmup_ms / replay_ms, 1, 100_000)):
        cuda.replay(work)
        cuda.replay(flush_only)
    n = _clamp(config.rep_ms / (2 * replay_ms), config.min_samples, config.max_samples)
    stream = cuda.current_stream()

    def enqueue(k: int) -> list[list[Any]]:
        events = [[cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(k)]
        for start_work, end_work, start_flush, end_flush in events:
            cuda.record(start_work, stream)
            cuda.replay(work)
            cuda.record(end_work, stream)
            cuda.record(start_flush, stream)
            cuda.replay(flush_only)
            cuda.record(end_flush, stream)
        return events

    def read(events: list[list[Any]]) -> list[float]:
        cuda.wait_for(events[-1][3])
        return [(cuda.elapsed_time(a, b) - cuda.elapsed_time(c, d)) / calls for a, b, c, d in events]

    cuda.synchronize()
    with watch if watch is not None else _Nothing():
        samples = SeriesStop(config, 2 * replay_ms, n).run(enqueue, read)
        cuda.synchronize()
    return samples, calls


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


@dataclass
class Measurement:
    timing: Timing | None
    notes: list[str] = field(default_factory=list)
    per_call: Timing | None = None  # the per-call events series, when graph replay timed the call instead


def graph_reason(timing: Timing, config: BenchConfig, flusher: L2Flusher, footprint_bytes: int | None) -> str:
    """Why this call is timed by graph replay rather than per-call events ("" when it is not)."""
    if timing.median_ms * 1e3 < config.cuda_graph_below_us:
        return f"under {config.cuda_graph_below_us:g} µs"
    return writeback_reason(timing.median_ms, flusher, footprint_bytes)


def writeback_reason(call_ms: float, flusher: L2Flusher, footprint_bytes: int | None) -> str:
    """Graph replay for a call whose footprint is a few L2s: its write-back is a share of its time."""
    l2_bytes = flusher.l2_bytes
    if footprint_bytes and l2_bytes and footprint_bytes < WRITEBACK_L2S * l2_bytes and call_ms < WRITEBACK_BELOW_MS:
        return (f"moves {footprint_bytes / MIB:.0f} MiB, under {WRITEBACK_L2S} L2s: writing back what it leaves "
                f"in L2 is a share of its time")
    return ""


def measure(fn: Callable[[], Any], config: BenchConfig, flusher: L2Flusher, watch: CompileWatch,
            what: str, footprint_bytes: int | None = None) -> Measurement:
    """Time `fn` (already compiled and warm) by the method its length and footprint call for.

    `footprint_bytes`: what one call reads and writes in device memory, when known.
    A compile inside the timed region voids the series: it is timed again once,
    and if it compiles again (a specialization that changes every call) it posts no time.
    """
    notes: list[str] = []
    # Graph replay is certain from the footprint when one flush + call is already short enough:
    # the per-call series is then only shown beside the graph's, and a brief one does.
    per_iteration = estimate_ms(fn, flusher)
    brief = bool(writeback_reason(per_iteration, flusher, footprint_bytes))
    timing = _events_series(fn, config, flusher, watch, what, notes, brief, per_iteration)
    if timing is None:
        return Measurement(None, notes + [f"{what}: compiles on every call, so it has no steady-state time"])
    reason = graph_reason(timing, config, flusher, footprint_bytes)

    def per_call_kept(why: str) -> Measurement:
        """Graph replay is not to be: per-call events are posted, from a full series."""
        notes.append(f"{what}: {why}; per-call events kept")
        kept = _events_series(fn, config, flusher, watch, what, notes) if brief else timing
        if kept is None:
            return Measurement(None, notes + [f"{what}: compiles on every call, so it has no steady-state time"])
        return Measurement(kept, notes)

    if not reason:
        return per_call_kept("it proved too long for graph replay") if brief else Measurement(timing, notes)
    why_not = host_sync(fn)
    if why_not:
        return per_call_kept(f"{reason} but not timed by CUDA-graph replay: it synchronizes with the host "
                             f"({why_not})")
    try:
        graph_samples, calls = time_with_graph(fn, config, flusher, watch, warm=True)
    except Exception as exc:  # noqa: BLE001 - something else a graph cannot hold; per-call events stand
        recover_from_failed_capture()
        return per_call_kept(f"CUDA-graph capture failed ({type(exc).__name__}: {first_line(exc)})")
    if watch.compiled:
        return per_call_kept("a compilation inside the graph-timed region")
    graph_timing = summarize(graph_samples, f"cuda graph replay of {calls} × (flush + call), flush-only replay "
                                            f"subtracted (so it includes writing the call's output back from L2); "
                                            f"{flusher.label}; {watch.proof}")
    if graph_timing.median_ms <= 0:
        return per_call_kept("too short to resolve under the flush's jitter by graph replay")
    notes.append(f"{what}: {reason}, so timed by CUDA-graph replay; per-call events "
                 f"gave {fmt_ms(timing.median_ms)}" + (f" ({timing.samples} calls)" if brief else ""))
    return Measurement(graph_timing, notes, per_call=timing)


def _events_series(fn: Callable[[], Any], config: BenchConfig, flusher: L2Flusher, watch: CompileWatch, what: str,
                   notes: list[str], brief: bool = False, per_iteration: float | None = None) -> Timing | None:
    """A per-call events series; a compile inside it voids it and it is timed once more (None: it compiled again).
    `per_iteration`: the caller's estimate, for the first attempt (a retry estimates afresh: it compiled)."""
    for attempt in (1, 2):
        samples = time_with_events(fn, config, flusher, watch, brief, per_iteration if attempt == 1 else None)
        if not watch.compiled:
            return summarize(samples, f"cuda events per call, {flusher.label}; {watch.proof}")
        notes.append(f"{what}: {watch.compiled} Triton compilation(s) inside the timed region "
                     f"(seen by {watch.witness}); series discarded" + ("" if attempt == 2 else ", timed again"))
    return None
