"""Work the timed calls put where the timer's events do not look (timing/escapes.py, plausible.escape_refusals):
another stream, another thread, after the call returned, threads left running, persisting L2. Pure logic, and
a benchmark case with the GPU's parts faked; the probe's spins on a real GPU: test_timing_hacks_gpu.py."""

import threading
import weakref
from types import SimpleNamespace

import torch
from test_timing_honesty import FakeChecker, bench_case, cpu_streams, launcher

from workbench.core.timing import escapes
from workbench.core.timing.escapes import CallSample, Seen, TimedCalls
from workbench.core.timing.plausible import escape_refusals, headline, withholds
from workbench.core.verify.launches import LaunchCounter


def launch_on(stream):
    """What Triton's launch hooks see for one launch on `stream` (its launch metadata names the stream)."""
    meta = SimpleNamespace(data={"stream": stream})
    escapes._Hooks._enter(meta)
    escapes._Hooks._exit(meta)


def test_each_escape_withholds_the_time_and_says_how():
    cases = {
        "kernel_fn launched on a stream it does not join back": Seen(off_stream=5, probe_off_stream=1, unjoined=1),
        "kernel_fn launched on a stream that does not wait for the caller's": Seen(probe_off_stream=1, unforked=1),
        "kernel_fn launched on another stream in its timed calls (5 launches), and whether it joins that stream "
        "back is unknown": Seen(off_stream=5),
        "Triton kernels launched while no call of kernel_fn was in progress": Seen(deferred=3, other_thread=3),
        "kernel_fn started threads that outlive its calls": Seen(threads_started=["worker"]),
        "kernel_fn set aside L2 for persisting accesses": Seen(set_aside_bytes=30 << 20),
    }
    for head, seen in cases.items():
        (why,) = escape_refusals(seen)
        assert withholds(why) and headline(why) == head.split(" (")[0], why
    assert "join it back" not in escape_refusals(Seen(off_stream=5))[0]
    assert "3 of them" in escape_refusals(Seen(deferred=3, other_thread=3))[0]


def test_streams_that_fork_and_join_post_the_time():
    # launches on another stream, and the probe saw that stream wait for the caller's and be waited for
    assert escape_refusals(Seen(off_stream=500, probe_off_stream=1)) == []
    assert escape_refusals(Seen(set_aside_bytes=0)) == [] and escape_refusals(Seen()) == []


def test_the_watch_tells_the_timed_stream_from_another_and_a_call_from_none(monkeypatch):
    cpu_streams(monkeypatch, stream=7)
    own = TimedCalls(lambda: launch_on(7))
    other = TimedCalls(lambda: launch_on(9))
    for calls in (own, other):
        with calls.watching():
            for _ in range(4):
                calls()
    assert (own.seen.off_stream, own.seen.deferred) == (0, 0) and escape_refusals(own.seen) == []
    assert other.seen.off_stream == 4 and other.seen.deferred == 0
    later = TimedCalls(lambda: None)
    with later.watching():
        later()
        launch_on(7)  # the timing thread, between calls: work the call left for later
        worker = threading.Thread(target=launch_on, args=(7,))
        worker.start()
        worker.join()
    assert later.seen.deferred == 2 and later.seen.other_thread == 1
    capturing = TimedCalls(lambda: launch_on(7))
    with capturing.watching():  # stream 7 when the timing began
        monkeypatch.setattr(escapes.cuda, "raw_current_stream", lambda: 11)  # a graph capturing on its own stream
        capturing()
    assert capturing.seen.off_stream == 0  # the outer stream: a capture that fails, then timed by events there
    monkeypatch.setattr(escapes.cuda, "raw_current_stream", lambda: 7)
    paused = TimedCalls(lambda: None)
    with paused.watching(), LaunchCounter.paused():
        launch_on(7)  # a backward's untimed forward (modes.py): set-up, not the timed work
    assert paused.seen.deferred == 0
    launch_on(9)  # no watch active: nothing recorded anywhere
    assert other.seen.off_stream == 4


def test_the_watch_names_threads_a_call_left_running(monkeypatch):
    cpu_streams(monkeypatch)
    stop = threading.Event()

    def starts_a_thread():
        if not any(t.name == "left-running" for t in threading.enumerate()):
            threading.Thread(target=stop.wait, name="left-running", daemon=True).start()

    calls = TimedCalls(starts_a_thread)
    try:
        with calls.watching():
            calls()
        assert calls.seen.threads_started == ["left-running"]
    finally:
        stop.set()


def test_a_case_launching_on_another_stream_posts_no_time(monkeypatch):
    def side_stream(x):
        launch_on(9)
        LaunchCounter.count += 1
        return x * 2

    result = bench_case(monkeypatch, side_stream)
    assert result.kernel is None and result.gbps is None and result.speedup_vs_reference is None
    assert result.withheld.startswith("kernel_fn launched on another stream in its timed calls"), result.withheld


def test_a_case_whose_work_is_launched_after_it_returns_posts_no_time(monkeypatch):
    def deferred(x):
        LaunchCounter.count += 1
        out = x * 2
        weakref.finalize(out, launch_on, 7)  # the launch happens when the timer drops the output
        return out

    result = bench_case(monkeypatch, deferred)
    assert result.kernel is None
    assert result.withheld == "Triton kernels launched while no call of kernel_fn was in progress", result.withheld


def test_a_call_sample_keeps_each_call_equally_likely_in_bounded_room():
    sample = CallSample(size=3)
    for i in range(10):
        sample.offer(f"out {i + 1}")
    kept = sample.take()
    assert len(kept) == 3 and sample.kept == [] and sample.offered == 10
    assert [n for n, _ in kept] == sorted(n for n, _ in kept) and all(out == f"out {n}" for n, out in kept)
    # uniform over the calls however many come: 4000 draws of 2 from 10, each call kept ~800 times (sd ~25)
    counts = [0] * 10
    for _ in range(4000):
        draw = CallSample(size=2)
        for i in range(10):
            draw.offer(i)
        for _, i in draw.take():
            counts[i] += 1
    assert all(650 < c < 950 for c in counts), counts
    few = CallSample(size=5)
    few.offer("only")
    assert few.take() == [(1, "only")]


def test_a_call_sample_fits_its_memory():
    assert CallSample.for_outputs(1 << 20, None).size == escapes.SAMPLED_CALLS_MOST
    assert CallSample.for_outputs(256 << 20, None).size == 4  # 1 GiB of outputs at most
    assert CallSample.for_outputs(256 << 20, 4 << 30).size == 2  # an eighth of what is free
    assert CallSample.for_outputs(8 << 30, 80 << 30).size == 1  # one call, however big


def test_only_the_watched_calls_outside_a_capture_are_offered(monkeypatch):
    cpu_streams(monkeypatch)
    sample = CallSample(size=100)
    calls = TimedCalls(lambda: "out", sample=sample)
    calls()  # before the timing: not a timed call
    with calls.watching():
        calls()
        monkeypatch.setattr(escapes.cuda, "capturing", lambda: True)
        calls()  # captured into a graph: its outputs are rewritten by every replay
        monkeypatch.setattr(escapes.cuda, "capturing", lambda: False)
        calls()
    assert sample.offered == 2


class ComparingChecker(FakeChecker):
    """FakeChecker with a real comparison: the recheck of a sampled call sees a wrong output."""

    def compare_here(self, case, out, ref):
        from workbench.core.events import CaseResult

        if all(torch.equal(a, b) for a, b in zip(out.tensors, ref.outputs.tensors)):
            return self.passed(case)
        return CaseResult(case_index=case.index, label=case.label, status="failed", messages=["values differ"])

    def check(self, case, out, ref, notes, messages=None, phase=""):
        from workbench.core.events import CaseResult

        self.failed = CaseResult(case_index=case.index, label=case.label, status="failed", messages=messages,
                                 phase=phase)
        return self.failed


def test_a_kernel_right_only_on_the_inputs_it_was_checked_on_posts_no_time(monkeypatch):
    """Right on the call checked before timing and on the recheck after it (both on the case's own inputs),
    wrong on the copies the timed calls rotate through: caught on the sampled timed calls."""
    seen = []

    def kernel_fn(x):
        LaunchCounter.count += 1
        seen.append(x.data_ptr()) if not seen else None
        return x * 2 if x.data_ptr() == seen[0] else x * 3

    result = bench_case(monkeypatch, kernel_fn, checker=ComparingChecker)
    assert result.kernel is None and result.gbps is None
    assert result.recheck.startswith("failed: timed call ") and "chosen at random" in result.recheck
    assert result.sampled_calls_checked == escapes.SAMPLED_CALLS_MOST
    assert "the kernel's time is not posted: its output was wrong on a timed call" in result.notes
    honest = bench_case(monkeypatch, launcher(LaunchCounter, "none"), checker=ComparingChecker)
    assert honest.recheck == "passed" and honest.kernel is not None
    assert honest.sampled_calls_checked == escapes.SAMPLED_CALLS_MOST


def test_a_sampled_call_is_passed_over_only_when_bit_for_bit_the_checked_one():
    from workbench.core.timing.checking import identical
    from workbench.core.verify.tensors import flatten_outputs

    codes, scale = torch.arange(12, dtype=torch.int8), torch.randn(3, dtype=torch.bfloat16)
    out = {"codes": codes, "scale": scale}  # an int8 quantiser's outputs, a dict as libraries return them
    assert identical(flatten_outputs(out).tensors, flatten_outputs({"codes": codes.clone(), "scale": scale.clone()}).tensors)
    assert not identical(flatten_outputs(out).tensors, flatten_outputs({"codes": codes + 1, "scale": scale}).tensors)
    nan = torch.tensor([float("nan"), 1.0])
    assert not identical([nan], [nan.clone()])  # NaN never equals: compared by the error model instead
    assert not identical([codes], [codes.float()]) and not identical([codes], [codes[:6]])
    assert not identical([codes], [codes, codes])
