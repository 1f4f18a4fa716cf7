"""Issue 28: training kernels. A kernel_fn that is a torch.autograd.Function's apply, with inputs that require grad
(or `[verify] backward = true`), is verified with its gradients: each input's gradient against the float64
reference's autograd, under the same battery as the outputs. The kernels are in tests/kernels_training.py."""

import kernels_training as train
import pytest
from run_helpers import failing, verify_json

NO_LAYOUTS = "[verify]\nnoncontiguous = \"off\"\n"


def messages(record):
    return " | ".join(m for c in failing(record) for m in c["messages"])


def test_a_training_kernel_written_as_libraries_write_it_verifies_with_its_gradients(cli, make_project):
    code, rec = verify_json(cli, make_project(train.RMSNORM_TRAIN, name="rmsnorm_train", toml=NO_LAYOUTS))
    assert code == 0, messages(rec) + str(rec["problems"])
    main = [c for c in rec["cases"] if not c["config"]]
    # the forward's launch and the backward's, every case; the generated edge shapes too
    assert main and all(c["launches"] == 2 for c in main) and any(c["generated"] for c in main)
    assert rec["compatibility"]["storage_offset"]["status"] == "passed"


def test_a_wrong_gradient_fails_and_names_the_input(cli, make_project):
    code, rec = verify_json(cli, make_project(train.WRONG_DX, name="wrong_dx", toml=NO_LAYOUTS), "--case", "1")
    assert code == 1
    text = messages(rec)
    assert "grad x" in text and "grad weight" not in text  # dw is still right


AUTOGRAD_COMPUTED = ("output['grad {}']: torch autograd computed it: the backward launched no Triton kernel and read "
                     "nothing a Triton kernel wrote in the forward")


def test_a_missing_gradient_and_a_backward_torch_computes_from_the_inputs_are_refused(cli, make_project):
    code, rec = verify_json(cli, make_project(train.NO_DW, name="no_dw", toml=NO_LAYOUTS), "--case", "1")
    assert code == 1 and "no gradient for weight (input #1)" in messages(rec)
    code, rec = verify_json(cli, make_project(train.TORCH_BACKWARD_FROM_INPUTS, name="torch_bwd", toml=NO_LAYOUTS),
                            "--case", "1")
    assert code == 1
    case = failing(rec)[0]
    assert ("output['grad x'], output['grad weight']: torch autograd computed them: the backward launched no "
            "Triton kernel and read nothing a Triton kernel wrote in the forward") in case["messages"][0], case
    assert case["checks"]["torch_ops"] == "failed" and case["launches"] == 1  # the forward's kernel only
    # ... allowed when the project says torch may compute them
    code, rec = verify_json(cli, make_project(train.TORCH_BACKWARD_FROM_INPUTS, name="torch_bwd_allowed",
                                              toml=NO_LAYOUTS + 'allow_torch_ops = ["torch.autograd.grad"]\n'),
                            "--case", "1")
    assert code == 0, messages(rec)


def test_a_torch_backward_that_finishes_the_forward_kernels_data_is_torch_finishing_triton_work(cli, make_project):
    """The rule is where the gradient's data comes from (a Triton kernel, in the forward or the backward), as for
    outputs (verify/torchops.py): a backward in torch from the rstd the forward's kernel wrote passes."""
    code, rec = verify_json(cli, make_project(train.TORCH_BACKWARD, name="torch_bwd_rstd", toml=NO_LAYOUTS),
                            "--case", "1")
    assert code == 0, messages(rec)
    assert [c["checks"]["torch_ops"] for c in rec["cases"] if not c["config"]] == ["passed"]


def test_no_triton_kernel_in_forward_or_backward_is_refused(cli, make_project):
    no_triton = train.TORCH_BACKWARD_FROM_INPUTS.replace(
        "        _rms_fwd[(n_rows,)](x2, w, y, rstd, x2.stride(0), n_cols, EPS, BLOCK=block)\n",
        "        y = (x2 * torch.rsqrt(x2.float().pow(2).mean(-1, keepdim=True) + EPS) * w).to(x2.dtype)\n")
    code, rec = verify_json(cli, make_project(no_triton, name="no_triton", toml=NO_LAYOUTS), "--case", "1")
    assert code == 1 and "neither the forward nor the backward launched a Triton kernel" in messages(rec)


@pytest.mark.parametrize("name", ["FUSED_CROSS_ENTROPY", "FUSED_CROSS_ENTROPY_NONE"])
def test_a_fused_loss_whose_backward_only_scales_the_forwards_gradient_in_torch_verifies(cli, make_project, name):
    """Liger's and Unsloth's cross-entropy: the forward's kernel writes the gradient, the backward scales it."""
    code, rec = verify_json(cli, make_project(getattr(train, name), name=name.lower(), toml=NO_LAYOUTS))
    assert code == 0, messages(rec) + str(rec["problems"])
    main = [c for c in rec["cases"] if not c["config"] and not c["generated"]]
    assert [c["launches"] for c in main] == [1, 1]  # the forward's kernel, no backward kernel
    assert all(c["checks"]["torch_ops"] == "passed" for c in main)


@pytest.mark.parametrize("name, gradient", [("RECOMPUTED_IN_TORCH", True), ("STRAIGHT_THROUGH", True),
                                            ("FUSED_CROSS_ENTROPY_UNSCALED", False)])
def test_a_fused_loss_whose_gradient_is_not_the_forward_kernels_fails(cli, make_project, name, gradient):
    """Recomputed in torch from the saved logits; the Triton loss's values with torch autograd's gradient behind
    them; the forward kernel's gradient handed back without the upstream gradient."""
    code, rec = verify_json(cli, make_project(getattr(train, name), name=name.lower(), toml=NO_LAYOUTS),
                            "--case", "0")
    assert code == 1
    text = messages(rec)
    if gradient:
        assert AUTOGRAD_COMPUTED.format("logits") in text, text
    else:
        assert "output['grad logits']: 800 of 800 elements outside" in text and "torch autograd" not in text, text


def test_backward_true_makes_a_training_kernel_of_inputs_that_ask_for_no_gradient(cli, make_project):
    import torch

    from workbench.core.verify.gradients import gradient_inputs

    x, w, n = torch.randn(4, 8), torch.randn(8), 3
    assert gradient_inputs([x, w, n], backward=False) == []  # an inference kernel: forward only
    assert gradient_inputs([x, w.requires_grad_(), n], backward=False) == [1]
    assert gradient_inputs([x, torch.arange(3), n], backward=True) == [0]  # every float tensor input
    wrong = make_project(train.WRONG_DX.replace(", requires_grad=True", ""), name="wrong_dx_toml",
                         toml=NO_LAYOUTS + "backward = true\n")
    code, rec = verify_json(cli, wrong, "--case", "1")
    assert code == 1 and "grad x" in messages(rec)


def test_a_fused_loss_whose_forward_computes_the_gradient_verifies(cli, make_project):
    code, rec = verify_json(cli, make_project(train.CROSS_ENTROPY, name="cross_entropy", toml=NO_LAYOUTS),
                            "--case", "0", "--case", "1")
    assert code == 0, messages(rec) + str(rec["problems"])
    assert [c["launches"] for c in rec["cases"]] == [2, 2]  # the upstream gradient is never 1.0: the scaling runs


# -- the live loop: the forward's verdict first ----------------------------------------------------------------

def live_events(project_path, interpret=True):
    """The events of one live-loop run of verify (the interpreter, else this machine's GPU), in their order."""
    from workbench.core.project.folder import Project
    from workbench.core.run import make_runner
    from workbench.core.run.session import RunSpec, run_project

    events = []
    runner = make_runner(interpret=interpret)
    try:
        outcome = run_project(Project.open(project_path), runner, RunSpec(("verify",), live=True, record=False), events.append)
    finally:
        runner.close()
    return events, outcome


def case_results(events):
    from workbench.core.events import CaseResult

    return [e for e in events if isinstance(e, CaseResult) and not e.config]


@pytest.mark.parametrize("interpret", [True, pytest.param(False, marks=pytest.mark.gpu)], ids=["interpreter", "gpu"])
def test_the_live_loop_judges_every_case_forward_before_the_gradients(make_project, interpret):
    from workbench.core.events import StageChanged

    events, outcome = live_events(make_project(train.WRONG_DX, name="wrong_dx_live",
                                               toml=NO_LAYOUTS + "generated_cases = false\n"), interpret)
    results = case_results(events)
    forward = [r for r in results if r.phase == "forward"]
    whole = [r for r in results if not r.phase]
    assert sorted(r.case_index for r in forward) == sorted(r.case_index for r in whole) == [0, 1, 2]
    # every forward verdict came before the first case's whole battery, and the forward is right
    assert results.index(whole[0]) > max(results.index(r) for r in forward)
    assert all(r.status == "passed" for r in forward) and "grad x" not in str([r.messages for r in forward])
    assert any(r.status == "failed" and "grad x" in " ".join(r.messages) for r in whole)
    assert outcome.verdict.status == "failed"  # a forward that passed never hides the gradients' failure
    stages = [e for e in events if isinstance(e, StageChanged) and e.stage == "verifying"]
    assert [e.phase for e in stages] == ["forward"] * 3 + [""] * 3


def test_a_wrong_forward_fails_in_the_forward_verdict_and_headless_runs_judge_once(make_project, cli):
    wrong = train.RMSNORM_TRAIN.replace("(x * rstd * w)", "(x * w)")
    path = make_project(wrong, name="wrong_forward_live", toml=NO_LAYOUTS + "generated_cases = false\n")
    events, outcome = live_events(path)
    forward = [r for r in case_results(events) if r.phase == "forward"]
    assert forward and any(r.status == "failed" for r in forward) and outcome.verdict.status == "failed"
    code, rec = verify_json(cli, path, "--case", "1")  # headless: the whole battery alone, one result a case
    assert code == 1 and [c["phase"] for c in rec["cases"] if not c["config"]] == [""]


@pytest.mark.parametrize("name", ["RMSNORM_TRAIN", "CROSS_ENTROPY"])
def test_correct_training_kernels_written_as_libraries_write_them_pass_forward_first_in_the_live_loop(make_project,
                                                                                                   name):
    events, outcome = live_events(make_project(getattr(train, name), name=name.lower(),
                                               toml=NO_LAYOUTS + "generated_cases = false\n"))
    results = case_results(events)
    forward = [r for r in results if r.phase == "forward"]
    assert forward and all(r.status == "passed" for r in forward), [(r.label, r.messages) for r in forward]
    assert outcome.verdict.status == "passed", [(r.label, r.messages) for r in results if r.status != "passed"]


def test_what_a_backward_reads_is_the_saved_tensors_it_unpacks_and_what_its_ctx_keeps():
    import torch

    from workbench.core.verify.gradients import BackwardReads

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            kept, saved, unused = x * 2, x * 3, x * 4
            ctx.kept, ctx.unpack = [kept], x.shape[0] == 5
            ctx.save_for_backward(saved, unused)
            return x.sum()

        @staticmethod
        def backward(ctx, grad_output):
            if ctx.unpack:
                saved, _ = ctx.saved_tensors
                return saved * grad_output
            return ctx.kept[0] * grad_output

    def reads(disabled, unpack=True):
        x = torch.randn(5 if unpack else 6).abs().add(1).requires_grad_()
        found = BackwardReads()
        with (torch.autograd.graph.disable_saved_tensors_hooks("a library's checkpointing") if disabled
              else torch.enable_grad()):
            with found.saved():
                out = Scaled.apply(x)
        found.kept_on_ctx([out])
        ctx = out.grad_fn
        torch.autograd.grad([out], [x], [torch.tensor(0.5)])
        return found, x, ctx

    def multiples(found, x):
        return sorted(round(float(t[0] / x[0].detach())) for t in found.tensors)

    found, x, ctx = reads(disabled=False)
    assert multiples(found, x) == [2, 3, 4] and not found.every_saved  # on ctx; both saved tensors, unpacked
    found, x, ctx = reads(disabled=False, unpack=False)
    assert multiples(found, x) == [2]  # saved but never unpacked: not read
    found, x, ctx = reads(disabled=True, unpack=False)  # hooks refused: every saved tensor, unpacked or not
    assert found.every_saved and multiples(found, x) == [2, 3, 4]


@pytest.mark.gpu
def test_where_the_gradients_come_from_is_followed_on_a_gpu(cli, make_project):
    """On a GPU the autograd engine runs the backward on its own thread: the saved tensors it unpacks are still
    seen (saved-tensor hooks travel with each saved tensor), and the Triton launches it makes are counted."""
    code, rec = verify_json(cli, make_project(train.FUSED_CROSS_ENTROPY, name="fused_ce_gpu", toml=NO_LAYOUTS))
    assert rec["mode"] == "gpu" and code == 0, messages(rec) + str(rec["problems"])
    for name in ("RECOMPUTED_IN_TORCH", "STRAIGHT_THROUGH"):
        code, rec = verify_json(cli, make_project(getattr(train, name), name=f"{name.lower()}_gpu", toml=NO_LAYOUTS))
        assert code == 1 and AUTOGRAD_COMPUTED.format("logits") in messages(rec), messages(rec)
    code, rec = verify_json(cli, make_project(train.TORCH_BACKWARD_FROM_INPUTS, name="torch_bwd_gpu",
                                              toml=NO_LAYOUTS))
    assert code == 1 and "torch autograd computed them" in messages(rec)


def test_a_compiler_contracted_fma_over_a_single_column_is_the_dtypes_rounding_not_a_bug(cli, make_project):
    """Over one column a LayerNorm's dx is exactly 0, and so is torch's float32 autograd; a kernel whose dx is one
    FMA (the product exact there, rounded in the row's mean: what fp-contract makes of any Triton kernel) is off by
    the product's rounding times rstd = 316, past the float32 floor. One more rounding of the reference's own
    intermediates (error_model.RoundEachOp) budgets it; a dx that is wrong fails beside it."""
    code, rec = verify_json(cli, make_project(train.LAYERNORM_TRAIN_FMA, name="ln_fma", toml=NO_LAYOUTS), "--case", "0")
    assert code == 0, messages(rec) + str(rec["problems"])
    single = [c for c in rec["cases"] if c["case_index"] == 0 and not c["config"]][0]
    grad_x = [o for o in single["compared"] if o["output"] == "grad x"][0]
    # past the float32 floor (1e-5), within 2x what one more rounding of the intermediates moves it
    assert grad_x["max_abs_err"] > 1e-5 and grad_x["source"] == "inputs" and grad_x["multiple"] < 1
    code, rec = verify_json(cli, make_project(train.LAYERNORM_TRAIN_FMA_WRONG_DX, name="ln_fma_wrong",
                                              toml=NO_LAYOUTS), "--case", "1")
    assert code == 1 and [c["case_index"] for c in failing(rec)] == [1] and "grad x" in messages(rec)
