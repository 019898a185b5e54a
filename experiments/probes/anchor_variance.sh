#!/usr/bin/env bash
# Is torch.compile's max-autotune anchor one forward, or one per compile? Two compiles of the
# same shape on one GPU, each into its own fresh Inductor cache (a and b), timed in interleaved
# rounds (a, b, then timm in a CUDA graph as the control: it autotunes nothing). Each round runs
# every forward in a new process, which loads its compile from its cache, so a and b keep the
# kernels their own autotuning picked. The first round's logs keep Inductor's autotuning tables
# (the candidates it timed, fastest first) and the generated code: which kernels each forward calls.
#
#   experiments/probes/anchor_variance.sh OUT [batch] [rounds]      (defaults: 256, 2)
#
# Writes OUT/compile_a.csv, OUT/compile_b.csv and OUT/control.csv (the anchors' rows, one per
# round, energy included), OUT/kernels.txt (per compile, the kernels its forward calls and the
# autotuning winners) and OUT/logs.tgz. The caches stay in OUT/cache_a and OUT/cache_b.
# Exit 2 on bad arguments, 1 when a forward fails.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
usage="usage: experiments/probes/anchor_variance.sh OUT [batch] [rounds]"
out=${1:-}; batch=${2:-256}; rounds=${3:-2}
[ -n "$out" ] || { echo "error: no output folder; $usage" >&2; exit 2; }
[[ $batch =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] ||
  { echo "error: batch and rounds must be positive integers, got '$batch' and '$rounds'; $usage" >&2; exit 2; }
mkdir -p "$out/logs" 2> /dev/null && [ -w "$out" ] || { echo "error: cannot write to $out" >&2; exit 2; }
out=$(readlink -f "$out")
py=${STUDY_PYTHON:-python3}

# forward NAME VERSION ROUND: one process, one row appended to OUT/NAME.csv.
forward() {
  local logs=()
  [ "$3" = 1 ] && logs=(TORCH_LOGS=output_code)  # the compiling round prints the code it generated
  echo "[anchor_variance] $(date -u +%T) round $3: $1 ($2, batch $batch)"
  env TORCHINDUCTOR_CACHE_DIR="$out/cache_$1" "${logs[@]}" \
    "$py" -m experiments.anchors.torch_vit --version "$2" --batch "$batch" --warmup 5 --iters 20 --energy 5 \
    --csv "$out/$1.csv" > "$out/logs/$1_round$3.out" 2> "$out/logs/$1_round$3.err" ||
    { tail -3 "$out/logs/$1_round$3.err" >&2; echo "error: $1 failed in round $3" >&2; exit 1; }
  "$py" -c 'import csv, sys; r = list(csv.DictReader(open(sys.argv[1])))[-1]
print("   ", r["status"], r["median_us"], "us,", r["energy_j"], "J a call at", r["energy_sm_clock_mhz"], "MHz")' "$out/$1.csv"
}
for r in $(seq 1 "$rounds"); do
  forward compile_a pytorch_timm_compile_graph "$r"
  forward compile_b pytorch_timm_compile_graph "$r"
  forward control pytorch_timm_graph "$r"
done

# Per compile: the kernels the generated forward launches (Inductor's own Triton kernels and
# templates, and the library calls) and, per autotuned product, the winner and its runner-up.
for c in compile_a compile_b; do
  err=$out/logs/${c}_round1.err
  echo "== $c: kernel calls in the generated code (count, name)"
  grep -oE "extern_kernels\.[A-Za-z_0-9]+|triton_(tem|per|red|poi)_[A-Za-z_0-9]+\.run" "$err" | sed 's/\.run$//' |
    sed -E 's/_[0-9]+$//' | sort | uniq -c | sort -rn
  echo "== $c: autotuning (each product, its fastest two candidates)"
  awk '/^AUTOTUNE/ { print; n = 2; next } n > 0 && /^  [^ ]+ [0-9.]+ ms / { print; n-- }' "$err"
done > "$out/kernels.txt"
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs"
echo "[anchor_variance] done: $out"
