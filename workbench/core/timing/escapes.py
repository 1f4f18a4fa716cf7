"""Work kernel_fn does where the timer's events do not look: another stream, another thread, after it returns.

The timer records its events on the stream current when kernel_fn is called (the timed stream), in the
thread that times. Work a call puts on another stream is inside them only if the call makes that stream wait
for the timed stream before the work (a fork) and the timed stream wait for it after (a join), as a correct
multi-stream launcher does; work launched from another thread, or after the call returned, is not in them at
all. `TimedCalls` watches the kernel's timed calls for each:

- every Triton launch, through Triton's launch hooks: the stream it goes to (the launch's own, as Triton
  passes it), the thread it comes from, and whether a call of kernel_fn is in progress. A launch from
  another thread while a call is in progress on the timed stream is the call's own (autograd runs a
  backward on its device thread); from another thread with no call in progress, or from the timing thread
  between calls, it is work deferred past the call's return;
- one probe call (`probe`) that makes a missing fork or join show on the GPU: the timed stream spins
  PROBE_SPIN_MS before the call, and each launch on another stream is preceded there (from the launch hook)
  by an event and a spin of as long, and followed by an event. A forked stream starts after the timed
  stream's spin; a joined one ends before the event the timed stream records after the call. Each is off
  by a whole spin when missing, so the verdict does not depend on how long the kernel is;
- Python threads a timed call started and left running;
- L2 set aside for persisting accesses (l2persist.py): reset before the calls, read after them.

It also keeps the outputs of a random sample of the timed calls (`CallSample`), which the benchmark
compares with the reference after timing: a kernel right on its first call and wrong on some later ones
(a counter, a cache, a race between calls) is caught on the calls that were timed, not only on the call
checked before timing and the one after.

What it does not see: work other than Triton launches (torch or library calls) on another stream or thread;
launches Triton's hooks are not called for (a Triton without the launch-hook chain, a kernel launched
through the CUDA driver by hand). Each finding withholds the time (plausible.escape_refusals says why).
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..verify.launches import LaunchCounter
from . import l2persist
from . import primitives as cuda

PROBE_SPIN_MS = 2.0  # each spin of the probe: missing forks and joins are off by this much on the GPU
SAMPLED_CALLS_MOST = 32  # timed calls whose outputs are kept for the check after timing ...
SAMPLED_BYTES_MOST = 1 << 30  # ... within this much device memory (and an eighth of what is free)
_urandom, _int_from_bytes = os.urandom, int.from_bytes  # bound before kernel.py is imported


class CallSample:
    """The outputs of a uniform random sample of the calls offered (reservoir sampling): at most `size` are
    held at once, and every call is as likely as any other to be among them however many calls there are.
    The draws come from os.urandom, bound at import: the kernel cannot tell which of its calls are kept."""

    def __init__(self, size: int):
        self.size = size
        self.offered = 0
        self.kept: list[tuple[int, Any]] = []  # (the call's number, counted from 1; its outputs)

    @classmethod
    def for_outputs(cls, output_bytes: int, free_bytes: int | None) -> "CallSample":
        """As many calls as fit SAMPLED_BYTES_MOST (and an eighth of `free_bytes`), between 1 and SAMPLED_CALLS_MOST."""
        budget = min(SAMPLED_BYTES_MOST, free_bytes // 8) if free_bytes else SAMPLED_BYTES_MOST
        return cls(max(1, min(SAMPLED_CALLS_MOST, budget // max(1, output_bytes))))

    def offer(self, outputs: Any) -> None:
        self.offered += 1
        if len(self.kept) < self.size:
            self.kept.append((self.offered, outputs))
            return
        slot = _int_from_bytes(_urandom(8), "little") % self.offered
        if slot < self.size:
            self.kept[slot] = (self.offered, outputs)

    def take(self) -> list[tuple[int, Any]]:
        """The kept calls in the order they ran; the sample lets go of them."""
        kept, self.kept = sorted(self.kept, key=lambda pair: pair[0]), []
        return kept


@dataclass
class Seen:
    """What the watched calls did outside the timed stream and thread."""

    off_stream: int = 0  # launches on a stream other than the call's timed stream
    deferred: int = 0  # launches with no call of kernel_fn in progress
    other_thread: int = 0  # ... of those, from a thread other than the timing one
    threads_started: list[str] = field(default_factory=list)
    unforked: int = 0  # probe: launches on a stream that did not wait for the timed stream
    unjoined: int = 0  # probe: launches on a stream the timed stream did not wait for
    probe_off_stream: int = 0  # probe: launches on another stream
    probe_note: str = ""  # why the probe could not look
    set_aside_bytes: int | None = None  # persisting L2 set aside after the timed calls
    reset_note: str = ""  # why persisting L2 could not be reset before them


class _Hooks:
    """Triton's launch hooks, added once per process; they report to the TimedCalls being watched."""

    installed: bool | None = None
    active: "TimedCalls | None" = None

    @classmethod
    def install(cls) -> bool:
        if cls.installed is None:
            try:
                from triton import knobs

                enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
                enter.add(cls._enter)
                leave.add(cls._exit)
                cls.installed = True
            except (ImportError, AttributeError, TypeError):  # a Triton without the hook chains
                cls.installed = False
        return bool(cls.installed)

    @classmethod
    def _enter(cls, metadata: Any = None) -> None:
        watch = cls.active
        if watch is not None and not LaunchCounter._paused:
            watch._launch(_stream_of(metadata), True)

    @classmethod
    def _exit(cls, metadata: Any = None) -> None:
        watch = cls.active
        if watch is not None and watch._probing is not None and not LaunchCounter._paused:
            watch._launch(_stream_of(metadata), False)


def _stream_of(metadata: Any) -> int:
    """The stream a launch goes to: Triton's launch metadata names it; else the current one (Triton's choice)."""
    data = getattr(metadata, "data", None)
    stream = data.get("stream") if isinstance(data, dict) else None
    return int(stream) if isinstance(stream, int) else cuda.raw_current_stream()


class TimedCalls:
    """kernel_fn's timed calls (`fn`: one call on the next input set), watched for work outside the timed stream."""

    def __init__(self, fn: Callable[[], Any], probe_fn: Callable[[], Any] | None = None,
                 sample: CallSample | None = None):
        self.fn = fn
        self.probe_fn = probe_fn or fn
        self.sample = sample  # offered the outputs of each call made while watching, outside a graph's capture
        self.seen = Seen()
        self.hooked = _Hooks.install()
        self._thread = threading.get_ident()
        self._inside = 0
        self._timed_stream = 0
        self._outer_stream = 0  # the stream current when the timing began: a CUDA graph's capture is on another
        self._probing: dict[str, Any] | None = None

    def __call__(self) -> Any:
        """One call of `fn`, with the stream it is timed on noted (a CUDA graph captures on a stream of its own)."""
        self._timed_stream = cuda.raw_current_stream()
        self._inside += 1
        try:
            out = self.fn()
        finally:
            self._inside -= 1
        if self.sample is not None and _Hooks.active is self and not cuda.capturing():
            self.sample.offer(out)  # (a graph's outputs are rewritten by each replay: the recheck reads the last)
        return out

    def _launch(self, stream: int, entering: bool) -> None:
        if self._probing is not None:
            self._probe_mark(stream, entering)
            return
        if not self._inside:
            self.seen.deferred += 1
            if threading.get_ident() != self._thread:
                self.seen.other_thread += 1
        elif stream != self._timed_stream and stream != self._outer_stream:
            # (a launch on the outer stream while a graph captures on its own makes the capture fail, and the
            # call is then timed by events on the outer stream: it is not work the timing misses)
            self.seen.off_stream += 1

    @contextmanager
    def watching(self) -> Iterator["TimedCalls"]:
        """The timed calls: persisting L2 reset before, launches watched during, threads and L2 read after."""
        self.seen.reset_note = l2persist.reset()
        self._outer_stream = cuda.raw_current_stream()
        before = {t.ident for t in threading.enumerate()}
        _Hooks.active = self
        try:
            yield self
        finally:
            _Hooks.active = None
            cuda.synchronize()
            self.seen.threads_started = [t.name for t in threading.enumerate()
                                         if t.ident not in before and t.is_alive()]
            self.seen.set_aside_bytes = l2persist.set_aside_bytes()
            l2persist.reset()  # nothing kept for the baselines timed next

    def probe(self) -> None:
        """One call of kernel_fn with the spins that show a missing fork or join (see the module's docstring)."""
        if not self.hooked:
            self.seen.probe_note = "this Triton has no launch hooks to watch streams with"
            return
        from .timers import LaunchPad

        cycles = max(1, int(PROBE_SPIN_MS * LaunchPad.cycles_per_ms()))
        start, spun, returned = (cuda.Event(enable_timing=True) for _ in range(3))
        stream = cuda.current_stream()
        self._probing = {"cycles": cycles, "open": {}, "marks": []}
        cuda.synchronize()
        cuda.record(start, stream)
        cuda.sleep(cycles)
        cuda.record(spun, stream)
        _Hooks.active = self
        try:
            self._timed_stream = cuda.raw_current_stream()
            self._inside += 1
            out = self.probe_fn()
        finally:
            self._inside -= 1
            _Hooks.active = None
        cuda.record(returned, stream)
        cuda.synchronize()
        del out
        marks, self._probing = self._probing["marks"], None
        half = PROBE_SPIN_MS / 2
        call_start, call_end = cuda.elapsed_time(start, spun), cuda.elapsed_time(start, returned)
        for before, after in marks:
            self.seen.probe_off_stream += 1
            self.seen.unforked += cuda.elapsed_time(start, before) < call_start - half
            self.seen.unjoined += call_end < cuda.elapsed_time(start, after) - half

    def _probe_mark(self, stream: int, entering: bool) -> None:
        """In the probe, around a launch on another stream: an event and a spin before it, an event after it."""
        if stream == self._timed_stream:
            return
        probing = self._probing
        try:
            other = cuda.ExternalStream(stream)
            event = cuda.Event(enable_timing=True)
            cuda.record(event, other)
            if entering:
                with cuda.use_stream(other):
                    cuda.sleep(probing["cycles"])
                probing["open"].setdefault(stream, []).append(event)
            elif probing["open"].get(stream):
                probing["marks"].append((probing["open"][stream].pop(), event))
        except Exception as exc:  # noqa: BLE001 - the kernel's launch goes on; the probe says it could not look
            self.seen.probe_note = f"marking stream {stream:#x} failed ({type(exc).__name__}: {exc})"
