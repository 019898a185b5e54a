#!/usr/bin/env bash
# The streamed mainloop's step cost over its shapes (experiments/probes/chunk_step.cu) into
# RUN/chunk_step.csv: 64- and 256-row chunks, 2 to 8 stages, every CTA on the same rows or each
# on its own, with and without the products, 3 interleaved rounds (about a minute).
#   experiments/probes/chunk_step.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: chunk_step.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/chunk_step"
for round in 1 2 3; do
  for rows in 64 256; do
    for stages in 2 4 8; do
      [ "$rows" = 256 ] && [ "$stages" = 8 ] && continue  # 256 KB of stages: more than a CTA's shared memory
      for source in same distinct; do
        for mma in "" --no-mma; do
          "$exe" --rows "$rows" --stages "$stages" --source "$source" $mma --iters 50 --warmup 10 \
            --csv "$run/chunk_step.csv" | tail -1
        done
      done
    done
  done
  echo "chunk_step.sh: round $round done" >&2
done
