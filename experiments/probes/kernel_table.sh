#!/usr/bin/env bash
# The per-kernel table of one CUDA-graph replay of named encoder steps (vit_b, 224 px; batch 1
# unless KT_BATCH says otherwise): every kernel's duration and the gap before it, from the kernel
# tracer (common/profile/kernel_trace.cpp: CUPTI timestamps of every node of every replay), and
# its DRAM bytes and tensor-core operations, from Nsight Compute over the graph's nodes; then
# experiments/probes/kernel_table.py joins them with the GPU's measured ceilings.
#   experiments/probes/kernel_table.sh OUT_DIR STEP [STEP ...]   (build folder: $BUILD, default build)
# Writes OUT_DIR/ceilings.csv, and per step OUT_DIR/STEP.trace.csv, STEP.ncu.csv and STEP.csv (the
# table), and prints each step's summary.
set -euo pipefail
out=${1:?usage: kernel_table.sh OUT_DIR STEP [STEP ...]}
shift
[ $# -gt 0 ] || { echo "kernel_table.sh: name at least one encoder step" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-build}
batch=${KT_BATCH:-1}
iters=${KT_ITERS:-50}
trace_lib=$build/common/libkernel_trace.so
[ -f "$trace_lib" ] || { echo "kernel_table.sh: $trace_lib not built (CUPTI not found: meson configure -Dcupti_root=...)" >&2; exit 2; }
command -v "${NCU:-ncu}" > /dev/null || { echo "kernel_table.sh: no ncu (Nsight Compute) on PATH" >&2; exit 2; }
mkdir -p "$out"
[ -f "$out/ceilings.csv" ] || "$build/common/ceilings" --csv "$out/ceilings.csv" > /dev/null
# Tensor-core operation counters, per source type (fp16, FP8), and the sectors the SMs read from
# and write to L2 (loads, TMA and cp.async included: the L1TEX unit issues them all), where this
# Nsight Compute has them.
ops=$("${NCU:-ncu}" --query-metrics 2>/dev/null |
  awk '$1 ~ /^(sm__ops_path_tensor_src_(fp16|fp8)|lts__t_sectors_srcunit_tex_op_(read|write))$/ {printf ",%s.sum", $1}')
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size$ops
for step in "$@"; do
  exe=$build/stages/encoder/encoder_$step
  [ -x "$exe" ] || { echo "kernel_table.sh: $exe not built" >&2; exit 2; }
  args=(--model vit_b --image-size 224 --batch "$batch" --no-check)
  # Once plain: the GEMM searches run on first use and keep their choice on disk, so that the
  # traced and profiled runs launch only the chosen kernels.
  "$exe" "${args[@]}" --warmup 1 --iters 1 > /dev/null
  CUDA_INJECTION64_PATH=$PWD/$trace_lib STUDY_KERNEL_TRACE=$out/$step.trace.csv \
    "$exe" "${args[@]}" --warmup 5 --iters "$iters" > /dev/null
  # Each graph node profiled alone with the caches as the previous kernel left them (no flush):
  # one pass of counters per kernel, so no replay of the kernel warms the L2 for itself.
  "${NCU:-ncu}" --graph-profiling node --clock-control none --cache-control none --print-kernel-base mangled \
    --csv --page raw --metrics "$metrics" "$exe" "${args[@]}" --warmup 0 --iters 1 \
    2> "$out/$step.ncu.err" | grep '^"' > "$out/$step.ncu.csv" || { cat "$out/$step.ncu.err" >&2; exit 1; }
  python3 "$here/kernel_table.py" --trace "$out/$step.trace.csv" --ncu "$out/$step.ncu.csv" \
    --ceilings "$out/ceilings.csv" --step "$step" --batch "$batch" --out "$out/$step.csv"
done
