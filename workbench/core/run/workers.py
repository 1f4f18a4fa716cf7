"""Parent side: the workers of this machine. One worker process (`WorkerProcess`: its start, forked from
the warm template or from scratch, its event and log streams, its readiness, its job, its end), and
`LocalWorkers`, the runner's source of them (contracts.WorkerSource).

The parent never imports the user's kernel, torch or triton: a worker runs
`python -m workbench.core.run.child.worker` (or is forked from the template, run/forkserver.py), says
`worker_ready`, takes one job on stdin and streams its events back as JSON lines; its prints come on
stderr (run/protocol.py).
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from ..events import LogLine, Problem, WorkerReady, event_from_json
from ..fsutil import INDUCTOR_CACHE_ENV, inductor_cache_dir
from ..stage import Job
from . import trace
from .forkserver import ForkServer
from .gpus import GpuSlot
from ..exit_codes import EXIT_POISONED
from .protocol import (
    COMPILE_CHECK_MODULE,
    COMPILE_TARGET_ENV,
    GPU_GATE,
    WORKER_MODULE,
    dies_with_this_process,
    parent_death_fd,
)

STARTUP_TIMEOUT_S = 180.0
READY_POLL_S = 0.1  # how soon a second waiter for one worker sees the WorkerReady the first took (wait_for_ready)
PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding workbench/: the worker imports this copy


def worker_env(env: dict[str, str] | None = None, interpret: bool = False) -> dict[str, str]:
    """The environment a worker (or the template workers fork from) runs in: this one, plus `env`,
    importing this copy of the workbench; `interpret`: the worker runs the Triton interpreter."""
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env["PYTHONUNBUFFERED"] = "1"
    child_env.setdefault(INDUCTOR_CACHE_ENV, str(inductor_cache_dir()))
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), child_env.get("PYTHONPATH", "")) if p)
    if interpret:
        child_env["WORKBENCH_INTERPRET"] = "1"
    return child_env


def event_or_log(line: str) -> Any:
    """A line of a worker's event channel: its event, or (not an event) the line itself, as printed output."""
    try:
        return event_from_json(line)
    except (ValueError, TypeError, KeyError):
        return LogLine(text=line, stream="stdout")


def forkserver_wanted(launcher: Sequence[str]) -> bool:
    """Fork workers from a warm template unless they run under a launcher (a profiler must start the
    process itself) or WORKBENCH_FORKSERVER=0 asks for workers started from scratch."""
    return not launcher and hasattr(os, "fork") and os.environ.get("WORKBENCH_FORKSERVER", "1") != "0"


class BoundedLog:
    """What a worker prints, bounded on its way to the app and the reports: the first HEAD_LINES lines pass as
    they come, then the last TAIL_LINES are kept and passed at the end, with a line that says how much was
    dropped between; a line over LINE_CHARS characters is cut and says by how much. A kernel that prints
    megabytes per call must not freeze the app (it did: 40 s for 10 MB a call)."""

    HEAD_LINES, TAIL_LINES, LINE_CHARS = 300, 200, 2000

    def __init__(self) -> None:
        self._head_left = self.HEAD_LINES
        self._tail: collections.deque[str] = collections.deque(maxlen=self.TAIL_LINES)
        self._dropped_lines = self._dropped_chars = 0
        self._lock = threading.Lock()

    def admit(self, text: str) -> str | None:
        """The line to pass on now, or None (held for the tail)."""
        if len(text) > self.LINE_CHARS:
            text = text[:self.LINE_CHARS] + f" ... ({len(text) - self.LINE_CHARS:,} more characters)"
        with self._lock:
            if self._head_left > 0:
                self._head_left -= 1
                return text
            if len(self._tail) == self._tail.maxlen:
                self._dropped_lines += 1
                self._dropped_chars += len(self._tail[0])
            self._tail.append(text)
        return None

    def flush(self) -> list[str]:
        """The lines held: a note of what was dropped, then the tail."""
        with self._lock:
            lines = list(self._tail)
            self._tail.clear()
            if self._dropped_lines:
                lines.insert(0, f"... {self._dropped_lines:,} lines ({self._dropped_chars:,} characters) of the worker's "
                                f"output dropped here: the first {self.HEAD_LINES} and the last {self.TAIL_LINES} are kept")
                self._dropped_lines = self._dropped_chars = 0
            return lines


class WorkerStartError(Exception):
    """A worker could not start (no torch/triton, a broken environment). `stalled`: it was alive but silent
    past its time (another worker may start where this one hung); else it ended, or could not be started."""

    def __init__(self, problem: Problem, stalled: bool = False):
        super().__init__(problem.message)
        self.problem, self.stalled = problem, stalled


class WorkerProcess:
    """One child process and the threads that read its stdout (events) and stderr (log): a
    contracts.WorkerHandle of this machine.

    `launcher` is a command the worker runs under (a profiler or sanitizer, e.g.
    ``["ncu", "--profile-from-start", "off"]``); it must pass stdin and stdout through.
    `gpu`: the one GPU the worker sees (its CUDA_VISIBLE_DEVICES), None to leave the environment's.
    """

    lost: str = ""

    def __init__(self, interpret: bool, env: dict[str, str] | None = None, python: str = sys.executable,
                 launcher: Sequence[str] = (), forkserver: ForkServer | None = None, gpu: GpuSlot | None = None):
        self.gpu = gpu
        child_env = dies_with_this_process(worker_env({**(env or {}), **(gpu.worker_env() if gpu else {})}, interpret))
        if forkserver is not None and not launcher:
            self.proc: Any = forkserver.spawn(child_env)
        else:
            self.proc = subprocess.Popen(
                [*launcher, python, "-m", WORKER_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=child_env, start_new_session=True, pass_fds=(parent_death_fd(),),
                text=True, encoding="utf-8",
                errors="replace", bufsize=1)
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.ready: WorkerReady | None = None
        self.started_up = threading.Event()  # its WorkerReady has come (or it ended): wait_ready returns at once
        self._log = BoundedLog()
        self._log_thread = threading.Thread(target=self._read_log, daemon=True)
        threading.Thread(target=self._read_events, daemon=True).start()
        self._log_thread.start()
        trace.mark(f"fork {id(self) % 10000:04d}")

    @property
    def gpu_id(self) -> str:
        """The GPU reports name for this worker's results ("" when the run places no GPUs)."""
        return self.gpu.id if self.gpu else ""

    def _read_events(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line:
                event = event_or_log(line)
                self.queue.put(("event", event))
                if isinstance(event, WorkerReady):
                    trace.mark(f"ready pid {event.pid} (warm-up {event.warmup_s:.2f} s: "
                               + ", ".join(f"{k} {v:.2f}" for k, v in event.warmup_phases.items()) + ")")
                    self.started_up.set()
        self.queue.put(("eof", None))
        self.started_up.set()

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = self._log.admit(line.rstrip("\n"))
            if text is not None:
                self.queue.put(("event", LogLine(text=text)))
        for text in self._log.flush():
            self.queue.put(("event", LogLine(text=text)))

    def drain_log(self, timeout: float = 1.0) -> list[LogLine]:
        """After the process ended: the stderr lines not yet taken from the queue (with the tail of a flood)."""
        self._log_thread.join(timeout)
        return log_lines_left(self.queue) + [LogLine(text=text) for text in self._log.flush()]

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> WorkerReady:
        return wait_for_ready(self, timeout)

    def send(self, job: Job) -> None:
        self.send_line(job.to_json())

    def send_line(self, line: str) -> None:
        """One line to the worker's stdin: its job; later, a job's GPU gate."""
        trace.mark("gate opened" if line == GPU_GATE else "job sent")
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self, wait: bool = True) -> None:
        """SIGKILL the worker's process group; wait for the exit here, or in the background."""
        if self.proc.poll() is None:
            try:
                if self.proc.pid is None:  # asked of the template, not forked yet: killed as it comes
                    raise ProcessLookupError
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        if wait:
            self.wait_exit()
        else:
            threading.Thread(target=self.wait_exit, daemon=True).start()

    def wait_exit(self, timeout: float = 5.0) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass

    def close_unused(self) -> None:
        """Let a warm worker that never got a job go."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for_ready(worker: Any, timeout: float = STARTUP_TIMEOUT_S, name: str = "the worker") -> WorkerReady:
    """A worker's WorkerReady from its queue (kept in `worker.ready`); WorkerStartError when it did not come
    within `timeout` (the worker is killed) or the worker ended first (the Problem it reported, else its
    status, with its last log lines). For any contracts.WorkerHandle that reads its events into `queue`.

    Several threads may wait for one worker (a run taking a spare while its GPU-free thread waits for the spares
    to warm): one takes the WorkerReady off the queue, the others see it in `worker.ready` within READY_POLL_S."""
    deadline = time.monotonic() + timeout
    log: list[str] = []
    startup_problem: Problem | None = None
    while True:
        if worker.ready is not None:
            return worker.ready
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stacks = stacks_of_stalled(worker)
            worker.kill()
            raise WorkerStartError(Problem(kind="environment", message=f"{name} did not start within {timeout:.0f} s",
                                           traceback="\n".join(log[-15:] + stacks)), stalled=True)
        try:
            kind, payload = worker.queue.get(timeout=min(remaining, READY_POLL_S))
        except queue.Empty:
            ended = getattr(worker, "started_up", None)
            if ended is not None and ended.is_set() and worker.ready is None and worker.proc.poll() is not None:
                # another waiter took its end off the queue
                raise WorkerStartError(Problem(kind="environment", message=f"{name} exited during start-up "
                                                                           f"(status {worker.proc.returncode})"))
            continue
        if kind == "eof":
            worker.proc.wait()
            message = startup_problem.message if startup_problem else \
                f"{name} exited during start-up (status {worker.proc.returncode})"
            raise WorkerStartError(Problem(kind="environment", message=message, traceback="\n".join(log[-15:])))
        if isinstance(payload, WorkerReady):
            worker.ready = payload
            return payload
        if isinstance(payload, Problem):
            startup_problem = payload
        elif isinstance(payload, LogLine):
            log.append(payload.text)


STACKS_SIGNAL = signal.SIGUSR1  # a worker writes every thread's stack to its stderr on it (child/worker.py)


def stacks_of_stalled(worker: Any, wait_s: float = 1.0) -> list[str]:
    """What a worker that stalls in its start-up is doing: every thread's stack, asked with STACKS_SIGNAL and read
    from its log, for the record of the failure ([] when it cannot be asked, or says nothing)."""
    pid = getattr(worker.proc, "pid", None)
    if not pid or worker.proc.poll() is not None:
        return []
    try:
        os.kill(pid, STACKS_SIGNAL)
    except OSError:
        return []
    lines: list[str] = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            _, payload = worker.queue.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if isinstance(payload, LogLine):
            lines.append(payload.text)
    return ["its threads when it was given up:", *lines] if lines else []


def log_lines_left(events: "queue.Queue[tuple[str, Any]]") -> list[LogLine]:
    """Empty a worker's queue, keeping its log lines (what a worker printed before it ended)."""
    lines = []
    while True:
        try:
            _, payload = events.get_nowait()
        except queue.Empty:
            return lines
        if isinstance(payload, LogLine):
            lines.append(payload)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    if returncode == EXIT_POISONED:
        return "hit a fatal CUDA error (the context is unusable)"
    return f"exited with status {returncode}"


# Where a template's imports could differ: which Triton it imports (the interpreter's or the GPU's), what it can see
# of the GPUs, where it imports from.
TEMPLATE_ENV_KEYS = ("WORKBENCH_INTERPRET", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", COMPILE_TARGET_ENV,
                     "PYTHONPATH")
_templates: dict[tuple, ForkServer] = {}
_templates_lock = threading.Lock()


def shared_template(env: dict[str, str], python: str) -> ForkServer:
    """The warm template for `env` (worker_env's), one per process: it costs seconds of CPU to start (torch and
    triton imported), and every runner of a process may fork from it (the lanes of a multi-project verify, the
    runs of a server or a test session). A child takes its whole environment from its own request, so templates
    differ only where their imports could: TEMPLATE_ENV_KEYS, the interpreter, the working folder. It lives until
    this process ends (and dies with it: run/protocol.py); one that has died is replaced."""
    key = (python, os.getcwd(), *(env.get(name, "") for name in TEMPLATE_ENV_KEYS))
    with _templates_lock:
        template = _templates.get(key)
        if template is None or not template.alive():
            if template is not None:
                template.close()
            template = _templates[key] = ForkServer(env, python)
        return template


class LocalWorkers:
    """The runner's source of workers on this machine (contracts.WorkerSource): each forked from the process's
    warm template (shared_template, started on first use), or started from scratch under a launcher (a profiler
    must start the process itself) or with WORKBENCH_FORKSERVER=0."""

    local = True

    def __init__(self, interpret: bool = False, env: dict[str, str] | None = None, python: str = sys.executable,
                 launcher: Sequence[str] = ()):
        self.interpret, self.env, self.python, self.launcher = interpret, dict(env or {}), python, list(launcher)
        self._template: ForkServer | None = None
        self._lock = threading.Lock()

    @property
    def forks(self) -> bool:
        return forkserver_wanted(self.launcher)

    def template(self) -> ForkServer | None:
        """The warm template workers are forked from (started on first use; None: workers start from scratch)."""
        with self._lock:
            if self._template is None and self.forks:
                self._template = shared_template(worker_env(self.env), self.python)
            return self._template

    def new_worker(self, gpu: GpuSlot | None = None) -> WorkerProcess:
        """A worker on `gpu`."""
        return WorkerProcess(self.interpret, self.env, self.python, self.launcher, self.template(), gpu=gpu)

    def start_compile_processes(self, env: dict[str, str], count: int) -> list[Any]:
        """`count` compile processes forked from the template in one request, no pipes: each reports to the
        GPU worker alone ([] without a template)."""
        template = self.template()
        if template is None:
            return []
        with trace.span("fork compile processes"):
            return template.spawn_detached(dies_with_this_process(worker_env({**self.env, **env}, self.interpret)),
                                           count)

    def start_compile_check(self, job_file: str, folder: str, gpu: GpuSlot | None = None) -> subprocess.Popen:
        """The process that runs the run's torch.compile check beside its workers (verify/compat_beside.py),
        started now, from scratch: it imports torch beside the template rather than after it."""
        env = dies_with_this_process(worker_env({**self.env, **(gpu.worker_env() if gpu else {})}))
        with open(os.path.join(folder, "stderr.txt"), "wb") as stderr:
            return subprocess.Popen([self.python, "-m", COMPILE_CHECK_MODULE, job_file, folder],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                    start_new_session=True, pass_fds=(parent_death_fd(),))

    def warm_compiler(self, target: list[Any]) -> None:
        """Compile once for `target` in the template, so the compile processes forked later start warm."""
        with self._lock:
            template = self._template
        if template is not None:
            template.warm_compiler(target)

    def close(self) -> None:
        """Nothing of the template's: it is the process's (shared_template), kept for the next runner."""
        with self._lock:
            self._template = None
