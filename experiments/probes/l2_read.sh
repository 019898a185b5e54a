#!/usr/bin/env bash
# The L2-to-SM read rate (experiments/probes/l2_read.cu) at buffer sizes inside an H100's or
# H200's L2 and one far past it (DRAM, for comparison), and what 1 to 132 SMs alone read from L2,
# in interleaved rounds, into one CSV.
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
  # What a few SMs alone read from a 24 MiB buffer in L2, at 1 to 8 CTAs an SM (a
  # tile-scheduled forward runs 2 a SM): the SM's own path against the whole GPU's rate.
  for sms in 1 4 16 66 132; do
    for per_sm in 1 2 4 8; do
      passes=$(( sms < 16 ? 1 : 4 ))
      "$exe" --mib 24 --passes "$passes" --sms "$sms" --ctas-per-sm "$per_sm" --iters 10 --csv "$out" | tail -1
    done
  done
done
