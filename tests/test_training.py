"""Issue 28: training kernels. A kernel_fn that is a torch.autograd.Function's apply, with inputs that require grad
(or `[verify] backward = true`), is verified with its gradients: each input's gradient against the float64
reference's autograd, under the same battery as the outputs. The kernels are in tests/kernels_training.py."""

import kernels_training as train
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


def test_a_missing_gradient_and_a_backward_torch_computes_are_refused(cli, make_project):
    code, rec = verify_json(cli, make_project(train.NO_DW, name="no_dw", toml=NO_LAYOUTS), "--case", "1")
    assert code == 1 and "no gradient for weight (input #1)" in messages(rec)
    code, rec = verify_json(cli, make_project(train.TORCH_BACKWARD, name="torch_bwd", toml=NO_LAYOUTS), "--case", "1")
    assert code == 1 and "the backward launched no Triton kernel" in messages(rec)


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
