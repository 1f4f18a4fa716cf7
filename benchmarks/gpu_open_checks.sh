#!/usr/bin/env bash
# On a GPU machine: the GPU checks that the open issues still wait for, each under its own time
# limit, logs under OUTDIR. Usage: bash benchmarks/gpu_open_checks.sh OUTDIR [STEP ...], STEP one of
# tests loop scaffolds multi (default: all four; together they take longer than 10 minutes, so a
# command limited to 10 minutes runs `tests loop`, then `scaffolds multi`), or `breakdown`
# (where a save's time goes: the loop profiled, then Triton's compile stages in one process)
#   1. the verification checks on a GPU (torch.compile / CUDA-graph compatibility, the judge's
#      hand-off of CUDA tensors, launch counts on this Triton), then the rest of the GPU tests
#   2. the live loop against the plain loop (benchmarks/loop_latency.py)
#   3. every scaffold's hard shapes against torch.compile, cuBLAS, SDPA and the ceilings
#   4. verification of every scaffold on one GPU against all of them (benchmarks/multi_gpu.py)
# Needs the workbench's dependencies importable (textual, watchfiles, pytest-asyncio beside the
# machine's torch and triton): `make setup`, or wheels installed onto PYTHONPATH where no registry is reachable.
set -uo pipefail
out=${1:-/tmp/gpu-open-checks}
shift || true
steps=${*:-tests loop scaffolds multi}
want() { [[ " $steps " == *" $1 "* ]]; }
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-}:$PWD
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/gpu.txt"
if want tests; then  # SIGINT, so that pytest still prints its summary when the limit cuts it short
  WORKBENCH_WORKERS=2 timeout -s INT 260 python3 -m pytest -q -p no:cacheprovider -m gpu tests -rfs \
    > "$out/gpu-tests.txt" 2>&1
  echo "GPU tests: exit $?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu-tests.txt" | tail -12
fi
if want loop; then
  timeout 330 python3 benchmarks/loop_latency.py --saves 6 --json "$out/loop.json" > "$out/loop.txt" 2>&1
  echo "loop_latency: exit $?"; sed -n '/^loop latency/,$p' "$out/loop.txt" | head -45
fi
if want breakdown; then
  timeout 150 python3 benchmarks/loop_latency.py --saves 3 --broken-saves 1 --mid-bench-saves 1 --no-plain \
    --profile "$out/profiles" > "$out/loop-profiled.txt" 2>&1
  echo "loop_latency --profile: exit $?"; sed -n '/^loop latency/,$p' "$out/loop-profiled.txt" | head -30
  python3 benchmarks/profile_summary.py "$out/profiles" --top 45 > "$out/profile-summary.txt" 2>&1
  timeout 120 python3 benchmarks/compile_breakdown.py --json "$out/compile_breakdown.json" \
    > "$out/compile_breakdown.txt" 2>&1
  echo "compile_breakdown: exit $?"
fi
if want scaffolds; then
  timeout 540 python3 benchmarks/scaffolds.py --out "$out" > "$out/scaffolds.txt" 2>&1
  echo "scaffolds: exit $?"; tail -30 "$out/scaffolds.txt"
fi
if want multi && [ "$(nvidia-smi -L | wc -l)" -gt 1 ]; then
  timeout 540 python3 benchmarks/multi_gpu.py --rounds 2 --json "$out/multi_gpu.json" > "$out/multi_gpu.txt" 2>&1
  echo "multi_gpu: exit $?"; tail -12 "$out/multi_gpu.txt"
fi
