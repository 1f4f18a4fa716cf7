#!/usr/bin/env bash
# On a GPU machine: the timing path's GPU tests, then `workbench bench` on a fresh rmsnorm project
# (text report with every column, the JSON record, the plot).
# Usage: bash benchmarks/gpu_bench_check.sh OUTDIR
# The agreement check (do_bench, ncu, three repeated runs) is benchmarks/bench_agreement.py.
set -uo pipefail
out=${1:-/tmp/gpu-bench}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 WORKBENCH_CACHE_DIR=${WORKBENCH_CACHE_DIR:-$work/cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/gpu.txt"
python3 - <<'EOF' | tee -a "$out/gpu.txt"
import torch, triton
from triton import knobs
print("torch", torch.__version__, "triton", triton.__version__,
      "| autotuning listener:", hasattr(getattr(knobs, "autotuning", None), "listener"),
      "| compilation listener:", hasattr(getattr(knobs, "compilation", None), "listener"))
EOF
python3 -m pytest -q -p no:cacheprovider tests/test_bench_gpu.py 2>&1 | tee "$out/gpu-tests.txt" | tail -15
python3 -m workbench.cli new rmsnorm --dir "$work" >/dev/null
python3 -m workbench.cli doctor --measure 2>&1 | tee "$out/doctor.txt" | grep -E "ceilings|device|mode"
python3 -m workbench.cli bench "$work/rmsnorm" -v --plot "$out/rmsnorm-bench.png" > "$out/bench.txt" 2>&1
echo "workbench bench exit $?"
sed -n '/  benchmark$/,$p' "$out/bench.txt"
python3 -m workbench.cli bench "$work/rmsnorm" --json --no-plot > "$out/bench.json" 2>"$out/bench-json.err"
echo "workbench bench --json exit $?"
python3 -m workbench.cli history "$work/rmsnorm" | tail -2
python3 -m workbench.cli diff "$work/rmsnorm" | head -8
