"""Several projects over lanes of runners (factory.lanes): each lane runs one project at a time, taking the next
in the order they were given. `workbench verify`/`bench` of several projects and `pytest --workbench` both run
through it, so both share GPUs, start-ups and compiles the same way.

A project whose run raises (not a verdict: the runner itself failed) stops the lanes taking new projects; the
projects not started yet are cancelled, and the error is raised again where their results are asked for.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Generic, Sequence, TypeVar

P = TypeVar("P")
R = TypeVar("R")


class ProjectLanes(Generic[P, R]):
    def __init__(self, runners: Sequence[Any], run_one: Callable[[P, Any], R]):
        self.runners = list(runners)
        self._run_one = run_one
        self._todo: queue.Queue[tuple[P, Future[R]] | None] = queue.Queue()
        self._failures: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, project: P) -> Future[R]:
        """The project's outcome, once a lane has run it."""
        future: Future[R] = Future()
        with self._lock:
            if not self._threads:
                self._threads = [threading.Thread(target=self._lane, args=(runner,), daemon=True,
                                                  name=f"project-lane-{n}") for n, runner in enumerate(self.runners)]
                for thread in self._threads:
                    thread.start()
            self._todo.put((project, future))
        return future

    def _lane(self, runner: Any) -> None:
        while True:
            item = self._todo.get()
            if item is None:
                return
            project, future = item
            if self._failures:
                future.cancel()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._run_one(project, runner))
            except BaseException as exc:  # noqa: BLE001 - raised again where the result is asked for
                self._failures.append(exc)
                future.set_exception(exc)

    def result(self, future: Future[R]) -> R:
        """`future`'s outcome, waited for in short steps (Ctrl-C reaches the waiting thread); a project cancelled
        after another's failure raises that failure."""
        while True:
            try:
                return future.result(timeout=0.2)
            except FutureTimeout:
                continue
            except CancelledError:
                if self._failures:
                    raise self._failures[0] from None
                raise

    def close(self) -> None:
        """No more projects: the lanes end once their current project does, and every runner is closed."""
        try:
            while True:  # what was never started is cancelled, so no one waits for it
                item = self._todo.get_nowait()
                if item is not None:
                    item[1].cancel()
        except queue.Empty:
            pass
        for _ in self._threads:
            self._todo.put(None)
        for runner in self.runners:
            runner.close()
