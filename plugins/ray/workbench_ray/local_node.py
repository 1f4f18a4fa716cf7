"""A Ray node started on this machine for a while (the plugin's tests, benchmarks/multi_gpu.py's `cluster`
setting): `ray start --block` in a process group of its own, stopped by killing that group. Never `ray stop`,
which stops every Ray of this user.

    process = start_node(["--head", "--num-gpus", "2", "--ray-client-server-port", str(port)], lambda: answers(port))
    ...
    stop_node(process)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Sequence


class NodeDidNotStart(RuntimeError):
    pass


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something listens on `host`:`port`."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def start_node(args: Sequence[str], ready: Callable[[], bool], timeout_s: float = 90.0) -> subprocess.Popen:
    """`ray start --block ARGS` (Ray's own CLI, run by this Python: no console script needed) in a process group of
    its own; returns once `ready()`. NodeDidNotStart, with the end of Ray's stderr, when it exits or is not ready in
    `timeout_s` (the node is stopped then)."""
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--disable-usage-stats", *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            stop_node(process)
            raise NodeDidNotStart("a Ray node did not start: "
                                  + (process.stderr.read() if process.stderr else b"").decode(errors="replace")[-2000:])
        time.sleep(0.3)
    return process


def stop_node(process: subprocess.Popen) -> None:
    """SIGKILL the node's process group (its raylet, and with it its workers), and wait for it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
