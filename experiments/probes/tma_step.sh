#!/usr/bin/env bash
# The TMA + wgmma mainloop's step cost over its shapes (experiments/probes/tma_step.cu) into
# RUN/tma_step.csv, 3 interleaved rounds (about three minutes):
# - chunk_step's grid: 64- and 256-row chunks, 2 to 8 stages, every CTA on the same rows or each
#   on its own, with and without the products, the weight tile resident; chunk_step itself at each
#   point with the same CTAs (one an SM), into RUN/chunk_step.csv, so that the two loops are
#   compared within one sitting;
# - read-once at batch 1: 128- and 256-row chunks with a weight tile streamed a step;
# - 12 steps beside 48: a step's cost apart from the first trip and the launch.
#   experiments/probes/tma_step.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: tma_step.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/tma_step"
step() { "$exe" --iters 50 --warmup 10 --csv "$run/tma_step.csv" "$@" | tail -1; }
cp_step() { "${BUILD:-build}/experiments/probes/chunk_step" --iters 50 --warmup 10 --ctas-per-sm 1 \
              --csv "$run/chunk_step.csv" "$@" | tail -1; }
for round in 1 2 3; do
  for rows in 64 256; do
    for stages in 2 4 8; do
      [ "$rows" = 256 ] && [ "$stages" = 8 ] && continue  # 256 KB of buffers: more than a CTA's shared memory
      for source in same distinct; do
        step --rows "$rows" --stages "$stages" --source "$source"
        step --rows "$rows" --stages "$stages" --source "$source" --no-mma
        cp_step --rows "$rows" --stages "$stages" --source "$source"
        cp_step --rows "$rows" --stages "$stages" --source "$source" --no-mma
      done
    done
  done
  for rows in 128 256; do
    step --rows "$rows" --stages 4 --weights streamed
    step --rows "$rows" --stages 4 --weights streamed --no-mma
  done
  for rows in 64 256; do
    step --rows "$rows" --stages 4 --steps 12
    step --rows "$rows" --stages 4 --steps 12 --weights streamed
  done
  step --rows 64 --stages 4 --ctas-per-sm 2
  echo "tma_step.sh: round $round done" >&2
done
