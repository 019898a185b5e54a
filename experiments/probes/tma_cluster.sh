#!/usr/bin/env bash
# A task's hand-off kept on chip against one through L2 (experiments/probes/tma_step.cu) into
# RUN/tma_cluster.csv, 3 interleaved rounds (about half a minute): 16 tasks a CTA of 3 and 12 steps
# (256-row chunks, 3 buffers: a staged tile and two receiving ones leave room for no fourth, the
# weights streamed) on every SM, the tile sent into the paired CTA's shared memory and awaited
# there (`cluster`: by each thread's stores, or staged and sent by bulk copies with --store tma),
# stored by TMA and handed off through L2 (`stored`), stored by TMA without holding the next
# inputs (`unordered`), and not stored (`none`).
#   experiments/probes/tma_cluster.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: tma_cluster.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/tma_step"
args=(--iters 50 --warmup 10 --csv "$run/tma_cluster.csv" --rows 256 --stages 3 --tasks 16 --weights streamed)
for round in 1 2 3; do
  for steps in 3 12; do
    for how in "--handoff cluster" "--handoff cluster --store tma" "--store tma" "--store tma --handoff unordered" \
      "--handoff none"; do
      # shellcheck disable=SC2086  # $how: the options of one hand-off, split on purpose
      "$exe" "${args[@]}" --steps "$steps" $how | tail -1
    done
  done
  echo "tma_cluster.sh: round $round done" >&2
done
