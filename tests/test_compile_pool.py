"""A run's kernels compiled by processes without a GPU (run/compile_pool.py).

Triton compiles for a GPU target without a GPU: LLVM and ptxas ship with its wheel. These tests record
specialisations in one process, compile them in compile processes (the worker module in its compile role)
and find them in the Triton cache afterwards, all on the CPU. Each runs in a fresh Python (a script below),
so the test process's Triton stays as the other tests left it; the runner-level test forks its compile
processes from the real template, which on this machine serves the interpreter.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from workbench.core.run.child import compile_pool  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not compile_pool.supported(), reason="this Triton has no jit_cache_hook/preload")

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def tuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def broken_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), undefined_name)


def kernel_fn(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out


def tuned_fn(x, y):
    out = torch.empty_like(x)
    tuned_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out


def broken_fn(x, y):
    broken_kernel[(1,)](x, BLOCK=16)
    return x


class _Scale(torch.autograd.Function):  # a training kernel: its backward launches a kernel of its own
    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        tuned_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        return out

    @staticmethod
    def backward(ctx, grad):
        dx = torch.empty_like(grad)
        add_kernel[(triton.cdiv(grad.numel(), 256),)](grad, grad, dx, grad.numel(), BLOCK=256)
        return dx


def train_fn(x, y):
    return _Scale.apply(x)


def reference_fn(x, y):
    return x + y


def get_inputs(n=1000):
    return [torch.randn(n), torch.randn(n)]
'''

SCRIPT = '''
import json, os, subprocess, sys, time
from pathlib import Path
import torch
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
from workbench.core.project.contract import load_kernel
from workbench.core.run.child import compile_pool
from workbench.core.run.protocol import COMPILE_ORDER_ENV, WORKER_MODULE
from workbench.core.stage import CompilePoolOrder

# The compile processes import torch before they connect: on a loaded 2-core machine that can take longer than
# a run's worker waits for them (CONNECT_WAIT_S, 5 s, then it compiles alone). Here they are what is tested.
compile_pool.CONNECT_WAIT_S = float(os.environ.get("CONNECT_WAIT_S", "120"))
driver.set_active(compile_pool.CompileOnlyDriver(GPUTarget("cuda", 90, 32)))
km = load_kernel(Path(sys.argv[1]), module_name=compile_pool.MODULE_NAME)
m = km.module
report = {}
specs = {
    "add": compile_pool.record(m.kernel_fn, lambda: m.get_inputs(1000)),
    "add again": compile_pool.record(m.kernel_fn, lambda: m.get_inputs(1000)),
    "add aligned": compile_pool.record(m.kernel_fn, lambda: m.get_inputs(1024)),
    "tuned": compile_pool.record(m.tuned_fn, lambda: m.get_inputs(1000)),
    "broken": compile_pool.record(m.broken_fn, lambda: m.get_inputs(16)),
}
# A training kernel as verification calls it (verify/gradients.with_gradients: the forward, then its backward
# through autograd), each launch recorded, nothing run: the backward's kernels are recorded too.
from workbench.core.verify.gradients import with_gradients
trained = with_gradients(m.train_fn, [0], ["x", "y"], is_kernel=True, require_triton=True)
report["training"] = [len(compile_pool.record(fn, lambda: m.get_inputs(1000))) for fn in (m.train_fn, trained)]
report["recorded"] = {k: len(v) for k, v in specs.items()}
report["same specialisation"] = specs["add"] == specs["add again"]
report["nothing compiled here"] = not os.listdir(os.environ["TRITON_CACHE_DIR"])
processes = int(os.environ["PROCESSES"])
address, key = "\\0workbench-test-" + os.urandom(6).hex(), os.urandom(16)
pool = compile_pool.CompilePool(address, key, processes)
env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}  # the order names the run's cache
env["WORKBENCH_ROLE"] = "compile"
env[COMPILE_ORDER_ENV] = CompilePoolOrder(address, key.hex(), processes, ["cuda", 90, 32]).order_for(
    sys.argv[1], os.environ["TRITON_CACHE_DIR"])
children = [subprocess.Popen([sys.executable, "-m", WORKER_MODULE], stdin=subprocess.DEVNULL, env=env)
            for _ in range(processes)]
names = list(specs)
for name in names:
    pool.submit(specs[name])
report["order"] = list(pool.in_compiled_order(names, [specs[n] for n in names]))
pool.close(wait=True)
report["summary"] = pool.summary()
report["exits"] = [child.wait(60) for child in children]
hits = []
knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
for spec in specs["add"] + specs["add aligned"] + specs["tuned"]:
    fn = compile_pool.find_jit_function(m, spec.name)
    fn.device_caches.clear()
    fn.preload(spec.data)
report["cache hits"] = hits
print("REPORT " + json.dumps(report))
'''


def run_script(tmp_path, processes, **env):
    (tmp_path / "kernel.py").write_text(KERNEL)
    (tmp_path / "script.py").write_text(SCRIPT)
    cache = tmp_path / "cache"
    cache.mkdir()
    child_env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    child_env.update(PYTHONPATH=str(ROOT), TRITON_CACHE_DIR=str(cache), PROCESSES=str(processes), **env)
    done = subprocess.run([sys.executable, str(tmp_path / "script.py"), str(tmp_path / "kernel.py")],
                          capture_output=True, text=True, env=child_env, timeout=300)
    line = next((x for x in done.stdout.splitlines() if x.startswith("REPORT ")), None)
    assert line is not None, done.stdout + done.stderr
    return json.loads(line[len("REPORT "):])


@pytest.mark.slow
def test_specialisations_are_recorded_then_compiled_once_each_by_compile_processes(tmp_path):
    report = run_script(tmp_path, processes=2)
    # One launch, one specialisation; an autotuner's every config; nothing compiled while recording.
    assert report["recorded"] == {"add": 1, "add again": 1, "add aligned": 1, "tuned": 2, "broken": 1}
    assert report["same specialisation"] and report["nothing compiled here"]
    # Forward alone: the autotuner's two configs; with its gradients: the backward's kernel too (the worker
    # records a training kernel as it verifies it: with its backward).
    assert report["training"] == [2, 3]
    summary = report["summary"]
    # "add again" is "add": 5 distinct specialisations, each compiled once; the broken one fails there.
    assert summary["specialisations"] == 5 and summary["compiled"] == 4 and summary["failed"] == 1
    assert summary["processes"] == 2
    assert sorted(report["order"]) == sorted(["add", "add again", "add aligned", "tuned", "broken"])
    assert report["exits"] == [0, 0]
    # The recording process finds every compiled specialisation in the cache, as a GPU worker then does.
    assert report["cache hits"] == [True] * 4
    # Triton's own compilation listener accounts for the compiling, stage by stage.
    stages = summary["stages_s"]
    assert {"Python to TTIR", "LLVM IR", "ptxas"} <= set(stages) and all(v > 0 for v in stages.values())
    assert sum(stages.values()) <= summary["compile_s"]


@pytest.mark.slow
def test_without_compile_processes_every_case_still_comes_and_nothing_is_compiled(tmp_path):
    report = run_script(tmp_path, processes=0, CONNECT_WAIT_S="0.3")
    assert sorted(report["order"]) == sorted(["add", "add again", "add aligned", "tuned", "broken"])
    assert report["summary"]["compiled"] == 0 and report["summary"]["processes"] == 0
    assert report["cache hits"] == [False] * 4  # compiled by the recording process itself, as a worker would


def test_the_templates_compile_warm_up_leaves_no_driver_kernel_or_cache_behind(tmp_path):
    script = textwrap.dedent('''
        import json, os
        from triton.runtime.driver import driver
        from workbench.core.run.child import compile_pool
        from workbench.core.run.child.compiler_warmup import _bump
        os.environ["TRITON_CACHE_DIR"] = "/nonexistent/keep-me"
        compile_pool.warm_compiler_for(["cuda", 90, 32])
        print("REPORT " + json.dumps({"driver": driver._active is None, "kernels": len(_bump.device_caches),
                                      "cache": os.environ["TRITON_CACHE_DIR"]}))
    ''')
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    line = next((x for x in done.stdout.splitlines() if x.startswith("REPORT ")), None)
    assert line is not None, done.stdout + done.stderr
    assert json.loads(line[len("REPORT "):]) == {"driver": True, "kernels": 0, "cache": "/nonexistent/keep-me"}


@pytest.mark.slow
def test_the_runner_starts_the_compile_processes_and_points_them_at_the_worker(make_project):
    """The runner's half, through the real template: N compile processes connect to the address it put in the
    job. The CPU's template serves the interpreter, where nothing compiles: each specialisation comes back
    failed, and every case is still handed on (the GPU worker would compile it itself)."""
    import kernels

    from workbench.core.run.runner import Runner
    from workbench.core.run.strategies import Pooled, RunInFlight
    from workbench.core.stage import Job

    project = make_project(kernels.GOOD)
    runner = Runner(interpret=True, parallel=2)
    os.environ["WORKBENCH_COMPILE_PROCESSES"] = "3"
    try:
        strategy = Pooled(runner, ["cuda", 90, 32])
        run = RunInFlight(job=Job(kernel_path=str(project / "kernel.py"), stages=["verify", "bench"]), relay=print,
                          limits=(None, None))
        strategy._start_compile_processes(run.job)  # what Pooled.execute does once the GPU worker has the job
        compilers = runner.supply.compiling
        order = strategy.pool
        assert order.processes == 3 == len(compilers)
        pool = compile_pool.CompilePool(order.address, bytes.fromhex(order.authkey), 3)
        deadline = time.monotonic() + 120
        while pool.summary()["processes"] < 3:  # forked from the template, each connects with the key it was given
            assert time.monotonic() < deadline
            time.sleep(0.05)
        fake = [compile_pool.Specialisation(compile_pool.MODULE_NAME, "no_such_kernel", "{}"),
                compile_pool.Specialisation(compile_pool.MODULE_NAME, "no_such_kernel", "[]")]
        pool.submit(fake)
        got = []
        reader = threading.Thread(target=lambda: got.extend(pool.in_compiled_order(["a", "b"], [fake[:1], fake])))
        reader.start()
        reader.join(120)
        assert got == ["a", "b"]
        pool.close(wait=True)
        assert pool.summary()["processes"] == 3 and pool.summary()["failed"] == 2
        for compiler in compilers:
            assert compiler.wait(timeout=30) == 0  # told there is no more: each exits by itself
    finally:
        os.environ.pop("WORKBENCH_COMPILE_PROCESSES", None)
        runner.close()


def test_a_worker_lost_mid_run_hands_its_cases_on_without_the_compile_pool():
    """The compile processes served the lost worker and went with it: the fresh one must not wait for them."""
    from workbench.core.run.runner import Runner
    from workbench.core.run.strategies import RunInFlight, WorkerJobs
    from workbench.core.stage import CompilePoolOrder, Job

    runner = Runner(interpret=True, parallel=2)
    seen = []

    class Recording(WorkerJobs):
        def once(self, run, job, relay, gpu, after_send=None):
            seen.append((job, after_send))
            return job if len(seen) == 1 else None

    job = Job(kernel_path="k.py", compile_pool=CompilePoolOrder("x", "00", 2, []), gpu_gate=True)
    start_compilers = object()
    Recording(runner).with_restarts(RunInFlight(job=job, relay=print, limits=(None, None)), job, lambda event: None,
                                    after_send=start_compilers)
    (first, first_hook), (second, second_hook) = seen
    assert first.compile_pool is not None and second.compile_pool is None and second.gpu_gate
    assert first_hook is start_compilers and second_hook is None  # the compile processes start once


@pytest.mark.slow
def test_a_run_falls_back_to_shards_when_the_worker_says_triton_cannot_compile_elsewhere():
    """On the CPU the worker reports no compile target: the runner keeps sharding verification."""
    from workbench.core.run.runner import Runner

    runner = Runner(interpret=True, keep_warm=True, parallel=2)
    try:
        assert runner.pooling_possible() is False
        assert runner.compile_target == []
        assert runner.workers_per_run == 3  # two shards and the benchmark's worker
    finally:
        runner.close()



def test_a_runner_whose_workers_run_elsewhere_never_starts_compile_processes():
    """Ray's actors run on other machines: compile processes forked here could not reach them."""
    from workbench.core.run import WorkerSource, make_runner

    class Elsewhere:
        local = False

        def new_worker(self, gpu=None):
            raise AssertionError("no worker is asked for: the answer needs none")

        def start_compile_processes(self, env, count):
            raise AssertionError("no compile process is started for workers elsewhere")

        def warm_compiler(self, target):
            pass

        def close(self):
            pass

    assert isinstance(Elsewhere(), WorkerSource)  # a plugin's source meets the contract without the workbench's classes
    runner = make_runner(interpret=True, parallel=2, workers=Elsewhere())
    assert runner.pooling_possible() is False and runner.compile_target == []


@pytest.mark.slow
def test_cancelling_a_run_kills_its_compile_processes(make_project):
    """Compile processes of a cancelled run must not go on compiling beside the next run's: cancel kills them
    (here they would otherwise wait for a GPU worker that never comes, then exit by themselves)."""
    import kernels

    from workbench.core.run.runner import Runner
    from workbench.core.run.strategies import Pooled
    from workbench.core.stage import Job

    project = make_project(kernels.GOOD)
    runner = Runner(interpret=True, parallel=2)
    os.environ["WORKBENCH_COMPILE_PROCESSES"] = "2"
    try:
        job = Job(kernel_path=str(project / "kernel.py"), stages=["verify"])
        Pooled(runner, ["cuda", 90, 32])._start_compile_processes(job)
        compilers = list(runner.supply.compiling)
        assert len(compilers) == 2
        deadline = time.monotonic() + 120
        while any(c.pid is None for c in compilers):  # forked by the template
            assert time.monotonic() < deadline
            time.sleep(0.02)
        runner.cancel()
        assert [c.wait(timeout=30) for c in compilers] == [-9, -9]
    finally:
        os.environ.pop("WORKBENCH_COMPILE_PROCESSES", None)
        runner.close()
