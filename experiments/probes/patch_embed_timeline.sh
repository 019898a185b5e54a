#!/usr/bin/env bash
# The patch-embedding streams timeline: per-launch start and end times of v3_streams at vit_ti,
# 64 px, batch 1 (3,072 launches) on 1 stream and on 8, appended to RUN/patch_embed_timeline.csv,
# the side table the patch-embedding section draws as a Gantt chart beside the run's sweeps.
#
#   experiments/probes/patch_embed_timeline.sh RUN [build-dir]      (default build dir: build)
#
# The benches' own timed rows are not kept (a CSV of patch-embedding rows in RUN would join its
# sweeps). The table is written afresh. Exit 2 on bad arguments or an unbuilt bench, 1 when a
# bench fails.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
usage="usage: experiments/probes/patch_embed_timeline.sh RUN [build-dir]"
run=${1:-}; build=${2:-build}
[ -n "$run" ] || { echo "error: no run folder; $usage" >&2; exit 2; }
bench=$build/stages/patch_embed/patch_embed_v3_streams
[ -x "$bench" ] || { echo "error: no $bench: build it first (ninja -C $build stages/patch_embed/patch_embed_v3_streams)" >&2; exit 2; }
mkdir -p "$run" 2> /dev/null && [ -w "$run" ] || { echo "error: cannot write to $run" >&2; exit 2; }
table=$run/patch_embed_timeline.csv
rm -f "$table"
for streams in 1 8; do
  echo "[patch_embed_timeline] $(date -u +%T) v3_streams, vit_ti, 64 px, batch 1, $streams stream(s)"
  "$bench" --model vit_ti --image-size 64 --batch 1 --streams "$streams" --timeline "$table" > /dev/null ||
    { echo "error: the bench failed at $streams stream(s)" >&2; exit 1; }
done
echo "[patch_embed_timeline] wrote $table ($(($(wc -l < "$table") - 1)) launches)"
