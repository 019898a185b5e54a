#!/usr/bin/env bash
# The task clock of named tile-scheduled encoder steps (vit_b, 224 px; batch 1 unless TC_BATCH
# says otherwise): every task of one eager forward with its SM, its start, inputs-ready and end
# stamps and its counters (the bench's --task-times), then experiments/probes/task_table.py's
# per-task table and critical path of each.
#   experiments/probes/task_clock.sh OUT_DIR STEP [STEP ...]   (build folder: $BUILD, default build)
# Writes per step OUT_DIR/tasks_STEP.csv (the stamps), table_STEP.csv and path_STEP.csv, and
# prints both tables.
set -euo pipefail
out=${1:?usage: task_clock.sh OUT_DIR STEP [STEP ...]}
shift
[ $# -gt 0 ] || { echo "task_clock.sh: name at least one tile-scheduled encoder step" >&2; exit 2; }
build=${BUILD:-build}
batch=${TC_BATCH:-1}
mkdir -p "$out"
for step in "$@"; do
  exe=$build/stages/encoder/encoder_$step
  [ -x "$exe" ] || { echo "task_clock.sh: $exe not built" >&2; exit 2; }
  rm -f "$out/tasks_$step.csv"  # the bench appends; one forward a file
  "$exe" --model vit_b --image-size 224 --batch "$batch" --warmup 5 --iters 5 --task-times "$out/tasks_$step.csv" \
    > /dev/null
  echo "== $step, batch $batch"
  python3 -m experiments.probes.task_table "$out/tasks_$step.csv" --out "$out/table_$step.csv" \
    --path-out "$out/path_$step.csv"
done
