"""Child side: a run's kernels compiled once each, in parallel, by processes that hold no CUDA context.

Most of a cold verification is Triton compiling one specialisation per case shape and dtype
(LLVM and ptxas: CPU work; executing the 23 cases of the shipped rmsnorm takes milliseconds).
Sharding the cases over GPU workers compiles in parallel but costs a fresh CUDA context per
shard per save, and nine contexts come up one after another in the driver (about 2 s on an H100,
benchmarks/RESULTS.md 3e), which must not overlap a timed benchmark. Here one GPU worker runs
every case, and the compiling is done beside it:

1. The GPU worker runs each case's `kernel_fn` once under `recording()`: Triton's own hook
   (`knobs.runtime.jit_cache_hook`, called before a JIT function compiles; returning True skips
   the compile and the launch) hands over each launch's specialisation as Triton serialises it
   (`specialization_data`); an autotuner's every config is recorded. Nothing runs on the GPU.
2. Each distinct specialisation goes, once, to the next free compile process (forked from the
   warm template, never touching CUDA: `serve_compiles`), which compiles it with Triton's
   `JITFunction.preload` into the run's Triton cache.
3. The GPU worker verifies the cases in the order their kernels become ready, loading each
   from the cache as Triton does.

An optimisation only: a specialisation that could not be recorded or compiled elsewhere is
compiled by the GPU worker itself when it runs the case, as without the pool, and errors are
met and reported there.

Channel: `multiprocessing.connection` over a Linux abstract-namespace socket, with an
authentication key; the runner chooses both per run and gives them to the GPU worker (in its
job) and to each compile process (in its environment: core.stage.CompilePoolOrder.order_for). The
order also names kernel.py, the GPU target and the run's Triton cache (both sides import kernel.py as
MODULE_NAME), so a compile process imports kernel.py while the GPU worker does, not after it. The
runner forks all of a run's compile processes in one request to the template, with no pipes.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from ..protocol import COMPILE_ORDER_ENV
from ...timing.compiled import CompileOnlyDriver, compile_only, compiling_for

CONNECT_WAIT_S = 5.0  # how long the first compile process may take to connect before the worker compiles alone
JOB_LIMIT_S = 60.0  # a compile process silent this long on one specialisation is dropped; the worker compiles it


def supported() -> bool:
    """Whether this Triton offers the hook and the preload the pool is built on (3.4 and later)."""
    try:
        from triton import knobs
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    return hasattr(knobs.runtime, "jit_cache_hook") and hasattr(JITFunction, "preload")


@dataclass(frozen=True)
class Specialisation:
    """One compile: the JIT function (its module and qualified name) and Triton's own description."""

    module: str
    name: str
    data: str  # JITFunction's specialization_data: JSON


# -- the GPU worker's side --------------------------------------------------------------------


@contextlib.contextmanager
def recording(sink: Callable[[Specialisation], None], first_config_only: bool = False) -> Iterator[None]:
    """Within: a launch of a Triton kernel (each config of an autotuner its pruning keeps, or the first of them)
    passes its specialisation to `sink` and neither compiles nor runs anything."""
    from triton import knobs

    def hook(**kwargs: Any) -> bool:
        fn, compile_ = kwargs["fn"], kwargs["compile"]
        sink(Specialisation(module=fn.module, name=fn.name, data=compile_["specialization_data"]))
        return True

    saved = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = hook
    try:
        with compile_only(first_config_only=first_config_only):
            yield
    finally:
        knobs.runtime.jit_cache_hook = saved


def record(kernel_fn: Callable[..., Any], inputs: Callable[[], list[Any]],
           first_config_only: bool = False) -> list[Specialisation]:
    """The specialisations one call of `kernel_fn(*inputs())` launches (none when it fails). `first_config_only`:
    an autotuner's first config its pruning keeps, not each (a generated case: verify/quick_tuning.py)."""
    found: list[Specialisation] = []
    try:
        with recording(found.append, first_config_only):
            kernel_fn(*inputs())
    except Exception:  # noqa: BLE001 - the case meets it again when it runs, and reports it
        pass
    return list(dict.fromkeys(found))


MODULE_NAME = "workbench_kernel_pooled"  # kernel.py's module name in the GPU worker and its compile processes


class CompilePool:
    """The GPU worker's end: hands each specialisation, once, to the next free compile process,
    and says which are compiled (or failed: then the worker compiles it itself)."""

    def __init__(self, address: str, authkey: bytes, expected: int):
        from multiprocessing.connection import Listener

        self._listener = Listener(address, family="AF_UNIX", authkey=authkey)
        self._expected = expected
        self._jobs: queue.Queue[Specialisation | None] = queue.Queue()
        self._state: dict[Specialisation, str] = {}  # "queued", "done", "failed"
        self._changed = threading.Condition()
        self._connected = 0
        self._serving = 0
        self._closed = False
        self._opened = time.monotonic()
        self.first_compiles: list[float] = []  # seconds of each process's first compile (its compiler's first use)
        self.later_compiles: list[float] = []  # ... and of the others
        self.stage_seconds: dict[str, float] = {}  # summed over every compile, by Triton's stage (STAGE_NAMES)
        self.recorded_s = 0.0  # the recording pass, in this process
        self._first_sent: float | None = None  # when the first specialisation went out (time.monotonic)
        self._last_done: float | None = None  # ... and the last compile came back
        threading.Thread(target=self._accept, name="compile-pool-accept", daemon=True).start()

    # Each compile process gets one thread here, pulling the next specialisation when it is free.
    def _accept(self) -> None:
        for _ in range(self._expected):
            try:
                conn = self._listener.accept()
            except Exception:  # noqa: BLE001 - closed, or a peer without the key: stop accepting
                return
            with self._changed:
                self._connected += 1
                self._serving += 1
            threading.Thread(target=self._serve, args=(conn,), name="compile-pool-conn", daemon=True).start()

    def _serve(self, conn: Any) -> None:
        job: Specialisation | None = None
        compiled = self.first_compiles
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    self._jobs.put(None)  # for the other connections
                    conn.send(None)
                    return
                conn.send((job.module, job.name, job.data))
                if self._first_sent is None:
                    self._first_sent = time.monotonic()
                if not conn.poll(JOB_LIMIT_S):
                    raise OSError("a compile process stopped answering")
                ok, seconds, stages = conn.recv()
                self._last_done = time.monotonic()
                compiled.append(seconds)
                compiled = self.later_compiles
                with self._changed:
                    for stage, spent in stages.items():
                        self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + spent
                self._mark(job, "done" if ok else "failed")
                job = None
        except (EOFError, OSError):
            if job is not None:
                self._mark(job, "failed")
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with self._changed:
                self._serving -= 1
                self._changed.notify_all()

    def _mark(self, job: Specialisation, state: str) -> None:
        with self._changed:
            self._state[job] = state
            self._changed.notify_all()

    def submit(self, specs: Iterable[Specialisation]) -> None:
        for spec in specs:
            with self._changed:
                if spec in self._state:
                    continue
                self._state[spec] = "queued"
            self._jobs.put(spec)

    def _settled(self, spec: Specialisation) -> bool:
        return self._state.get(spec, "done") in ("done", "failed")

    def _nobody_left(self) -> bool:
        """No compile process is (or will be) serving: what is not compiled, the worker compiles itself."""
        if self._closed:
            return True
        if self._connected == 0:
            return time.monotonic() - self._opened > CONNECT_WAIT_S
        return self._serving == 0

    def wait_any(self, groups: list[list[Specialisation]]) -> int:
        """The index of the first group whose specialisations are all compiled (or given up on)."""
        with self._changed:
            while True:
                for n, group in enumerate(groups):
                    if all(self._settled(s) for s in group):
                        return n
                if self._nobody_left():
                    return 0
                self._changed.wait(0.05)

    def in_compiled_order(self, items: list[Any], specs: list[list[Specialisation]]) -> Iterator[Any]:
        """`items`, each once its specialisations are compiled: the first ready first, else in order."""
        pending = list(zip(items, specs))
        while pending:
            n = self.wait_any([group for _, group in pending])
            item, _ = pending.pop(n)
            yield item

    def ahead(self, km: Any, cases: list[Any], later: list[Any],
              announce: Callable[[Any], None] = lambda case: None, later_km: Any = None) -> Iterator[Any]:
        """Record what `cases` (then `later`, a benchmark's, through `later_km` when given) compile, hand it all
        out, and return `cases` in the order they become ready to run. `km`: the module as verification calls it
        (a training kernel's kernel_fn with its backward: verify/gradients.for_training, so the backward's kernels
        compile here too). `announce(case)` before each case's launcher runs: a hang or a crash in it is that
        case's (stage.RECORDING)."""
        import torch

        started = time.perf_counter()
        specs = []
        for case in cases:
            announce(case)
            # A generated case forces no config: its tuners take their first config untimed, and only it compiles.
            specs.append(record(km.kernel_fn, lambda case=case: km.get_inputs(**case.params),
                                first_config_only=case.generated))
            self.submit(specs[-1])
        later_km = later_km or km
        for case in later:
            announce(case)
            self.submit(record(later_km.kernel_fn, lambda case=case: later_km.get_inputs(**case.params)))
        torch.cuda.empty_cache()  # the recorded cases' inputs (a benchmark's can be large): once, not per case
        self.recorded_s = time.perf_counter() - started
        return self.in_compiled_order(cases, specs)

    def close(self, wait: bool = False) -> None:
        """No more work: each compile process is told so after its current compile (`wait`: until every
        queued compile is over), and exits."""
        if wait:
            with self._changed:
                while not all(self._settled(s) for s in self._state) and not self._nobody_left():
                    self._changed.wait(0.05)
        self._jobs.put(None)
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        with contextlib.suppress(OSError):
            self._listener.close()

    def summary(self) -> dict[str, Any]:
        with self._changed:
            states = list(self._state.values())
            stages = dict(self.stage_seconds)
        later = sorted(self.later_compiles) or [0.0]
        return {"specialisations": len(states), "compiled": states.count("done"), "failed": states.count("failed"),
                "processes": self._connected, "recorded_s": round(self.recorded_s, 3),
                "compile_s": round(sum(self.first_compiles) + sum(self.later_compiles), 3),
                "first_compile_s": round(max(self.first_compiles or [0.0]), 3),
                "later_compile_s": round(later[len(later) // 2], 3),
                "first_sent_s": round(self._first_sent - self._opened, 3) if self._first_sent else None,
                "last_done_s": round(self._last_done - self._opened, 3) if self._last_done else None,
                "stages_s": {k: round(v, 3) for k, v in sorted(stages.items(), key=lambda kv: -kv[1])}}

    def describe(self) -> str:
        s = self.summary()
        text = (f"{s['compiled']} of {s['specialisations']} kernel specialisations compiled by {s['processes']} "
                f"processes beside the GPU worker ({s['compile_s']:.2f} s of compiling so far; recorded in "
                f"{s['recorded_s']:.3f} s; slowest first compile {s['first_compile_s']:.2f} s, later ones "
                f"{s['later_compile_s']:.2f} s)")
        if s["first_sent_s"] is not None and s["last_done_s"] is not None:
            text += (f"; after the job came: first handed out {s['first_sent_s']:.3f} s, last back "
                     f"{s['last_done_s']:.3f} s")
        if s["stages_s"]:
            text += "; Triton's stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in s["stages_s"].items())
        return text + (f"; {s['failed']} left to the GPU worker" if s["failed"] else "")


def target_of_this_process() -> list[Any]:
    """The GPU target Triton compiles for here, as (backend, arch, warp size)."""
    from triton.runtime.driver import driver

    target = driver.active.get_current_target()
    return [target.backend, target.arch, target.warp_size]


# -- the compile process ----------------------------------------------------------------------


def warm_compiler_for(target: list) -> None:
    """In the fork template, once the target is known: one compile for it (nothing launched, no CUDA), so the
    compile processes forked afterwards inherit a compiler past its first use (H100: a process's first compile
    took 0.41 s where later ones took 0.19 s). Leaves no compiled kernel behind in the template."""
    import tempfile

    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    from .compiler_warmup import _bump

    if not hasattr(driver, "_active"):
        return  # a Triton whose driver cannot be swapped back without asking CUDA: skip the head start
    saved_cache = os.environ.get("TRITON_CACHE_DIR")
    try:
        with compiling_for(GPUTarget(*target)), tempfile.TemporaryDirectory(prefix="workbench-warmup-") as scratch:
            os.environ["TRITON_CACHE_DIR"] = scratch
            _bump.warmup(torch.zeros(16), 16, STEP=3, BLOCK=16, grid=(1,))
    finally:
        _bump.device_caches.clear()
        if saved_cache is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved_cache


def find_jit_function(module: Any, qualname: str) -> Any:
    """The JITFunction `qualname` names in `module` (through autotuner/heuristics wrappers)."""
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    while not hasattr(obj, "preload") and hasattr(obj, "fn"):
        obj = obj.fn
    return obj


def serve_compiles() -> int:
    """A compile process's life: read its order, import kernel.py as the GPU worker names it (while the
    worker imports it too), connect to the worker, compile what it is handed until told there is no more."""
    from multiprocessing.connection import Client

    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    from .launcher_cache import MANAGER

    order = json.loads(os.environ.pop(COMPILE_ORDER_ENV, "") or "null")
    if not order:
        return 0
    driver.set_active(CompileOnlyDriver(GPUTarget(*order["target"])))
    if order.get("cache_dir"):
        os.environ["TRITON_CACHE_DIR"] = order["cache_dir"]
    os.environ.setdefault("TRITON_CACHE_MANAGER", MANAGER)  # as the GPU worker's (run/worker.py)
    modules = _import_kernel(order["kernel_path"], MODULE_NAME)
    stages = _listen_to_stages()
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        try:
            conn = Client(order["address"], family="AF_UNIX", authkey=bytes.fromhex(order["authkey"]))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                return 0
            time.sleep(0.002)
    with conn, contextlib.suppress(EOFError, OSError):  # the GPU worker gone (killed, crashed): so is this
        return _compile_for(conn, modules, stages)
    return 0


# Triton's compile stages (its compilation listener's names) as the pool's account names them.
STAGE_NAMES = {"ir": "Python to TTIR", "ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR", "ptx": "PTX",
               "cubin": "ptxas", "store": "cache writes"}


def _listen_to_stages() -> dict[str, float]:
    """Seconds of the last compile, by stage, as Triton's own compilation listener reports them (empty
    with a Triton that has none)."""
    from triton import knobs

    last: dict[str, float] = {}
    if not hasattr(knobs.compilation, "listener"):
        return last

    def listener(*, times: Any, cache_hit: bool, **_: Any) -> None:
        if cache_hit:
            return
        spent = {"ir": times.ir_initialization, "store": times.store_results, **dict(times.lowering_stages)}
        last.update({STAGE_NAMES.get(k, k): us / 1e6 for k, us in spent.items()})

    knobs.compilation.listener = listener
    return last


def _compile_for(conn: Any, modules: dict[str, Any], stages: dict[str, float]) -> int:
    """Compile what the GPU worker hands out, one specialisation at a time, until it says there is no more."""
    while True:
        job = conn.recv()
        if job is None:
            return 0
        module, name, data = job
        stages.clear()
        started = time.perf_counter()
        try:
            find_jit_function(modules.get(module) or sys.modules[module], name).preload(data)
            ok = True
        except Exception:  # noqa: BLE001 - the GPU worker compiles it itself and reports what fails
            ok = False
        conn.send((ok, round(time.perf_counter() - started, 4), dict(stages)))


def _import_kernel(path: str, name: str) -> dict[str, Any]:
    from pathlib import Path

    from ...project.contract import ContractError, load_kernel

    try:
        return {name: load_kernel(Path(path), module_name=name).module}
    except ContractError:
        return {}
