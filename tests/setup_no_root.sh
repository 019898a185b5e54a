#!/bin/bash
# `./study setup` and `./study configure` on a machine where the user is not root, has no
# sudo, and the system has no meson, ninja or doctest (a cluster node). Simulated honestly:
# a copy of the checkout run by an unprivileged user (setpriv, uid 65534), in a private mount
# namespace where the system's doctest headers and CUDA's bin/ are hidden, with a PATH that
# holds the system's commands except meson, ninja and sudo (and, for the non-Debian case,
# apt-get). Checks:
#   1. no nvcc: exit 2, and the message says to `module load cuda`;
#   2. no apt-get: meson and ninja land in .venv/ from PyPI, then doctest cannot be had:
#      exit 2, and the message names STUDY_DOCTEST_INCLUDE / -Ddoctest_include;
#   3. no apt-get, STUDY_DOCTEST_INCLUDE=DIR: setup succeeds;
#   4. Debian without root: doctest-dev is fetched with `apt-get download` and unpacked into
#      .deps/doctest/; `./study configure` then sets up a build that uses it, with -Dgpu_arch
#      taken from the node's GPU (a stand-in nvidia-smi reporting compute capability 9.0 ->
#      90a), and says so.
# Needs root (to build the simulated user's world), unshare, setpriv and PyPI; exit 77 (skip)
# otherwise.
#   tests/setup_no_root.sh          KEEP=1 keeps the temp dir
set -uo pipefail

say() { echo "setup_no_root: $*"; }
skip() { echo "setup_no_root: SKIP: $*"; exit 77; }
fail() { echo "setup_no_root: FAIL: $*" >&2; exit 1; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
((EUID == 0)) || skip "needs root to set up the simulated unprivileged user"
for c in unshare setpriv git apt-get dpkg; do command -v $c >/dev/null || skip "$c not found"; done
unshare -m true 2>/dev/null || skip "no mount namespaces here (unshare -m)"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$nvcc" ]] || skip "no CUDA toolkit here"
cuda_bin=$(dirname "$(readlink -f "$nvcc")")
# Every toolkit bin/ that ./study could find an nvcc in (PATH, $CUDA_HOME, /usr/local/cuda),
# by its real directory: all of them are hidden for case 1. A system bin/ is never hidden
# (the simulated PATH leaves nvcc out of those instead).
nvcc_dirs=()
for n in $(type -ap nvcc) ${CUDA_HOME:+$CUDA_HOME/bin/nvcc} ${CUDA_PATH:+$CUDA_PATH/bin/nvcc} /usr/local/cuda/bin/nvcc; do
  [[ -x "$n" ]] || continue
  for d in "$(dirname "$(readlink -f "$n")")" "$(readlink -f "$(dirname "$n")")"; do
    case "$d" in /bin | /sbin | /usr/bin | /usr/sbin | /usr/local/bin | /usr/local/sbin) continue ;; esac
    [[ " ${nvcc_dirs[*]} " == *" $d "* ]] || nvcc_dirs+=("$d")
  done
done
[[ -f /usr/include/doctest/doctest.h ]] || skip "no system doctest to hide (the test copies it for case 3)"

tmp=$(mktemp -d /tmp/setup_no_root.XXXXXX)
chmod 755 "$tmp"
cleanup() {
  local rc=$?
  if [[ "${KEEP:-0}" == 1 || $rc -ne 0 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
  exit $rc
}
trap cleanup EXIT

# The checkout as a user has it: tracked and unignored files; the cuDNN frontend headers, the
# torchao wheel and the digits data are copied when present so that the test does not download
# them (they are not what it tests); a tracked file deleted in the working tree is left out.
mkdir -p "$tmp/repo" "$tmp/home" "$tmp/doctest_dir/doctest" "$tmp/empty"
git -C "$repo" ls-files -co --exclude-standard -z | (cd "$repo" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
  tar -C "$tmp/repo" -xf - || fail "could not copy the checkout"
for d in cudnn_frontend wheels digits; do
  [[ -d "$repo/.deps/$d" ]] && mkdir -p "$tmp/repo/.deps" && cp -rL "$repo/.deps/$d" "$tmp/repo/.deps/"
done
cp /usr/include/doctest/*.h "$tmp/doctest_dir/doctest/"
# A stand-in nvidia-smi: one H200 (compute capability 9.0).
mkdir -p "$tmp/gpu_bin"
cat > "$tmp/gpu_bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
  *name,compute_cap*) echo "NVIDIA H200, 9.0" ;;
  *compute_cap*) echo "9.0" ;;
  *) echo "GPU 0: NVIDIA H200 (stand-in)" ;;
esac
EOF
chmod 755 "$tmp/gpu_bin/nvidia-smi"
chown -R 65534:65534 "$tmp/repo" "$tmp/home"

# PATH of the simulated node: every system command except the ones a cluster lacks.
make_path() {  # make_path DIR [extra names to leave out]
  local dir=$1 f name; shift
  mkdir -p "$dir"
  for f in /usr/local/bin/* /usr/bin/* /bin/* /usr/sbin/* /sbin/*; do
    name=${f##*/}
    # nvcc comes from CUDA's own bin/ (a link elsewhere would move the toolkit's root).
    case " meson ninja sudo nvidia-smi nvcc $* " in *" $name "*) continue ;; esac
    [[ -x "$f" && ! -e "$dir/$name" ]] && ln -s "$f" "$dir/$name"
  done
}
make_path "$tmp/bin_debian"
make_path "$tmp/bin_other" apt-get apt dpkg
# Hide the system's doctest (headers and CMake config) and CUDA's bin/ in a private mount
# namespace, then run as uid 65534 (nobody: no root, no sudo, no write access to the system).
as_user() {  # as_user PATH_DIRS CMD...
  local path=$1; shift
  HIDE=${HIDE:-} unshare -m --propagation private bash -c '
    tmp=$1; shift
    for d in /usr/include/doctest /usr/lib/cmake/doctest /usr/lib/x86_64-linux-gnu/cmake/doctest /usr/share/doctest $HIDE; do
      [ -d "$d" ] && mount --bind "$tmp/empty" "$d"
    done
    exec "$@"' _ "$tmp" \
    setpriv --reuid=65534 --regid=65534 --clear-groups \
    env -i HOME="$tmp/home" PATH="$path" LANG=C.UTF-8 ${EXTRA_ENV:-} "$@"
}
run() {  # run NAME PATH CMD... : output in $tmp/NAME.log, exit code in $rc
  local name=$1 path=$2; shift 2
  (cd "$tmp/repo" && as_user "$path" "$@") > "$tmp/$name.log" 2>&1
  rc=$?
  say "$name: exit $rc"
}

# 1. No nvcc anywhere (CUDA's bin/ hidden too): a clear error with the cluster hint.
HIDE="${nvcc_dirs[*]}" run no_nvcc "$tmp/bin_debian" ./study setup
if ((rc != 2)); then
  seen=$(HIDE="${nvcc_dirs[*]}" as_user "$tmp/bin_debian" bash -c 'command -v nvcc; ls -l /usr/local/cuda/bin/nvcc' 2>&1)
  fail "no nvcc: exit $rc, expected 2 (hidden: ${nvcc_dirs[*]}; the simulated user still sees: $seen): $(tail -3 "$tmp/no_nvcc.log")"
fi
grep -q "module load cuda" "$tmp/no_nvcc.log" || fail "no nvcc: no 'module load cuda' hint: $(cat "$tmp/no_nvcc.log")"

# 2. Not Debian (no apt-get): meson and ninja from PyPI into .venv/, then doctest is missing.
run other "$tmp/bin_other:$cuda_bin" ./study setup
grep -q "pip could not install" "$tmp/other.log" && skip "PyPI not reachable: $(tail -2 "$tmp/other.log")"
((rc == 2)) || fail "no apt-get: exit $rc, expected 2: $(tail -5 "$tmp/other.log")"
grep -q "no system install here" "$tmp/other.log" || fail "no apt-get: setup did not take the no-root path: $(cat "$tmp/other.log")"
[[ -x "$tmp/repo/.venv/bin/meson" && -x "$tmp/repo/.venv/bin/ninja" ]] ||
  fail "no apt-get: meson/ninja not in .venv/bin: $(cat "$tmp/other.log")"
grep -q "STUDY_DOCTEST_INCLUDE" "$tmp/other.log" && grep -q -- "-Ddoctest_include" "$tmp/other.log" ||
  fail "no apt-get: the doctest message names neither STUDY_DOCTEST_INCLUDE nor -Ddoctest_include: $(cat "$tmp/other.log")"
[[ ! -e "$tmp/repo/.deps/doctest" ]] || fail "no apt-get: .deps/doctest/ appeared anyway"

# 3. Not Debian, doctest given by the user.
EXTRA_ENV="STUDY_DOCTEST_INCLUDE=$tmp/doctest_dir" run other_given "$tmp/bin_other:$cuda_bin" ./study setup
((rc == 0)) || fail "STUDY_DOCTEST_INCLUDE: exit $rc: $(tail -5 "$tmp/other_given.log")"

# 4. Debian without root: apt-get download + dpkg -x; then the build folder, for the node's GPU.
run debian "$tmp/bin_debian:$cuda_bin" ./study setup
((rc == 0)) || fail "Debian without root: exit $rc: $(tail -5 "$tmp/debian.log")"
[[ -f "$tmp/repo/.deps/doctest/usr/include/doctest/doctest.h" ]] ||
  fail "Debian without root: no .deps/doctest/usr/include/doctest/doctest.h: $(cat "$tmp/debian.log")"
grep -q "apt-get download doctest-dev" "$tmp/debian.log" || fail "Debian without root: doctest not fetched with apt-get download"
EXTRA_ENV="STUDY_BUILD_DIR=b" run configure "$tmp/gpu_bin:$tmp/bin_debian:$cuda_bin" ./study configure
((rc == 0)) || fail "./study configure without root: exit $rc: $(tail -20 "$tmp/configure.log")"
grep -q "GPU arch: 90a (this node's GPU, nvidia-smi: NVIDIA H200, 9.0)" "$tmp/configure.log" ||
  fail "configure did not state the GPU arch taken from nvidia-smi: $(cat "$tmp/configure.log")"
grep -q "doctest *: .*\.deps/doctest/usr/include" "$tmp/configure.log" ||
  fail "the build does not use .deps/doctest: $(cat "$tmp/configure.log")"
grep -q '"name": "gpu_arch", "value": \["90a"\]' "$tmp/repo/b/meson-info/intro-buildoptions.json" ||
  /usr/bin/python3 -c 'import json, sys
o = {x["name"]: x["value"] for x in json.load(open(sys.argv[1]))}
sys.exit(o["gpu_arch"] != ["90a"])' "$tmp/repo/b/meson-info/intro-buildoptions.json" ||
  fail "the build is not configured for gpu_arch 90a"
# Nothing was written outside the copy and its home: the user could not have.
say "PASS"
