#!/usr/bin/env bash
# On a GPU machine: every scaffold and known op verifies green; the broken kernels fail there too.
# Usage: bash benchmarks/gpu_verify_check.sh OUTDIR
set -uo pipefail
out=${1:-/tmp/gpu-verify}
mkdir -p "$out"
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/gpu.txt"
for name in rmsnorm layernorm softmax gelu silu_mul add matmul attention rmsnorm_train layernorm_train softmax_train silu_mul_train cross_entropy_train attention_train; do
  python3 -m workbench.cli new "$name" --dir "$work" >/dev/null
done
for t in elementwise row gemm attention; do
  python3 -m workbench.cli new "my_$t" --template "$t" --dir "$work" >/dev/null
done
start=$(date +%s)
python3 -m workbench.cli verify -v "$work"/* --junit "$out/scaffolds-junit.xml" > "$out/scaffolds.txt" 2>&1
code=$?
echo "scaffolds verify exit $code in $(( $(date +%s) - start )) s"
grep -E "^[a-z_]+  |VERIFIED|FAILED|NOT USABLE|ERROR" "$out/scaffolds.txt"
# One project alone, as a user verifies one: its torch.compile check runs in a process of its own (several
# projects' lanes keep it in the worker), again rather than kept from the run above
start=$(date +%s)
python3 -m workbench.cli verify -v "$work/attention" --fresh-checks > "$out/alone.txt" 2>&1
alone=$?
echo "attention alone (the torch.compile check in its own process) exit $alone in $(( $(date +%s) - start )) s"
grep -E "VERIFIED|FAILED|NOT USABLE|ERROR|compatibility: torch.compile" "$out/alone.txt"
exit $(( code > alone ? code : alone ))
