"""Issue 39, part 3: what the GPU cannot do, said as such. A forced autotune config that needs more shared
memory than the GPU has is skipped, as Triton's autotuner skips it (listed, never a failure); a float32 tl.dot
that multiplies in TF32 by default fails with that named. The kernels are in tests/kernels_gpu_limits.py."""

import kernels_gpu_limits as limits
import pytest
from run_helpers import ONLY_CASES, failing, verify_json

NOT_RUNNABLE = ("not runnable on this GPU (needs 262144 bytes of shared memory, has 232448): skipped, as the "
                "autotuner skips it")


def forced(record, marker):
    return [c for c in record["cases"] if c["config"] and marker in c["config"]]


# -- configs this GPU cannot launch --------------------------------------------------------------------------

def test_out_of_resources_is_found_however_it_is_wrapped():
    from triton.runtime.errors import OutOfResources

    from workbench.core.verify.failures import not_runnable_note, out_of_resources

    assert out_of_resources(OutOfResources(262144, 232448, "shared memory")) == \
        "needs 262144 bytes of shared memory, has 232448"
    try:
        try:
            raise OutOfResources(1024, 512, "threads")
        except OutOfResources as exc:
            raise RuntimeError("the launcher failed") from exc
    except RuntimeError as wrapped:
        assert out_of_resources(wrapped) == "needs 1024 threads per program, has 512"

    class OutOfResources(Exception):  # a Triton that keeps the class elsewhere: the name says it
        required, limit, name = 300000, 232448, "shared memory"

    assert out_of_resources(OutOfResources()) == "needs 300000 bytes of shared memory, has 232448"
    assert out_of_resources(RuntimeError("out of memory")) == "" and not_runnable_note(ValueError("no")) == ""


def test_the_other_errors_the_autotuner_skips_are_skips_too():
    from workbench.core.verify.failures import not_runnable_note

    class PTXASError(RuntimeError):
        pass

    class CompileTimeAssertionFailure(Exception):
        pass

    assert not_runnable_note(PTXASError("ptxas fatal: too many registers")) == (
        "not compiled for this config (ptxas refused its code: ptxas fatal: too many registers): skipped, as the "
        "autotuner skips it")
    wrapped = RuntimeError("compile failed")
    wrapped.__cause__ = CompileTimeAssertionFailure("BLOCK_K must divide K")
    assert "a compile-time assert failed: BLOCK_K must divide K" in not_runnable_note(wrapped)


def test_a_config_the_gpu_cannot_launch_is_skipped_as_the_autotuner_skips_it(cli, make_project):
    project = make_project(limits.ONE_CONFIG_TOO_BIG, toml=ONLY_CASES)
    code, rec = verify_json(cli, project)
    assert code == 0, failing(rec)
    too_big, others = forced(rec, "BLOCK=1024"), [c for c in rec["cases"] if c["config"] and "BLOCK=1024" not in
                                                  c["config"]]
    assert [c["case_index"] for c in too_big] == [0, 1, 2]
    assert all(c["status"] == "skipped" and c["notes"] == [NOT_RUNNABLE] for c in too_big), too_big
    assert len(others) == 6 and all(c["status"] == "passed" for c in others)
    assert rec["counts"]["configs"] == {"run": 6, "passed": 6}  # the skipped config never ran
    code, out, _ = cli("verify", project)
    assert code == 0 and "6 of 6 passed, 3 skipped (see the notes)" in out
    # said once for every case it was skipped on
    assert out.count(NOT_RUNNABLE) == 1
    assert f"note, scale_kernel: BLOCK=1024, num_warps=4, num_stages=3, cases 0, 1, 2: {NOT_RUNNABLE}" in out


def test_a_config_that_launches_and_is_wrong_still_fails_beside_one_skipped(cli, make_project):
    code, rec = verify_json(cli, make_project(limits.ONE_TOO_BIG_ONE_WRONG, toml=ONLY_CASES))
    assert code == 1
    assert all(c["status"] == "failed" for c in forced(rec, "BLOCK=128")) and forced(rec, "BLOCK=128")
    assert all(c["status"] == "skipped" and c["notes"] == [NOT_RUNNABLE] for c in forced(rec, "BLOCK=1024"))
    assert all(c["status"] == "passed" for c in forced(rec, "BLOCK=64"))


@pytest.mark.gpu
def test_the_tutorial_matmul_with_a_config_past_the_gpus_shared_memory_verifies(cli, make_project):
    """On an H100 or H200 (228 KB of shared memory a block): the third config needs about 320 KB where K is a
    multiple of 16. Where it is not (K=200), Triton compiles another specialisation that pipelines less and
    fits: the config runs and passes there, as the autotuner would run it (H200, 2026-11-27)."""
    code, rec = verify_json(cli, make_project(limits.MATMUL_TUTORIAL, name="matmul", toml=ONLY_CASES))
    assert rec["mode"] == "gpu"
    assert code == 0, [(c["label"], c["config"], c["messages"]) for c in failing(rec)]
    too_big = forced(rec, "BLOCK_K=128")
    skipped = [c for c in too_big if c["status"] == "skipped"]
    assert skipped and all(c["status"] in ("skipped", "passed") for c in too_big), too_big
    assert all("not runnable on this GPU (needs" in c["notes"][0] and "bytes of shared memory, has" in c["notes"][0]
               for c in skipped), skipped
    assert all(c["status"] == "passed" for c in rec["cases"] if c["config"] and c not in too_big)


# -- float32 multiplied in TF32 --------------------------------------------------------------------------------

def as_tf32(t):
    """t with its float32 mantissa rounded to TF32's 10 bits (to nearest, ties away), as tensor cores read it."""
    import torch

    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & -0x2000).view(torch.float32)


def matmul_case(tf32_flag, error=None):
    """A float32 matmul's output as TF32 tensor cores give it (products of TF32-rounded inputs, summed exactly),
    against the float64 reference; `error`: a kernel's own mistake on top."""
    import torch

    from workbench.core.verify.handoff import CaseData

    generator = torch.Generator().manual_seed(39)
    a, b = (torch.randn(shape, generator=generator) for shape in ((96, 64), (64, 80)))
    out = (as_tf32(a).double() @ as_tf32(b).double()).float()
    if error is not None:
        out = error(out)
    return CaseData(case_index=0, label="M=96", first=[out], second=[out.clone()], names=[""],
                    reference=[a.double() @ b.double()], native=[a @ b], before=[a, b], after=[a, b], launches=1,
                    dot_may_use_tf32=tf32_flag)


def test_a_float32_failure_by_tf32_sized_errors_from_a_tl_dot_kernel_is_named():
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.judge import TF32_HINT, Judge

    result = Judge(VerifyConfig()).judge(matmul_case(True))
    assert result.status == "failed" and result.messages[-1] == TF32_HINT, result.messages
    assert "fp32_precision = \"tf32\"" in TF32_HINT and "input_precision='ieee'" in TF32_HINT
    # the same errors from a kernel without tl.dot: a plain failure
    result = Judge(VerifyConfig()).judge(matmul_case(False))
    assert result.status == "failed" and TF32_HINT not in result.messages
    # errors past TF32's own: a bug, not the precision
    result = Judge(VerifyConfig()).judge(matmul_case(True, error=lambda out: out * 1.05))
    assert result.status == "failed" and TF32_HINT not in result.messages
    # TF32 accepted: the same output passes
    assert Judge(VerifyConfig(fp32_precision="tf32")).judge(matmul_case(True)).status == "passed"


def test_which_kernels_may_multiply_in_tf32_is_read_from_their_jit_code(make_project):
    from workbench.core.project.contract import dot_may_use_tf32, load_kernel

    def loaded(source, name):
        return load_kernel(make_project(source, name=name) / "kernel.py")

    assert dot_may_use_tf32(loaded(limits.MATMUL_FP32, "tf32"))
    assert not dot_may_use_tf32(loaded(limits.MATMUL_FP32_IEEE, "ieee"))
    assert not dot_may_use_tf32(loaded(limits.ONE_CONFIG_TOO_BIG, "no_dot"))


def test_a_float32_matmul_passes_in_the_interpreter_where_tl_dot_is_exact(cli, make_project):
    code, rec = verify_json(cli, make_project(limits.MATMUL_FP32, name="fp32_interpreted", toml=ONLY_CASES))
    if rec["mode"] != "interpreter":
        pytest.skip("on a GPU tl.dot multiplies in TF32: test_a_float32_tl_dot_fails_naming_tf32_on_a_gpu")
    assert code == 0, failing(rec)


@pytest.mark.gpu
def test_a_float32_tl_dot_fails_naming_tf32_on_a_gpu(cli, make_project):
    from workbench.core.verify.judge import TF32_HINT

    code, rec = verify_json(cli, make_project(limits.MATMUL_FP32, name="fp32", toml=ONLY_CASES))
    assert rec["mode"] == "gpu" and code == 1
    assert all(TF32_HINT in c["messages"] for c in failing(rec)) and failing(rec), failing(rec)
    code, rec = verify_json(cli, make_project(limits.MATMUL_FP32, name="fp32_accepted",
                                              toml=ONLY_CASES + 'fp32_precision = "tf32"\n'))
    assert code == 0, failing(rec)
    code, rec = verify_json(cli, make_project(limits.MATMUL_FP32_IEEE, name="fp32_ieee", toml=ONLY_CASES))
    assert code == 0, failing(rec)
