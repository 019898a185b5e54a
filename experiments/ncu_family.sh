#!/usr/bin/env bash
# Nsight Compute metrics of every version of a family (attention, mlp or patch_embed) at batch 32, 224 px
# (197 tokens), ViT-B: launch shape, registers, shared memory, achieved occupancy, SM, memory,
# L2 and DRAM throughput, issue activity and kernel time, one CSV row per kernel launch, tagged
# with the version. NCU_EXTRA_METRICS (comma-separated) adds metrics.
#   experiments/ncu_family.sh FAMILY OUT.csv [BUILD_DIR (default build)] [extra bench args...]
# Each bench runs once, unchecked and untimed beyond one call (--warmup 0 --iters 1 --no-check),
# so only the timed call is profiled (library versions may launch several kernels per call).
# Keep OUT outside a results run folder's top level (e.g. <run>/ncu/FAMILY.csv): that
# folder's *.csv files must all be in the study's row schema.
set -euo pipefail
family=${1:?usage: ncu_family.sh attention|mlp|patch_embed OUT.csv [BUILD_DIR] [bench args...]}
out=${2:?usage: ncu_family.sh attention|mlp|patch_embed OUT.csv [BUILD_DIR] [bench args...]}
build=${3:-build}
shift $(( $# >= 3 ? 3 : 2 ))
case $family in
  attention) versions=(v0_naive v1_smem_tiling v2_coalesced v3_wmma v4_multiwarp v5_large_tile v6_coalesced_k
                       v7_flash_mma v7_flash v8_exact_tail v9_softmax_overlap cudnn_sdpa) ;;
  mlp) versions=(unfused unfused_graph fused_epilogue handwritten_epilogue gemm_only pingpong_epilogue
                 pingpong_gemm_only cutlass_epilogue cutlass_epilogue_erf fastest_epilogue split_epilogue
                 half_gelu_epilogue fp8_tensor fp8_channel) ;;
  # The device-resident versions (v1-v3 launch a kernel per dot product: nothing to profile).
  patch_embed) versions=(v4_one_copy v5_im2col_gemm v6_implicit_gemm v7_implicit_wgmma v8_balanced_tiles
                         v9_pos_first v10_round_tiles cudnn) ;;
  *) echo "ncu_family.sh: unknown family '$family' (attention, mlp or patch_embed)" >&2; exit 2 ;;
esac
metrics=launch__grid_size,launch__block_size,launch__registers_per_thread
metrics+=,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
metrics+=,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active
[ -n "${NCU_EXTRA_METRICS:-}" ] && metrics+=,$NCU_EXTRA_METRICS
ncu_bin=${NCU:-ncu}
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in "${versions[@]}"; do
  exe="$build/stages/$family/${family}_$v"
  [ -x "$exe" ] || { echo "ncu_family.sh: $exe not built (ninja -C $build)" >&2; exit 2; }
  echo "[ncu] $v" >&2
  # Once without the profiler: the CUTLASS versions search their kernels on first use and record
  # the choice on disk, so that the profiled run below launches only the chosen kernels.
  "$exe" --batch 32 --image-size 224 --model vit_b --warmup 0 --iters 1 --no-check "$@" > /dev/null 2>&1 || true
  # --clock-control none: measure the GPU at the clocks it runs at, as the benches do.
  "$ncu_bin" --clock-control none --csv --page raw --metrics "$metrics" \
    "$exe" --batch 32 --image-size 224 --model vit_b --warmup 0 --iters 1 --no-check "$@" \
    > "$tmp/$v.csv" 2> "$tmp/$v.err" || { cat "$tmp/$v.err" >&2; exit 1; }
done
# ncu's raw page: a header row, a units row (empty ID), then one row per kernel. Keep the first
# header, drop the units rows, prefix every row with the version.
python3 - "$out" "$tmp" "${versions[@]}" <<'PY'
import csv, sys
out, tmp, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
header, rows = None, []
for v in versions:
    with open(f"{tmp}/{v}.csv", newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own log lines start with ==PROF==
    table = list(csv.reader(lines))
    kernels = [r for r in table[1:] if r and r[0].strip()]
    if not table or not kernels:
        sys.exit(f"ncu_family.sh: no kernel profiled for {v}")
    header = header or ["version"] + table[0]
    if ["version"] + table[0] != header:
        sys.exit(f"ncu_family.sh: {v}: columns differ from the first version's")
    rows += [[v] + r for r in kernels]
with open(out, "w", newline="") as f:
    csv.writer(f).writerows([header] + rows)
print(f"ncu_family.sh: {len(rows)} kernel rows -> {out}", file=sys.stderr)
PY
