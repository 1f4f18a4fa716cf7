"""Layouts (issue 24, item 4): kernel_fn on the same values transposed, strided and at a storage offset
(verify/layouts.py). A launcher that takes its pointer from the storage's start fails; one that reads a
non-contiguous input as contiguous is a finding beside the verdict (most kernels are written for
contiguous tensors), failing it only where the project requires; a launcher may refuse a layout."""

import xml.etree.ElementTree as ET

import kernels
import kernels_libraries as lib
import torch
from run_helpers import ONLY_CASES, failing, verify_json

from workbench.core.project.config import VerifyConfig
from workbench.core.project.contract import Case
from workbench.core.verify.edge_cases import first_case_per_dtype
from workbench.core.verify.launches import LaunchCounter
from workbench.core.verify.layouts import (
    LIVE_SKIP,
    layout_runs,
    noncontiguous,
    relaid,
    storage_offset,
)


def tuned(record):
    return [c for c in record["cases"] if not c["config"]]


def finding(record, name):
    """The case whose compatibility finding `name` ran, and the finding."""
    case = next(c for c in tuned(record) if name in c["compat"])
    return case, case["compat"][name]


# -- the layouts themselves ----------------------------------------------------------------------------

def test_a_matrix_is_transposed_in_memory_with_its_values_unchanged():
    x = torch.randn(5, 7)
    laid, how = noncontiguous(x)
    assert laid.shape == x.shape and laid.stride() == (1, 5) and not laid.is_contiguous()
    assert torch.equal(laid, x) and how == "transposed (strides (1, 5))"
    batched, _ = noncontiguous(torch.randn(2, 3, 4))
    assert batched.stride() == (12, 1, 3)


def test_a_vector_takes_every_other_element_and_the_gaps_hold_poison():
    for x in (torch.randn(9), torch.randn(1, 6), torch.arange(8, dtype=torch.int32)):
        laid, how = noncontiguous(x)
        assert torch.equal(laid, x) and not laid.is_contiguous() and laid.stride()[-1] == 2, how
        whole = torch.empty(0, dtype=x.dtype).set_(laid.untyped_storage())
        gaps = whole[1::2]
        assert (gaps.isnan().all() if x.is_floating_point() else (gaps == torch.iinfo(x.dtype).max).all())


def test_a_storage_offset_keeps_the_16_byte_alignment_and_poisons_what_is_before():
    for dtype, offset in ((torch.float32, 4), (torch.float16, 8), (torch.float64, 2), (torch.int8, 16)):
        x = (torch.randn(3, 5) * 10).to(dtype)
        laid, how = storage_offset(x)
        assert laid.is_contiguous() and laid.storage_offset() == offset and torch.equal(laid, x)
        assert laid.data_ptr() % 16 == 0 and how == f"at storage offset {offset}"
        before = torch.empty(0, dtype=dtype).set_(laid.untyped_storage())[:offset]
        assert before.isnan().all() if dtype.is_floating_point else (before == torch.iinfo(dtype).max).all()


def test_only_inputs_with_a_layout_of_their_own_are_relaid():
    base = torch.randn(4, 6)
    weight = torch.randn(6, requires_grad=True)
    inputs = [base[:2], base[2:], torch.randn(1), 3.5, torch.tensor(2.0), weight]
    out = relaid(inputs, "noncontiguous")
    assert out.inputs[0] is inputs[0] and out.inputs[1] is inputs[1]  # views of one buffer: their layout is given
    assert out.inputs[2] is inputs[2] and out.inputs[3] == 3.5 and out.inputs[4] is inputs[4]
    assert out.inputs[5].requires_grad and out.inputs[5].stride() == (2,) and torch.equal(out.inputs[5], weight)
    assert out.changed == ["input #5 every other element (strides (2,))"]


def test_the_layout_anchor_of_a_dtype_is_its_first_case_with_a_size_above_one():
    cases = [Case(0, dict(n=1)), Case(1, dict(n=1000, dtype=torch.float16)), Case(2, dict(n=4097)),
             Case(3, dict(n=1, dtype=torch.float16))]
    assert first_case_per_dtype(cases) == {0, 1}
    assert first_case_per_dtype(cases, sized=True) == {2, 1}
    assert first_case_per_dtype([Case(0, dict(n=1))], sized=True) == {0}  # none larger: the first


# -- layout_runs, with kernel_fn faked ------------------------------------------------------------------

def runs_of(call, reference_fn=lambda x: x * 2, modes=None, live=False, skip=""):
    x = torch.randn(4, 5)
    config = VerifyConfig(**(modes or {}))
    runs = layout_runs(call, reference_fn, [x], [x * 2], [x * 2], [], config, skip=skip, live=live)
    return {r.name: r for r in runs}


def test_a_call_that_raises_before_launching_is_a_refusal_and_after_it_an_error():
    def refuses(args):
        raise ValueError("x must be contiguous")

    runs = runs_of(refuses)
    assert runs["noncontiguous"].refused.startswith("kernel_fn refuses input #0 transposed (strides (1, 4)): "
                                                    "ValueError: x must be contiguous")
    assert not runs["noncontiguous"].error and not runs["noncontiguous"].outputs

    def raises(args):
        LaunchCounter.count += 1  # a launch, then the error
        raise IndexError("out of range")

    runs = runs_of(raises)
    assert runs["storage_offset"].error == "kernel_fn raised on input #0 at storage offset 4: IndexError: out of range"


def test_modes_the_live_loop_and_a_reference_that_refuses():
    def doubles(args):
        return args[0] * 2

    runs = runs_of(doubles, modes={"noncontiguous": "off", "storage_offset": "check"})
    assert runs["noncontiguous"].skipped == "turned off ([verify] noncontiguous)"
    assert not runs["storage_offset"].required and runs["storage_offset"].outputs
    runs = runs_of(doubles)
    assert not runs["noncontiguous"].required and runs["storage_offset"].required  # the defaults
    runs = runs_of(doubles, live=True)
    assert runs["noncontiguous"].skipped == LIVE_SKIP and not runs["storage_offset"].skipped

    def contiguous_only(x):
        return x.view(-1) * 2

    runs = runs_of(doubles, reference_fn=contiguous_only)
    assert runs["noncontiguous"].skipped.startswith("reference_fn refuses input #0 transposed")
    assert not runs["storage_offset"].skipped  # a view of an offset tensor is fine


# -- end to end, under the interpreter -------------------------------------------------------------------

def test_a_pointer_from_the_storage_start_fails_even_without_guard_margins(cli, make_project):
    # Guarded, every input already starts part-way into its allocation: the margins are read.
    code, rec = verify_json(cli, make_project(kernels.FROM_STORAGE_START, toml=ONLY_CASES))
    assert code == 1
    code, rec = verify_json(cli, make_project(kernels.FROM_STORAGE_START, name="unguarded",
                                              toml=ONLY_CASES + "guard_regions = false\n"))
    assert code == 1
    case, found = finding(rec, "storage_offset")
    assert case["status"] == "failed" and case["checks"]["storage_offset"] == "failed"
    assert found["status"] == "failed" and found["required"]
    assert any(m.startswith("storage_offset: ") and "input #0 at storage offset" in m
               and "untyped_storage().data_ptr()" in m for m in case["messages"]), case["messages"]
    # only the first sized case of each dtype runs the layouts; the others' tensors start their storage
    assert {c["case_index"] for c in failing(rec)} == {1, 2}
    assert [c["status"] for c in tuned(rec) if c["case_index"] == 0] == ["passed"]
    code, rec = verify_json(cli, make_project(kernels.FROM_STORAGE_START, name="reported_only",
                                              toml=ONLY_CASES + "guard_regions = false\nstorage_offset = \"check\"\n"))
    assert code == 0 and finding(rec, "storage_offset")[0]["checks"]["storage_offset"] == "warning"


def test_a_kernel_reading_a_transposed_input_as_contiguous_is_a_finding_unless_required(cli, make_project):
    code, out, err = cli("verify", make_project(lib.TUTORIAL_SOFTMAX, name="tutorial"))
    assert code == 0, out
    assert "compatibility: non-contiguous inputs FAILED on case 0 (rows=9 cols=300); not required" in out
    assert "kernel_fn on input #0 transposed (strides (1, 9))" in out
    assert "compatibility: inputs at a storage offset passed" in out
    project = make_project(lib.TUTORIAL_SOFTMAX, name="required", toml='[verify]\nnoncontiguous = "require"\n')
    code, rec = verify_json(cli, project)
    assert code == 1
    bad = failing(rec)
    assert [c["case_index"] for c in bad] == [0, 1]  # the first case of each dtype
    assert all(c["checks"]["noncontiguous"] == "failed" for c in bad)
    assert any(m.startswith("noncontiguous: ") for m in bad[0]["messages"])


def test_a_kernel_taking_every_stride_passes_and_one_assuming_a_layout_is_found(cli, make_project):
    code, rec = verify_json(cli, make_project(lib.MATMUL_MASKED_K, name="strided", toml=ONLY_CASES))
    assert code == 0, failing(rec)
    case, found = finding(rec, "noncontiguous")
    assert found["status"] == "passed" and case["checks"]["noncontiguous"] == "passed"
    code, rec = verify_json(cli, make_project(lib.MATMUL_B_STRIDES_ASSUMED, name="assumed",
                                              toml=ONLY_CASES))
    assert code == 0  # right on the contiguous inputs of its CASES
    case, found = finding(rec, "noncontiguous")
    assert found["status"] == "failed" and not found["required"] and case["checks"]["noncontiguous"] == "warning"
    assert "input #1 transposed" in found["error"]


def test_a_launcher_that_refuses_a_layout_says_so_and_passes(cli, make_project, tmp_path):
    junit = tmp_path / "junit.xml"
    project = make_project(kernels.REFUSES_NONCONTIGUOUS, toml=ONLY_CASES)
    code, out, err = cli("verify", project, "--junit", junit)
    assert code == 0, out
    assert ("compatibility: non-contiguous inputs refused on case 1: kernel_fn refuses input #0 every other "
            "element (strides (2,)): ValueError: scale: x must be contiguous (raised before any launch)") in out
    code, rec = verify_json(cli, project)
    case, found = finding(rec, "noncontiguous")
    assert found["status"] == "refused" and case["checks"]["noncontiguous"].startswith("skipped: kernel_fn refuses")
    suite = ET.parse(junit).getroot().find("testsuite")
    layout = next(t for t in suite.iter("testcase") if t.get("name") == "compatibility: noncontiguous")
    props = {p.get("name"): p.get("value") for p in layout.iter("property")}
    assert props["status"] == "refused" and layout.find("failure") is None


def test_a_bad_layout_mode_is_refused_naming_the_key(cli, make_project):
    code, out, err = cli("verify", make_project(kernels.GOOD, toml='[verify]\nnoncontiguous = "sometimes"\n'))
    assert code == 2 and "verify.noncontiguous" in out + err


def test_the_reference_meets_the_layout_itself_not_a_contiguous_clone_of_it():
    def contiguous_only(x):
        assert x.is_contiguous()
        return x * 2

    x = torch.randn(9)  # every other element: a clone of that is contiguous again
    runs = layout_runs(lambda args: args[0] * 2, contiguous_only, [x], [x * 2], [x * 2], [], VerifyConfig())
    assert runs[0].name == "noncontiguous" and runs[0].skipped.startswith("reference_fn refuses input #0 every other")
