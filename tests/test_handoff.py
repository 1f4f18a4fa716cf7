"""The hand-off of a case's tensors to the judge: exact bytes, whatever the kernel patched."""

import pytest

torch = pytest.importorskip("torch")

from workbench.core.verify.handoff import CaseData, ExtraRun, pack_tensor, unpack_tensor  # noqa: E402


@pytest.mark.parametrize("tensor", [
    torch.randn(3, 5), torch.randn(4, 6).t(), torch.randn(7).to(torch.bfloat16), torch.tensor(2.5),
    torch.empty(0, 3), torch.arange(10, dtype=torch.int64), torch.tensor([True, False]),
    torch.randn(2, 3, dtype=torch.float16)[:, 1],
    torch.randn(2)[1::2], torch.randn(3, 1, 4)[:, :, 1::4],  # one element (per row) at a stride: no byte view as is
])
def test_tensors_travel_bit_for_bit(tensor):
    back = unpack_tensor(pack_tensor(tensor))
    assert back.dtype == tensor.dtype and back.shape == tensor.shape
    from workbench.core.verify.compare import tensors_equal_bitwise

    assert bool(tensors_equal_bitwise(back, tensor).all())


def test_packing_ignores_patched_tensor_methods_and_subclasses(monkeypatch):
    t = torch.arange(6, dtype=torch.float32)
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self, *a, **k: torch.zeros_like(self))
    monkeypatch.setattr(torch.Tensor, "contiguous", lambda self, *a, **k: torch.zeros_like(self))
    monkeypatch.setattr(torch.Tensor, "numpy", lambda self, *a, **k: None)
    assert torch.equal(unpack_tensor(pack_tensor(t)), torch.arange(6, dtype=torch.float32))

    class Liar(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return torch.zeros(6)

    liar = torch.arange(6, dtype=torch.float32).as_subclass(Liar)
    packed = pack_tensor(liar)
    assert not packed["exact"] and torch.equal(unpack_tensor(packed), torch.arange(6, dtype=torch.float32))


def test_case_data_round_trip_flags_subclass_outputs():
    class Sub(torch.Tensor):
        pass

    data = CaseData(case_index=3, label="n=3", first=[torch.ones(3).as_subclass(Sub)], names=[""],
                    reference=[torch.ones(3, dtype=torch.float64)], before=[None, torch.ones(2)],
                    extra_runs=[ExtraRun("repeat_fresh_inputs", outputs=[torch.ones(1)], reference=[torch.ones(1)])])
    back = CaseData.unpack(data.pack())
    assert back.not_plain == [0] and back.before[0] is None and back.extra_runs[0].name == "repeat_fresh_inputs"
    assert torch.equal(back.first[0], torch.ones(3))


def test_the_judge_warns_when_two_cases_have_the_same_reference():
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.judge import Judge

    judge = Judge(VerifyConfig())
    x = torch.randn(64)

    def case(index, label):
        return CaseData(case_index=index, label=label, first=[x * 2], names=[""], reference=[(x * 2).double()],
                        expected_dtypes=["float32"], before=[x], after=[x.clone()], launches=1)

    first, second = judge.judge(case(0, "n=64")), judge.judge(case(1, "n=64 again"))
    assert first.status == second.status == "passed" and not first.warnings
    assert second.warnings == ["the reference output is identical to case n=64's: the cases test the same thing"]
    assert second.checks["inputs"] == "warning" and first.checks["inputs"] == "passed"


# -- benchmark-sized outputs: judged on a random sample, with the whole output's shape and NaN count ---------

def judged_sample(out, ref, limit=1 << 12):
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.judge import Judge

    data = CaseData(case_index=0, label="big", names=[""])
    data.sample([out], [ref], limit)
    return Judge(VerifyConfig()).judge(CaseData.unpack(data.pack())), data


def test_a_right_big_output_passes_on_a_sample_and_says_so():
    ref = torch.randn(256, 1024, dtype=torch.float64)
    result, data = judged_sample(ref.float(), ref)
    assert result.status == "passed", result.messages
    assert data.sampled_from == 256 * 1024 and data.first[0].numel() == 1 << 12
    assert any("drawn at random from up to 262,144" in n for n in result.notes)


def test_a_loss_beside_a_big_gradient_is_judged_whole_and_the_gradient_on_a_sample():
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.judge import Judge

    grad = torch.randn(256, 1024, dtype=torch.float64)
    data = CaseData(case_index=0, label="loss", names=["loss", "grad x"], reference_names=["loss", "grad x"])
    data.sample([torch.tensor(1.5), grad.float()], [torch.tensor(1.5, dtype=torch.float64), grad], 1 << 12)
    result = Judge(VerifyConfig()).judge(CaseData.unpack(data.pack()))  # a 0-d first output has no len()
    assert result.status == "passed", result.messages
    assert any("judged on 4,096 elements drawn at random from up to 262,144" in n for n in result.notes)


def test_a_wrong_region_of_a_big_output_fails_with_its_place_in_the_whole_output():
    ref = torch.randn(256, 1024, dtype=torch.float64)
    out = ref.float().clone()
    out[192:] = 0  # the last quarter of the rows: a sample of 4096 misses it with probability 0.75**4096
    result, _ = judged_sample(out, ref)
    assert result.status == "failed" and result.checks["values"] == "failed"
    assert result.worst.index[0] >= 192 and len(result.worst.index) == 2
    assert result.error_map is None and "drawn at random" in result.pattern


def test_a_few_unwritten_elements_fail_through_the_whole_output_nan_count():
    ref = torch.randn(256, 1024, dtype=torch.float64)
    out = ref.float().clone()
    out[7, 3] = out[200, 1000] = float("nan")  # two elements: almost surely outside the sample
    result, _ = judged_sample(out, ref)
    assert result.status == "failed" and result.checks["nan"] == "failed"
    assert any("2 NaN where the reference has a number, counted over the whole output" in m for m in result.messages)
    assert [e["non_finite"] for e in result.compared] == [True]  # the output's entry says so, wherever the sample fell


def test_a_big_output_of_the_wrong_shape_is_reported_with_the_whole_shapes():
    ref = torch.randn(256, 1024, dtype=torch.float64)
    result, _ = judged_sample(torch.zeros(1, 1024), ref)
    assert result.status == "failed" and result.checks["shape"] == "failed"
    assert "shape (1, 1024), expected (256, 1024) (it only broadcasts to it)" in result.messages[0]


def test_a_sample_still_flags_a_tensor_subclass_output():
    class Sub(torch.Tensor):
        pass

    ref = torch.randn(64, 1024, dtype=torch.float64)
    result, _ = judged_sample(ref.float().as_subclass(Sub), ref)
    assert result.status == "failed" and result.checks["structure"] == "failed"


def test_a_reference_in_16_bit_floats_widens_the_tolerances_and_says_so():
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.judge import Judge

    ref = torch.randn(1000, dtype=torch.float64)
    low = ref.to(torch.bfloat16)
    tol = VerifyConfig().tolerance_for("bfloat16")
    out = ref.clone()
    out[:10] += 1.5 * (tol.atol + tol.rtol * ref[:10].abs())  # ten elements 1.5x outside the tolerance
    out = out.to(torch.bfloat16)
    strict = Judge(VerifyConfig()).judge(CaseData(case_index=0, label="x", names=[""], first=[out],
                                                  reference=[ref]))
    widened = Judge(VerifyConfig()).judge(CaseData(case_index=0, label="x", names=[""], first=[out],
                                                   reference=[low]))
    assert strict.status == "failed" and widened.status == "passed", widened.messages
    assert any("tolerances multiplied by 2: the reference ran in bfloat16" in n for n in widened.notes)


def test_the_in_process_recheck_never_digests_the_whole_reference(monkeypatch):
    """A benchmark's recheck compares whole outputs (a gigabyte in float64 for the big shapes): hashing the
    reference there for the weak-input warning cost a second per case."""
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify import judge as judge_module
    from workbench.core.verify.checks import weak_inputs

    def refuse(tensors):
        raise AssertionError("the reference was digested")

    monkeypatch.setattr(weak_inputs, "reference_digest", refuse)
    ref = torch.randn(1000, dtype=torch.float64)
    result = judge_module.judge_outputs(VerifyConfig(), 0, "x", [ref.float()], [""], [ref])
    assert result.status == "passed"


def test_a_tensor_held_in_several_places_travels_once():
    ref = torch.randn(1 << 16, dtype=torch.float64)
    runs = [ExtraRun(name, outputs=[ref.float()], reference=[ref]) for name in ("a", "b", "c", "d")]
    once = CaseData(case_index=0, label="x", names=[""], extra_runs=runs[:1]).pack()
    four = CaseData(case_index=0, label="x", names=[""], extra_runs=runs).pack()
    # three more runs add their own float32 outputs (256 KiB each), not three more float64 references (512 KiB)
    assert len(four) - len(once) < 3 * (ref.numel() * 4 + ref.numel() * 8)
    assert len(four) - len(once) < 3 * ref.numel() * 4 + 4096
    back = CaseData.unpack(four)
    assert all(torch.equal(run.reference[0], ref) for run in back.extra_runs)


def test_the_autotune_hint_is_added_only_to_a_failing_case_that_changed_an_input():
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.judge import Judge

    ref = torch.randn(64, dtype=torch.float64)
    x = torch.randn(64)

    def judged(out, after):
        data = CaseData(case_index=0, label="x", names=[""], first=[out], reference=[ref], before=[x],
                        after=[after], mutation_hints=["list the arguments it writes in restore_value"])
        return Judge(VerifyConfig(inplace=True)).judge(data)

    hint = "list the arguments it writes in restore_value"
    assert hint in judged(ref.float() + 1, x + 1).notes  # wrong, and the input changed
    assert hint not in judged(ref.float() + 1, x.clone()).notes  # wrong, input untouched
    assert hint not in judged(ref.float(), x + 1).notes  # right (in place, declared)


# -- a benchmark case's check, handed over on a thread while the kernel is timed ----------------------------

def test_a_sample_copied_to_the_host_keeps_its_values_and_a_compact_index():
    ref = torch.randn(256, 1024, dtype=torch.float64)
    data = CaseData(case_index=0, label="big", names=[""])
    data.sample([ref.float()], [ref], 1 << 12)
    data.to_host()
    assert data.sample_index[0].dtype == torch.int32 and data.sample_index[0].device.type == "cpu"
    assert torch.equal(data.first[0], ref.float().reshape(-1)[data.sample_index[0].long()])
    assert torch.equal(data.reference[0], ref.reshape(-1)[data.sample_index[0].long()])


def test_a_multi_megabyte_frame_arrives_whole_between_small_ones():
    import os
    import threading

    from workbench.core.verify.handoff import CASE, EVENT, read_frame, write_frame

    r, w = os.pipe()
    big = os.urandom(5 << 20)
    got = []
    reader = threading.Thread(target=lambda: got.extend(read_frame(r) for _ in range(3)))
    reader.start()
    write_frame(w, EVENT, b"{}")
    write_frame(w, CASE, big)
    write_frame(w, EVENT, b"[]")
    reader.join(10)
    os.close(r)
    os.close(w)
    assert got == [(EVENT, b"{}"), (CASE, big), (EVENT, b"[]")]


def test_events_emitted_while_a_case_is_on_its_way_never_cut_into_its_frame():
    import os
    import threading

    from workbench.core.events import StageChanged
    from workbench.core.run.child.judge_process import JudgeLink
    from workbench.core.verify.handoff import CASE, EVENT, read_frame

    frames_r, frames_w = os.pipe()
    replies_r, replies_w = os.pipe()
    link = JudgeLink(frames_w, replies_r)
    data = CaseData(case_index=3, label="big", names=[""])
    data.sample([torch.randn(1 << 20)], [torch.randn(1 << 20, dtype=torch.float64)], 1 << 20)
    kinds = []

    def judge_side():
        while len(kinds) < 41:
            kind, payload = read_frame(frames_r)
            kinds.append(kind)
            if kind == CASE:
                assert CaseData.unpack(payload).case_index == 3
                os.write(replies_w, b'{"type": "case_result", "case_index": 3, "label": "big", "status": "passed"}\n')

    judge = threading.Thread(target=judge_side)
    judge.start()
    from workbench.core.timing.checking import hand_over

    pending = hand_over(link.judge, data)
    for n in range(40):
        link.emit(StageChanged(stage="benchmarking", detail=f"event {n}"))
    assert pending.result().status == "passed"
    judge.join(10)
    assert kinds.count(CASE) == 1 and kinds.count(EVENT) == 40
    for fd in (frames_r, frames_w, replies_r, replies_w):
        os.close(fd)


def test_a_pending_verdict_raises_what_the_hand_over_raised():
    from workbench.core.timing.checking import hand_over

    def gone(data):
        raise SystemExit(76)

    with pytest.raises(SystemExit):
        hand_over(gone, CaseData(case_index=0, label="x")).result()


def test_phases_add_up_in_order_and_carry_the_set_up():
    from workbench.core.timing.bench import Phases

    phases = Phases({"set-up": 0.5})
    phases.done("inputs")
    phases.done("timing")
    assert list(phases.seconds) == ["set-up", "inputs", "timing"]
    assert phases.seconds["set-up"] == 0.5 and all(v >= 0 for v in phases.seconds.values())


def test_the_whole_output_nan_count_is_said_wherever_the_sample_falls():
    # a sample of half the output: the NaN lands in it about half the time; the count is said either way
    for _ in range(40):
        ref = torch.randn(64, 256, dtype=torch.float64)
        out = ref.float().clone()
        out[7, 3] = float("nan")
        result, _ = judged_sample(out, ref, limit=1 << 13)
        assert result.status == "failed" and result.checks["nan"] == "failed"
        assert any("1 NaN where the reference has a number, counted over the whole output" in m
                   for m in result.messages), result.messages


def test_the_judge_passes_a_plugins_own_events_on_and_never_a_forged_verdict():
    """A plugin's event type (its module imported in the worker after the judge forked) reaches the parent as it
    was written; a line that claims a type the workbench knows but does not parse is only log text, and a
    verdict from the kernel's process is marked forged."""
    import json
    import os
    import threading

    from workbench.core.run.child.judge_process import FORGED, serve
    from workbench.core.verify.handoff import EVENT, write_frame

    frames_r, frames_w = os.pipe()
    replies_r, replies_w = os.pipe()
    events_r, events_w = os.pipe()
    judge = threading.Thread(target=serve, args=(frames_r, replies_w, events_w), daemon=True)
    judge.start()
    plugin = {"type": "example_plugin_measured", "case_index": 2, "kernels": ["rmsnorm_kernel"]}
    for line in (json.dumps(plugin), '{"type": "case_result", "case_index": 1}',
                 '{"type": "case_result", "case_index": 1, "label": "x", "status": "passed"}', "not json"):
        write_frame(frames_w, EVENT, line.encode())
    os.close(frames_w)
    judge.join(10)
    with os.fdopen(events_r) as stream:
        lines = [json.loads(line) for line in stream.read().splitlines()]
    assert lines[0] == plugin
    assert lines[1]["type"] == "log" and "case_result" in lines[1]["text"]
    assert lines[2]["type"] == "case_result" and lines[2]["status"] == "error" and lines[2]["messages"] == [FORGED]
    assert lines[3]["type"] == "log"
    os.close(replies_r)
