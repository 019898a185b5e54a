#!/usr/bin/env bash
# A GEMM task's cost on the TMA + wgmma mainloop (experiments/probes/tma_step.cu) into
# RUN/tma_tasks.csv, 3 interleaved rounds (about a minute):
# - one task a launch at 3 to 48 steps (256-row chunks with the weight tile resident or streamed;
#   64-row chunks, 8 buffers): a launch's cost apart from its steps;
# - 16 tasks a launch of 3 and 12 steps (K 768 and 3072 in 4 slices), the weights streamed, each
#   task storing its output before the next one's inputs are requested, with and without the next
#   task's weights requested early: a task's cost inside a persistent kernel.
#   experiments/probes/tma_tasks.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: tma_tasks.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/tma_step"
step() { "$exe" --iters 50 --warmup 10 --csv "$run/tma_tasks.csv" "$@" | tail -1; }
for round in 1 2 3; do
  for steps in 3 6 12 24 48; do
    step --rows 256 --stages 4 --weights resident --steps "$steps"
    step --rows 256 --stages 4 --weights streamed --steps "$steps"
    step --rows 64 --stages 8 --steps "$steps"
  done
  for steps in 3 12; do
    for tasks in 1 4 16; do
      step --rows 256 --stages 4 --weights streamed --steps "$steps" --tasks "$tasks"
      [ "$tasks" = 1 ] || step --rows 256 --stages 4 --weights streamed --steps "$steps" --tasks "$tasks" --prefetch-weights
    done
  done
  echo "tma_tasks.sh: round $round done" >&2
done
