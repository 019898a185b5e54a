#!/usr/bin/env bash
# The inputs of the batch-1 waterfall (experiments/probes/waterfall.py) into one run folder, after
# the bench rows of `experiments.sweep --spec batch1_waterfall` (or experiments/gpu_job.sh
# batch1_waterfall) and its ceilings.csv: the L2 read rate (l2_read.csv), the tile schedule's
# chain without math at both tilings (dry_run_chain.csv), one graph replay's kernel table with each
# kernel's L2 traffic (kernels/), and the tile-scheduled steps' task clock and critical path
# (tasks/).
#   experiments/probes/waterfall.sh RUN_DIR [STEP ...]   (build folder: $BUILD, default build)
# Default steps: e19_exact_gelu e18_fp8_cutlass e30_row_stats. Then, on any machine:
#   python3 -m experiments.probes.waterfall RUN_DIR --predicted stages/encoder/waterfall_predicted.csv
# Another batch (the batch256_waterfall spec's rows first): KT_BATCH=256 waterfall.sh RUN_DIR
# e19_exact_gelu e18_fp8_cutlass, then waterfall.py RUN_DIR --batch 256; the tile-scheduled steps'
# task clock runs at batch 1 only, so name graph steps there.
set -euo pipefail
run=${1:?usage: waterfall.sh RUN_DIR [STEP ...]}
shift
steps=("$@")
batch=${KT_BATCH:-1}  # kernel_table.sh reads KT_BATCH itself
if [ ${#steps[@]} -eq 0 ]; then
  steps=(e19_exact_gelu e18_fp8_cutlass)
  [ "$batch" != 1 ] || steps+=(e30_row_stats)
fi
here=$(cd "$(dirname "$0")" && pwd)
tiled=()  # the steps whose composition runs the tile-scheduled blocks (the step table's column 5)
for s in "${steps[@]}"; do
  awk -F'\t' -v s="$s" '$1 == s && $5 ~ /blocks=tiled/ {found = 1} END {exit !found}' \
    "$here/../../stages/encoder/steps.tsv" && tiled+=("$s")
done
[ ${#tiled[@]} -eq 0 ] || [ "$batch" = 1 ] ||
  { echo "waterfall.sh: the task clock of ${tiled[*]} runs at batch 1 only (KT_BATCH=$batch)" >&2; exit 2; }
[ -f "$run/ceilings.csv" ] || { echo "waterfall.sh: $run/ceilings.csv missing (run the batch1_waterfall or batch256_waterfall sweep first)" >&2; exit 2; }
mkdir -p "$run/kernels"
cp "$run/ceilings.csv" "$run/kernels/ceilings.csv"  # the kernel table's rates are the run's
"$here/l2_read.sh" "$run/l2_read.csv" 3 > /dev/null
# The chain without math of the 64 x 64 and the read-once tilings (the hand-off bar of a tiling
# before its kernel exists, at batch 1 where the tilings run), 3 interleaved rounds.
if [ "$batch" = 1 ]; then
  for r in 1 2 3; do
    for tiling in read_once tiles64; do
      "${BUILD:-build}/experiments/probes/dry_run_chain" --tiling "$tiling" --iters 20 --csv "$run/dry_run_chain.csv" |
        tail -1
    done
  done
fi
"$here/kernel_table.sh" "$run/kernels" "${steps[@]}"
[ ${#tiled[@]} -eq 0 ] || "$here/task_clock.sh" "$run/tasks" "${tiled[@]}"
# Only the tables stay: the raw trace and profile are large and rebuilt by the lines above.
rm -f "$run/kernels/"*.trace.csv "$run/kernels/"*.ncu.csv "$run/kernels/"*.ncu.err "$run/kernels/ceilings.csv"
