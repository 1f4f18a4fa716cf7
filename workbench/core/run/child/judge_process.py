"""The judge: the worker's twin that never imports kernel.py, and the only one that talks to the parent.

A worker process imports torch, then calls `fork_judge` before anything else (before CUDA comes
up, before triton and kernel.py are imported). The child becomes the judge: it keeps the
worker's event channel to the parent (stdout) and its stdin, and the parent process keeps neither.
Everything the kernel's process has to say comes over a pipe as frames (verify/handoff.py):

    event frames   relayed to the parent, except a CaseResult (only the judge gives verdicts: one
                   from the kernel's process becomes an error) and a RunFinished (the parent's own)
    case frames    a case's tensors: judged here (verify/judge.py), the CaseResult sent to the parent,
                   and a copy sent back to the kernel's process for its own bookkeeping

The judge reads the job from stdin itself once the worker is ready, so the project's config and
tolerances come from the parent, never from the kernel's process, and forwards the job line.
The threat model is in verify/judge.py's docstring.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from ...events import (
    CaseResult,
    EventStream,
    LogLine,
    RunFinished,
    WorkerReady,
    event_from_json,
    foreign_event,
)
from ...exit_codes import EXIT_JUDGE_GONE
from ...verify.handoff import CASE, EVENT, GATE, CaseData, read_frame, write_frame

FORGED = ("a verdict written by the kernel's process, not by the judge: ignored "
          "(does kernel.py write to the worker's event stream or patch the workbench?)")


class JudgeLink:
    """The kernel process's end: send events and cases, receive the job and the verdicts."""

    def __init__(self, frames_fd: int, replies_fd: int):
        self.frames_fd = frames_fd
        self._replies = os.fdopen(replies_fd, "r", encoding="utf-8")
        # A benchmark hands a case over on a thread while the main thread emits: one frame at a time.
        self._writing = threading.Lock()

    def _send(self, kind: bytes, payload: bytes) -> None:
        with self._writing:
            write_frame(self.frames_fd, kind, payload)

    def _ask(self, kind: bytes, payload: bytes) -> str:
        """Send a frame and return the judge's answer, the next line (one question at a time)."""
        self._send(kind, payload)
        line = self._replies.readline()
        if not line:
            raise SystemExit(EXIT_JUDGE_GONE)
        return line

    def emit(self, event: Any) -> None:
        self._send(EVENT, event.to_json().encode())

    def read_job(self) -> str:
        return self._replies.readline()

    def judge(self, data: CaseData) -> CaseResult:
        """The judge's verdict on one case."""
        result = event_from_json(self._ask(CASE, data.pack()))
        assert isinstance(result, CaseResult)
        return result

    def wait_for_gate(self) -> None:
        """Block until the parent says the GPU is this worker's alone (a GATE frame; see verify/handoff.py).
        Never while a case is with the judge."""
        self._ask(GATE, b"")




def judge_threads() -> int:
    """The judge's torch threads: half the cores, at most 4 (the kernel's process compiles beside it)."""
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def fork_judge(events_fd: int) -> JudgeLink:
    """Fork the judge. Returns the link in the kernel's process; the judge never returns from here."""
    frames_r, frames_w = os.pipe()
    replies_r, replies_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(frames_w)
        os.close(replies_r)
        code = 1
        try:
            code = serve(frames_r, replies_w, events_fd)
        finally:
            os._exit(code)
    os.close(frames_r)
    os.close(replies_w)
    os.close(events_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the job comes through the judge
    os.close(devnull)
    return JudgeLink(frames_w, replies_r)


def serve(frames_fd: int, replies_fd: int, events_fd: int) -> int:
    import torch

    from ...project.config import ConfigError, ProjectConfig
    from ...stage import Job
    from ...verify.judge import Judge

    torch.set_num_threads(judge_threads())
    send = EventStream(events_fd)
    replies = os.fdopen(replies_fd, "w", buffering=1, encoding="utf-8")

    judge: Judge | None = None
    profiler, profile_path = _profiler()
    while True:
        frame = read_frame(frames_fd)
        if frame is None:
            if profiler is not None and profiler.getstats():  # a judge that judged nothing writes nothing
                profiler.dump_stats(profile_path)
            return 0
        kind, payload = frame
        if kind == EVENT:
            text = payload.decode("utf-8", "replace")
            try:
                event = event_from_json(text)
            except (ValueError, TypeError, KeyError):
                if foreign_event(text):  # a plugin's event (its module was imported after this fork): passed on
                    send.line(text)
                else:
                    send(LogLine(text=text[:2000], stream="stdout"))
                continue
            if isinstance(event, RunFinished):
                continue
            if isinstance(event, CaseResult):
                event = CaseResult(case_index=event.case_index, label=event.label, config=event.config,
                                   status="error", messages=[FORGED], checks={"judge": "failed"})
            send(event)
            if isinstance(event, WorkerReady):
                line = sys.stdin.readline()
                if line.strip():
                    try:
                        judge = Judge(ProjectConfig.from_dict(Job.from_json(line).config).verify)
                    except (ConfigError, ValueError, TypeError):
                        judge = None  # the kernel's process reports the bad config
                replies.write(line if line.strip() else "\n")
                replies.flush()
        elif kind == GATE:
            replies.write(sys.stdin.readline() or "\n")  # at the end of stdin: the parent is gone, so on
            replies.flush()
        elif kind == CASE:
            if judge is None:
                judge = Judge(ProjectConfig().verify)
            try:
                data = CaseData.unpack(payload)
                result = judge.judge(data) if profiler is None else profiler.runcall(judge.judge, data)
            except Exception as exc:  # noqa: BLE001 - a torn or forged frame is no pass
                result = CaseResult(case_index=-1, label="?", status="error",
                                    messages=[f"the judge could not read a case: {type(exc).__name__}: {exc}"])
            send(result)
            replies.write(result.to_json() + "\n")
            replies.flush()


def _profiler() -> tuple[Any, str]:
    """A cProfile profiler for the judge's verdicts and the file it goes to, `<pid>-judge.prof` in the folder
    WORKBENCH_PROFILE_DIR names (as the worker's jobs are profiled: worker.profiled); (None, "") without it."""
    folder = os.environ.get("WORKBENCH_PROFILE_DIR")
    if not folder:
        return None, ""
    import cProfile

    os.makedirs(folder, exist_ok=True)
    return cProfile.Profile(), os.path.join(folder, f"{os.getpid()}-judge.prof")
