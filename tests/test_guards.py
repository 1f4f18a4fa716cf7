"""Guard margins (issue 24, item 1; verify/guards.py): the inputs and kernel_fn's allocations sit inside
margins of 0xFF bytes, read back after each call. The GPU's side is in tests/test_verify_gpu.py."""

import torch

from workbench.core.verify.guards import GUARDED_SPANS, MIN_MARGIN, Guards, margin_bytes, span_elements
from workbench.core.verify.torchmodes import PrefillEmpty


def test_a_guarded_input_keeps_its_values_layout_and_alignment():
    x = torch.randn(6, 10)
    t = torch.randn(10, 6).t()  # non-contiguous: the span is what its strides reach
    ints = torch.arange(7, dtype=torch.int32)
    guards = Guards()
    gx, gt, gi, scalar = guards.guard_inputs([x, t, ints, 2.5])
    for guard, (before, after) in zip(guards.inputs, ((x, gx), (t, gt), (ints, gi))):
        assert torch.equal(before, after) and after.stride() == before.stride() and after.dtype == before.dtype
        # 512 bytes into the allocation or a multiple: the tensor keeps the alignment its allocation has
        assert (after.data_ptr() - guard.raw.data_ptr()) % 512 == 0 and after.data_ptr() != before.data_ptr()
    assert scalar == 2.5 and len(guards.inputs) == 3
    raw = guards.inputs[0].raw
    assert GUARDED_SPANS[raw.untyped_storage().data_ptr()] == (gx.data_ptr(), gx.data_ptr() + 60 * 4)
    assert (raw[:guards.inputs[0].start] == 0xFF).all() and (raw[guards.inputs[0].end:] == 0xFF).all()
    guards.close()
    assert raw.untyped_storage().data_ptr() not in GUARDED_SPANS


def test_inputs_sharing_memory_are_left_as_they_are():
    base = torch.randn(8)
    q, k = base[:4], base[4:]
    out = Guards().guard_inputs([q, k])
    assert out[0] is q and out[1] is k


def test_margins_are_as_long_as_the_span_within_bounds():
    assert span_elements((3, 4), (4, 1)) == 12 and span_elements((3, 4), (1, 3)) == 12
    assert span_elements((0, 4), (4, 1)) == 0
    assert margin_bytes(10) == MIN_MARGIN and margin_bytes(10_000) == 10_240 and margin_bytes(1 << 30) == 1 << 20


def test_stores_outside_an_allocation_are_counted_on_each_side_and_the_margins_reset():
    guards = Guards()
    with PrefillEmpty("nan", guards):
        out = torch.empty(5)
    assert out.isnan().all() and len(guards.allocated) == 1
    whole = torch.empty(0, dtype=out.dtype).set_(out.untyped_storage())
    first = out.storage_offset()
    whole[first + 5:first + 8] = 1.0  # three elements past the end
    whole[first - 1] = 1.0  # one before the start
    found = guards.check([out], [""])
    assert found == ["out-of-bounds store: 1 element before the start of output and 3 elements after the end of "
                     "output were written (a missing or wrong mask on a store?)"]
    assert guards.allocated == []  # forgotten after the call


def test_a_store_past_an_input_names_the_input_and_the_next_check_is_clean():
    guards = Guards()
    (x,) = guards.guard_inputs([torch.zeros(4, dtype=torch.float16)])
    whole = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
    whole[x.storage_offset() + 4] = 3.0
    assert guards.check([], []) == ["out-of-bounds store: 1 element after the end of input #0 was written "
                                    "(a missing or wrong mask on a store?)"]
    assert guards.check([], []) == []  # the margin was put back for the case's next call


def test_a_store_inside_the_tensor_is_no_finding():
    guards = Guards()
    (x,) = guards.guard_inputs([torch.zeros(16)])
    x.fill_(7.0)
    assert guards.check([x], [""]) == []
