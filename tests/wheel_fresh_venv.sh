#!/usr/bin/env bash
# The wheel as a user installs it on a GPU node: the file `./study wheel` makes, pip-installed into
# a fresh venv and run from outside the checkout with no nvcc on PATH and no CUDA_HOME or
# LD_LIBRARY_PATH: the README's two examples (vitstudy/test_readme.py) and the module's GPU tests
# (vitstudy/test_gpu.py) against the installed wheel, with STUDY_REQUIRE_GPU=1. torch and timm come
# from TORCH_PYTHON's site-packages through a .pth file (a node without network cannot pip install
# them; a user's own venv would). Writes into OUT_DIR: wheel_env.txt (the wheel, where vitstudy and
# each CUDA library it loaded came from), readme.txt, gpu_tests.txt. Exit 0 only when both pass.
#   tests/wheel_fresh_venv.sh WHEEL OUT_DIR   (TORCH_PYTHON: the Python with torch, default python3)
set -euo pipefail
usage="usage: tests/wheel_fresh_venv.sh WHEEL OUT_DIR"
wheel=$(realpath "${1:?$usage}")
out=$(realpath -m "${2:?$usage}")
root=$(cd "$(dirname "$0")/.." && pwd)
torch_python=$(command -v "${TORCH_PYTHON:-python3}") || { echo "no Python with torch: set TORCH_PYTHON" >&2; exit 2; }
[ -f "$wheel" ] || { echo "no wheel at $wheel (./study wheel makes one)" >&2; exit 2; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$torch_python" -m venv "$tmp/venv"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$torch_python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' > "$site/torch_and_timm.pth"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index --no-deps "$wheel"
cp "$root/vitstudy/test_readme.py" "$root/vitstudy/test_gpu.py" "$root/vitstudy/needs_gpu.py" "$root/README.md" "$tmp/"

# A PATH of the usual folders that hold no nvcc.
path="$tmp/venv/bin"
for d in /usr/local/bin /usr/bin /bin; do
  [ -x "$d/nvcc" ] || path="$path:$d"
done
clean=(env -i HOME="$HOME" PATH="$path" STUDY_REQUIRE_GPU=1)
cd "$tmp"
"${clean[@]}" python - "$wheel" > "$out/wheel_env.txt" <<'EOF'
import os, shutil, sys
import torch, vitstudy
print("wheel:", os.path.basename(sys.argv[1]))
print("vitstudy:", vitstudy.__file__)
print("nvcc on PATH:", shutil.which("nvcc"), "| CUDA_HOME:", os.environ.get("CUDA_HOME"),
      "| LD_LIBRARY_PATH:", os.environ.get("LD_LIBRARY_PATH"))
print("torch", torch.__version__, "CUDA", torch.version.cuda, "| GPUs:", vitstudy.gpu_count())
assert os.path.realpath(vitstudy.__file__).startswith(os.path.realpath(sys.prefix)), "vitstudy not from the venv"
assert shutil.which("nvcc") is None, "nvcc on PATH"
loaded = sorted({line.split()[-1] for line in open("/proc/self/maps") if ".so" in line.split()[-1]})
for lib in ("libcudart", "libcublasLt", "libcudnn.so", "libnvrtc.so", "_engine"):
    print(f"{lib}:", " ".join(p for p in loaded if os.path.basename(p).startswith(lib)) or "not loaded")
EOF
cat "$out/wheel_env.txt"
rc=0
"${clean[@]}" python test_readme.py README.md -v > "$out/readme.txt" 2>&1 || rc=1
tail -n 3 "$out/readme.txt"
"${clean[@]}" python test_gpu.py -v > "$out/gpu_tests.txt" 2>&1 || rc=1
tail -n 3 "$out/gpu_tests.txt"
exit $rc
