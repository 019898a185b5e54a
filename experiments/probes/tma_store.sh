#!/usr/bin/env bash
# A task's output tile stored by TMA from shared memory against its threads' own stores
# (experiments/probes/tma_step.cu --store) into RUN/tma_store.csv, 3 interleaved rounds (about half
# a minute): 16 tasks a CTA of 3 and 12 steps (256-row chunks, 4 buffers, the weights streamed),
# each stored and handed off (`stored`), stored with the next inputs not held for it
# (`unordered`), and not stored (`none`, the floor of both).
#   experiments/probes/tma_store.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: tma_store.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/tma_step"
step() {
  "$exe" --iters 50 --warmup 10 --csv "$run/tma_store.csv" --rows 256 --stages 4 --tasks 16 --weights streamed "$@" |
    tail -1
}
for round in 1 2 3; do
  for steps in 3 12; do
    for store in registers tma; do
      for handoff in stored unordered; do
        step --steps "$steps" --store "$store" --handoff "$handoff"
      done
    done
    step --steps "$steps" --handoff none
  done
  echo "tma_store.sh: round $round done" >&2
done
