"""CPU verdict = GPU verdict: 16-bit float arithmetic under the Triton interpreter (with the
workbench's fixes) computes what a GPU computes.

Every kernel of interpreter_agreement_kernels.py runs under the interpreter (one child process,
benchmarks/record_interpreter_agreement.py --interpret) and is checked two ways:

- against its float32-compute-then-round reference (torch on the CPU): what the GPU does;
- against the outputs a GPU recorded (tests/fixtures/interpreter_agreement/gpu.json), once
  recorded. Until then those tests skip, saying how to record them.
"""

import json
import subprocess
import sys
from pathlib import Path

import interpreter_agreement_kernels as agreement
import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_FIXTURE = ROOT / "tests" / "fixtures" / "interpreter_agreement" / "gpu.json"
RECORD = "python benchmarks/record_interpreter_agreement.py --out tests/fixtures/interpreter_agreement"
CASES = {case.name: case for case in agreement.CASES}


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    out = tmp_path_factory.mktemp("agreement")
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "record_interpreter_agreement.py"),
                          "--interpret", "--quiet", "--out", str(out)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    record = json.loads((out / "interpreter.json").read_text())
    assert record["mode"] == "interpreter"
    return record["cases"]


@pytest.fixture(scope="module")
def gpu_record():
    if not GPU_FIXTURE.exists():
        pytest.skip(f"no GPU outputs recorded yet: on a GPU machine run `{RECORD}` and commit gpu.json")
    assert GPU_FIXTURE.stat().st_size < 1 << 20, "keep the fixture small: small inputs"
    return json.loads(GPU_FIXTURE.read_text())


def interpreter_output(interpreted, name):
    entry = interpreted[name]
    assert "error" not in entry, f"{name} failed under the interpreter: {entry.get('error')}"
    return agreement.decode(entry)


def describe(got, expected, where):
    if where is None:
        return "shapes differ" if got.shape != expected.shape else ""
    return (f"worst at flat index {where}: interpreter {got.reshape(-1)[where].item()!r}, "
            f"expected {expected.reshape(-1)[where].item()!r}")


@pytest.mark.parametrize("name", CASES)
def test_interpreter_matches_float32_then_round(interpreted, name):
    case = CASES[name]
    got = interpreter_output(interpreted, name)
    expected = case.reference(*case.make_inputs())
    ulps, where = agreement.ulps_apart(got, expected)
    assert ulps <= case.ulps, f"{name}: {ulps} ulps from the float32-then-round reference " \
                              f"(allowed {case.ulps}); {describe(got, expected, where)}"


@pytest.mark.parametrize("name", CASES)
def test_interpreter_matches_the_gpu(interpreted, gpu_record, name):
    recorded = gpu_record["cases"].get(name)
    assert recorded is not None, f"{name} is not in {GPU_FIXTURE.name} (recorded {gpu_record['recorded']}): " \
                                 f"re-record with `{RECORD}`"
    if "error" in recorded:
        pytest.skip(f"the GPU could not run {name}: {recorded['error'].splitlines()[0]}")
    ours = interpreted[name]
    assert ours.get("inputs_sha256") == recorded["inputs_sha256"], \
        f"{name}: the inputs differ from those the GPU was given: re-record with `{RECORD}`"
    got, gpu = interpreter_output(interpreted, name), agreement.decode(recorded)
    ulps, where = agreement.ulps_apart(got, gpu)
    assert ulps <= CASES[name].ulps, f"{name}: {ulps} ulps from the {gpu_record['device']} " \
                                     f"(allowed {CASES[name].ulps}); {describe(got, gpu, where)}"
