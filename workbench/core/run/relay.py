"""Parent side: the events of one run's workers relayed as one run's: each result once (a re-queued job may
repeat one), stamped with the GPU that produced it, verification shards merged (one WorkerReady, one
RunStarted, progress over every shard, one "verified" when the last shard is past its cases).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Callable

from ..events import (
    BenchResult,
    CaseResult,
    DeviceFacts,
    Event,
    Problem,
    RunStarted,
    StageChanged,
    WorkerReady,
)
from ..verdict import Tally
from .contracts import OnEvent
from .protocol import PRECOMPILING


def result_key(event: Event) -> tuple | None:
    """What makes a result one of a kind within a run (None: not a result)."""
    if isinstance(event, CaseResult):
        return ("case", event.case_index, event.config, event.output, event.phase)
    if isinstance(event, BenchResult):
        return ("bench", event.case_index)
    if isinstance(event, DeviceFacts):
        return ("device", event.gpu)
    return None


def stamp_gpu(relay: OnEvent, gpu: str) -> OnEvent:
    """`relay`, writing the GPU that ran each result into it."""

    def stamped(event: Event) -> None:
        if isinstance(event, (CaseResult, BenchResult, DeviceFacts)) and not event.gpu:
            event = replace(event, gpu=gpu)
        relay(event)

    return stamped


class RunRelay:
    """A run's events on their way to `on_event`: each result once, counted into the run's Tally, and
    `on_verified(tally)` called when the verdict is complete (a "verified" StageChanged)."""

    def __init__(self, on_event: OnEvent, on_verified: Callable[[Tally], None] | None = None):
        self.on_event, self.on_verified = on_event, on_verified
        self.tally = Tally()
        self._seen: set[tuple] = set()
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        key = result_key(event)
        with self._lock:
            if key is not None:
                if key in self._seen:
                    return  # a re-queued job's repeat of a result that did come back: recorded once
                self._seen.add(key)
            self.tally.add(event)
            self.on_event(event)
            verified = isinstance(event, StageChanged) and event.stage == "verified"
        if verified and self.on_verified is not None:
            self.on_verified(self.tally)


class ShardMerger:
    """Merges the events of verification shards into those of one run.

    One WorkerReady and one RunStarted (the first; RunStarted.planned is the
    whole plan), progress counted over every shard, each Problem once.
    """

    def __init__(self, relay: OnEvent, shards: int = 1):
        self._relay = relay
        self._lock = threading.Lock()
        self._seen_ready = self._seen_started = False
        self._total = 0
        self._done: set[int] = set()
        self._forward_done: set[int] = set()  # a training kernel's forward judged first (live loop)
        self._problems: set[tuple[str, str]] = set()
        self._shards = shards
        self._verified: set[int] = set()  # shards past their verification cases

    def shard_over(self, shard: int) -> None:
        """Shard `shard` verified its cases (and maybe more): the last one completes the verdict."""
        with self._lock:
            if shard in self._verified:
                return
            self._verified.add(shard)
            if len(self._verified) == self._shards:
                self._relay(StageChanged(stage="verified", detail=f"{len(self._done)} of {self._total} cases"))

    def relay(self, event: Event, shard: int = 0) -> None:
        if isinstance(event, StageChanged) and event.stage == PRECOMPILING:
            self.shard_over(shard)  # a shard's own work after verification is not the run's progress
            return
        with self._lock:
            if isinstance(event, WorkerReady):
                if self._seen_ready:
                    return
                self._seen_ready = True
            elif isinstance(event, RunStarted):
                if self._seen_started:
                    return
                self._seen_started = True
                self._total = len(event.planned)
            elif isinstance(event, StageChanged) and event.stage == "verifying":
                done = self._forward_done if event.phase == "forward" else self._done
                event = replace(event, current=min(len(done) + 1, self._total or event.total),
                                total=self._total or event.total)
            elif isinstance(event, CaseResult) and not event.config:
                (self._forward_done if event.phase == "forward" else self._done).add(event.case_index)
            elif isinstance(event, Problem):
                key = (event.kind, event.message)
                if key in self._problems:
                    return
                self._problems.add(key)
            self._relay(event)


class EarlyStart:
    """A run's stages after verification, started on a thread at most once (when the verdict is in)."""

    def __init__(self, target: Callable[[], None]):
        self._thread = threading.Thread(target=target, name="after-verification", daemon=True)
        self._lock = threading.Lock()
        self.started = False

    def start(self) -> None:
        with self._lock:
            if not self.started:
                self.started = True
                self._thread.start()

    def join(self) -> None:
        self._thread.join()
