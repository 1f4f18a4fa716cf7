#!/usr/bin/env bash
# What one kind of generated case adds to a headless verify: the 12 scaffolds and templates verified cold
# with `[verify] KEY = false`, then cold with it on (separate copies: nothing kept between).
# KEY: value_stress (verify/value_stress.py, the default) or large_index (verify/large_index.py).
# Usage: bash benchmarks/generated_case_cost.sh OUTDIR [KEY]
set -uo pipefail
out=${1:-/tmp/generated-case-cost}
key=${2:-value_stress}
mkdir -p "$out"
work=$(mktemp -d)
for mode in off on; do
  mkdir -p "$work/$mode"
  for name in rmsnorm layernorm softmax gelu silu_mul add matmul attention rmsnorm_train layernorm_train softmax_train silu_mul_train; do
    python3 -m workbench.cli new "$name" --dir "$work/$mode" >/dev/null
    if [ "$mode" = off ]; then  # KEY = false added to the scaffold's own [verify], or a new one
      toml="$work/$mode/$name/workbench.toml"
      if grep -q '^\[verify\]' "$toml" 2>/dev/null; then sed -i "s/^\[verify\]\$/[verify]\n$key = false/" "$toml"
      else printf '[verify]\n%s = false\n' "$key" >> "$toml"; fi
    fi
  done
done
for mode in off on; do
  start=$(date +%s%N)
  python3 -m workbench.cli verify -v "$work/$mode"/* > "$out/verify-$key-$mode.txt" 2>&1
  code=$?
  echo "$key $mode: exit $code in $(( ($(date +%s%N) - start) / 1000000 )) ms"
  tail -1 "$out/verify-$key-$mode.txt"
done
