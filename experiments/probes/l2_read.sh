#!/usr/bin/env bash
# The L2-to-SM read rate (experiments/probes/l2_read.cu) at buffer sizes inside an H100's or
# H200's L2 and one far past it (DRAM, for comparison), in interleaved rounds, into one CSV.
#   experiments/probes/l2_read.sh OUT.csv [ROUNDS]   (build folder: $BUILD, default build)
set -euo pipefail
out=${1:?usage: l2_read.sh OUT.csv [ROUNDS]}
rounds=${2:-3}
exe=${BUILD:-build}/experiments/probes/l2_read
[ -x "$exe" ] || { echo "l2_read.sh: $exe not built" >&2; exit 2; }
for r in $(seq "$rounds"); do
  for mib in 8 16 24 32 40 2048; do
    passes=$(( mib > 64 ? 2 : 20 ))
    "$exe" --mib "$mib" --passes "$passes" --iters 20 --csv "$out" | tail -1
  done
done
