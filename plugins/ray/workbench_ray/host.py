"""The Ray side: an actor holding one GPU that runs the workbench's own worker process on its node.

The actor starts ``python -m workbench.core.run.child.worker`` (which warms up and says ``worker_ready``),
hands it one job, and gives back what it prints, line by line, each time the parent polls. The
worker's CUDA_VISIBLE_DEVICES is the one GPU Ray gave the actor. The kernel's source travels with
the job and is written to a folder of the node's own: the node need not share the project's disk.

Imports neither torch nor the worker's modules: the actor only carries lines.
"""

from __future__ import annotations

import ctypes
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the worker, before exec: the kernel dies with the actor (a killed actor leaves no worker on its GPU)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def accelerator_type(resources: dict[str, Any]) -> str:
    """The GPU kind a Ray node advertises (its "accelerator_type:<kind>" resource), or ""."""
    return next((k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")), "")


FOLDER_PREFIX = "workbench-ray-"  # + the actor's pid: a folder whose actor is gone (killed) is stale


def sweep_stale_folders(root: Path | None = None) -> list[Path]:
    """Remove the folders of actors that are gone (an actor killed by Ray never cleans up after itself); each
    host sweeps when it starts. Returns what it removed."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*"):
        pid = folder.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not folder.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its actor still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # another user's actor
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


class WorkerHost:
    """One worker process on the node this actor was placed on (Ray sets its CUDA_VISIBLE_DEVICES)."""

    def __init__(self, interpret: bool, env: dict[str, str]):
        from workbench.core.run import (  # this node's copy of the workbench
            WORKER_MODULE,
            worker_env,
        )

        sweep_stale_folders()
        self.folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
        child_env = worker_env(env, interpret)
        self.proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env, text=True,
                                     encoding="utf-8", errors="replace", bufsize=1, preexec_fn=_die_with_parent)
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        readers = [threading.Thread(target=self._read, args=(self.proc.stdout, "out"), daemon=True),
                   threading.Thread(target=self._read, args=(self.proc.stderr, "err"), daemon=True)]
        for reader in readers:
            reader.start()
        threading.Thread(target=self._await_exit, args=(readers,), daemon=True).start()

    def _read(self, stream: Any, kind: str) -> None:
        for line in stream:
            self.lines.put((kind, line.rstrip("\n")))

    def _await_exit(self, readers: list[threading.Thread]) -> None:
        for reader in readers:
            reader.join()
        code = self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)  # the kernel's copy and its Triton cache
        self.lines.put(("exit", str(code)))

    def where(self) -> dict[str, Any]:
        """The node and GPU this actor holds, and the kind of GPU (Ray's accelerator_type)."""
        import ray

        context = ray.get_runtime_context()
        node_id = context.get_node_id()
        node = next((n for n in ray.nodes() if n.get("NodeID") == node_id), {})
        return {"node_ip": node.get("NodeManagerAddress", ""),
                "gpu_ids": [str(g) for g in context.get_accelerator_ids().get("GPU", [])],
                "accelerator_type": accelerator_type(node.get("Resources", {}))}

    def send(self, job: dict[str, Any], sources: dict[str, str]) -> str:
        """Write the kernel (and the modules beside it) here, point the job at it, hand it to the worker;
        returns the kernel's path here."""
        import json

        for name, text in sources.items():
            (self.folder / Path(name).name).write_text(text, encoding="utf-8")
        path = self.folder / "kernel.py"
        job = {**job, "kernel_path": str(path) if job.get("kernel_path") else "",
               "cache_dir": str(self.folder / "triton-cache")}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return str(path)

    def poll(self, wait_s: float = 0.5, most: int = 500) -> list[tuple[str, str]]:
        """The lines printed since the last poll (waiting up to `wait_s` for the first); ("exit", status) last."""
        batch: list[tuple[str, str]] = []
        try:
            batch.append(self.lines.get(timeout=wait_s))
            while len(batch) < most:
                batch.append(self.lines.get_nowait())
        except queue.Empty:
            pass
        return batch
