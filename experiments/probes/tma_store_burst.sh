#!/usr/bin/env bash
# Whether a TMA-stored task waits on its store's bytes or on its round trip
# (experiments/probes/tma_step.cu --store tma) into RUN/tma_store_burst.csv, 3 interleaved rounds
# (about half a minute): 16 tasks a CTA of 3 steps (256-row chunks, 4 buffers, the weights
# streamed) on 33, 66 and 132 CTAs, the tile stored by TMA and handed off (`stored`), stored
# without holding the next inputs (`unordered`), and not stored (`none`). The grid's burst of
# stores is 32 KB a CTA: 1.1, 2.2 and 4.3 MB.
#   experiments/probes/tma_store_burst.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: tma_store_burst.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/tma_step"
args=(--iters 50 --warmup 10 --csv "$run/tma_store_burst.csv" --rows 256 --stages 4 --tasks 16 --steps 3
  --weights streamed)
for round in 1 2 3; do
  for ctas in 33 66 132; do
    for how in "--store tma" "--store tma --handoff unordered" "--handoff none"; do
      # shellcheck disable=SC2086  # $how: the options of one hand-off, split on purpose
      "$exe" "${args[@]}" --ctas "$ctas" $how | tail -1
    done
  done
  echo "tma_store_burst.sh: round $round done" >&2
done
