#!/usr/bin/env bash
# common/dump_asm.sh with a stand-in nvcc (no GPU, no toolkit needed): without cuobjdump it
# must write the PTX and the resource report, no kernel.sass, and say so on stderr; with one
# beside nvcc it must write the SASS.
set -euo pipefail
dump=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/empty"
cat > "$tmp/bin/nvcc" <<'NVCC'
#!/bin/sh
# Writes the file named by -o, and a resource line on stderr for -cubin.
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift;; -cubin) echo "ptxas info : Used 32 registers" >&2;; esac; shift; done
echo fake > "$out"
NVCC
chmod +x "$tmp/bin/nvcc"
echo "__global__ void k() {}" > "$tmp/k.cu"
fail() { echo "FAIL: $*"; exit 1; }

# No cuobjdump: PATH holds only the basic tools (not the CUDA toolkit's bin/).
out=$tmp/out1
mkdir -p "$out" && echo stale > "$out/kernel.sass"
PATH=$tmp/empty:/usr/bin:/bin
command -v cuobjdump >/dev/null && { echo "cuobjdump on /usr/bin: cannot test its absence"; exit 77; }
"$dump" "$tmp/bin/nvcc" "$tmp/k.cu" "$out" 2> "$tmp/err1" || fail "dump_asm.sh exited $? without cuobjdump"
[ -f "$out/kernel.ptx" ] || fail "no kernel.ptx"
grep -q "Used 32 registers" "$out/resources.txt" || fail "no resource report"
[ ! -e "$out/kernel.sass" ] || fail "kernel.sass written without cuobjdump: $(cat "$out/kernel.sass")"
grep -q "cuobjdump not found" "$tmp/err1" || fail "stderr does not say cuobjdump is missing: $(cat "$tmp/err1")"

# cuobjdump beside nvcc: the SASS is written.
printf '#!/bin/sh\necho "SASS of $2"\n' > "$tmp/bin/cuobjdump"
chmod +x "$tmp/bin/cuobjdump"
out=$tmp/out2
"$dump" "$tmp/bin/nvcc" "$tmp/k.cu" "$out" 2> "$tmp/err2" || fail "dump_asm.sh exited $?"
grep -q "SASS of" "$out/kernel.sass" || fail "no SASS with cuobjdump present"
echo "dump_asm.sh: PTX + resources without cuobjdump (no kernel.sass, said so), SASS with it"
