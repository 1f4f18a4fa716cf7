"""The benchmark's refusals to post a time kernel.py could fake (pure logic and CPU tensors: no GPU).

The timed calls' Triton launches against a checked call's, the input copies they rotate through, and
rates past this GPU's measured ceilings (timing/plausible.py, timing/rotation.py, timing/timed_series.py,
bench.CaseBencher).
"""

from types import SimpleNamespace

import pytest
import torch

from workbench.core.events import BenchResult, Timing
from workbench.core.text import fmt_bandwidth
from workbench.core.timing import baselines, bench, timed_series
from workbench.core.timing.plausible import (
    PLAUSIBLE_MARGIN,
    affordable_sets,
    flops_ceiling_factor,
    headline,
    implausible_rates,
    launch_refusal,
    launches_per_call,
    rotation_note,
    withholds,
)
from workbench.core.timing.rotation import (
    Rotation,
    TuningLaunches,
    copy_inputs,
    input_storage_bytes,
    probe_launches,
    why_not_copied,
)
from workbench.core.timing.stats import (
    BYTES_FROM_KERNEL,
    BYTES_LOWER_BOUND,
    bench_summary,
)
from workbench.core.verify.launches import LaunchCounter

GIB = 1 << 30


class Counter:
    count = 0


def launcher(counter, keep="all"):
    """A kernel_fn whose "launch" is a count: `keep` "all" hands back a result kept by the inputs' address
    whenever it has one, "last" only for the inputs of the call before, "none" launches on every call."""
    kept = {}

    def kernel_fn(x):
        key = x.data_ptr()
        if keep != "none" and key in kept:
            return kept[key]
        counter.count += 1
        out = x * 2
        if keep == "last":
            kept.clear()
        kept[key] = out
        return out

    return kernel_fn


def timed(rotation, counter, calls=200):
    """What the benchmark counts around `measure`: launches over the calls it made."""
    before = counter.count
    for _ in range(calls):
        rotation()
    return counter.count - before, rotation.calls


# -- the launch rule ----------------------------------------------------------------------------------

def test_timed_calls_launching_fewer_kernels_than_the_checked_call_post_no_time():
    why = launch_refusal(launched=0, calls=500, checked=1)
    assert why.startswith("timed calls launched 0 Triton kernels per call; the checked call launched 1: "
                          "the kernel's time is not posted")
    assert "0.5 Triton kernels per call" in launch_refusal(launched=250, calls=500, checked=1)
    assert launch_refusal(launched=999, calls=500, checked=2)  # one launch short over 500 calls is short


@pytest.mark.parametrize("launched, calls, checked", [
    (500, 500, 1),  # one launch a call, as checked
    (1000, 500, 2),  # two kernels a call
    (1500, 500, 2),  # more than checked: nothing skipped
    (0, 500, 0),  # no Triton kernel at all (require_triton = false), or launches not countable
    (0, 500, None),  # not counted
    (None, 500, 1),
    (0, 0, 1),  # no timed call
])
def test_launch_counts_that_post_the_time(launched, calls, checked):
    assert launch_refusal(launched, calls, checked) == ""


def test_launches_per_call():
    assert launches_per_call(300, 100) == 3.0
    assert launches_per_call(None, 100) is None and launches_per_call(3, 0) is None


# -- the rotation -------------------------------------------------------------------------------------

def test_input_sets_fit_a_share_of_free_memory():
    assert affordable_sets(1 * GIB, 80 * GIB) == 4  # at most 4 sets
    assert affordable_sets(8 * GIB, 80 * GIB) == 3  # 2 copies in 20 GiB
    assert affordable_sets(30 * GIB, 80 * GIB) == 1  # no copy fits in a quarter
    assert affordable_sets(0, 80 * GIB) == 1  # nothing to copy
    assert affordable_sets(GIB, None) == 1  # free memory unknown: no copy
    assert affordable_sets(GIB, 80 * GIB, most=2) == 2


def test_the_notes_say_when_inputs_are_not_rotated():
    note = rotation_note(1, 30 * GIB, 80 * GIB)
    assert note.startswith("inputs not rotated") and "30.00 GiB" in note and "reuse one input set" in note
    assert rotation_note(4, GIB, 80 * GIB) == "" and rotation_note(1, 0, 80 * GIB) == ""
    assert "a tensor subclass" in rotation_note(1, GIB, 80 * GIB, "input 0 is a Foo, a tensor subclass")


def test_a_copy_of_the_inputs_differs_from_them_only_by_address():
    base = torch.arange(40, dtype=torch.float32)
    matrix = torch.randn(6, 8).t()  # strided
    window = base[3:23]  # an offset into its storage, sharing it with `base`
    weight = torch.randn(5, requires_grad=True)
    inputs = [base, window, matrix, 7, "mode", torch.arange(4, dtype=torch.int8), weight]
    (a, b, c, seven, mode, small, w) = copy = copy_inputs(inputs)
    for original, made in ((base, a), (window, b), (matrix, c), (inputs[5], small), (weight, w)):
        assert made.data_ptr() != original.data_ptr()
        assert (made.shape, made.stride(), made.storage_offset(), made.dtype) == \
            (original.shape, original.stride(), original.storage_offset(), original.dtype)
        assert torch.equal(made.detach(), original.detach())
    assert seven == 7 and mode == "mode"
    assert w.requires_grad and not a.requires_grad
    # base and window shared one storage: their copies do too, so a write through one shows in the other
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    b[0] = -1.0
    assert a[3] == -1.0 and base[3] == 3.0
    assert input_storage_bytes(inputs) == 40 * 4 + 48 * 4 + 4 + 5 * 4  # each storage once
    assert len(copy) == len(inputs)


def test_tensor_subclasses_are_not_copied():
    class Tagged(torch.Tensor):
        pass

    assert "tensor subclass" in why_not_copied([torch.zeros(3).as_subclass(Tagged)])
    assert why_not_copied([torch.zeros(3), torch.nn.Parameter(torch.zeros(2)), 3]) == ""


def test_rotation_takes_each_input_set_in_turn_and_counts_its_calls():
    seen = []
    rotation = Rotation(lambda *args: seen.append(args[0]), [["a"], ["b"], ["c"]])
    for _ in range(7):
        rotation()
    assert seen == ["a", "b", "c", "a", "b", "c", "a"] and rotation.calls == 7
    with pytest.raises(ValueError):
        Rotation(print, [])
    # a probe before the timing is a call on a set too: the first timed call is on the next one (a launcher that
    # keeps its last output would otherwise hand it back once, and the count would say 0.996 launches a call)
    seen.clear()
    probed = Rotation(lambda *args: seen.append(args[0]), [["a"], ["b"]])
    probed.uncounted()
    probed()
    probed()
    assert seen == ["a", "b", "a"] and probed.calls == 2


def test_a_launcher_keeping_results_by_address_is_caught_and_a_cache_of_the_last_call_is_defeated():
    inputs = [torch.randn(64)]
    copies = [copy_inputs(inputs) for _ in range(3)]
    for keep, refused in (("all", True), ("last", False), ("none", False)):
        counter = Counter()
        kernel_fn = launcher(counter, keep)
        kernel_fn(*inputs)  # the first call (the benchmark's check before timing)
        checked = max(probe_launches(kernel_fn, copies, counter))
        assert checked == 1  # copies it has never seen: a launch each
        launched, calls = timed(Rotation(kernel_fn, [inputs] + copies), counter)
        why = launch_refusal(launched, calls, checked)
        assert bool(why) == refused, (keep, launched, calls)
    # without the rotation a cache of the last call alone would skip every timed launch
    counter = Counter()
    kernel_fn = launcher(counter, "last")
    kernel_fn(*inputs)
    launched, calls = timed(Rotation(kernel_fn, [inputs]), counter)
    assert launched == 0 and launch_refusal(launched, calls, 1)


def test_autotuning_launches_are_told_apart_from_the_calls_own(monkeypatch):
    from triton.runtime.autotuner import Autotuner

    counter = Counter()

    def fake_bench(tuner, *args, config=None, **meta):  # a config timed: 25 launches
        counter.count += 25
        if config == "nested":
            Autotuner._bench(tuner, config=None)  # counted once, by the outer call
        return 1.0

    monkeypatch.setattr(Autotuner, "_bench", fake_bench)
    with TuningLaunches(counter) as tuning:
        assert Autotuner._bench is not fake_bench
        Autotuner._bench(object(), config="a")
        Autotuner._bench(object(), config="nested")
        counter.count += 1  # the call's own launch
    assert tuning.launches == 75 and counter.count == 76
    assert Autotuner._bench is fake_bench  # put back


# -- the bencher's rotation, with the device's memory faked ------------------------------------------

def input_sets_of(kernel_fn, result, inputs, originals, first_launches, free_bytes):
    """timed_series.input_sets for a forward-only kernel (timing/modes.py), `free_bytes` of device memory free."""
    return timed_series.input_sets(result, kernel_fn, inputs, originals, first_launches, free_bytes)


def test_the_bencher_rotates_copies_and_checks_a_call_on_each():
    before = LaunchCounter.count
    kernel_fn = launcher(LaunchCounter, "all")
    inputs = [torch.randn(1024)]
    kernel_fn(*inputs)
    result = BenchResult(case_index=3, label="n=1024")
    rotation = input_sets_of(kernel_fn, result, inputs, None, first_launches=1, free_bytes=GIB)
    assert result.input_sets == 4 and len(rotation.sets) == 4 and rotation.sets[0][0] is inputs[0]
    assert result.checked_launches == 1 and not any("not rotated" in n for n in result.notes)
    launched, calls = timed(rotation, LaunchCounter)
    assert launched == 0 and calls == 200
    assert launch_refusal(launched, calls, result.checked_launches)
    assert LaunchCounter.count - before == 4  # the first call and one a copy


def test_without_room_for_a_copy_the_first_calls_own_launches_are_the_check():
    kernel_fn = launcher(LaunchCounter, "all")
    inputs = [torch.randn(1024)]
    result = BenchResult(case_index=3, label="n=1024")
    # a copy (4 KiB) is over a quarter
    rotation = input_sets_of(kernel_fn, result, inputs, None, first_launches=2, free_bytes=4096)
    assert result.input_sets == 1 and len(rotation.sets) == 1
    assert result.checked_launches == 2
    assert any(n.startswith("inputs not rotated") for n in result.notes)


def test_an_inplace_kernels_sets_all_start_from_get_inputs_values():
    def doubles_in_place(x):
        x.mul_(2)
        return x

    original = torch.arange(8, dtype=torch.float32)
    inputs = [original.clone()]
    doubles_in_place(*inputs)  # the first call changed them
    result = BenchResult(case_index=0, label="n=8")
    rotation = input_sets_of(doubles_in_place, result, inputs, [original.clone()], first_launches=1, free_bytes=GIB)
    assert torch.equal(inputs[0], original)  # restored before copying
    assert all(s[0].data_ptr() != inputs[0].data_ptr() for s in rotation.sets[1:])


# -- plausibility -------------------------------------------------------------------------------------

def test_a_bandwidth_past_the_copy_ceiling_is_implausible_and_names_where_the_bytes_came_from():
    (why,) = implausible_rates(31000.0, 3000.0, BYTES_FROM_KERNEL, None, None)
    assert why.startswith("implausible: 31.0 TB/s against a 3.0 TB/s ceiling (bytes from bytes_moved() in kernel.py)")
    assert "may count more" in why and "not posted" in why
    (bound,) = implausible_rates(9000.0, 3000.0, BYTES_LOWER_BOUND, None, None)
    assert bound.startswith("implausible: 9.0 TB/s against a 3.0 TB/s ceiling (bytes from the lower bound")
    assert "bytes_moved() in kernel.py" in bound and withholds(bound)
    assert headline(bound) == "implausible: 9.0 TB/s against a 3.0 TB/s ceiling"


@pytest.mark.parametrize("gbps", [2900.0, 3000.0, 3000.0 * (1 + PLAUSIBLE_MARGIN) - 1, None])
def test_a_bandwidth_within_the_margin_is_plausible(gbps):
    assert implausible_rates(gbps, 3000.0, BYTES_LOWER_BOUND, None, None) == []
    assert implausible_rates(50000.0, None, BYTES_LOWER_BOUND, None, None) == []  # no ceiling measured


def test_flops_past_the_matmul_rate_are_implausible_and_narrow_inputs_raise_the_ceiling():
    (why,) = implausible_rates(None, 3000.0, "", 2100.0, 750.0)
    assert why.startswith("implausible: 2.10 PFLOP/s against a 750 TFLOP/s ceiling (FLOPs from flops() in kernel.py")
    assert implausible_rates(None, 3000.0, "", 800.0, 750.0) == []
    assert flops_ceiling_factor([8, 32]) == 4.0 and flops_ceiling_factor([16, 32]) == 1.0
    assert implausible_rates(None, 3000.0, "", 2100.0, 750.0, flops_factor=flops_ceiling_factor([8])) == []
    assert len(implausible_rates(31000.0, 3000.0, BYTES_FROM_KERNEL, 2100.0, 750.0)) == 2


def test_format_bandwidth():
    assert fmt_bandwidth(31000.0) == "31.0 TB/s" and fmt_bandwidth(812.4) == "812 GB/s"


# -- a withheld time in the result, the report and the summary ---------------------------------------

def kernel_timing(ms=0.002):
    return Timing(median_ms=ms, q25_ms=ms, q75_ms=ms, min_ms=ms, samples=500, method="cuda graph replay")


def test_withholding_drops_the_time_and_says_why_once():
    result = BenchResult(case_index=3, label="n=1048576", kernel=kernel_timing(), recheck="passed")
    bench.withhold(result, "")
    assert result.kernel is not None and result.withheld == ""
    bench.withhold(result, launch_refusal(0, 500, 1))
    assert result.kernel is None
    assert result.withheld == "timed calls launched 0 Triton kernels per call; the checked call launched 1"
    bench.withhold(result, implausible_rates(31000.0, 3000.0, BYTES_FROM_KERNEL, None, None)[0])
    assert result.withheld.startswith("timed calls")  # the first reason stays the headline
    assert len(result.notes) == 2 and result.notes[1].startswith("implausible: 31.0 TB/s")
    implausible = BenchResult(case_index=4, label="n=4", kernel=kernel_timing())
    bench.withhold(implausible, implausible_rates(31000.0, 3000.0, BYTES_FROM_KERNEL, None, None)[0])
    assert implausible.withheld == "implausible: 31.0 TB/s against a 3.0 TB/s ceiling"


def test_the_summary_and_the_report_say_a_time_was_not_posted(tmp_path):
    from test_bench_cli import gpu_outcome

    from workbench.reports import format_bench

    posted = BenchResult(case_index=1, label="n=1", kernel=kernel_timing(0.01), gbps=100.0, recheck="passed")
    held = BenchResult(case_index=3, label="n=1048576", recheck="passed",
                       withheld="implausible: 31.0 TB/s against a 3.0 TB/s ceiling")
    assert bench_summary([held]).startswith("bench: TIME NOT POSTED on case 3 (implausible: 31.0 TB/s")
    line = bench_summary([posted, held])
    assert line.startswith("bench 1 case") and "TIME NOT POSTED on case 3" in line
    outcome = gpu_outcome(tmp_path)
    big = next(e for e in outcome.events if isinstance(e, BenchResult) and e.case_index == 4)
    bench.withhold(big, launch_refusal(0, 500, 1))
    big.gbps = big.bandwidth_fraction = None
    text = format_bench(outcome)
    row = next(line for line in text.splitlines() if line.strip().startswith("4 "))
    assert "NOT POSTED" in row and "µs" not in row.split("rows=8192 cols=8192")[1].split()[0]
    assert "timed calls launched 0 Triton kernels per call" in text


def test_old_records_read_and_new_fields_round_trip():
    from workbench.core.events import event_from_json

    old = BenchResult(case_index=2, label="n=2", kernel=kernel_timing()).to_dict()
    for name in ("withheld", "timed_launches_per_call", "checked_launches", "input_sets"):
        old.pop(name)
    read = BenchResult.from_dict({k: v for k, v in old.items() if k != "type"})
    assert read.withheld == "" and read.timed_launches_per_call is None and read.input_sets is None
    new = BenchResult(case_index=2, label="n=2", withheld="implausible: x", timed_launches_per_call=0.0,
                      checked_launches=1, input_sets=4)
    again = event_from_json(new.to_json())
    assert (again.withheld, again.timed_launches_per_call, again.checked_launches, again.input_sets) == \
        ("implausible: x", 0.0, 1, 4)


def test_element_bits_of_the_inputs():
    assert bench.element_bits([torch.zeros(2, dtype=torch.int8), torch.zeros(2), 3]) == [8, 32]
    assert bench.element_bits([torch.zeros(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bfloat16)]) == [16]


def test_tuning_launches_count_through_the_autotune_recorders_wrap():
    """Triton's own Autotuner (its launch and its timer faked), as the bencher runs a first call: TuningLaunches
    entered before AutotuneRecorder, whose wrap of the tuner's _bench then calls the count."""
    import triton
    import triton.language as tl

    from workbench.core.timing.autotune import AutotuneRecorder

    counter = Counter()

    @triton.jit
    def copy_kernel(x_ptr, n, BLOCK: tl.constexpr):
        pass

    def fake_launch(*args, **kwargs):
        counter.count += 1

    def fake_do_bench(kernel_call, quantiles=None):
        for _ in range(5):
            kernel_call()
        return [1.0, 0.9, 1.1]

    copy_kernel.run = fake_launch
    tuner = triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                            do_bench=fake_do_bench)(copy_kernel)
    with TuningLaunches(counter) as tuning, AutotuneRecorder({"copy_kernel": tuner}):
        tuner.run(None, 1000)
        assert tuning.launches == 10 and counter.count == 11  # 5 per config timed, then the call's own
        tuner.run(None, 1000)  # tuned already: its own launch only
        assert tuning.launches == 10 and counter.count == 12
    assert "_bench" not in tuner.__dict__


def test_the_app_shows_a_withheld_time_as_not_posted():
    from workbench.tui.widgets.bench import bench_cells

    held = BenchResult(case_index=3, label="n=1", withheld="implausible: 31.0 TB/s against a 3.0 TB/s ceiling")
    assert str(bench_cells(held)[3]) == "not posted"
    posted = BenchResult(case_index=3, label="n=1", kernel=kernel_timing(0.25))
    assert str(bench_cells(posted)[3]) == "250 µs"


# -- a benchmark case end to end, the GPU's parts faked ---------------------------------------------

class FakeChecker:
    """BenchChecker's part in a case: inputs, the reference, calls, and the judge's verdicts (all passed)."""

    def __init__(self, km):
        self.km = km

    def _inputs(self, case):
        return [torch.randn(case.params["n"])]

    def reference(self, inputs, case, native=False):
        from workbench.core.verify.references import Reference
        from workbench.core.verify.tensors import flatten_outputs

        return Reference(outputs=flatten_outputs(self.km.reference_fn(*inputs)))

    def call(self, inputs, case):
        from workbench.core.verify.tensors import flatten_outputs

        return flatten_outputs(self.km.kernel_fn(*inputs))

    def passed(self, case):
        from workbench.core.events import CaseResult

        return CaseResult(case_index=case.index, label=case.label, status="passed", dtype="float32")

    def check_soon(self, case, out, ref, notes):
        from concurrent.futures import Future

        done = Future()
        done.set_result(self.passed(case))
        return done

    def compare_here(self, case, out, ref):
        return self.passed(case)


def cpu_streams(monkeypatch, stream=7):
    """escapes.TimedCalls without a GPU: every call on stream `stream`, no probe, no persisting L2."""
    from workbench.core.timing import escapes

    monkeypatch.setattr(escapes.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(escapes.cuda, "raw_current_stream", lambda: stream)
    monkeypatch.setattr(escapes.cuda, "capturing", lambda: False)
    monkeypatch.setattr(escapes.l2persist, "reset", lambda: "")
    monkeypatch.setattr(escapes.l2persist, "set_aside_bytes", lambda: 0)
    monkeypatch.setattr(escapes.TimedCalls, "probe", lambda self: None)


def bench_case(monkeypatch, kernel_fn, median_ms=0.05, bytes_moved=None, checker=None):
    """One case through CaseBencher._run: `measure` calls the timed fn 300 times and says `median_ms`."""
    from workbench.core.events import DeviceFacts
    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import Case
    from workbench.core.timing.device import GpuState
    from workbench.core.timing.timers import Measurement

    def fake_measure(fn, config, flusher, watch, what, footprint_bytes=None):
        for _ in range(300):
            fn()
        return Measurement(kernel_timing(median_ms) if what == "kernel" else kernel_timing(1.0))

    monkeypatch.setattr(timed_series, "measure", fake_measure)  # the kernel's timed calls
    monkeypatch.setattr(baselines, "measure", fake_measure)  # the reference's
    cpu_streams(monkeypatch)
    monkeypatch.setattr(bench, "gpu_state", lambda uuid="": GpuState())
    monkeypatch.setattr(bench, "device_uuid", lambda: "")
    monkeypatch.setattr(bench, "free_device_bytes", lambda: GIB)
    events = []
    bencher = object.__new__(bench.CaseBencher)
    bencher.km = SimpleNamespace(kernel_fn=kernel_fn, reference_fn=lambda x: x * 2, get_inputs=None,
                                 bytes_moved=bytes_moved, flops=None, path="kernel.py", module=None)
    bencher.project_km, bencher.mode, bencher.backward = bencher.km, None, False
    bencher.config = BenchConfig(compare_torch_compile=False)
    bencher.inplace = False
    bencher.emit = events.append
    bencher.facts = DeviceFacts(name="a GPU", copy_gbps=3000.0, matmul_tflops=750.0)
    bencher.flusher = bencher.watch = None
    context = SimpleNamespace(km=bencher.km, config=SimpleNamespace(bench=bencher.config), emit=events.append,
                              job=SimpleNamespace(live=False, reference_timings={}, kept_baselines={}))
    bencher.baselines = baselines.Baselines(context, bencher.facts.name, None, None)
    bencher.checker = (checker or FakeChecker)(bencher.km)
    bencher.autotuners, bencher.wait_for_gpu = {}, lambda: None
    bencher._run(Case(index=3, params={"n": 1 << 16}, purpose="bench"), None)
    (result,) = [e for e in events if isinstance(e, BenchResult)]
    return result


def test_a_case_whose_timed_calls_launch_nothing_posts_no_time(monkeypatch):
    result = bench_case(monkeypatch, launcher(LaunchCounter, "all"))
    assert result.recheck == "passed" and result.kernel is None and result.gbps is None
    assert result.timed_launches_per_call == 0 and result.checked_launches == 1 and result.input_sets == 4
    assert result.withheld == "timed calls launched 0 Triton kernels per call; the checked call launched 1"
    assert result.reference is not None  # the baselines are still timed
    assert result.to_dict()["withheld"] == result.withheld


def test_a_case_launching_on_every_timed_call_posts_its_time(monkeypatch):
    for keep in ("none", "last"):  # a cache of the last call misses on rotated inputs
        result = bench_case(monkeypatch, launcher(LaunchCounter, keep))
        assert result.kernel is not None and result.withheld == "", result.notes
        assert result.timed_launches_per_call == 1 and result.checked_launches == 1
        assert result.gbps == pytest.approx(2 * (1 << 16) * 4 / 0.05e-3 / 1e9)
        assert result.speedup_vs_reference == pytest.approx(20.0)


def test_a_case_past_the_copy_ceiling_posts_no_time(monkeypatch):
    claims = lambda x: 100 * 2 * x.numel() * x.element_size()  # noqa: E731 - 100 times what it moves
    result = bench_case(monkeypatch, launcher(LaunchCounter, "none"), median_ms=0.0002, bytes_moved=claims)
    assert result.kernel is None and result.gbps is None and result.speedup_vs_reference is None
    assert result.withheld.startswith("implausible: ") and result.withheld.endswith("against a 3.0 TB/s ceiling")
    assert any("(bytes from bytes_moved() in kernel.py)" in n for n in result.notes)
    assert result.timed_launches_per_call == 1


def test_a_case_past_the_copy_ceiling_on_the_lower_bound_posts_no_time(monkeypatch):
    # 512 KiB in 50 ns: 10.5 TB/s against 3.0, with no bytes_moved() to say the kernel reads less than its inputs
    result = bench_case(monkeypatch, launcher(LaunchCounter, "none"), median_ms=0.00005)
    assert result.kernel is None and result.gbps is None and result.speedup_vs_reference is None
    assert result.withheld == "implausible: 10.5 TB/s against a 3.0 TB/s ceiling", result.withheld
    assert bench_summary([result]).startswith("bench: TIME NOT POSTED on case 3 (implausible: 10.5 TB/s")
    declared = bench_case(monkeypatch, launcher(LaunchCounter, "none"), median_ms=0.00005,
                          bytes_moved=lambda x: x.numel())  # a lookup reading a quarter of its input: 2.6 TB/s
    assert declared.kernel is not None and declared.withheld == "", declared.notes
