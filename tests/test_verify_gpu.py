"""The GPU-only checks on a real GPU (marker `gpu`: skipped without CUDA): kernel_fn under
torch.compile(fullgraph=True), and captured into a CUDA graph and replayed (issue #9), as findings beside the
verdict that fail it only where the project requires them (issue #23); launches of kernels compiled with
`warmup` and launched directly, counted by Triton's own launch hook.

    .venv/bin/python -m pytest -q -m gpu tests/test_verify_gpu.py
"""


import kernels
import kernels_libraries
import kernels_zoo
import pytest
from run_helpers import ONLY_CASES, verify_json

pytestmark = pytest.mark.gpu


def compat_checks(record, key):
    return [c["checks"].get(key, "") for c in record["cases"] if not c["config"] and not c["generated"]]


def test_a_good_kernel_compiles_without_graph_breaks_and_replays_from_a_cuda_graph(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.GOOD, toml=ONLY_CASES))
    assert rec["mode"] == "gpu"
    assert code == 0, [(c["label"], c["messages"]) for c in rec["cases"] if c["status"] != "passed"]
    for key in ("torch_compile", "cuda_graph"):
        outcomes = compat_checks(rec, key)
        # once per dtype: case 0 (float32) and case 1 (float16), whichever worker runs them
        assert outcomes[:2] == ["passed", "passed"], outcomes
        assert all(o.startswith("skipped: checked once per dtype, on cases 0, 1") for o in outcomes[2:]), outcomes
        assert rec["compatibility"][key]["status"] == "passed"


def test_a_pass_is_kept_until_the_kernel_changes_or_fresh_checks_and_a_failure_runs_every_time(cli, make_project):
    project = make_project(kernels.GOOD, toml=ONLY_CASES)
    code, first = verify_json(cli, project)
    assert code == 0 and not any(c["kept"] for c in first["compatibility"]["torch_compile"]["cases"])
    code, again = verify_json(cli, project)
    kept = again["compatibility"]["torch_compile"]["cases"]
    assert code == 0 and kept and all(c["kept"].startswith("passed in a run at") for c in kept)
    assert [c["key"] for c in kept] == [c["key"] for c in first["compatibility"]["torch_compile"]["cases"]]
    code, out, _ = cli("verify", project)
    assert "compatibility: torch.compile(fullgraph=True) passed (cases 0, 1; kept: passed in a run at" in out
    code, fresh = verify_json(cli, project, "--fresh-checks")
    assert code == 0 and not any(c["kept"] for c in fresh["compatibility"]["cuda_graph"]["cases"])
    (project / "kernel.py").write_text((project / "kernel.py").read_text() + "\n# edited\n")
    code, edited = verify_json(cli, project)
    assert code == 0 and not any(c["kept"] for c in edited["compatibility"]["torch_compile"]["cases"])
    failing = make_project(kernels.HOST_READ, name="host_read", toml=ONLY_CASES)
    for _ in range(2):
        code, rec = verify_json(cli, failing)
        assert rec["compatibility"]["torch_compile"]["status"] == "failed"
        assert not any(c["kept"] for c in rec["compatibility"]["torch_compile"]["cases"])


@pytest.mark.parametrize("workers", ["1", "2", "3"])
def test_compatibility_runs_on_the_same_cases_however_the_cases_are_sharded(cli, make_project, monkeypatch, workers):
    monkeypatch.setenv("WORKBENCH_WORKERS", workers)
    code, rec = verify_json(cli, make_project(kernels.HOST_READ, toml=ONLY_CASES))
    assert code == 0
    assert [c["case_index"] for c in rec["compatibility"]["torch_compile"]["cases"]] == [0, 1]


@pytest.mark.parametrize("name", ["rmsnorm", "swiglu", "matmul"])
def test_library_style_kernels_pass_both(cli, make_project, name):
    code, rec = verify_json(cli, make_project(kernels_zoo.ZOO[name], name=name, toml=ONLY_CASES))
    assert code == 0, [(c["label"], c["messages"]) for c in rec["cases"] if c["status"] != "passed"]
    assert compat_checks(rec, "torch_compile")[0] == "passed"
    assert compat_checks(rec, "cuda_graph")[0] == "passed"


def test_a_host_read_in_the_launcher_is_a_finding_that_fails_only_when_required(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.HOST_READ, toml=ONLY_CASES))
    assert code == 0, [(c["label"], c["messages"]) for c in rec["cases"] if c["status"] != "passed"]
    first = next(c for c in rec["cases"] if not c["config"] and c["case_index"] == 0)
    assert first["status"] == "passed"
    assert first["checks"]["torch_compile"] == "warning" and first["checks"]["cuda_graph"] == "warning"
    for key in ("torch_compile", "cuda_graph"):
        finding = rec["compatibility"][key]
        assert finding["status"] == "failed" and not finding["required"]
        assert finding["cases"][0]["error"]
    code, rec = verify_json(cli, make_project(kernels.HOST_READ, name="required", toml=ONLY_CASES
                                              + 'torch_compile = "require"\ncuda_graph = "require"\n'))
    assert code == 1
    first = next(c for c in rec["cases"] if not c["config"] and c["checks"].get("torch_compile") == "failed")
    assert first["checks"]["cuda_graph"] == "failed"
    text = "\n".join(first["messages"])
    assert "torch_compile: torch.compile(fullgraph=True)" in text
    assert "cuda_graph: CUDA graph capture or replay failed" in text


@pytest.mark.parametrize("name", sorted(kernels_libraries.CORRECT) + sorted(kernels_libraries.GPU_ONLY))
def test_correct_library_style_kernels_verify_on_the_gpu_with_every_check_on(cli, make_project, name):
    source = kernels_libraries.CORRECT.get(name) or kernels_libraries.GPU_ONLY[name]
    code, rec = verify_json(cli, make_project(source, name=name))
    assert rec["mode"] == "gpu"
    assert code == 0, [(c["label"], c["config"], c["messages"]) for c in rec["cases"] if c["status"] != "passed"]
    assert all(c["launches"] for c in rec["cases"] if c["status"] == "passed")


def test_a_compiled_kernel_launched_directly_counts_through_tritons_launch_hook(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels_libraries.TUTORIAL_SOFTMAX, name="tutorial", toml=ONLY_CASES))
    assert code == 0
    assert {c["launches"] for c in rec["cases"]} == {1}


def test_a_loss_launcher_with_a_logger_and_item_is_correct_and_says_why_it_does_not_compile(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels_libraries.LIGER_CROSS_ENTROPY, name="liger", toml=ONLY_CASES))
    assert code == 0
    assert rec["compatibility"]["torch_compile"]["status"] == "failed"
    assert "logging" in rec["compatibility"]["torch_compile"]["cases"][0]["error"]
    assert rec["compatibility"]["cuda_graph"]["status"] == "failed"


@pytest.mark.parametrize("name", sorted(kernels_libraries.BROKEN))
def test_the_broken_kernels_beside_them_fail_on_the_gpu_too(cli, make_project, name):
    # shapes_unmasked: its stray stores land in the guard margins, its stray loads read NaN from them
    code, rec = verify_json(cli, make_project(kernels_libraries.BROKEN[name], name=name))
    assert code == 1


def test_the_checks_can_be_turned_off(cli, make_project):
    toml = ONLY_CASES + "torch_compile = false\ncuda_graph = false\n"
    code, rec = verify_json(cli, make_project(kernels.HOST_READ, toml=toml))
    assert code == 0
    assert compat_checks(rec, "torch_compile")[0] == "skipped: turned off ([verify] torch_compile)"
    assert compat_checks(rec, "cuda_graph")[0] == "skipped: turned off ([verify] cuda_graph)"


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


# -- issue 24: misses a GPU would let through ------------------------------------------------------------

def test_an_unmasked_store_fails_on_the_gpu_with_the_margin_it_wrote(cli, make_project):
    """On a GPU the stores past the end land in the allocator's slack; the guard margin catches them."""
    code, rec = verify_json(cli, make_project(kernels.STORE_UNMASKED))
    assert code == 1
    generated = [c for c in rec["cases"] if c["generated"] and not c["config"] and c["status"] != "skipped"]
    assert generated and all(c["checks"]["out_of_bounds"] == "failed" for c in generated
                             if c["label"].startswith(("n=65", "n=63", "n=67"))), generated
    assert any("elements after the end of output were written" in m for c in generated for m in c["messages"])


def test_an_unmasked_kernel_fails_on_the_gpu_as_under_the_interpreter(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.MISSING_MASK))
    assert code == 1
    assert any(c["status"] in ("failed", "error") for c in rec["cases"] if c["generated"])


def test_torch_doing_the_work_fails_on_the_gpu(cli, make_project):
    code, rec = verify_json(cli, make_project(kernels.TORCH_DOES_THE_WORK, toml=ONLY_CASES))
    assert code == 1
    tuned = [c for c in rec["cases"] if not c["config"]]
    assert all(c["checks"]["torch_ops"] == "failed" for c in tuned), [c["checks"] for c in tuned]
    code, rec = verify_json(cli, make_project(kernels.TORCH_FINISHES, name="finishes", toml=ONLY_CASES))
    assert code == 0, [(c["label"], c["messages"]) for c in rec["cases"] if c["status"] != "passed"]


def test_layouts_on_the_gpu(cli, make_project):
    """Item 4: a pointer from the storage's start fails (the margins, then the offset run without them); a
    kernel taking every stride passes the transposed run, one assuming b's layout is found."""
    code, rec = verify_json(cli, make_project(kernels.FROM_STORAGE_START, toml=ONLY_CASES))
    assert code == 1
    code, rec = verify_json(cli, make_project(kernels.FROM_STORAGE_START, name="unguarded",
                                              toml=ONLY_CASES + "guard_regions = false\n"))
    assert code == 1 and rec["compatibility"]["storage_offset"]["status"] == "failed"
    code, rec = verify_json(cli, make_project(kernels_libraries.MATMUL_MASKED_K, name="strided",
                                              toml=ONLY_CASES))
    assert code == 0 and rec["compatibility"]["noncontiguous"]["status"] == "passed"
    code, rec = verify_json(cli, make_project(kernels_libraries.MATMUL_B_STRIDES_ASSUMED, name="assumed",
                                              toml=ONLY_CASES))
    assert code == 0 and rec["compatibility"]["noncontiguous"]["status"] == "failed"
    code, rec = verify_json(cli, make_project(kernels_libraries.MATMUL_B_STRIDES_ASSUMED, name="required",
                                              toml=ONLY_CASES + 'noncontiguous = "require"\n'))
    assert code == 1
