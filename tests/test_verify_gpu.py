"""The GPU-only checks of issue #9 on a real GPU (marker `gpu`: skipped without CUDA):
kernel_fn under torch.compile(fullgraph=True), and captured into a CUDA graph and replayed.

    .venv/bin/python -m pytest -q -m gpu tests/test_verify_gpu.py
"""


import kernels
import kernels_zoo
import pytest
from run_helpers import ONLY_CASES, verify_json

pytestmark = pytest.mark.gpu

def compat_checks(record, key):
    return [c["checks"].get(key, "") for c in record["cases"] if not c["config"] and not c["generated"]]


@pytest.fixture(autouse=True)
def one_worker(monkeypatch):
    monkeypatch.setenv("WORKBENCH_WORKERS", "1")  # each worker checks on its first case: one worker, one check


def test_a_good_kernel_compiles_without_graph_breaks_and_replays_from_a_cuda_graph(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.GOOD, toml=ONLY_CASES))
    assert rec["mode"] == "gpu"
    assert code == 0, [(c["label"], c["messages"]) for c in rec["cases"] if c["status"] != "passed"]
    for key in ("torch_compile", "cuda_graph"):
        outcomes = compat_checks(rec, key)
        assert outcomes[0] == "passed", outcomes
        assert all(o == "passed" or o.startswith("skipped: checked on this worker's first case") for o in outcomes)


@pytest.mark.parametrize("name", ["rmsnorm", "swiglu", "matmul"])
def test_library_style_kernels_pass_both(cli, make_project, name):
    code, rec = verify_json(cli, make_project(kernels_zoo.ZOO[name], name=name, toml=ONLY_CASES))
    assert code == 0, [(c["label"], c["messages"]) for c in rec["cases"] if c["status"] != "passed"]
    assert compat_checks(rec, "torch_compile")[0] == "passed"
    assert compat_checks(rec, "cuda_graph")[0] == "passed"


def test_a_host_read_in_the_launcher_is_a_graph_break_and_a_capture_error(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.HOST_READ, toml=ONLY_CASES))
    assert code == 1
    first = next(c for c in rec["cases"] if not c["config"] and c["checks"].get("torch_compile") == "failed")
    assert first["checks"]["cuda_graph"] == "failed"
    text = "\n".join(first["messages"])
    assert "torch_compile: torch.compile(fullgraph=True)" in text
    assert "cuda_graph: CUDA graph capture or replay failed" in text


def test_the_checks_can_be_turned_off(cli, make_project):
    toml = ONLY_CASES + "torch_compile = false\ncuda_graph = false\n"
    code, rec = verify_json(cli, make_project(kernels.HOST_READ, toml=toml))
    assert code == 0
    assert compat_checks(rec, "torch_compile")[0] == "skipped: [verify] torch_compile = false"
    assert compat_checks(rec, "cuda_graph")[0] == "skipped: [verify] cuda_graph = false"


def test_the_judge_runs_beside_a_cuda_worker(cli, make_project):
    """The judge forks before CUDA comes up and never touches it: verdicts arrive on a GPU too."""
    code, rec = verify_json(cli, make_project(kernels.TAMPERS, toml=ONLY_CASES))
    assert rec["mode"] == "gpu" and code == 1
    assert rec["cases"] and not any(c["status"] == "passed" for c in rec["cases"])


def test_asking_whether_a_call_syncs_leaves_no_prototype_warning_in_the_log():
    """host_sync switches torch's sync debug mode, which warns once per process that it is a prototype: that
    warning went to every live run's Log tab. A fresh process, as torch warns only once."""
    import subprocess
    import sys

    probe = ("import torch, warnings; warnings.simplefilter('always')\n"
             "from workbench.core.verify.compat import host_sync\n"
             "x = torch.ones(4, device='cuda')\n"
             "assert host_sync(lambda: x.sum()) == ''\n"
             "assert host_sync(lambda: x.sum().item()) != ''  # a host sync is still found\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "prototype" not in done.stderr, done.stderr
