"""The parent side: the workbench's Runner, with its workers as Ray actors of one GPU each.

`RayWorkers` is a worker source (:class:`workbench.core.run.WorkerSource`) handed to the workbench's
own runner factory (``make_runner(workers=...)``): sharding over the cluster's GPUs, crash and hang
recovery, resuming and re-queueing are the Runner's own. A `RayWorker` is a
:class:`workbench.core.run.WorkerHandle` (a queue of events, a process-like exit status, kill); a
background thread polls its actor for the worker's lines. When the actor or its node dies, the worker
is marked `lost` and the Runner sends its unfinished cases to another worker.
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlparse

from workbench.commands import EXIT_ENVIRONMENT, CommandError
from workbench.core.events import LogLine, Problem, WorkerReady
from workbench.core.run import (
    GpuSlot,
    Job,
    Runner,
    event_or_log,
    lane_sizes,
    log_lines_left,
    make_runner,
    verify_lanes_per_gpu,
    wait_for_ready,
)

from .host import accelerator_type

CONNECT_TIMEOUT_S = 5.0
WAIT_READY_S = 180.0
CONNECT_ATTEMPTS = 3
POLL_WAIT_S = 0.5


class ClusterUnreachable(CommandError):
    def __init__(self, address: str, why: str):
        super().__init__(f"cannot reach the Ray cluster at {address}: {why}", EXIT_ENVIRONMENT)


def _check_reachable(address: str, timeout_s: float) -> None:
    """A ray:// address whose port does not answer fails here, in seconds (Ray's client would retry)."""
    parsed = urlparse(address)
    if parsed.scheme != "ray":
        return
    if not parsed.hostname:
        raise ClusterUnreachable(address, "give it as ray://HOST:PORT")
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 10001), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ClusterUnreachable(address, exc.strerror or str(exc) or type(exc).__name__) from None


def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """Join the Ray cluster at `address` (``ray://HOST:PORT``, or ``auto`` for one running here).

    Returns whether this call connected (and `close` should disconnect). Raises ClusterUnreachable
    (exit 3, naming the address) when it cannot.
    """
    import ray

    if ray.is_initialized():
        return False
    _check_reachable(address, timeout_s)
    import workbench
    import workbench_ray

    # The nodes get this very workbench (and this plugin) whatever they have installed.
    modules = [str(Path(workbench.__file__).parent), str(Path(workbench_ray.__file__).parent)]
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            ray.init(address=address, runtime_env={"py_modules": modules}, log_to_driver=False,
                     logging_level="ERROR")
            return True
        except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, grpc errors: all mean "not there"
            why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
            if ray.is_initialized():
                ray.shutdown()
            # The port answered: a busy head may fail to start this client's server; once more, later.
            if attempt + 1 == CONNECT_ATTEMPTS or not address.startswith("ray://"):
                raise ClusterUnreachable(address, why) from None
            time.sleep(1.0)
    return True


def cluster_cpus() -> float:
    """The CPUs the cluster's live nodes offer (Ray's resource 'CPU')."""
    import ray

    return float(ray.cluster_resources().get("CPU", 0))


def cluster_gpus() -> dict[str, int]:
    """GPUs of the cluster's live nodes by kind (Ray's accelerator_type; "GPU" when a node names none)."""
    import ray

    kinds: dict[str, int] = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources", {})
        count = int(resources.get("GPU", 0))
        if count:
            kind = accelerator_type(resources) or "GPU"
            kinds[kind] = kinds.get(kind, 0) + count
    return kinds


_HOST_CLASS: Any = None


def _host_class() -> Any:
    """WorkerHost as a Ray actor class (made once: each ray.remote() would ship the class again)."""
    global _HOST_CLASS
    if _HOST_CLASS is None:
        import ray

        from .host import WorkerHost

        _HOST_CLASS = ray.remote(WorkerHost)
    return _HOST_CLASS


MAX_SHIPPED_BYTES = 4 << 20


def project_sources(kernel_path: str) -> dict[str, str]:
    """kernel.py and the Python modules beside it (kernel.py may import them), by file name."""
    if not kernel_path:
        return {}
    kernel = Path(kernel_path)
    sources = {"kernel.py": kernel.read_text(encoding="utf-8", errors="replace")}
    size = len(sources["kernel.py"])
    for module in sorted(kernel.parent.glob("*.py")):
        if module.name in (kernel.name, "workbench_plugin.py") or not module.is_file():
            continue
        size += module.stat().st_size
        if size > MAX_SHIPPED_BYTES:
            break
        sources[module.name] = module.read_text(encoding="utf-8", errors="replace")
    return sources


class RemoteProcess:
    """What the Runner reads of a worker's process, for one that runs in an actor."""

    pid = 0

    def __init__(self) -> None:
        self.returncode: int | None = None
        self._over = threading.Event()

    def finish(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._over.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._over.wait(timeout):
            raise subprocess.TimeoutExpired("ray actor", timeout or 0)
        return self.returncode


class RayWorker:
    """A worker process in a Ray actor holding one GPU, or its share of one (`share` < 1: actors that only verify,
    several to a GPU) (a workbench.core.run.WorkerHandle)."""

    def __init__(self, interpret: bool, env: dict[str, str], actor_options: dict[str, Any], share: float = 1.0):
        self.gpu: GpuSlot | None = None  # placement is Ray's: the Runner asks for no GPU of its own
        self.placed: GpuSlot | None = None  # the GPU Ray gave the actor, once it is known
        self.where: dict[str, Any] = {}
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.ready: WorkerReady | None = None
        self.lost = ""  # why the actor, its node or the connection went away
        self.started_up = threading.Event()  # as a local worker's: its WorkerReady has come, or it ended
        self.proc = RemoteProcess()
        self._killed = False
        self._paths: list[tuple[str, str]] = []  # (a path on the node, the same here), JSON-escaped: the kernel's, its folder's
        self._log_thread = threading.Thread(target=self._pump, daemon=True)
        try:
            self.actor = _host_class().options(num_gpus=share, max_restarts=0, max_task_retries=0,
                                                **actor_options).remote(interpret, env)
        except Exception as exc:  # noqa: BLE001 - the cluster went away: wait_ready reports it (exit 3)
            self.actor = None
            self.queue.put(("event", Problem(kind="environment", message=f"no Ray worker could be started: "
                                                                         f"{type(exc).__name__}: {exc}")))
            self.proc.finish(3)
            self.queue.put(("eof", None))
            self.started_up.set()
            return
        self._log_thread.start()

    @property
    def gpu_id(self) -> str:
        return self.placed.id if self.placed else ""

    def wait_ready(self, timeout: float = WAIT_READY_S) -> WorkerReady:
        return wait_for_ready(self, timeout, "the Ray worker")

    def send_line(self, line: str) -> None:
        """A line after the job (the GPU gate): a Ray worker is never gated (RayWorkers.local is False)."""

    def _pump(self) -> None:
        import ray

        try:
            self.where = ray.get(self.actor.where.remote())
            gpu = (self.where.get("gpu_ids") or ["?"])[0]
            kind = self.where.get("accelerator_type") or ""
            self.placed = GpuSlot(id=f"{self.where.get('node_ip') or '?'}/{gpu}" + (f" {kind}" if kind else ""),
                                  name=kind or "GPU")
            while True:
                for kind, text in ray.get(self.actor.poll.remote(POLL_WAIT_S)):
                    if kind == "exit":
                        self.proc.finish(int(text))
                        self.queue.put(("eof", None))
                        self.started_up.set()
                        return
                    event = self._event(kind, text)
                    self.queue.put(("event", event))
                    if isinstance(event, WorkerReady):
                        self.started_up.set()
        except Exception as exc:  # noqa: BLE001 - an actor, a node or the connection gone
            if not self._killed:
                where = f"GPU {self.placed.id}" if self.placed else "a GPU not yet placed"
                self.lost = f"the Ray worker on {where} was lost ({type(exc).__name__}: {str(exc)[:160]})"
            self.proc.finish(-9)
            self.queue.put(("eof", None))
            self.started_up.set()

    def _event(self, kind: str, text: str) -> Any:
        if kind == "err":
            return LogLine(text=text)
        for there, here in self._paths:  # what the worker says of the node's copy of kernel.py, of this one
            text = text.replace(there, here)
        return event_or_log(text)

    def send(self, job: Job) -> None:
        import ray

        there = ray.get(self.actor.send.remote(asdict(job), project_sources(job.kernel_path)))
        if job.kernel_path:  # as the event lines spell them: JSON-escaped, once per job
            self._paths = [(json.dumps(a)[1:-1], json.dumps(b)[1:-1]) for a, b in
                           ((there, job.kernel_path), (str(Path(there).parent), str(Path(job.kernel_path).parent)))]

    def kill(self, wait: bool = True) -> None:
        import ray

        if self.proc.returncode is None and self.actor is not None:
            self._killed = True
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if wait:
            self.wait_exit()

    def wait_exit(self, timeout: float = 5.0) -> None:
        if self._log_thread.ident is not None:  # started: not when the actor never was
            self._log_thread.join(timeout)

    def drain_log(self, timeout: float = 1.0) -> list[LogLine]:
        self.wait_exit(timeout)
        return log_lines_left(self.queue)

    def close_unused(self) -> None:
        self.kill(wait=False)


class Connection:
    """This process's connection to the cluster, shared by the runners made over it (the lanes of a verify of
    several projects): the last to let go disconnects, if this process connected (`connected`)."""

    def __init__(self, connected: bool, users: int = 1):
        self.connected, self.users = connected, users
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            self.users -= 1
            last = self.users == 0
        if last and self.connected:
            import ray

            ray.shutdown()


class RayWorkers:
    """Workers placed by Ray, anywhere in the cluster (a workbench.core.run.WorkerSource): one GPU each, or
    `share` of one (a verification lane's workers, several to a GPU: verification times nothing).

    Not `local`: an actor elsewhere takes no GPU-gate line (its stages after verification start once the
    shards are gone, and its GPU is not theirs anyway), and compile processes forked here could not reach
    it. `actor_options` go to every actor (e.g. ``{"accelerator_type": "H100"}`` for one kind of GPU).
    `connected_here`: close() disconnects from the cluster, once the actors' kills have gone out; or
    `connection`, shared with other runners' sources: the last to close disconnects.
    """

    local = False

    def __init__(self, interpret: bool = False, env: dict[str, str] | None = None,
                 actor_options: dict[str, Any] | None = None, connected_here: bool = False,
                 connection: Connection | None = None, share: float = 1.0):
        self.interpret, self.env = interpret, dict(env or {})
        self.actor_options = dict(actor_options or {})
        self.connection = connection or Connection(connected_here)
        self.share = share
        self._started: list[RayWorker] = []
        self._closed = False

    def new_worker(self, gpu: GpuSlot | None = None) -> RayWorker:
        worker = RayWorker(self.interpret, self.env, self.actor_options, self.share)
        self._started = [w for w in self._started if w.proc.poll() is None] + [worker]
        return worker

    def start_compile_processes(self, env: dict[str, str], count: int) -> list[Any]:
        return []

    def warm_compiler(self, target: list[Any]) -> None:
        pass

    def close(self) -> None:
        for worker in self._started:  # let the actors' kills go out before the connection (or the process) ends
            worker.wait_exit()
        if not self._closed:  # once per source: a second close must not count as another lane letting go
            self._closed = True
            self.connection.release()


def ray_runner(interpret: bool = False, keep_warm: bool = False, parallel: int | None = None,
               actor_options: dict[str, Any] | None = None, connected_here: bool = False,
               connection: Connection | None = None, share: float = 1.0) -> Runner:
    """The workbench's Runner over Ray's workers: verification shards over every GPU of the cluster
    (`parallel`, by default all of them); the stages after it run in one fresh actor, which holds its GPU alone
    (`share` < 1 only for runners that only verify: see verify_lanes)."""
    workers = RayWorkers(interpret, actor_options=actor_options, connected_here=connected_here,
                         connection=connection, share=share)
    return make_runner(interpret=interpret, keep_warm=keep_warm, workers=workers,
                       parallel=parallel or max(1, sum(cluster_gpus().values())))


def verify_lanes(projects: int, gpus: int, cpus: int) -> tuple[int, int, float]:
    """(lanes, workers per lane, each worker's share of a GPU) for a verification of `projects` projects over a
    cluster of `gpus` GPUs and `cpus` CPUs, sized as a verify of several is on one machine (factory.lane_sizes with
    the cluster's cores): each lane verifies one project at a time. One lane: a whole GPU to each worker, one
    worker per GPU."""
    lanes, workers = lane_sizes(projects, gpus, verify_lanes_per_gpu(cpus), cores=cpus)
    if lanes == 1:
        return 1, gpus, 1.0
    actors_per_gpu = -(-lanes * workers // gpus)  # ceil: every actor of every lane placed at once
    return lanes, workers, 1.0 / actors_per_gpu if actors_per_gpu > 1 else 1.0


def connect_runner(address: str, interpret: bool, keep_warm: bool, projects: int = 1,
                   stages: Sequence[str] = ()) -> Runner | list[Runner]:
    """Connect to the cluster and check that it has GPUs; CommandError (exit 3) when it cannot be used.

    A verification of several projects (`stages` == ["verify"]) gets lanes, as on this machine: a runner each,
    verifying one project at a time, their workers sharing the cluster's GPUs (verify_lanes). Anything that
    times gets one runner, whose workers hold a GPU each."""
    connected = connect(address)
    try:
        gpus = sum(cluster_gpus().values())
        if not gpus:
            raise CommandError(f"the Ray cluster at {address} has no GPU (no node offers the resource 'GPU')",
                               EXIT_ENVIRONMENT)
        cpus = int(cluster_cpus())
    except BaseException:
        if connected:
            import ray

            ray.shutdown()
        raise
    if list(stages) != ["verify"] or projects < 2:
        return ray_runner(interpret=interpret, keep_warm=keep_warm, parallel=gpus, connected_here=connected)
    count, workers, share = verify_lanes(projects, gpus, cpus)
    connection = Connection(connected, users=count)
    return [ray_runner(interpret=interpret, keep_warm=keep_warm, parallel=workers, connection=connection, share=share)
            for _ in range(count)]
