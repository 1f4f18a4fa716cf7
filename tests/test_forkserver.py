"""Workers forked from the warm template (run/forkserver.py), and launchers kept across saves."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from workbench.core.run.forkserver import ForkServer
from workbench.core.run.workers import worker_env


def first_event(proc, timeout: float = 120.0) -> dict:
    """The first JSON line a worker writes (its worker_ready), read with a deadline."""
    import select

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if line.strip():
                return json.loads(line)
    raise AssertionError("no worker_ready within the deadline")


@pytest.fixture
def server():
    server = ForkServer(worker_env({"WORKBENCH_INTERPRET": "1"}))
    yield server
    server.close()


@pytest.mark.slow
def test_a_forked_worker_warms_up_in_its_own_session_and_reports_its_exit(server):
    proc = server.spawn(worker_env({"WORKBENCH_INTERPRET": "1"}))
    ready = first_event(proc)
    assert ready["type"] == "worker_ready" and ready["mode"] == "interpreter"
    assert proc.pid == ready["pid"] != os.getpid()
    assert os.getpgid(proc.pid) == proc.pid  # its own process group: the runner kills the group
    assert proc.poll() is None
    os.kill(proc.pid, signal.SIGSEGV)
    assert proc.wait(timeout=30) == -signal.SIGSEGV  # the status a started worker would give


@pytest.mark.slow
def test_a_worker_with_no_job_exits_cleanly(server):
    proc = server.spawn(worker_env({"WORKBENCH_INTERPRET": "1"}))
    first_event(proc)
    proc.stdin.close()  # the parent lets an unused spare go
    assert proc.wait(timeout=30) == 0


@pytest.mark.slow
def test_a_worker_says_where_its_warm_up_went(server):
    """WorkerReady lists each warm-up step's seconds (a GPU worker: its CUDA context, first Triton launch and
    compile, the battery's torch ops): how benchmarks/worker_warmup.py and loop_latency.py --trace see it."""
    proc = server.spawn(worker_env({"WORKBENCH_INTERPRET": "1"}))
    ready = first_event(proc)
    assert list(ready["warmup_phases"]) == ["judge forked"] and 0 <= ready["warmup_phases"]["judge forked"] < 60
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


@pytest.mark.slow
def test_workers_start_from_scratch_once_the_template_is_gone(server):
    first = server.spawn(worker_env({"WORKBENCH_INTERPRET": "1"}))
    first_event(first)
    server.proc.kill()
    server.proc.wait()
    deadline = time.monotonic() + 10
    while server.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.alive()
    second = server.spawn(worker_env({"WORKBENCH_INTERPRET": "1"}))
    assert first_event(second)["type"] == "worker_ready"
    assert second._popen is not None  # started as `python -m workbench.core.run.child.worker`
    second.stdin.close()
    assert second.wait(timeout=30) == 0
    first.kill()
    assert first.wait(timeout=30) == -signal.SIGKILL  # its status went with the template: called killed


def test_detached_children_come_from_one_request_and_from_scratch_once_the_template_is_gone(server):
    """Compile processes are forked N at a time with no pipes (their order is in their environment; with none
    they exit at once); without the template each is started as `python -m workbench.core.run.child.worker`."""
    env = worker_env({"WORKBENCH_INTERPRET": "1", "WORKBENCH_ROLE": "compile"})
    children = server.spawn_detached(env, 3)
    assert [c.wait(timeout=120) for c in children] == [0, 0, 0]
    assert len({c.pid for c in children}) == 3 and all(c._popen is None for c in children)  # forked
    assert all(c.stdin is None and c.stdout is None for c in children)
    server.proc.kill()
    server.proc.wait()
    deadline = time.monotonic() + 10
    while server.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    later = server.spawn_detached(env, 2)
    assert [c.wait(timeout=120) for c in later] == [0, 0]
    assert all(c._popen is not None for c in later)  # started from scratch
    assert server.spawn_detached(env, 0) == []


@pytest.mark.slow
def test_a_worker_killed_before_its_fork_is_killed_when_it_comes(server):
    proc = server.spawn(worker_env({"WORKBENCH_INTERPRET": "1"}))
    proc.kill()  # the template may still be warming: no pid yet
    assert proc.wait(timeout=120) == -signal.SIGKILL


def test_launchers_go_to_the_workbench_cache_and_everything_else_to_the_project_cache(tmp_path, monkeypatch):
    pytest.importorskip("triton.runtime.cache")
    from workbench.core.run.child.launcher_cache import (
        EXTENSION_SUFFIX,
        LauncherKeepingCache,
    )

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "project-cache"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "workbench-cache"))
    cache = LauncherKeepingCache("KEY")
    launcher = cache.put(b"\x7fELF", f"__triton_launcher{EXTENSION_SUFFIX}")
    cubin = cache.put(b"cubin", "rmsnorm_kernel.cubin")
    assert launcher.startswith(str(tmp_path / "workbench-cache" / "triton-launchers" / "KEY"))
    assert cubin.startswith(str(tmp_path / "project-cache" / "KEY"))
    # A save clears the project's cache: the kernel is gone, the launcher is still found.
    import shutil

    shutil.rmtree(tmp_path / "project-cache")
    again = LauncherKeepingCache("KEY")
    assert again.get_file("rmsnorm_kernel.cubin") is None
    assert again.get_file(f"__triton_launcher{EXTENSION_SUFFIX}") == launcher


def test_the_battery_warm_up_runs(monkeypatch):
    """A GPU worker swallows a failing warm-up (it is only a head start): this is where it would show.
    Run on the CPU, "cuda" mapped to the CPU as the interpreter's workers map it."""
    import torch

    from workbench.core.run.child import compiler_warmup
    from workbench.core.verify.torchmodes import CudaToCpu

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    with CudaToCpu():
        compiler_warmup.warm_battery_ops(torch)


def test_every_module_the_template_preloads_exists():
    """The template skips a module it cannot import (the worker then meets the error itself): a
    renamed module would silently stop being shared by the forks."""
    import importlib

    from workbench.core.run.child.template import PRELOAD

    for name in PRELOAD:
        importlib.import_module(name)


def test_workers_keep_torch_compiles_caches_in_the_workbench_cache_unless_told(tmp_path, monkeypatch):
    """One folder for a CI cache step: the ceilings and torch.compile's caches (Inductor's default is /tmp)."""
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "wb"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert worker_env()["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "wb" / "inductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert worker_env()["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def test_the_runners_of_a_process_share_one_template_per_import_environment(monkeypatch):
    """LocalWorkers of one process fork from one template (shared_template): a second runner pays no torch import;
    a template whose imports could differ (the interpreter asked for) is another; closing a runner leaves the
    template to the next; a compile target is warmed once however many runners ask."""
    from workbench.core.run import workers as workers_module
    from workbench.core.run.workers import LocalWorkers

    started = []

    class Template:
        def __init__(self, env, python):
            started.append(env)
            self.asked, self.closed = [], False

        def alive(self):
            return not self.closed

        def close(self):
            self.closed = True

    monkeypatch.setattr(workers_module, "ForkServer", Template)
    monkeypatch.setattr(workers_module, "_templates", {})
    monkeypatch.delenv("WORKBENCH_FORKSERVER", raising=False)
    first, second = LocalWorkers(), LocalWorkers(env={"TRITON_CACHE_DIR": "/tmp/elsewhere"})
    assert first.template() is second.template() and len(started) == 1
    first.close()
    assert not second.template().closed and LocalWorkers().template() is second.template()
    interpreting = LocalWorkers(env={"WORKBENCH_INTERPRET": "1"})
    assert interpreting.template() is not first.template() and len(started) == 2
    second.template().closed = True  # died: the next runner gets a fresh one
    assert LocalWorkers().template() is not second.template() and len(started) == 3


def test_a_compile_target_is_warmed_once_in_a_shared_template(server):
    asked = []

    class Requests(list):
        def append(self, request):
            asked.append(request[1])
            super().append(request)

    with server._lock:
        server._requests = Requests(server._requests)
    server.warm_compiler(["cuda", 90, 32])
    server.warm_compiler(["cuda", 90, 32])
    server.warm_compiler(["cuda", 80, 32])
    assert asked == [{"warm_compiler": ["cuda", 90, 32]}, {"warm_compiler": ["cuda", 80, 32]}]
