#!/usr/bin/env bash
# A task's hand-off on the TMA + wgmma mainloop taken apart (experiments/probes/tma_step.cu
# --handoff) into RUN/tma_handoff.csv, 3 interleaved rounds (about half a minute): 16 tasks a CTA
# of 3 and 12 steps (256-row chunks, 4 buffers, K 768 and 3072 in 4 slices), the weights streamed
# (each task its own, from HBM) or resident (one tile), each task's output
#   stored:    stored and fenced, the next task's inputs requested only then (tma_tasks.sh's case);
#   unfenced:  stored, not fenced, the next task's inputs held for the store;
#   unordered: stored and fenced, the next task's inputs not held for it;
#   none:      not stored: the tasks' steps back to back.
#   experiments/probes/tma_handoff.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: tma_handoff.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/tma_step"
step() { "$exe" --iters 50 --warmup 10 --csv "$run/tma_handoff.csv" --rows 256 --stages 4 --tasks 16 "$@" | tail -1; }
for round in 1 2 3; do
  for steps in 3 12; do
    for handoff in stored unfenced unordered none; do
      step --weights streamed --steps "$steps" --handoff "$handoff"
    done
  done
  for handoff in stored none; do
    step --weights resident --steps 3 --handoff "$handoff"
  done
  echo "tma_handoff.sh: round $round done" >&2
done
