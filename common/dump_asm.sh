#!/usr/bin/env bash
# Dumps the PTX, the SASS and the ptxas resource report (registers, shared memory, spills)
# of one kernel source, compiled with the study's flags. Used by the asm-<family>-<version>
# build targets: dump_asm.sh NVCC SOURCE OUTDIR [nvcc flags...]
# The SASS needs cuobjdump (beside nvcc, or on PATH); without it no kernel.sass is written
# (a stale one is removed) and stderr says so, while the PTX and the resource report still are.
set -euo pipefail
nvcc=$1 src=$2 out=$3
shift 3
mkdir -p "$out"
"$nvcc" "$@" -ptx -o "$out/kernel.ptx" "$src"
"$nvcc" "$@" -cubin -Xptxas -v -o "$out/kernel.cubin" "$src" 2> "$out/resources.txt"
cuobjdump_bin=$(dirname "$nvcc")/cuobjdump
[ -x "$cuobjdump_bin" ] || cuobjdump_bin=$(command -v cuobjdump || true)
rm -f "$out/kernel.sass"
if [ -n "$cuobjdump_bin" ]; then
  "$cuobjdump_bin" -sass "$out/kernel.cubin" > "$out/kernel.sass"
else
  echo "cuobjdump not found beside $nvcc or on PATH (the CUDA toolkit's cuda-cuobjdump package): no SASS written" >&2
fi
echo "asm of $src -> $out"
