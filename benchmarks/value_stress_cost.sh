#!/usr/bin/env bash
# What the value-stress cases (verify/value_stress.py) add to a headless verify: the 12 scaffolds and
# templates verified cold with them off, then cold with them on (separate copies: nothing kept between).
# Usage: bash benchmarks/value_stress_cost.sh OUTDIR
set -uo pipefail
out=${1:-/tmp/value-stress-cost}
mkdir -p "$out"
work=$(mktemp -d)
for mode in off on; do
  mkdir -p "$work/$mode"
  for name in rmsnorm layernorm softmax gelu silu_mul add matmul attention rmsnorm_train layernorm_train softmax_train silu_mul_train; do
    python3 -m workbench.cli new "$name" --dir "$work/$mode" >/dev/null
    if [ "$mode" = off ]; then  # value_stress = false added to the scaffold's own [verify], or a new one
      toml="$work/$mode/$name/workbench.toml"
      if grep -q '^\[verify\]' "$toml" 2>/dev/null; then sed -i 's/^\[verify\]$/[verify]\nvalue_stress = false/' "$toml"
      else printf '[verify]\nvalue_stress = false\n' >> "$toml"; fi
    fi
  done
done
for mode in off on; do
  start=$(date +%s%N)
  python3 -m workbench.cli verify "$work/$mode"/* > "$out/verify-$mode.txt" 2>&1
  code=$?
  echo "value stress $mode: exit $code in $(( ($(date +%s%N) - start) / 1000000 )) ms"
  tail -1 "$out/verify-$mode.txt"
done
