"""Parent side: workers forked from one warm template process (the template itself: run/child/template.py), instead of each starting Python, torch and triton.

A worker started from scratch spends seconds of CPU importing torch and triton (on a 16-core GPU
machine: 5.8 s wall, 7.8 s of CPU each, measured in benchmarks/compile_breakdown.py), and a live
loop starts a dozen per save to keep spares warm. Those start-ups land on the same cores as the
run in flight and slow its compiles. The template imports torch, triton and the workbench's
worker-side modules once, never touches CUDA, and forks a worker on request: the child brings its
own CUDA context up and warms the compiler (0.8 s wall, 0.7 s of CPU), then runs
`child/worker.main` exactly as a started one does. Every run still imports kernel.py afresh, in a
fresh child.

Protocol (a SOCK_SEQPACKET socket pair; one JSON message per packet):
  parent -> template   {"env": {...}} with three descriptors (the child's stdin, stdout, stderr);
                       {"env": {...}, "count": N}: N children sharing those descriptors (compile processes);
                       {"warm_compiler": [backend, arch, warp size]}: compile once for that GPU target
                       (no CUDA), so compile processes forked later start warm (run/child/compile_pool.py)
  template -> parent   {"ready": true} once; {"pid": N} per child forked; {"exit": N, "code": C} when a
                       child ends (C as subprocess reports it: negative for a signal)
The template ends when the parent's end of the socket closes. A child is a session leader (its
pid is its process group), as a started worker is.

`ForkServer.spawn` returns a `ForkedProcess`, which has the parts of `subprocess.Popen` the runner
uses. Where the template cannot start, the runner starts workers as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from .protocol import (
    TEMPLATE_MODULE,
    WORKER_MODULE,
    dies_with_this_process,
    parent_death_fd,
)

READY_TIMEOUT_S = 180.0


# -- the parent's side ------------------------------------------------------------------------


class ForkedProcess:
    """A worker asked of the template: the parts of `subprocess.Popen` the runner uses.

    It exists at once, with its pipes; the fork happens when the template is warm. Should the
    template fail, the same pipes go to a worker started from scratch instead (`fallback`).
    """

    def __init__(self, server: "ForkServer", stdin: Any, stdout: Any, stderr: Any):
        self._server = server
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.pid: int | None = None
        self.returncode: int | None = None
        self._popen: subprocess.Popen | None = None
        self._started = threading.Event()
        self._ended = threading.Event()
        self._killed = False

    def _forked(self, pid: int) -> None:
        self.pid = pid
        self._started.set()
        if self._killed:
            self.kill()

    def _fallback(self, popen: subprocess.Popen) -> None:
        self._popen, self.pid = popen, popen.pid
        self._started.set()
        if self._killed:
            self.kill()
        threading.Thread(target=lambda: self._exited(popen.wait()), daemon=True).start()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        if self.returncode is None and self.pid is not None and self._popen is None and not self._server.alive():
            self._lost()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended.wait(0.2):
            if self.poll() is not None:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def _lost(self) -> None:
        """The template died, so this exit status can no longer be learned: once the process is
        gone, call it killed."""
        try:
            os.kill(self.pid, 0)  # type: ignore[arg-type]
            return  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            return
        self._exited(-signal.SIGKILL)

    def kill(self) -> None:
        self._killed = True
        if self.pid is None:
            return  # killed the moment it exists
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class ForkServer:
    """Starts the template in the background; `spawn` asks it for a worker and returns at once."""

    def __init__(self, env: dict[str, str], python: str = sys.executable):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock, self._python = parent, python
        # The template and every child it forks hold the parent-death pipe's read end (run/protocol.py).
        self.proc = subprocess.Popen([python, "-m", TEMPLATE_MODULE, str(child.fileno())],
                                     pass_fds=(child.fileno(), parent_death_fd()), env=dies_with_this_process(env),
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        child.close()
        self._ready = threading.Event()
        self._failed = False
        self._lock = threading.Lock()
        # (children, message, their descriptors); no children: a message for the template itself
        self._requests: list[tuple[list[ForkedProcess], dict[str, Any], list[int]]] = []
        self._wakeup = threading.Condition(self._lock)
        self._awaiting_pid: list[ForkedProcess] = []  # sent, in order: the template answers in order
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}
        self._warmed: set[tuple] = set()  # the compile targets asked of the template (warm_compiler)
        threading.Thread(target=self._read, name="workbench-forkserver-read", daemon=True).start()
        threading.Thread(target=self._send, name="workbench-forkserver-send", daemon=True).start()

    def alive(self) -> bool:
        return not self._failed and self.proc.poll() is None

    def warm_compiler(self, target: list) -> None:
        """Ask the template to compile once for `target` before it forks anything else (once per target: the
        runners that share the template ask it each)."""
        with self._wakeup:
            if not self._failed and tuple(target) not in self._warmed:
                self._warmed.add(tuple(target))
                self._requests.append(([], {"warm_compiler": target}, []))
                self._wakeup.notify_all()

    def spawn(self, env: dict[str, str]) -> ForkedProcess:
        pipes = [os.pipe() for _ in range(3)]
        child_ends = [pipes[0][0], pipes[1][1], pipes[2][1]]
        child = ForkedProcess(self, open(pipes[0][1], "w", encoding="utf-8", buffering=1),
                              open(pipes[1][0], encoding="utf-8", errors="replace"),
                              open(pipes[2][0], encoding="utf-8", errors="replace"))
        self._ask([child], {"env": env}, child_ends)
        return child

    def spawn_detached(self, env: dict[str, str], count: int) -> list[ForkedProcess]:
        """`count` children with no pipes (their stdin, stdout and stderr are /dev/null), forked in one
        request: processes told everything by `env` that report to no one (compile processes)."""
        children = [ForkedProcess(self, None, None, None) for _ in range(count)]
        if children:
            self._ask(children, {"env": env, "count": count},
                      [os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY), os.open(os.devnull, os.O_WRONLY)])
        return children

    def _ask(self, children: list[ForkedProcess], message: dict[str, Any], child_ends: list[int]) -> None:
        with self._wakeup:
            queued = not self._failed
            if queued:
                self._requests.append((children, message, child_ends))
                self._wakeup.notify_all()
        if not queued:
            for child in children:
                self._start_from_scratch(child, message["env"], child_ends)
            for fd in child_ends:
                os.close(fd)

    def _send(self) -> None:
        if not self._ready.wait(READY_TIMEOUT_S):
            self._fail()
        while True:
            with self._wakeup:
                while not self._requests and not self._failed:
                    self._wakeup.wait()
                if not self._requests:
                    return  # failed, and nothing asked for: spawn starts workers itself from now on
                children, message, child_ends = self._requests.pop(0)
                if not children:  # a message for the template itself
                    with contextlib.suppress(OSError):
                        self._sock.send(json.dumps(message).encode())
                    continue
                sent = False
                if not self._failed:
                    try:
                        socket.send_fds(self._sock, [json.dumps(message).encode()], child_ends)
                        self._awaiting_pid.extend(children)
                        sent = True
                    except OSError:
                        self._failed = True
            if not sent:
                for child in children:
                    self._start_from_scratch(child, message["env"], child_ends)
            for fd in child_ends:
                os.close(fd)

    def _start_from_scratch(self, child: ForkedProcess, env: dict[str, str], child_ends: list[int]) -> None:
        child._fallback(subprocess.Popen([self._python, "-m", WORKER_MODULE], stdin=child_ends[0],
                                         stdout=child_ends[1], stderr=child_ends[2], env=dies_with_this_process(env),
                                         pass_fds=(parent_death_fd(),), start_new_session=True))

    def _read(self) -> None:
        try:
            while True:
                data = self._sock.recv(1 << 16)
                if not data:
                    break
                message = json.loads(data)
                if message.get("ready"):
                    self._ready.set()
                elif "pid" in message:
                    with self._lock:
                        child = self._awaiting_pid.pop(0)
                        self._children[message["pid"]] = child
                        code = self._early_exits.pop(message["pid"], None)
                    child._forked(message["pid"])
                    if code is not None:
                        child._exited(code)
                elif "exit" in message:
                    with self._lock:
                        child = self._children.pop(message["exit"], None)
                    if child is not None:
                        child._exited(message["code"])
        except (OSError, ValueError):
            pass
        self._fail()

    def _fail(self) -> None:
        """The template is gone or never came up: asked-for workers start from scratch; forked ones
        that have ended are called killed (their status went with the template)."""
        with self._wakeup:
            self._failed = True
            self._ready.set()
            unanswered, self._awaiting_pid = self._awaiting_pid, []
            forked, self._children = list(self._children.values()), {}
            self._wakeup.notify_all()
        for child in unanswered:  # sent but never forked: nothing holds its pipes' far ends any more
            child._exited(-signal.SIGKILL)
        for child in forked:
            child.poll()

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


