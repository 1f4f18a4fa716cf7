"""Capture real Nsight Compute and compute-sanitizer outputs on a GPU machine, and check the plugins.

    python benchmarks/capture_profiler_fixtures.py OUT_DIR

Needs the README set-up (`pip install -e . -e plugins/ncu -e plugins/sanitizer`), a CUDA GPU, and
ncu and compute-sanitizer on PATH. It runs, into OUT_DIR:

- projects/: the shipped rmsnorm project (projects/rmsnorm, else a fresh `workbench new rmsnorm`),
  `add_nomask` (a vector add whose masks are removed: it reads and writes past the end of its
  tensors, yet its numbers verify) and `no_launch` (a @triton.jit function that kernel_fn never
  calls: ncu's kernel filter finds nothing);
- `workbench verify`, `bench`, `profile` and `sanitize` on them, each command's output in *.txt;
- fixtures for tests/fixtures/: ncu/ (raw, NVTX-renamed raw and details CSV exports of the
  rmsnorm report, the ncu log) and sanitizer/ (the tool's own output for each run; racecheck on a
  racy CUDA C++ kernel when nvcc is there);

then prints a table of the acceptance checks. Exit status 0 when every check passed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL_KERNEL_US = 50.0  # ncu and bench must agree within 10% above this

ADD_NOMASK = '''\
"""add_nomask: out = x + y with the masks removed: a deliberately broken kernel.

The grid covers n rounded up to BLOCK_SIZE, so the last program reads and writes past the end
of x, y and out. PyTorch's caching allocator rounds each block up to 512 bytes and a BLOCK_SIZE
of fp32 is exactly 512 bytes, so those accesses stay in the slack of the tensor's own block: the
in-bounds results are right and verification passes. compute-sanitizer memcheck sees each one.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128


@triton.jit
def add_nomask_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)  # the mask `offsets < n_elements` is missing
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, x + y)  # and here


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_nomask_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out


kernel_fn = add


def reference_fn(x, y):
    return x + y


def get_inputs(n=1000, dtype=torch.float32):
    return [torch.randn(n, device="cuda", dtype=dtype), torch.randn(n, device="cuda", dtype=dtype)]


CASES = [
    {"n": 1000, "dtype": torch.float32},
    {"n": 127, "dtype": torch.float32},
    {"n": 4096, "dtype": torch.float32},  # a multiple of BLOCK_SIZE: no access out of bounds
    {"n": 4097, "dtype": torch.float16},
]
'''

NO_LAUNCH = '''\
"""no_launch: kernel_fn is plain PyTorch; the @triton.jit function beside it never runs."""

import torch
import triton
import triton.language as tl


@triton.jit
def unused_kernel(x_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(x_ptr + offsets, 0.0, mask=offsets < n_elements)


def kernel_fn(x):
    return x * 2


def reference_fn(x):
    return x * 2


def get_inputs(n=4096):
    return [torch.randn(n, device="cuda")]
'''

RACY_CU = r'''
#include <cstdio>
__global__ void racy_sum(const float* in, float* out) {
    __shared__ float tile[256];
    tile[threadIdx.x] = in[threadIdx.x];
    // missing __syncthreads(): thread 0 reads what other threads may not have written yet
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int i = 0; i < 256; ++i) s += tile[i];
        *out = s;
    }
}
int main() {
    float *in, *out;
    cudaMalloc(&in, 256 * sizeof(float));
    cudaMalloc(&out, sizeof(float));
    cudaMemset(in, 0, 256 * sizeof(float));
    racy_sum<<<1, 256>>>(in, out);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
'''


class Capture:
    def __init__(self, out: Path):
        self.out = out
        self.checks: list[tuple[str, bool, str]] = []

    def workbench(self, name: str, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        """`workbench ARGS`, its output saved as NAME.txt."""
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=self.out)
        took = time.monotonic() - started
        (self.out / f"{name}.txt").write_text(f"$ workbench {' '.join(args)}\n# exit {proc.returncode}, "
                                              f"{took:.1f} s\n{proc.stdout}\n--- stderr ---\n{proc.stderr}")
        print(f"  workbench {' '.join(args)}: exit {proc.returncode} in {took:.0f} s", flush=True)
        return proc

    def check(self, what: str, ok: bool, detail: str = "") -> None:
        self.checks.append((what, ok, detail))


def json_of(proc: subprocess.CompletedProcess) -> dict:
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return {}


def make_projects(out: Path) -> dict[str, Path]:
    projects = out / "projects"
    projects.mkdir(parents=True, exist_ok=True)
    rmsnorm = ROOT / "projects" / "rmsnorm"
    if not (rmsnorm / "kernel.py").is_file():
        subprocess.run([sys.executable, "-m", "workbench.cli", "new", "rmsnorm", "--dir", str(projects)], check=True,
                       capture_output=True)
        rmsnorm = projects / "rmsnorm"
    if not (projects / "add" / "kernel.py").is_file():  # autotuned: its tuning launches must stay out of ncu
        subprocess.run([sys.executable, "-m", "workbench.cli", "new", "add", "--dir", str(projects)], check=True,
                       capture_output=True)
    for name, source in (("add_nomask", ADD_NOMASK), ("no_launch", NO_LAUNCH)):
        (projects / name).mkdir(exist_ok=True)
        (projects / name / "kernel.py").write_text(source, encoding="utf-8")
    return {"rmsnorm": rmsnorm, "add": projects / "add", "add_nomask": projects / "add_nomask",
            "no_launch": projects / "no_launch"}


def ncu_fixtures(cap: Capture, report: Path) -> None:
    folder = cap.out / "fixtures" / "ncu"
    folder.mkdir(parents=True, exist_ok=True)
    exports = {"rmsnorm_raw.csv": ["--page", "raw"], "rmsnorm_details.csv": ["--page", "details"]}
    for name, args in exports.items():
        proc = subprocess.run(["ncu", "--import", str(report), "--csv", "--print-units", "base", *args],
                              capture_output=True, text=True)
        (folder / name).write_text(proc.stdout, encoding="utf-8")
    log = report.with_name(report.name.replace(".ncu-rep", ".log"))
    if log.is_file():
        shutil.copy(log, folder / "rmsnorm_ncu.log")
    shutil.copy(report, folder / "rmsnorm.ncu-rep")


def racecheck_fixture(cap: Capture) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("  nvcc not found: no racecheck hazard fixture")
        return
    work = cap.out / "racy"
    work.mkdir(exist_ok=True)
    (work / "racy.cu").write_text(RACY_CU)
    subprocess.run([nvcc, "-lineinfo", "-o", str(work / "racy"), str(work / "racy.cu")], check=True,
                   capture_output=True)
    proc = subprocess.run(["compute-sanitizer", "--tool", "racecheck", str(work / "racy")], capture_output=True,
                          text=True)
    (cap.out / "fixtures" / "sanitizer" / "racecheck_hazard_cuda.txt").write_text(proc.stdout, encoding="utf-8")


def one_launch_per_case(cap: Capture, name: str, profile: dict) -> None:
    """Exactly one profiled launch per case (no autotuning or warm-up launch), with its compile facts."""
    kernels = profile.get("metrics", {}).get("kernels", [])
    cases = [k.get("case_index") for k in kernels]
    cap.check(f"{name}: one profiled launch per case, none outside", bool(kernels) and None not in cases and
              len(cases) == len(set(cases)), f"cases {cases}")
    cap.check(f"{name}: registers and spills known", bool(kernels) and all(
        k.get("spilled_registers") is not None and k.get("registers_per_thread") for k in kernels),
        f"spilled {[k.get('spilled_registers') for k in kernels]}")


def compare_with_bench(cap: Capture, profile: dict, bench: dict) -> None:
    medians = {}
    for project in bench.get("projects", []):
        for row in project.get("bench") or []:
            if row.get("median_ms") is not None:
                medians[row["case_index"]] = row["median_ms"] * 1000
    per_case: dict[int, float] = {}
    for kernel in profile.get("metrics", {}).get("kernels", []):
        if kernel.get("case_index") is not None and kernel.get("duration_us") is not None:
            per_case[kernel["case_index"]] = per_case.get(kernel["case_index"], 0.0) + kernel["duration_us"]
    lines = ["case  ncu µs    bench median µs  diff"]
    compared = 0
    for index in sorted(per_case):
        ncu_us, bench_us = per_case[index], medians.get(index)
        if bench_us is None:
            continue
        diff = (ncu_us - bench_us) / bench_us
        lines.append(f"{index:<5} {ncu_us:<9.1f} {bench_us:<16.1f} {diff:+.1%}")
        if ncu_us > SMALL_KERNEL_US:
            compared += 1
            cap.check(f"ncu duration within 10% of bench median, case {index}", abs(diff) <= 0.10,
                      f"ncu {ncu_us:.1f} µs, bench {bench_us:.1f} µs ({diff:+.1%})")
    (cap.out / "ncu_vs_bench.txt").write_text("\n".join(lines) + "\n")
    print("\n".join("  " + line for line in lines))
    if not compared:
        cap.check("ncu duration compared with bench (kernels over 50 µs)", False, "no case to compare")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for kind in ("ncu", "sanitizer"):
        (out / "fixtures" / kind).mkdir(parents=True, exist_ok=True)
    cap = Capture(out)
    plugins = cap.workbench("plugins", "plugins").stdout
    for needed in ("ncu", "sanitizer"):
        if needed not in plugins:
            print(f"the {needed} plugin is not loaded: pip install -e . -e plugins/ncu -e plugins/sanitizer")
            return 3
    for tool in ("ncu", "compute-sanitizer"):
        if shutil.which(tool) is None:
            print(f"{tool} is not on PATH")
            return 3
    projects = make_projects(out)
    rms, bad, none = (str(projects[k]) for k in ("rmsnorm", "add_nomask", "no_launch"))

    cap.check("rmsnorm verifies", cap.workbench("verify_rmsnorm", "verify", rms).returncode == 0)
    cap.check("add_nomask verifies (its numbers are right)", cap.workbench("verify_add_nomask", "verify",
                                                                          bad).returncode == 0)
    bench = cap.workbench("bench_rmsnorm", "bench", rms, "--json", "--no-plot")
    profile = cap.workbench("profile_rmsnorm", "profile", rms, "--json")
    profile_data = json_of(profile)
    cap.check("workbench profile rmsnorm", profile.returncode == 0 and bool(profile_data.get("report_path")),
              profile.stderr.strip()[-200:])
    one_launch_per_case(cap, "rmsnorm", profile_data)
    (out / "profile_rmsnorm_summary.txt").write_text("\n".join(profile_data.get("summary_lines", [])) + "\n")
    reports = sorted((projects["rmsnorm"] / ".workbench" / "profiles").glob("*.ncu-rep"),
                     key=lambda path: path.stat().st_mtime)
    if reports:
        ncu_fixtures(cap, reports[-1])
    compare_with_bench(cap, profile_data, json_of(bench))
    tuned = json_of(cap.workbench("profile_add", "profile", str(projects["add"]), "--json"))
    one_launch_per_case(cap, "add (autotuned)", tuned)
    cap.check("add: the autotuner's pick is named", all(k.get("autotune_pick") for k in
                                                        tuned.get("metrics", {}).get("kernels", [{}])))
    profile_bad = cap.workbench("profile_add_nomask", "profile", bad)
    cap.check("workbench profile add_nomask", profile_bad.returncode == 0, profile_bad.stderr.strip()[-200:])
    no_match = cap.workbench("profile_no_launch", "profile", none)
    cap.check("no kernel under the filter: exit 3, one line", no_match.returncode == 3 and
              len(no_match.stderr.strip().splitlines()) == 1, no_match.stderr.strip())
    for log in sorted((projects["no_launch"] / ".workbench" / "profiles").glob("*.log"))[-1:]:
        shutil.copy(log, out / "fixtures" / "ncu" / "no_kernels_ncu.log")

    sanitized = cap.workbench("sanitize_add_nomask", "sanitize", bad, "--json")
    data = json_of(sanitized)
    flagged = [c for t in data.get("tools", []) for c in t.get("cases", []) if c.get("reports")]
    cap.check("sanitize flags add_nomask (exit 1, reports in the cases that overrun)",
              sanitized.returncode == 1 and {c["case_index"] for c in flagged} == {0, 1, 3},
              f"flagged cases {sorted(c['case_index'] for c in flagged if c['case_index'] is not None)}")
    cap.workbench("sanitize_add_nomask_text", "sanitize", bad, "-v")
    clean = cap.workbench("sanitize_rmsnorm", "sanitize", rms, "--tool", "memcheck", "--tool", "initcheck",
                          "--tool", "racecheck")
    cap.check("sanitize rmsnorm: memcheck, initcheck, racecheck clean", clean.returncode == 0,
              clean.stdout.strip().splitlines()[-1] if clean.stdout.strip() else clean.stderr.strip())
    for project in (projects["add_nomask"], projects["rmsnorm"]):
        for log in sorted((project / ".workbench" / "sanitizer").glob("*.log")):
            tool = log.name.split("-")[0]
            shutil.copy(log, out / "fixtures" / "sanitizer" / f"{project.name}_{tool}.txt")
    racecheck_fixture(cap)

    print(f"\nchecks ({out}):")
    for what, ok, detail in cap.checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {what}" + (f"  [{detail}]" if detail else ""))
    print(textwrap.dedent(f"""
        fixtures: {out / 'fixtures'} (copy ncu/ and sanitizer/ over tests/fixtures/ to refresh them)"""))
    return 0 if all(ok for _, ok, _ in cap.checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
