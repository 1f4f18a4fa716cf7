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
    """On an H100 or H200 (228 KB of shared memory a block): the third config needs about 320 KB."""
    code, rec = verify_json(cli, make_project(limits.MATMUL_TUTORIAL, name="matmul", toml=ONLY_CASES))
    assert rec["mode"] == "gpu"
    assert code == 0, [(c["label"], c["config"], c["messages"]) for c in failing(rec)]
    too_big = forced(rec, "BLOCK_K=128")
    assert too_big and all(c["status"] == "skipped" for c in too_big)
    assert all("not runnable on this GPU (needs" in c["notes"][0] and "bytes of shared memory, has" in c["notes"][0]
               for c in too_big), too_big
    assert all(c["status"] == "passed" for c in rec["cases"] if c["config"] and c not in too_big)
