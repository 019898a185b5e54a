#!/usr/bin/env bash
# Nsight Compute metrics of every version of a family (attention, mlp or patch_embed), or of named
# encoder steps, at batch 32, 224 px (197 tokens), ViT-B: launch shape, registers, shared memory,
# achieved occupancy, SM, memory, L2 and DRAM throughput, issue activity and kernel time, one CSV
# row per kernel launch, tagged with the version. NCU_EXTRA_METRICS (comma-separated) adds metrics,
# NCU_METRICS replaces the list; NCU_VERSIONS (comma-separated) limits the run to those versions.
# NCU_CACHE_CONTROL: `all` (the default, ncu's) flushes the caches before each profiled kernel, so
# every kernel's inputs come from DRAM; `none` keeps what the previous kernel left in L2, which is what a measurement of
# data passed between kernels through L2 needs (with few enough metrics for one pass per kernel,
# e.g. NCU_METRICS=dram__bytes_read.sum,dram__bytes_write.sum, so that no replay warms the L2).
# For the encoder (its steps from stages/encoder/steps.tsv) NCU_VERSIONS must name the steps, and
# NCU_KERNEL (a regex on the kernel's mangled name) with NCU_LAUNCH_COUNT picks kernels inside
# the forward. The FP8 steps calibrate on an fp16 forward first, so pick their kernels by what only
# the FP8 forward launches: NCU_KERNEL='flash_wgmma.*__nv_fp8_e4m3' NCU_LAUNCH_COUNT=12 for one
# forward's attentions (E4M3 output; the calibration's write fp16).
#   experiments/probes/ncu_family.sh FAMILY OUT.csv [BUILD_DIR (default build)] [extra bench args...]
# Each bench runs once, unchecked and untimed beyond one call (--warmup 0 --iters 1 --no-check),
# so only the timed call is profiled (library versions may launch several kernels per call).
# Keep OUT outside a results run folder's top level (e.g. <run>/ncu/FAMILY.csv): that
# folder's *.csv files must all be in the study's row schema.
set -euo pipefail
family=${1:?usage: ncu_family.sh attention|mlp|patch_embed|encoder OUT.csv [BUILD_DIR] [bench args...]}
out=${2:?usage: ncu_family.sh attention|mlp|patch_embed|encoder OUT.csv [BUILD_DIR] [bench args...]}
build=${3:-build}
shift $(( $# >= 3 ? 3 : 2 ))
case $family in attention|mlp|patch_embed|encoder) ;;
  *) echo "ncu_family.sh: unknown family '$family' (attention, mlp, patch_embed or encoder)" >&2; exit 2 ;;
esac
# Every version of the family's list (stages/FAMILY/versions.def); for patch_embed the
# device-resident ones only (v1-v3 launch a kernel per dot product: nothing to profile).
if [ "$family" = encoder ]; then
  [ -n "${NCU_VERSIONS:-}" ] ||
    { echo "ncu_family.sh: the encoder needs NCU_VERSIONS (the steps to profile)" >&2; exit 2; }
  list=stages/encoder/steps.tsv
  mapfile -t versions < <(awk -F'\t' '$2 == "step" {print $1}' "$(dirname "$0")/../../$list")
else
  list=stages/$family/versions.def
  mapfile -t versions < <(sed -n 's/^STUDY_VERSION(\(.*\))$/\1/p' "$(dirname "$0")/../../$list")
fi
[ "$family" = patch_embed ] && mapfile -t versions < <(printf '%s\n' "${versions[@]}" |
  grep -vx -e cpu_baseline -e v1_single_channel -e v2_unified_channel -e v3_streams -e v3_streams_graph)
# NCU_VERSIONS (comma-separated) profiles only those versions of the list.
if [ -n "${NCU_VERSIONS:-}" ]; then
  IFS=, read -ra wanted <<< "$NCU_VERSIONS"
  for v in "${wanted[@]}"; do
    printf '%s\n' "${versions[@]}" | grep -qx -- "$v" ||
      { echo "ncu_family.sh: '$v' is not a $family version ($list)" >&2; exit 2; }
  done
  versions=("${wanted[@]}")
fi
metrics=launch__grid_size,launch__block_size,launch__registers_per_thread
metrics+=,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
metrics+=,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active
[ -n "${NCU_EXTRA_METRICS:-}" ] && metrics+=,$NCU_EXTRA_METRICS
[ -n "${NCU_METRICS:-}" ] && metrics=$NCU_METRICS
cache_control=${NCU_CACHE_CONTROL:-all}
case $cache_control in all|none) ;;
  *) echo "ncu_family.sh: NCU_CACHE_CONTROL is all or none, not '$cache_control'" >&2; exit 2 ;;
esac
ncu_bin=${NCU:-ncu}
# Kernels inside a forward: which ones, and how many launches.
select=()
[ -n "${NCU_KERNEL:-}" ] && select+=(--kernel-name-base mangled --kernel-name "regex:$NCU_KERNEL")
[ -n "${NCU_LAUNCH_COUNT:-}" ] && select+=(--launch-count "$NCU_LAUNCH_COUNT")
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
  "$ncu_bin" --clock-control none --cache-control "$cache_control" "${select[@]}" --csv --page raw \
    --metrics "$metrics" \
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
