"""Timers that run in the worker (DESIGN.md "Timing: what a number means").

- `L2Flusher`: overwrites a buffer of at least twice the L2 between calls, so every
  call starts from a cold cache, as it would inside a model.
- `time_with_events`: a CUDA event pair around every call, flush outside the pair;
  warm-up first, for as long as `warmup_ms` of GPU time, so boost clocks settle.
- `time_with_graph`: for calls too short for per-call events (launch gaps are
  comparable to the kernel): a CUDA graph of N × (flush + call) replayed, minus a
  graph of N × flush alone.
- `CompileWatch`: proof that nothing compiled inside a timed region.
- `measure`: the method chosen by the call's length, with the notes that explain it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .config import BenchConfig
from .events import Timing
from .timing import format_ms, summarize

MIB = 1 << 20
FALLBACK_FLUSH_BYTES = 256 * MIB  # when the L2 size is unknown: more than any GPU's L2 today
MIN_FLUSH_BYTES = 64 * MIB
ESTIMATE_CALLS = 5
GRAPH_REPLAY_MS = 2.0  # target length of one graph replay: long enough that event resolution is moot
GRAPH_MAX_CALLS = 200


class L2Flusher:
    """A write over at least twice the L2 between calls: nothing of the last call stays cached."""

    def __init__(self, l2_bytes: int | None):
        wanted = 2 * l2_bytes if l2_bytes else FALLBACK_FLUSH_BYTES
        self.nbytes = math.ceil(max(wanted, MIN_FLUSH_BYTES) / MIB) * MIB
        self.buffer = torch.empty(self.nbytes, dtype=torch.int8, device="cuda")

    def __call__(self) -> None:
        self.buffer.zero_()

    @property
    def label(self) -> str:
        return f"L2 flushed ({self.nbytes // MIB} MiB write) before every call"


def _no_flush() -> None:
    pass


def _clamp(value: float, low: int, high: int) -> int:
    return int(min(max(value, low), max(low, high)))


def estimate_ms(fn: Callable[[], Any], flush: Callable[[], None]) -> float:
    """GPU time of one (flush + call), from a few calls between two events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(ESTIMATE_CALLS):
        flush()
        fn()
    end.record()
    torch.cuda.synchronize()
    return max(start.elapsed_time(end) / ESTIMATE_CALLS, 1e-4)


class CompileWatch:
    """Counts Triton compilations while active, to prove a timed region compiled nothing.

    Two witnesses: Triton's compilation listener (`triton.knobs.compilation.listener`,
    which sees every compile, torch.compile's kernels included, and every load from the
    disk cache) where the installed Triton has one, and the number of compiled variants
    in the in-memory caches of the kernel module's JIT functions.
    """

    def __init__(self, jit_functions: list[Any] | None = None):
        self.jit_functions = list(jit_functions or [])
        self.compiled = 0
        self._heard = 0
        self._before = 0
        self._previous: Any = None
        self._knobs: Any = None

    def __enter__(self) -> "CompileWatch":
        self.compiled = self._heard = 0
        self._before = self._cached_variants()
        self._knobs = _compilation_knobs()
        if self._knobs is not None:
            self._previous = self._knobs.listener
            previous = self._previous

            def listener(**kwargs: Any) -> None:
                self._heard += 1
                if previous is not None:
                    previous(**kwargs)

            self._knobs.listener = listener
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._knobs is not None:
            self._knobs.listener = self._previous
        self.compiled = max(self._heard, self._cached_variants() - self._before)

    @property
    def witness(self) -> str:
        return "Triton's compilation listener" if _compilation_knobs() is not None else \
            "the JIT functions' kernel caches"

    def _cached_variants(self) -> int:
        return sum(cached_variants(fn) for fn in self.jit_functions)


def _compilation_knobs() -> Any:
    try:
        from triton import knobs
    except ImportError:  # Triton before knobs.py (3.3 and older)
        return None
    compilation = getattr(knobs, "compilation", None)
    return compilation if compilation is not None and hasattr(compilation, "listener") else None


def cached_variants(jit_function: Any) -> int:
    """How many compiled variants a JITFunction holds (across Triton versions)."""
    caches = getattr(jit_function, "device_caches", None)
    if isinstance(caches, dict):
        return sum(len(entry[0]) for entry in caches.values() if entry and isinstance(entry[0], dict))
    cache = getattr(jit_function, "cache", None)
    if isinstance(cache, dict):
        return sum(len(v) for v in cache.values() if isinstance(v, dict))
    return 0


def jit_functions(module: Any) -> list[Any]:
    """The JITFunctions defined in a module, unwrapped from autotuners and heuristics."""
    from triton.runtime.jit import JITFunction

    found = []
    for value in vars(module).values():
        fn = value
        for _ in range(4):
            if isinstance(fn, JITFunction):
                break
            fn = getattr(fn, "fn", None)
        if isinstance(fn, JITFunction) and all(fn is not f for f in found):
            found.append(fn)
    return found


def time_with_events(fn: Callable[[], Any], config: BenchConfig, flush: Callable[[], None] = _no_flush,
                     watch: CompileWatch | None = None) -> list[float]:
    """Milliseconds per call, one CUDA event pair around each call, the flush outside the pair."""
    per_iteration = estimate_ms(fn, flush)
    for _ in range(_clamp(config.warmup_ms / per_iteration, 1, 1_000_000)):
        flush()
        fn()
    n = _clamp(config.rep_ms / per_iteration, config.min_samples, config.max_samples)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    torch.cuda.synchronize()
    with watch if watch is not None else _Nothing():
        for start, end in zip(starts, ends):
            flush()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends)]


def time_with_graph(fn: Callable[[], Any], config: BenchConfig, flush: Callable[[], None],
                    watch: CompileWatch | None = None) -> tuple[list[float], int]:
    """Milliseconds per call from CUDA-graph replays; returns (samples, calls per replay).

    One graph holds N × (flush + call), another N × flush; each sample is the
    difference of one replay of each, over N. Replays alternate, so a clock drift
    lands on both. Capture fails for a call that synchronizes or reads to the host;
    the caller falls back to per-call events.
    """
    per_iteration = estimate_ms(fn, flush)
    calls = _clamp(GRAPH_REPLAY_MS / per_iteration, 10, GRAPH_MAX_CALLS)
    work, flush_only = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(work):
        for _ in range(calls):
            flush()
            fn()
    with torch.cuda.graph(flush_only):
        for _ in range(calls):
            flush()
    replay_ms = per_iteration * calls
    for _ in range(_clamp(config.warmup_ms / replay_ms, 1, 100_000)):
        work.replay()
        flush_only.replay()
    n = _clamp(config.rep_ms / (2 * replay_ms), config.min_samples, config.max_samples)
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(n)]
    torch.cuda.synchronize()
    with watch if watch is not None else _Nothing():
        for start_work, end_work, start_flush, end_flush in events:
            start_work.record()
            work.replay()
            end_work.record()
            start_flush.record()
            flush_only.replay()
            end_flush.record()
        torch.cuda.synchronize()
    samples = [(a.elapsed_time(b) - c.elapsed_time(d)) / calls for a, b, c, d in events]
    del work, flush_only
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


def measure(fn: Callable[[], Any], config: BenchConfig, flusher: L2Flusher, watch: CompileWatch,
            what: str) -> Measurement:
    """Time `fn` (already compiled and warm) by the method its length calls for.

    A compile inside the timed region voids the series: it is timed again once,
    and if it compiles again (a specialization that changes every call) it posts no time.
    """
    notes: list[str] = []
    samples: list[float] | None = None
    for attempt in (1, 2):
        samples = time_with_events(fn, config, flusher, watch)
        if not watch.compiled:
            break
        notes.append(f"{what}: {watch.compiled} Triton compilation(s) inside the timed region "
                     f"(seen by {watch.witness}); series discarded" + ("" if attempt == 2 else ", timed again"))
        samples = None
    if samples is None:
        return Measurement(None, notes + [f"{what}: compiles on every call, so it has no steady-state time"])
    timing = summarize(samples, f"cuda events per call, {flusher.label}")
    if timing.median_ms * 1e3 >= config.cuda_graph_below_us:
        return Measurement(timing, notes)
    try:
        graph_samples, calls = time_with_graph(fn, config, flusher, watch)
    except Exception as exc:  # noqa: BLE001 - capture refuses host syncs; per-call events stand
        torch.cuda.synchronize()
        notes.append(f"{what}: CUDA-graph capture failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]}); "
                     "per-call events kept, launch overhead included")
        return Measurement(timing, notes)
    if watch.compiled:
        notes.append(f"{what}: a compilation inside the graph-timed region; per-call events kept")
        return Measurement(timing, notes)
    graph_timing = summarize(graph_samples, f"cuda graph replay of {calls} × (flush + call), flush-only replay "
                                            f"subtracted; {flusher.label}")
    if graph_timing.median_ms <= 0:
        notes.append(f"{what}: too short to resolve under the flush's jitter by graph replay; per-call events kept")
        return Measurement(timing, notes)
    notes.append(f"{what}: under {config.cuda_graph_below_us:g} µs, so timed by CUDA-graph replay; per-call events "
                 f"gave {format_ms(timing.median_ms)} (launch overhead included)")
    return Measurement(graph_timing, notes)
