#!/usr/bin/env bash
# compute-sanitizer's initcheck on the minimal cases of initcheck_repro and on a small whole
# ViT, with the reports counted per kernel and source line (docs/sanitizers.md reads them).
# Usage: tests/sanitizer/initcheck.sh [BUILD_DIR]   (default: build; needs a GPU and
# compute-sanitizer on PATH or in the CUDA toolkit)
set -uo pipefail
build=${1:-build}
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$san" ] || { echo "error: compute-sanitizer not found" >&2; exit 2; }
repro=$build/tests/initcheck_repro
vit=$build/stages/encoder/encoder_e6_best
for f in "$repro" "$vit"; do [ -x "$f" ] || { echo "error: $f not built (ninja -C $build)" >&2; exit 2; }; done

# Reports of one run: total uninitialized device reads, host API reads of uninitialized memory,
# and the device reads grouped by kernel and source line.
summarize() {
  local log=$1
  printf '  device reads reported: %s, host API accesses reported: %s\n' \
    "$(grep -c 'Uninitialized __global__ memory read' "$log")" "$(grep -c 'Uninitialized access' "$log")"
  awk '/Uninitialized __global__ memory read/ {getline; sub(/^ *=+ +at /, ""); print}' "$log" |
    sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | sort -rn | head -8 | sed 's/^/    /'
  grep -m1 'ERROR SUMMARY' "$log" | sed 's/^=* */  /'
}

for c in plain_store bulk_store cublaslt unwritten; do
  echo "== initcheck_repro --case $c"
  "$san" --tool initcheck --print-limit 100000 "$repro" --case "$c" > "initcheck_$c.log" 2>&1
  grep -E '^(cuBLASLt|[a-z_]+: |error)' "initcheck_$c.log" | sed 's/^/  /'
  summarize "initcheck_$c.log"
done

echo "== encoder_e6_best --batch 2 --image-size 64 --model vit_ti --layers 2"
"$san" --tool initcheck --print-limit 1000000 "$vit" --batch 2 --image-size 64 --model vit_ti --layers 2 \
  --warmup 1 --iters 1 --csv /dev/null > initcheck_encoder.log 2>&1
summarize initcheck_encoder.log
echo "== the same under memcheck"
"$san" --tool memcheck "$vit" --batch 2 --image-size 64 --model vit_ti --layers 2 --warmup 1 --iters 1 \
  --csv /dev/null 2>&1 | grep -m1 'ERROR SUMMARY'
