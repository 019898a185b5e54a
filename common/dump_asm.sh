#!/usr/bin/env bash
# Dumps the PTX, the SASS and the ptxas resource report (registers, shared memory, spills)
# of one kernel source, compiled with the study's flags. Used by the asm-<family>-<version>
# build targets: dump_asm.sh NVCC SOURCE OUTDIR [nvcc flags...]
set -euo pipefail
nvcc=$1 src=$2 out=$3
shift 3
mkdir -p "$out"
"$nvcc" "$@" -ptx -o "$out/kernel.ptx" "$src"
"$nvcc" "$@" -cubin -Xptxas -v -o "$out/kernel.cubin" "$src" 2> "$out/resources.txt"
cuobjdump_bin=$(dirname "$nvcc")/cuobjdump
command -v "$cuobjdump_bin" >/dev/null || cuobjdump_bin=$(command -v cuobjdump || true)
if [ -n "$cuobjdump_bin" ]; then
  "$cuobjdump_bin" -sass "$out/kernel.cubin" > "$out/kernel.sass"
else
  echo "cuobjdump not found (part of the CUDA toolkit's cuda-cuobjdump package): no SASS dump" | tee "$out/kernel.sass" >&2
fi
echo "asm of $src -> $out"
