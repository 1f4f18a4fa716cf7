"""Large-index cases (verify/large_index.py): which cases, how a size is scaled past 2^31, and how one is judged.

The sizing and the judging run here on the CPU with the limit scaled down (a "32-bit" offset that wraps at
2^13 elements, emulated by the kernels below); the real thing, past 2^31 on a GPU, is
tests/test_large_index_gpu.py."""

import textwrap

import pytest
import torch

from workbench.core.project.config import ConfigError, ProjectConfig, VerifyConfig
from workbench.core.project.contract import Case, load_kernel
from workbench.core.verify import battery, large_index
from workbench.core.verify.battery import Verifier
from workbench.core.verify.large_index import LARGE_INDEX, large_index_cases, plan


def test_one_case_per_dtype_from_its_smallest_case_only_on_a_gpu_outside_the_live_loop():
    cases = [Case(0, {"rows": 64, "cols": 300, "dtype": "float32"}), Case(1, {"rows": 8, "cols": 300}),
             Case(8, {"rows": 1, "cols": 1, "dtype": "float32"}),  # 2.7 billion rows of one element: not a base
             Case(2, {"rows": 5, "cols": 1000, "dtype": "bfloat16"}), Case(3, {"rows": 9, "cols": 9}, generated=True),
             Case(4, {"rows": 4096, "cols": 4096}, purpose="bench")]
    made = large_index_cases(cases, VerifyConfig(), first_index=5, on_gpu=True)
    assert [(c.index, c.params, c.stress, c.generated) for c in made] == [
        (5, {"rows": 64, "cols": 300, "dtype": "float32"}, LARGE_INDEX, True),
        (6, {"rows": 8, "cols": 300}, LARGE_INDEX, True),  # no dtype named: its own group
        (7, {"rows": 5, "cols": 1000, "dtype": "bfloat16"}, LARGE_INDEX, True)]
    assert made[0].label == "rows=64 cols=300 dtype=float32 [past 2^31] (generated)"
    assert large_index_cases(cases, VerifyConfig(), 5, on_gpu=False) == []
    assert large_index_cases(cases, VerifyConfig(large_index=False), 5, on_gpu=True) == []
    assert large_index_cases(cases, VerifyConfig(generated_cases=False), 5, on_gpu=True) == []
    assert large_index_cases([Case(0, {"dtype": "float32"})], VerifyConfig(), 1, on_gpu=True) == []  # no size


def test_large_index_is_a_setting():
    assert ProjectConfig.from_dict({"verify": {"large_index": "rows"}}).verify.large_index == "rows"
    assert ProjectConfig.from_dict({"verify": {"large_index": False}}).verify.large_index is False
    for bad in (3, "", ["rows"]):
        with pytest.raises(ConfigError, match="large_index"):
            ProjectConfig.from_dict({"verify": {"large_index": bad}})


class Shapes:
    """A stand-in KernelModule: get_inputs and reference_fn of a GEMM, a row op or attention, on the CPU."""

    def __init__(self, get_inputs, reference_fn):
        self.get_inputs, self.reference_fn = get_inputs, reference_fn


ROWS = Shapes(lambda rows=8, cols=300, dtype="float32": [torch.empty(rows, cols, dtype=getattr(torch, dtype)),
                                                          torch.empty(cols)],
              lambda x, w: x * w)
GEMM = Shapes(lambda m, n, k: [torch.empty(m, k, dtype=torch.bfloat16), torch.empty(k, n, dtype=torch.bfloat16)],
              lambda a, b: a @ b)
ATTENTION = Shapes(lambda batch, heads, seq, dim: [torch.empty(batch, heads, seq, dim)] * 3,
                   lambda q, k, v: q.clone())
FREE = 1 << 50


def test_the_first_size_that_scales_the_largest_tensor_in_proportion_is_scaled_past_the_limit():
    params, note = plan(ROWS, Case(0, {"rows": 8, "cols": 300}), VerifyConfig(), FREE)
    assert params["cols"] == 300 and params["rows"] * 300 >= large_index.TARGET > (params["rows"] - 1) * 300
    assert "rows scaled" in note
    params, _ = plan(ATTENTION, Case(0, {"batch": 2, "heads": 3, "seq": 40, "dim": 64}), VerifyConfig(), FREE)
    assert (params["heads"], params["seq"], params["dim"]) == (3, 40, 64)  # a batch, not the sequence
    assert params["batch"] * 3 * 40 * 64 >= large_index.TARGET


def test_the_size_that_needs_least_memory_wins_and_one_that_misses_the_largest_tensor_never_does():
    # C = m x n is the largest tensor, and k does not grow it. Scaling m grows A (m x k) beside it, scaling n
    # grows B (k x n): the one that needs less memory is scaled (the first, m, within 10%).
    params, _ = plan(GEMM, Case(0, {"m": 1270, "n": 300, "k": 250}), VerifyConfig(), FREE)
    assert (params["m"], params["k"]) == (1270, 250) and params["n"] * 1270 >= large_index.TARGET
    params, _ = plan(GEMM, Case(0, {"m": 300, "n": 1270, "k": 250}), VerifyConfig(), FREE)
    assert (params["n"], params["k"]) == (1270, 250) and params["m"] * 1270 >= large_index.TARGET
    # B (k x n) is the largest: k would grow it at less memory than n, but each output would then sum millions
    # of terms (a numerical question); n grows the output, the same work per element
    params, _ = plan(GEMM, Case(0, {"m": 65, "n": 129, "k": 97}), VerifyConfig(), FREE)
    assert (params["m"], params["k"]) == (65, 97) and params["n"] * 97 >= large_index.TARGET


def test_a_named_size_is_scaled_and_a_case_that_does_not_fit_or_cannot_scale_says_why():
    params, _ = plan(ROWS, Case(0, {"rows": 8, "cols": 300}), VerifyConfig(large_index="cols"), FREE)
    assert params["rows"] == 8 and params["cols"] * 8 >= large_index.TARGET
    none, why = plan(ROWS, Case(0, {"rows": 8, "cols": 300}), VerifyConfig(large_index="batch"), FREE)
    assert none is None and "names 'batch', which this case has not (it has rows, cols)" in why
    none, why = plan(ROWS, Case(0, {"rows": 8, "cols": 300}), VerifyConfig(), 8 << 30)
    assert none is None and "GiB of device memory, 8 GiB free" in why
    fixed = Shapes(lambda n=4, seed=1: [torch.empty(1000)], lambda x: x)  # n changes nothing
    none, why = plan(fixed, Case(0, {"n": 4}), VerifyConfig(), FREE)
    assert none is None and "no size parameter (n) scales the largest tensor" in why


# -- judged: one call, on a sample, with the hint (the CPU stands in: offsets "wrap" at 2^13) -----------------

WRAPPING_ROWS = '''
import torch

WRAP = 1 << 13


def row_scale(x, w):
    """Each row times w, reading row r at offset (r * cols) mod WRAP, as a 32-bit offset wraps at 2^31."""
    rows, cols = x.shape
    flat = x.reshape(-1)
    starts = (torch.arange(rows) * cols) % WRAP
    return torch.stack([flat[s:s + cols] for s in starts.tolist()]) * w


kernel_fn = row_scale


def reference_fn(x, w):
    return x * w


def get_inputs(rows=8, cols=300):
    return [torch.randn(rows, cols), torch.randn(cols)]


CASES = [{"rows": 8, "cols": 300}]
'''

RIGHT_ROWS = WRAPPING_ROWS.replace("starts = (torch.arange(rows) * cols) % WRAP", "starts = torch.arange(rows) * cols")
REFUSING_ROWS = RIGHT_ROWS.replace('    rows, cols = x.shape\n',
                                   '    rows, cols = x.shape\n    if rows > 16:\n'
                                   '        raise ValueError("at most 16 rows")\n')


def judge_large_case(tmp_path, monkeypatch, source, free=FREE):
    monkeypatch.setattr(large_index, "TARGET", (1 << 13) + (1 << 11))
    monkeypatch.setattr(battery, "free_device_memory", lambda: free)
    path = tmp_path / "kernel.py"
    path.write_text(textwrap.dedent(source))
    km = load_kernel(path)
    results = []
    verifier = Verifier(km, VerifyConfig(require_triton=False), results.append, interpret=False)
    case = large_index_cases(km.cases, verifier.config, 1, on_gpu=True)[0]
    verifier.large_index_case(case)
    return [r for r in results if getattr(r, "case_index", None) == 1][-1]


def test_a_kernel_whose_offsets_wrap_fails_the_large_case_with_the_likely_cause(tmp_path, monkeypatch):
    result = judge_large_case(tmp_path, monkeypatch, WRAPPING_ROWS)
    assert result.status == "failed", result
    assert result.label.endswith("cols=300 [past 2^31] (generated)") and result.label.startswith("rows=")
    assert any("int32 offset overflow" in n and "row.to(tl.int64)" in n for n in result.notes)


def test_a_kernel_right_at_every_offset_passes_the_large_case(tmp_path, monkeypatch):
    result = judge_large_case(tmp_path, monkeypatch, RIGHT_ROWS)
    assert result.status == "passed", result
    assert any("rows scaled so that the largest tensor passes 2^31 elements" in n for n in result.notes)


def test_a_refused_or_unaffordable_large_case_is_skipped_and_says_why(tmp_path, monkeypatch):
    refused = judge_large_case(tmp_path, monkeypatch, REFUSING_ROWS)
    assert refused.status == "skipped" and any("refuses this generated shape" in n for n in refused.notes)
    unaffordable = judge_large_case(tmp_path, monkeypatch, RIGHT_ROWS, free=1 << 10)
    assert unaffordable.status == "skipped"
    assert any("large-index case not run" in n and "free: not run on this GPU" in n for n in unaffordable.notes)


def test_a_launch_the_gpu_refuses_is_told_apart_from_the_kernel_being_wrong():
    assert large_index.launch_refused(RuntimeError("Triton Error [CUDA]: invalid argument"))
    assert not large_index.launch_refused(RuntimeError("Triton Error [CUDA]: an illegal memory access"))
    assert not large_index.launch_refused(ValueError("grid too large"))


def test_large_index_cases_take_turns_and_the_one_waiting_keeps_saying_so(monkeypatch):
    import threading
    import time

    monkeypatch.setattr(large_index, "WAIT_SAY_S", 0.1)
    said, order = [], []
    holding, release = threading.Event(), threading.Event()

    def first():
        with large_index.taking_turns(said.append):
            order.append("first in")
            holding.set()
            release.wait(5)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    threading.Timer(0.5, release.set).start()
    with large_index.taking_turns(said.append):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
    assert said and all(s >= 0.1 for s in said)  # a worker waiting a minute is not taken for hung
