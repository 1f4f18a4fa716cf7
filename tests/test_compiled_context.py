"""A scalar that reaches a Triton kernel as another type under torch.compile: read from the Triton cache's IR."""

import dataclasses
import json

import pytest

from workbench.core.verify.compiled_context import changed_scalars, kernels_in, read_entry

# The signatures as triton 3.6 writes them (seen on an H200 with torch 2.11: a Python float `eps` is f32 called
# eagerly, f64 when Inductor launches the kernel), and with argument attributes as other versions write them.
EAGER = ('module {\n  tt.func public @norm_kernel(%x_ptr: !tt.ptr<f32>  loc("x_ptr"(#loc)), %y_ptr: !tt.ptr<f32>  '
         'loc("y_ptr"(#loc)), %n: i32  loc("n"(#loc)), %eps: f32 loc("eps"(#loc))) attributes {noinline = false} {\n'
         '    tt.return\n  }\n}\n')
COMPILED = EAGER.replace("%eps: f32", "%eps: f64")
WITH_ATTRIBUTES = ('module {\n  tt.func public @norm_kernel(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} '
                   'loc("x_ptr"(#loc)), %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("y_ptr"(#loc)), '
                   '%n: i32 loc("n"(#loc)), %eps: f32 loc("eps"(#loc))) {\n    tt.return\n  }\n}\n')


def entry(cache, name, ttir, fp64_lines=None):
    """A cache entry: the .ttir, and a .ptx (when fp64_lines is given) that loads and converts an fp64 argument
    (no fp64 work) and runs `fp64_lines` fp64 additions."""
    folder = cache / name
    folder.mkdir(parents=True)
    (folder / "norm_kernel.ttir").write_text(ttir)
    if fp64_lines is not None:
        lines = ["\tld.param.f64 \t%fd1, [eps_param];", "\tcvt.rn.f32.f64 \t%f4, %fd1;",
                 "\tmul.rn.f32 \t%f1, %f2, %f3;"] + ["\tadd.rn.f64 \t%fd3, %fd1, %fd2;"] * fp64_lines
        (folder / "norm_kernel.ptx").write_text("\n".join(lines))


def test_the_signature_is_read_with_each_arguments_type(tmp_path):
    entry(tmp_path, "a", EAGER, fp64_lines=0)
    entry(tmp_path, "b", WITH_ATTRIBUTES)
    a, b = read_entry(tmp_path / "a" / "norm_kernel.ttir"), read_entry(tmp_path / "b" / "norm_kernel.ttir")
    assert a.name == "norm_kernel" and a.args == {"x_ptr": "!tt.ptr<f32>", "y_ptr": "!tt.ptr<f32>", "n": "i32",
                                                  "eps": "f32"}
    assert a.fp64_lines == 0 and b.fp64_lines is None and b.args == a.args


def test_a_float_that_reaches_the_kernel_as_fp64_under_torch_compile_is_said_with_what_to_do(tmp_path):
    entry(tmp_path, "eager", EAGER, fp64_lines=0)
    before = kernels_in(tmp_path)
    entry(tmp_path, "compiled", COMPILED, fp64_lines=4)
    notes = changed_scalars(before, kernels_in(tmp_path))
    assert len(notes) == 1
    assert "`norm_kernel` receives `eps` as f64 (eagerly f32)" in notes[0]
    assert "4 fp64 arithmetic instructions in its PTX, 0 eagerly" in notes[0] and "eps = eps.to(tl.float32)" in notes[0]


@pytest.mark.parametrize("compiled, fp64_lines", [(EAGER, 0), (COMPILED, 0)])
def test_the_same_types_or_no_more_fp64_work_is_no_note(tmp_path, compiled, fp64_lines):
    """A kernel that converts the scalar where it first uses it runs no fp64 math (a load and a conversion of the
    argument are no fp64 work): its changed type costs nothing."""
    entry(tmp_path, "eager", EAGER, fp64_lines=0)
    before = kernels_in(tmp_path)
    entry(tmp_path, "compiled", compiled, fp64_lines=fp64_lines)
    assert changed_scalars(before, kernels_in(tmp_path)) == []


def test_no_cache_or_another_kernel_is_no_note(tmp_path):
    assert kernels_in(None) == {} and kernels_in(tmp_path / "missing") == {}
    entry(tmp_path, "compiled", COMPILED.replace("norm_kernel", "other_kernel"), fp64_lines=3)
    assert changed_scalars({}, kernels_in(tmp_path)) == []


# A correct kernel as libraries write them: a module-level epsilon passed to the kernel as a Python float.
EPS_AS_PYTHON_FLOAT = '''
import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rms_scale(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    eps = eps{cast}
    y = x / tl.sqrt(x * x + eps)
    tl.store(y_ptr + offs, y, mask=mask)


def kernel_fn(x):
    y = torch.empty_like(x)
    n = x.numel()
    _rms_scale[(triton.cdiv(n, 1024),)](x, y, n, EPS, BLOCK=1024)
    return y


def reference_fn(x):
    return x / torch.sqrt(x * x + EPS)


def get_inputs(n=4096, dtype=torch.float32):
    return [torch.randn(n, device="cuda", dtype=dtype)]


CASES = [{{"n": 4096}}, {{"n": 1000}}]
'''


@pytest.mark.gpu
@pytest.mark.parametrize("cast, noted", [("", True), (".to(tl.float32)", False)])
def test_under_torch_compile_a_python_float_reaching_the_kernel_as_fp64_is_a_note(cli, make_project, cast, noted):
    from run_helpers import verify_json

    project = make_project(EPS_AS_PYTHON_FLOAT.format(cast=cast))
    code, record = verify_json(cli, project)
    assert code == 0
    notes = [n for case in record["cases"] for n in case.get("notes", []) if n.startswith("torch_compile:")]
    assert bool(notes) == noted, notes
    if noted:
        assert "`eps` as f64 (eagerly f32)" in notes[0] and "eps = eps.to(tl.float32)" in notes[0]


def test_bench_says_kernel_fns_time_under_torch_compile_beside_its_eager_time():
    from workbench.core.events import BenchResult, Timing
    from workbench.reports.bench import kernel_compiled_lines

    def timing(ms):
        return Timing(median_ms=ms, q25_ms=ms, q75_ms=ms, min_ms=ms, samples=50, method="cuda events")

    timed = BenchResult(case_index=0, label="n=4096", kernel=timing(0.129), kernel_compiled=timing(0.1488))
    failed = BenchResult(case_index=1, label="n=1000", kernel=timing(0.01),
                         kernel_compiled_note="torch.compile(kernel_fn) failed: Unsupported: ...")
    lines = kernel_compiled_lines([timed, failed])
    assert "kernel_fn under torch.compile, case 0: 149 µs" in lines[0] and "(1.15x the eager call's 129 µs" in lines[0]
    assert lines[1].endswith("torch.compile(kernel_fn) failed: Unsupported: ...")
    again = BenchResult.from_dict(json.loads(json.dumps(dataclasses.asdict(timed))))
    assert again.kernel_compiled == timed.kernel_compiled  # the record keeps it


async def test_the_benchmark_tab_says_kernel_fns_time_under_torch_compile(tmp_path):
    from tui_helpers import READY_GPU, app_for, case_events, replay, rmsnorm_project, text_of

    from workbench.core.events import BenchResult, DeviceFacts, Timing

    def timing(ms):
        return Timing(median_ms=ms, q25_ms=ms, q75_ms=ms, min_ms=ms, samples=200, method="cuda events")

    result = BenchResult(case_index=4, label="rows=8192 cols=4096", dtype="bfloat16", kernel=timing(0.129),
                         reference=timing(0.3), kernel_compiled=timing(0.1488))
    app = app_for(rmsnorm_project(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await replay(app, pilot, case_events(failing=False) + [DeviceFacts(name=READY_GPU.device_name), result])
        await pilot.press("1")
        await pilot.pause()
        notes = text_of(app.query_one("#bench-notes"))
        assert "kernel_fn under torch.compile, case 4: 149 µs" in notes and "1.15x the eager call's 129 µs" in notes


def test_compiles_that_are_not_new_are_told_apart_by_their_fp64_scalar(tmp_path):
    """An earlier compile under torch.compile (the check's, then the benchmark's own hits the cache): the entries
    with an fp64 scalar are torch.compile's, since an eager launch passes a Python float as fp32."""
    entry(tmp_path, "eager", EAGER, fp64_lines=0)
    entry(tmp_path, "compiled", COMPILED, fp64_lines=4)
    from workbench.core.verify.compiled_context import scalars_as_fp64

    (note,) = scalars_as_fp64(kernels_in(tmp_path))
    assert "`norm_kernel` receives `eps` as f64 (eagerly f32)" in note
    (tmp_path / "compiled" / "norm_kernel.ttir").write_text(EAGER)  # no fp64 scalar anywhere: nothing to say
    assert scalars_as_fp64(kernels_in(tmp_path)) == []


@pytest.mark.gpu
def test_bench_says_why_kernel_fn_is_slower_under_torch_compile(cli, make_project):
    """The fixture passes `eps` as a Python float: the bench's torch.compile(kernel_fn) line says it reached the
    kernel as fp64, whether the torch.compile check compiled it first in the run or not."""
    source = EPS_AS_PYTHON_FLOAT.format(cast="")
    assert 'CASES = [{"n": 4096}, {"n": 1000}]' in source
    project = make_project(source.replace('CASES = [{"n": 4096}, {"n": 1000}]',
                                          'CASES = [{"n": 4096}, {"n": 1 << 24, "purpose": "bench"}]'),
                           toml="[bench]\ncompare_torch_compile = true\n")
    for extra in ((), ("--fresh-checks", "--fresh-baselines")):
        code, out, err = cli("bench", project, "--no-plot", *extra)
        assert code == 0, out + err
        assert "kernel_fn under torch.compile, case 1:" in out, out
        assert "receives `eps` as f64 (eagerly f32)" in out.split("kernel_fn under torch.compile, case 1:")[1], out
