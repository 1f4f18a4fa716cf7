"""Issue 28: a training kernel's benchmark modes (core/timing/modes.py), on the CPU: what one timed call of
each mode runs and returns. The GPU path (`workbench bench --mode`) is in test_bench_gpu.py."""

import pytest
import torch

from workbench.core.project.config import ConfigError, ProjectConfig
from workbench.core.timing.modes import BackwardOnly, CachedUpstream, ModeError, chosen_mode, takes_mode, timed_mode
from workbench.core.verify.launches import LaunchCounter


class Counted(torch.autograd.Function):
    """y = x * w (w broadcast over rows), counting forwards and backwards."""

    forwards = 0
    backwards = 0

    @staticmethod
    def forward(ctx, x, w):
        Counted.forwards += 1
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, dy):
        Counted.backwards += 1
        x, w = ctx.saved_tensors
        return dy * w, (dy * x).sum(0)


def kernel_fn(x, w):
    return Counted.apply(x, w)


def reference_fn(x, w):
    return x * w


class Module:
    """The parts of a KernelModule the modes read."""

    def __init__(self):
        from workbench.core.project.contract import KernelModule

        self.km = KernelModule(module=None, path=None, kernel_fn=kernel_fn, reference_fn=reference_fn,
                               get_inputs=lambda: [], cases=[])


def inputs(grad=True):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=grad)
    w = torch.randn(3, dtype=torch.float64, requires_grad=grad)
    return [x, w]


def test_the_default_mode_is_full_for_a_training_kernel_and_fwd_otherwise():
    assert chosen_mode("", training=True) == "full"
    assert chosen_mode("", training=False) == "fwd"
    assert chosen_mode("bwd", training=True) == "bwd"
    with pytest.raises(ModeError, match="no backward to time"):
        chosen_mode("bwd", training=False)
    with pytest.raises(ModeError, match="unknown benchmark mode"):
        chosen_mode("backward", training=True)


def test_bench_mode_in_workbench_toml_is_checked():
    assert ProjectConfig.from_dict({"bench": {"mode": "bwd"}}).bench.mode == "bwd"
    with pytest.raises(ConfigError, match="bench.mode"):
        ProjectConfig.from_dict({"bench": {"mode": "backward"}})


def each_mode(asked):
    km = Module().km
    args = inputs()
    mode = timed_mode(km, args, asked, backward=False)
    return mode, mode.module(km), args


def expected_grads(args):
    x, w = (a.detach().requires_grad_() for a in args)
    y = x * w
    up = CachedUpstream()(y, 0)
    gx, gw = torch.autograd.grad(y, (x, w), up)
    return y.detach(), gx, gw


def test_full_returns_the_outputs_and_every_gradient_with_verifications_upstream():
    mode, km, args = each_mode("")
    assert mode.mode == "full" and km.gradients == ["x", "w"]
    out = km.kernel_fn(*args)
    y, gx, gw = expected_grads(args)
    assert set(out) == {"out", "grad x", "grad w"}
    torch.testing.assert_close(out["out"], y)
    torch.testing.assert_close(out["grad x"], gx)
    torch.testing.assert_close(out["grad w"], gw)
    assert not out["out"].requires_grad


def test_bwd_runs_each_input_sets_forward_once_and_the_backward_every_call():
    mode, km, args = each_mode("bwd")
    Counted.forwards = Counted.backwards = 0
    first = km.kernel_fn(*args)
    for _ in range(3):
        again = km.kernel_fn(*args)
    assert (Counted.forwards, Counted.backwards) == (1, 4)
    _, gx, gw = expected_grads(args)
    assert set(first) == {"grad x", "grad w"}
    torch.testing.assert_close(again["grad x"], gx)
    torch.testing.assert_close(again["grad w"], gw)
    other = [a.detach().clone().requires_grad_() for a in args]  # another input set: its own forward
    km.kernel_fn(*other)
    assert Counted.forwards == 2
    mode.clear()
    km.kernel_fn(*args)
    assert Counted.forwards == 3


def test_bwd_keeps_a_bounded_number_of_forwards():
    backward = BackwardOnly(kernel_fn, [0, 1], ["x", "w"], CachedUpstream(), is_kernel=False)
    for _ in range(backward.most + 3):
        backward(*inputs())
    assert len(backward._prepared) == backward.most


def test_fwd_records_the_graph_and_returns_detached_outputs_even_under_no_grad():
    mode, km, args = each_mode("fwd")
    Counted.forwards = 0
    with torch.no_grad():
        out = km.kernel_fn(*args)
    assert Counted.forwards == 1 and not out.requires_grad
    torch.testing.assert_close(out, args[0].detach() * args[1].detach())


def test_a_forward_only_kernel_is_timed_as_it_is():
    km = Module().km
    args = inputs(grad=False)
    mode = timed_mode(km, args, "", backward=False)
    assert mode.mode == "fwd" and not mode.indices and mode.module(km) is km
    with pytest.raises(ModeError):
        timed_mode(km, args, "full", backward=False)
    assert timed_mode(km, args, "", backward=True).mode == "full"  # [verify] backward = true


def test_upstream_gradients_are_made_once_per_output_shape():
    up = CachedUpstream()
    y = torch.zeros(4, 4)
    first = up(y, 0)
    assert up(torch.ones(4, 4), 0) is first
    assert up(y, 1) is not first and up(torch.zeros(2, 4), 0).shape == (2, 4)
    assert not ((first == 0) | (first.abs() == 1)).any()


def test_launches_made_while_paused_are_not_counted():
    class Launcher:
        def run(self, *args, **kwargs):
            return "launched"

    LaunchCounter._wrap(Launcher)
    before = LaunchCounter.count
    Launcher().run()
    with LaunchCounter.paused():
        Launcher().run()
        Launcher().run()
    Launcher().run(warmup=True)
    assert LaunchCounter.count - before == 1


def test_bytes_moved_with_a_mode_is_recognised():
    assert takes_mode(lambda x, w, mode="full": 0)
    assert takes_mode(lambda *a, **kw: 0)
    assert not takes_mode(lambda x, w: 0)
    assert not takes_mode(None)


async def test_the_benchmark_tab_shows_the_mode_and_each_calls_peak_memory(tmp_path):
    from tui_helpers import READY_GPU, app_for, case_events, replay, rmsnorm_project, text_of

    from workbench.core.events import BenchResult, DeviceFacts, Timing
    from workbench.tui.widgets.bench import BENCH_COLUMNS, bench_cells

    timing = Timing(0.05, 0.049, 0.051, 0.048, 200, "cuda events", peak_memory_bytes=3 << 20)
    result = BenchResult(case_index=4, label="rows=8192 cols=4096", dtype="bfloat16", kernel=timing, mode="bwd",
                         reference=Timing(0.1, 0.1, 0.1, 0.1, 100, "cuda events"))
    cells = dict(zip(BENCH_COLUMNS, bench_cells(result)))
    assert cells["peak mem"] == "3 MiB"
    app = app_for(rmsnorm_project(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await replay(app, pilot, case_events(failing=False) + [DeviceFacts(name=READY_GPU.device_name), result])
        await pilot.press("1")
        await pilot.pause()
        notes = text_of(app.query_one("#bench-notes"))
        assert "mode: bwd (backward alone" in notes and "the reference and torch.compile timed alike" in notes
