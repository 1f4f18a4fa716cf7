"""Python constructs the GPU compiler accepts, run by the interpreter as the compiler means them
(verify/interpreter/python_syntax.py): `and`/`or` between tensors, a module-level alias of a tl builtin, a launcher
entering its tensors' device. Each correct kernel verifies on the CPU and its broken twin still fails."""

import interpreter_python_kernels as k
import pytest
from run_helpers import ONLY_CASES, failing, verify_json


@pytest.mark.parametrize("name", ["AND_MASK", "OR_MASK", "BUILTIN_ALIAS", "DEVICE_CONTEXT", "INT_ARGUMENT_AS_TENSOR"])
def test_the_construct_runs_under_the_interpreter(cli, make_project, name):
    code, rec = verify_json(cli, make_project(getattr(k, name), name=name.lower(), toml=ONLY_CASES))
    assert code == 0, failing(rec) + rec["problems"]
    assert rec["cases"][0]["launches"] == 1


@pytest.mark.parametrize("name, words", [("AND_MASK_WRONG", "outside rtol"), ("BUILTIN_ALIAS_WRONG", "outside rtol"),
                                         ("DEVICE_CONTEXT_WRONG", "outside rtol")])
def test_a_wrong_kernel_using_it_still_fails_on_values(cli, make_project, name, words):
    code, rec = verify_json(cli, make_project(getattr(k, name), name=name.lower(), toml=ONLY_CASES))
    assert code == 1 and not rec["problems"]
    assert any(words in m for m in failing(rec)[0]["messages"])


def test_the_boolean_operator_follows_the_compiler():
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    from workbench.core.verify.interpreter.python_syntax import boolean_operator

    apply = boolean_operator(tl)
    a = tl.tensor(TensorHandle(np.array([True, False, True, True]), tl.int1), tl.block_type(tl.int1, [4]))
    assert apply("logical_and", lambda: False, lambda: 1 / 0) is False  # compile-time False short-circuits
    assert apply("logical_or", lambda: True, lambda: 1 / 0) is True
    assert apply("logical_and", lambda: True, lambda: a) is a  # a true constant drops out
    assert apply("logical_and", lambda: 0, lambda: 0) == 0
