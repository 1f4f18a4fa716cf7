"""The torch.compile check in a process of its own, started with the run (verify/compat_beside.py,
run/child/torch_compile_process.py): what it writes, how the worker takes it in or checks the case itself, and
which runs start it. The check itself runs on a GPU (tests/test_verify_gpu.py); here kernel_fn is plain torch
and the compiled call a stand-in."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from workbench.core.project.config import ProjectConfig, VerifyConfig
from workbench.core.project.contract import load_kernel
from workbench.core.run import runner as runner_module
from workbench.core.run.gpus import GpuSlot
from workbench.core.run.runner import CompileCheck, compile_check_wanted
from workbench.core.stage import Job
from workbench.core.verify import compat
from workbench.core.verify.compat_beside import (
    FAILED,
    PLAN,
    CheckBeside,
    check_cases,
    fresh_inputs,
    inputs_digest,
)
from workbench.core.verify.tensors import flatten_outputs

KERNEL = '''
import torch

def kernel_fn(x, scale):
    return x * scale + 1

def reference_fn(x, scale):
    return x * scale + 1

def get_inputs(n=8, dtype=torch.float32):
    return [torch.randn(n, dtype=dtype), 0.5]

CASES = [{"n": 8, "dtype": torch.float32}, {"n": 33, "dtype": torch.float32}, {"n": 8, "dtype": torch.float16},
         {"n": 64, "dtype": torch.float32, "purpose": "bench"}]
'''


def eager_call(km, inputs):
    """The compiled call's stand-in: kernel_fn as it is."""
    return flatten_outputs(km.kernel_fn(*inputs)), "", ""


@pytest.fixture
def km(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL)
    return load_kernel(tmp_path / "kernel.py")


def test_the_process_checks_the_first_case_of_each_dtype_on_the_inputs_the_worker_builds(km, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    cases = compat.torch_compile_cases(km, VerifyConfig(), None, {})
    assert [c.index for c in cases] == [0, 2]  # the first of each dtype; a benchmark case is not verified
    check_cases(km, cases, folder, eager_call)
    assert (folder / PLAN).read_text() == "[0, 2]"
    beside = CheckBeside(folder)
    for case in cases:
        inputs = fresh_inputs(km, case)  # the worker's own, built after the process's: the same seed
        got = beside.result(case.index, inputs_digest(inputs))
        assert got.why == "" and got.data["error"] == ""
        assert torch.equal(got.data["outputs"][0], km.kernel_fn(*inputs)) and got.data["names"] == [""]
    assert compat.torch_compile_cases(km, VerifyConfig(), [1, 3], {})[0].index == 1  # --case: among those asked for
    kept = compat.KeptFindings(km, VerifyConfig(), {})
    passed = {kept.key(km.cases[0], "torch_compile"): {"check": "torch_compile", "at": 0.0}}
    again = compat.torch_compile_cases(km, VerifyConfig(), None, passed)
    assert [c.index for c in again] == [2]  # a kept pass is not run again


def test_the_inputs_digest_follows_values_strides_and_dtypes():
    x = torch.arange(12.0).reshape(3, 4)
    assert inputs_digest([x, 2]) == inputs_digest([x.clone(), 2]) != ""
    assert inputs_digest([x, 2]) != inputs_digest([x, 3])
    one_ulp = x.clone()
    one_ulp[1, 1] = torch.nextafter(one_ulp[1, 1], torch.tensor(100.0))
    assert inputs_digest([x]) != inputs_digest([one_ulp])
    assert inputs_digest([x.t().contiguous().t()]) != inputs_digest([x])  # the same values, other strides
    assert inputs_digest([x]) != inputs_digest([x.double()])
    nested = [[x, {"w": x}], torch.tensor(True)]
    assert inputs_digest(nested) == inputs_digest([[x.clone(), {"w": x.clone()}], torch.tensor(True)])


def test_the_worker_checks_a_case_itself_where_the_process_has_no_result_for_it(km, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    case = km.cases[0]
    digest = inputs_digest(fresh_inputs(km, case))
    check_cases(km, [case], folder, eager_call)
    assert CheckBeside(folder).result(0, digest).data is not None
    assert "other inputs" in CheckBeside(folder).result(0, "not the same").why  # get_inputs not deterministic
    assert "did not plan" in CheckBeside(folder).result(2, digest).why
    (folder / FAILED).write_text("RuntimeError: no memory")
    assert CheckBeside(folder).result(2, digest).why == "its process stopped: RuntimeError: no memory"
    assert CheckBeside(folder).result(0, digest).data is not None  # a result written before it stopped stands
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    assert "within 0 s" in CheckBeside(quiet, wait_s=0.05).result(0, digest).why  # alive, silent, too long
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    beside = CheckBeside(quiet, pid=ended.pid)
    assert beside.ready(0) and "ended without a result" in beside.result(0, digest).why
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not CheckBeside(quiet, pid=running.pid).ready(0)
    finally:
        running.kill()
        running.wait()


def fake_km(tmp_path):
    (tmp_path / "kernel.py").write_text("x = 1\n")
    return SimpleNamespace(path=tmp_path / "kernel.py", gradients=[], kernel_fn=lambda x: x * 2)


def test_compat_runs_leaves_the_check_to_the_process_and_the_worker_takes_its_result_in(tmp_path, monkeypatch):
    km, config = fake_km(tmp_path), VerifyConfig(cuda_graph="off")
    case = SimpleNamespace(index=0, params={}, label="n=4", generated=False)
    folder = tmp_path / "results"
    folder.mkdir()
    beside = CheckBeside(folder)
    inputs, reference = [torch.ones(4)], [torch.full((4,), 2.0)]
    monkeypatch.setattr(compat, "_torch_compile", lambda *a: pytest.fail("the worker ran the check itself"))
    compiled, graphed = compat.compat_runs(km, case, inputs, reference, [reference[0] + 1], [reference[0] + 2],
                                           config, interpret=False, anchors={0}, beside=beside)
    assert compiled.pending is not None and not compiled.outputs and graphed.skipped
    inputs[0].fill_(7)  # the worker's inputs change after; the pending check kept its own copy
    monkeypatch.setattr("workbench.core.verify.compat_beside.fresh_inputs", lambda km, case: [torch.ones(4)])
    check_cases(km, [case], folder, lambda km, x: (flatten_outputs(km.kernel_fn(*x)), "", ""))
    said = []
    compat.finish_beside(km, compiled, beside, announce=said.append)
    assert compiled.pending is None and compiled.error == ""
    assert torch.equal(compiled.outputs[0], torch.full((4,), 2.0)) and torch.equal(compiled.reference[0], reference[0])
    assert torch.equal(compiled.native[0], reference[0] + 1) and torch.equal(compiled.rounded[0], reference[0] + 2)
    assert said == ["the torch.compile check, in its own process"]


def test_where_the_process_failed_the_worker_runs_the_check_and_says_why(tmp_path, monkeypatch):
    km, config = fake_km(tmp_path), VerifyConfig(cuda_graph="off")
    case = SimpleNamespace(index=3, params={}, label="n=4", generated=False)
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / FAILED).write_text("ImportError: no module named triton")
    compiled, _ = compat.compat_runs(km, case, [torch.ones(4)], [torch.full((4,), 2.0)], [], [], config,
                                     interpret=False, anchors={3}, beside=CheckBeside(folder))
    ran = []

    def inline(km_, inputs, reference, run):
        ran.append(inputs)
        run.outputs, run.names, run.reference = [km_.kernel_fn(*inputs)], [""], list(reference)

    monkeypatch.setattr(compat, "_torch_compile", inline)
    said, logged = [], []
    compat.finish_beside(km, compiled, CheckBeside(folder), announce=said.append, log=logged.append)
    assert len(ran) == 1 and torch.equal(ran[0][0], torch.ones(4))
    assert torch.equal(compiled.outputs[0], torch.full((4,), 2.0))
    assert said[-1] == "the torch.compile check"  # its own stage (and time-out) again, for the run here
    assert logged == ["case 3: the torch.compile check runs in the worker: its process stopped: "
                      "ImportError: no module named triton"]


def test_a_kept_or_skipped_check_is_never_left_pending(tmp_path):
    km, case = fake_km(tmp_path), SimpleNamespace(index=0, params={}, label="n=4", generated=False)
    beside = CheckBeside(tmp_path)
    for config, interpret, anchors in ((VerifyConfig(torch_compile="off", cuda_graph="off"), False, {0}),
                                       (VerifyConfig(cuda_graph="off"), True, {0}),
                                       (VerifyConfig(cuda_graph="off"), False, {1})):
        compiled, _ = compat.compat_runs(km, case, [torch.ones(4)], [torch.ones(4)], [], [], config,
                                         interpret=interpret, anchors=anchors, beside=beside)
        assert compiled.pending is None and compiled.skipped


def job(stages=("verify",), **verify):
    return Job(kernel_path="k.py", stages=list(stages), config=ProjectConfig.from_dict({"verify": verify}).to_dict())


def test_only_a_verification_alone_on_this_machines_gpu_starts_the_process(monkeypatch):
    gpus = [GpuSlot("0", "H200", "GPU-1")]
    monkeypatch.delenv(runner_module.COMPILE_CHECK_ENV, raising=False)
    assert compile_check_wanted(job(), False, gpus, True)  # on by default (RESULTS.md 3p)
    monkeypatch.setenv(runner_module.COMPILE_CHECK_ENV, "1")
    assert compile_check_wanted(job(), False, gpus, True)
    assert compile_check_wanted(job(torch_compile="require"), False, gpus, True)
    assert not compile_check_wanted(job(("verify", "bench")), False, gpus, True)  # a benchmark times alone
    assert not compile_check_wanted(Job(kernel_path="k.py", live=True), False, gpus, True)
    assert not compile_check_wanted(job(), True, gpus, True)  # the interpreter runs no such check
    assert not compile_check_wanted(job(), False, [], True)
    assert not compile_check_wanted(job(), False, gpus, False)  # workers elsewhere (a cluster)
    assert not compile_check_wanted(job(torch_compile="off"), False, gpus, True)
    assert not compile_check_wanted(job(repeat_calls=False), False, gpus, True)
    assert not compile_check_wanted(job(backward=True), False, gpus, True)
    assert not compile_check_wanted(job(), False, gpus, True, alone=False)  # one lane among several
    monkeypatch.setenv(runner_module.COMPILE_CHECK_ENV, "0")
    assert not compile_check_wanted(job(), False, gpus, True)


@pytest.mark.parametrize("beside", [True, False])
def test_a_runner_that_is_one_lane_among_several_keeps_the_check_in_its_worker(monkeypatch, beside):
    started = []

    def start_compile_check(job_file, folder, gpu):
        started.append(folder)
        return SimpleNamespace(pid=1, poll=lambda: 0, wait=lambda: 0)

    monkeypatch.delenv(runner_module.COMPILE_CHECK_ENV, raising=False)
    runner = runner_module.Runner(check_beside=beside, gpus=[GpuSlot("0", "H200", "GPU-1")],
                                  workers=SimpleNamespace(local=True, start_compile_check=start_compile_check))
    monkeypatch.setattr(runner, "_execute", lambda job, on_event, limits, started_at: job)
    sent = runner._run(job(), lambda event: None, (None, None))
    assert len(started) == beside and bool(sent.compile_check) == beside


def test_the_process_is_named_in_the_job_and_ends_with_the_run(tmp_path):
    started = {}

    def start_compile_check(job_file, folder, gpu):
        started.update(job=Job.from_json(open(job_file).read()), gpu=gpu)
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)

    gpu = GpuSlot("0", "H200", "GPU-1")
    check = CompileCheck.start(SimpleNamespace(start_compile_check=start_compile_check), job(), gpu)
    sent = check.for_job(job())
    assert sent.compile_check == {"folder": check.folder, "pid": check.proc.pid}
    assert Job.from_json(sent.to_json()).compile_check == sent.compile_check  # it travels with the job
    assert started["gpu"] == gpu and started["job"].stages == ["verify"]
    check.stop()
    assert check.proc.returncode is not None and not os.path.exists(check.folder)
    assert CompileCheck.start(SimpleNamespace(), job(), gpu) is None  # a source that cannot: the worker checks


def test_the_process_without_a_gpu_says_so_and_ends(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (tmp_path / "kernel.py").write_text(KERNEL)
    job_file = tmp_path / "job.json"
    job_file.write_text(Job(kernel_path=str(tmp_path / "kernel.py")).to_json())
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "workbench.core.run.child.torch_compile_process", str(job_file),
                           str(folder)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (folder / FAILED).read_text() == "no CUDA GPU visible to torch"
    assert "its process stopped: no CUDA GPU" in CheckBeside(folder).result(0, "x").why


class SlowBeside(CheckBeside):
    """A process whose results are in only once the worker waits for them."""

    def ready(self, index):
        return False


def test_a_case_left_to_the_process_reaches_the_judge_once_its_result_is_in_and_the_others_do_not_wait(km, tmp_path):
    from workbench.core.events import CaseResult, StageChanged
    from workbench.core.verify.battery import run_verification

    folder = tmp_path / "results"
    folder.mkdir()
    config = VerifyConfig(cuda_graph="off", large_index=False, value_stress=False, require_triton=False)
    check_cases(km, compat.torch_compile_cases(km, config, None, {}), folder, eager_call)
    events, cases = [], [c for c in km.cases if c.purpose == "verify"]
    run_verification(km, cases, config, events.append, interpret=False, beside=SlowBeside(folder))
    results = [(e.case_index, e.status, e.checks.get("torch_compile", "")) for e in events
               if isinstance(e, CaseResult) and not e.generated]
    assert results[:1] == [(1, "passed", "skipped: checked once per dtype, on cases 0, 2")]
    assert sorted(results[1:]) == [(0, "passed", "passed"), (2, "passed", "passed")]
    waited = [e.case_index for e in events if isinstance(e, StageChanged) and e.stage == "checking"]
    assert sorted(waited) == [0, 2]
    # without a process beside it the worker checks each case where it comes (here with the same stand-in)
    events.clear()
    run_verification(km, cases, VerifyConfig(cuda_graph="off", large_index=False, value_stress=False,
                                                require_triton=False, torch_compile="off"), events.append,
                     interpret=False, beside=SlowBeside(folder))
    assert [e.case_index for e in events if isinstance(e, CaseResult) and not e.generated][:3] == [0, 1, 2]
