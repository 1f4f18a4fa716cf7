"""A worker that dies mid-job: the case it was on is reported, and verification resumes with the rest."""

from workbench.core.events import CaseResult
from workbench.core.run.pump import resume_after
from workbench.core.stage import RECORDING, Job


def test_a_crash_while_a_cases_launcher_is_recorded_is_that_cases_and_the_others_still_run():
    # On a GPU the worker runs every case's launcher once, ahead, to learn what it compiles (compile_pool.ahead):
    # a launcher that hangs or crashes there must not take the other cases' verdicts with it.
    job = Job(kernel_path="kernel.py", stages=["verify", "bench"])
    said = []
    again = resume_after(job, planned=[0, 1, 2], done=set(), at=(1, "n=1000 float16"),
                         stage=RECORDING, relay=said.append, message="the worker was killed by SIGSEGV")
    (result,) = said
    assert isinstance(result, CaseResult) and result.case_index == 1 and result.status == "error"
    assert "SIGSEGV" in result.messages[0]
    assert again is not None and again.case_indices == [0, 2] and again.stages == ["verify"]


def test_past_verification_nothing_resumes():
    job = Job(kernel_path="kernel.py", stages=["verify", "bench"])
    said = []
    assert resume_after(job, [0, 1], {0, 1}, (None, ""), "benchmarking", said.append, "killed") is None
    assert said == []
