"""Child side: the warm template that workers are forked from (the parent's client: run/forkserver.py).

Started by the parent as ``python -m workbench.core.run.child.template FD``: imports torch, triton and
the workbench's worker-side modules once (PRELOAD), never touches CUDA, and forks a worker (or several
compile processes) on each request over the socket FD. The protocol is described in run/forkserver.py.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import sys
from typing import Sequence

from ...exit_codes import EXIT_FORK_FAILED
from ..protocol import COMPILE_TARGET_ENV, WORKER_MODULE, die_with_parent

# What every worker imports before its job: loaded once here, shared by every fork.
PRELOAD = ("torch", "triton", "triton.language", "workbench.core.events", "workbench.core.stage",
           "workbench.core.project.config", "workbench.core.project.contract", "workbench.core.project.folder",
           "workbench.core.verify.battery", "workbench.core.timing.bench", "workbench.core.run.child.precompile",
           "workbench.core.verify.handoff", "workbench.core.verify.judge", "workbench.core.run.child.judge_process",
           WORKER_MODULE)


def serve(sock: socket.socket) -> int:
    import importlib
    import warnings

    # A fork after these imports is the point; Python's warning about forking a process that
    # may have threads would land in every worker's log.
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    # triton.language's own @jit functions become interpreter functions only when TRITON_INTERPRET
    # is set as it is imported: the template serves one mode, chosen as a worker chooses it.
    interpret = (os.environ.get("WORKBENCH_INTERPRET") == "1" or not _gpu_visible()) \
        and not os.environ.get(COMPILE_TARGET_ENV)
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the worker meets and reports the same failure itself
            pass
    if not interpret:
        _hash_triton_once()
    sock.send(json.dumps({"ready": True}).encode())
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([sock], [], [], 0.05 if children else None)
        _reap(sock, children)
        if not readable:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        except OSError:
            return 0
        if not message:
            return 0  # the parent is gone; running children live on in their own sessions
        request = json.loads(message)
        if "warm_compiler" in request:
            _warm_compiler(request["warm_compiler"])
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        for _ in range(int(request.get("count", 1))):
            pid = os.fork()
            if pid == 0:
                sock.close()
                _become_worker(fds, request["env"], interpret)  # never returns
            children.add(pid)
            sock.send(json.dumps({"pid": pid}).encode())
        for fd in fds:
            os.close(fd)


def _hash_triton_once() -> None:
    """Triton keys its cache on a hash of its own sources and its compiled library (hundreds of MB), once
    per process, on the first compile or cache lookup: about 0.5 s of a GPU worker's warm-up on an H100
    host (benchmarks/worker_warmup.py --profile). Computed here, it is inherited by every fork."""
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # noqa: BLE001 - then each worker computes it, as without the template
        pass


def _warm_compiler(target: list) -> None:
    try:
        from .compile_pool import warm_compiler_for

        warm_compiler_for(target)
    except Exception:  # noqa: BLE001 - each compile process then pays its compiler's first use itself
        pass


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)
        try:
            sock.send(json.dumps({"exit": pid, "code": code}).encode())
        except OSError:
            pass


def _gpu_visible() -> bool:
    """Whether torch sees a GPU, asked through NVML: CUDA itself must stay down in the template
    (a CUDA context does not survive a fork)."""
    saved = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - then the workers find out for themselves, in interpreter mode
        return False
    finally:
        if saved is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved


def _become_worker(fds: Sequence[int], env: dict[str, str], template_interprets: bool) -> None:
    code = EXIT_FORK_FAILED
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        hides_gpus = env.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1")
        if not template_interprets and (env.get("WORKBENCH_INTERPRET") == "1" or hides_gpus):
            # An interpreter worker asked of a GPU template: triton must be imported afresh for it.
            os.execve(sys.executable, [sys.executable, "-m", WORKER_MODULE], env)
        os.environ.clear()
        os.environ.update(env)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True)
        sys.argv = [WORKER_MODULE]
        from . import worker

        code = worker.main()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - the child must never return into the template's loop
        try:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def main() -> int:
    die_with_parent()  # its forks start their own watch (threads do not survive a fork)
    fd = int(sys.argv[1])
    sock = socket.socket(fileno=fd)
    return serve(sock)



if __name__ == "__main__":
    os._exit(main())
