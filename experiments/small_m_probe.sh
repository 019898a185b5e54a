#!/usr/bin/env bash
# Why the 197-row GEMMs of batch 1 stay on cuBLASLt, and where a batch-1 forward's time goes
# (vit_b, 224 px), on the local GPU; everything is written under OUT_DIR:
#   trials.tsv      every candidate the CUTLASS layer's search timed (STUDY_CUTLASS_SEARCH_LOG),
#                   from a fresh cache, for split_epilogue at batch 1 and e11_split_gemms at 1 and 4
#   rows.csv        those runs' rows (the search's choices)
#   forced.tsv      the fastest split kernel of every searched shape, as a cache that forces it
#   rows_forced.csv the same runs with the split kernels forced (correctness is checked as usual)
#   ncu_mlp_cublaslt.csv, ncu_mlp_split.csv   Nsight Compute of the MLP's two GEMMs at 197 rows,
#                   cuBLASLt (fastest_epilogue) against the forced split kernels
#   ncu_forward_b1.csv  Nsight Compute of every kernel of e6_best's eager batch-1 forwards
#   experiments/small_m_probe.sh OUT_DIR [BUILD_DIR (default build)]
set -uo pipefail
out=${1:?usage: small_m_probe.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bench=$build/stages
for b in "$bench/mlp/mlp_split_epilogue" "$bench/encoder/encoder_e11_split_gemms" "$bench/encoder/encoder_e6_best"; do
  [ -x "$b" ] || { echo "small_m_probe.sh: $b is not built" >&2; exit 2; }
done
command -v ncu > /dev/null || { echo "small_m_probe.sh: ncu (Nsight Compute) is not on PATH" >&2; exit 2; }
log=$out/run.log
: > "$log"
rm -f "$out/trials.tsv" "$out/fresh.tsv" "$out/rows.csv" "$out/rows_forced.csv"

echo "searching from a fresh cache, every candidate logged"
export STUDY_CUTLASS_CACHE=$out/fresh.tsv
STUDY_CUTLASS_SEARCH_LOG=$out/trials.tsv "$bench/mlp/mlp_split_epilogue" --batch 1 --iters 20 --csv "$out/rows.csv" >> "$log" 2>&1
for b in 1 4; do
  STUDY_CUTLASS_SEARCH_LOG=$out/trials.tsv "$bench/encoder/encoder_e11_split_gemms" --batch $b --iters 20 \
    --csv "$out/rows.csv" >> "$log" 2>&1
done

echo "forcing the fastest split kernel of every shape"
# trials.tsv columns: gpu m n k activation residual kernel raster swizzle splits us.
awk -F'\t' '$7 ~ /_split$/ { k = $1 FS $2 FS $3 FS $4 FS $5 FS $6
                             if (!(k in us) || $11 < us[k]) { us[k] = $11; line[k] = $0 } }
            END { for (k in line) print line[k] }' "$out/trials.tsv" > "$out/forced.tsv"
STUDY_CUTLASS_CACHE=$out/forced.tsv "$bench/mlp/mlp_split_epilogue" --batch 1 --iters 20 --csv "$out/rows_forced.csv" >> "$log" 2>&1
for b in 1 4; do
  STUDY_CUTLASS_CACHE=$out/forced.tsv "$bench/encoder/encoder_e11_split_gemms" --batch $b --iters 20 \
    --csv "$out/rows_forced.csv" >> "$log" 2>&1
done

echo "Nsight Compute: the MLP's GEMMs at 197 rows"
metrics=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__cluster_size
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__bytes_read.sum,sm__cycles_elapsed.avg.per_second
ncu_run() { ncu --clock-control none --metrics "$metrics" --csv --page raw "$@"; }
"$bench/mlp/mlp_fastest_epilogue" --batch 1 --iters 5 --no-check >> "$log" 2>&1  # its choice, searched unprofiled
ncu_run "$bench/mlp/mlp_fastest_epilogue" --batch 1 --warmup 0 --iters 1 --no-check > "$out/ncu_mlp_cublaslt.csv" 2>> "$log"
STUDY_CUTLASS_CACHE=$out/forced.tsv ncu_run "$bench/mlp/mlp_split_epilogue" --batch 1 --warmup 0 --iters 1 --no-check \
  > "$out/ncu_mlp_split.csv" 2>> "$log"

echo "Nsight Compute: every kernel of e6_best's eager batch-1 forwards"
# Only kernels inside the forward's NVTX range: the eager forward before the graph capture and
# the eager breakdown pass (graph replays run outside it). Caches flushed before each kernel, as
# a forward finds every layer's weights.
ncu_run --nvtx --nvtx-include "encoder_forward/" "$bench/encoder/encoder_e6_best" --batch 1 --warmup 0 --iters 1 \
  --no-check > "$out/ncu_forward_b1.csv" 2>> "$log"
echo "done: $out"
