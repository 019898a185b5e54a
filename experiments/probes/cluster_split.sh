#!/usr/bin/env bash
# K-split GEMM tasks at batch 1 (experiments/probes/cluster_split.cu) into RUN/cluster_split.csv:
# the projection's K (768) and fc2's (3072) cut into 1 to 16 slices, each without a reduction
# (the products and a store), through L2 with a meeting, and through a cluster's shared memory,
# 3 interleaved rounds (about two minutes).
#   experiments/probes/cluster_split.sh RUN_DIR   (build folder: $BUILD, default build)
set -euo pipefail
run=${1:?usage: cluster_split.sh RUN_DIR}
mkdir -p "$run"
exe="${BUILD:-build}/experiments/probes/cluster_split"
one() { "$exe" "$@" --iters 30 --warmup 5 --csv "$run/cluster_split.csv" | tail -1; }
for round in 1 2 3; do
  # K 768 (12 chunks), 11 tiles: at most 132 CTAs.
  for split in 1 2 3 4 6 12; do
    one --tiles 11 --split "$split" --chunks $((12 / split)) --reduce none
    if [ "$split" -gt 1 ]; then
      one --tiles 11 --split "$split" --chunks $((12 / split)) --reduce global
      one --tiles 11 --split "$split" --chunks $((12 / split)) --reduce cluster || true  # a cluster of 12 may not fit
    fi
  done
  # K 3072 (48 chunks), 8 tiles.
  for split in 1 4 8 16; do
    one --tiles 8 --split "$split" --chunks $((48 / split)) --reduce none
    if [ "$split" -gt 1 ]; then
      one --tiles 8 --split "$split" --chunks $((48 / split)) --reduce global
      one --tiles 8 --split "$split" --chunks $((48 / split)) --reduce cluster || true  # a cluster of 16 may not fit
    fi
  done
  echo "cluster_split.sh: round $round done" >&2
done
