"""The hand-off of a case's tensors to the judge: exact bytes, whatever the kernel patched."""

import pytest

torch = pytest.importorskip("torch")

from workbench.core.verify.handoff import CaseData, ExtraRun, pack_tensor, unpack_tensor  # noqa: E402


@pytest.mark.parametrize("tensor", [
    torch.randn(3, 5), torch.randn(4, 6).t(), torch.randn(7).to(torch.bfloat16), torch.tensor(2.5),
    torch.empty(0, 3), torch.arange(10, dtype=torch.int64), torch.tensor([True, False]),
    torch.randn(2, 3, dtype=torch.float16)[:, 1],
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
