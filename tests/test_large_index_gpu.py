"""Large-index cases past 2^31 elements on a real GPU (marker `gpu`: skipped without CUDA): a kernel whose
row or block offset is 32 bits wide verifies on every smaller case and fails here, naming the cause; the same
kernel with the offset in int64 verifies, forward and backward (verify/large_index.py).

    .venv/bin/python -m pytest -q -m gpu tests/test_large_index_gpu.py
"""

import kernels_numerics as num
import pytest
from run_helpers import verify_json

pytestmark = pytest.mark.gpu

# Only the project's own cases and the large-index ones: the edge shapes and value stress have their own tests.
LARGE_ONLY = "[verify]\nmax_generated_cases = 0\nvalue_stress = false\n"


def large_cases(record):
    return [c for c in record["cases"] if "[past 2^31]" in c["label"]]


def said(record):
    """Every message, note and problem of the run, as one text."""
    texts = [p["message"] for p in record["problems"]]
    texts += [t for c in record["cases"] for t in c["messages"] + c["notes"]]
    return "\n".join(texts)


@pytest.mark.parametrize("source", ["ROW_SCALE_INT64", "SILU_TRAIN_INT64"])
def test_a_kernel_with_64_bit_offsets_verifies_past_2_31_elements(cli, make_project, source):
    code, rec = verify_json(cli, make_project(getattr(num, source), toml=LARGE_ONLY, large_index=True))
    assert rec["mode"] == "gpu"
    large = large_cases(rec)
    assert code == 0, [(c["label"], c["status"], c["messages"], c["notes"]) for c in rec["cases"]
                       if c["status"] != "passed"]
    assert large and all(c["status"] == "passed" for c in large), large
    assert all(any("scaled so that the largest tensor passes 2^31 elements" in n for n in c["notes"])
               for c in large)


@pytest.mark.parametrize("source", ["ROW_SCALE_INT32", "SILU_TRAIN_BWD_INT32"])
def test_a_kernel_whose_offsets_wrap_at_2_31_fails_there_and_only_there(cli, make_project, source):
    code, rec = verify_json(cli, make_project(getattr(num, source), toml=LARGE_ONLY, large_index=True))
    assert code != 0
    small = [c for c in rec["cases"] if "[past 2^31]" not in c["label"] and c["status"] != "skipped"]
    assert small and all(c["status"] == "passed" for c in small), small
    assert "int32 offset overflow" in said(rec), said(rec)
