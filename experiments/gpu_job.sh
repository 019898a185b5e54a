#!/usr/bin/env bash
# A batch job for a GPU node with no network (cuDNN frontend headers already in .deps/):
# build, run the test suite, the ceilings and the sweeps named on the command line, and dump
# the ptxas resource reports. Everything is written under $OUT (default ./out) as it goes, so an
# interrupted job keeps what it finished. A failed build or a failed test stops the job before
# any sweep (no row is timed on a stale or wrong executable), and the tests run with
# STUDY_REQUIRE_GPU=1: a GPU suite that would skip fails instead. The run folder keeps the
# test summary (tests.txt).
# Usage: experiments/gpu_job.sh [spec ...]   (default: layernorm_quick)
# STUDY_TESTS=0 skips the test suite, STUDY_ASM=0 the resource reports, STUDY_SWEEPS=0 the
# ceilings and sweeps. STUDY_TARGETS="t1 t2 ..." builds only those ninja targets (and the
# ceilings) instead of everything: e.g. the final sitting's benches and the tests that
# STUDY_TEST_ARGS names, 51 of the build's 183 CUDA compilations; the CUTLASS layer, which the
# encoder needs, stays most of the build's time. STUDY_TARGETS=auto builds what the named specs
# run (python3 -m experiments.sweep --spec S --targets: each version's bench and GPU test, the
# Python module for its anchors), and the tests default to those versions' GPU tests.
# STUDY_PRECOMPILE=1 compiles the specs'
# torch.compile anchors after the tests, one shape at a time, each in a fresh process on the
# quiet machine (experiments/anchors/precompile.py), for the sittings to load from Inductor's
# cache: a compile inside the sitting's kept anchor process, or beside other work, autotunes to
# a slower forward (docs/method.md, Timing). STUDY_SANITIZE=1 adds the sanitizer suite
# (docs/sanitizers.md; its summary into the run folder's sanitizer.txt) and STUDY_MUTANTS=1 the
# mutation suite (tests/mutants.py, in a second build folder with test hooks, build-hooks; its
# report into mutants.md): both after the tests, both stopping the job when they fail.
# STUDY_WHEEL=1 builds the module's wheel (./study wheel) and installs it as a user would, into a
# fresh venv with no nvcc on PATH (tests/wheel_fresh_venv.sh: the README's examples and the
# module's GPU tests against it; its record into the run folder's wheel/).
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
command -v nvidia-smi > /dev/null || { echo "error: no nvidia-smi: experiments/gpu_job.sh runs on a GPU node" >&2; exit 2; }
OUT=${OUT:-out}
mkdir -p "$OUT"
BUILD=build-gpu
RUN_DIR=${STUDY_RUN_DIR:-$OUT/$(date -u +%Y%m%d)_$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9' '_' | tr -s _ | sed 's/_$//')}
mkdir -p "$RUN_DIR"
log() { printf '[device] %s %s\n' "$(date -u +%H:%M:%S)" "$*"; }

log "GPU: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader)"
py=$(command -v python3)
# The run folder's README summarizes what it holds (CSVs, test summaries), however the job ends.
trap '"$py" -m studylib.run_folder "$RUN_DIR" > /dev/null || true' EXIT
# The cuDNN the build links: the one the PyTorch anchors load where there is one, else the newest
# system cuDNN (the choice ./study makes, by the same script).
cudnn=$($py common/cudnn/find_cudnn.py --python "$py" --system "$(dirname "$(dirname "$(command -v nvcc)")")" \
  --system /usr/local/cuda --system /usr)
log "cuDNN: $(echo "$cudnn" | paste -sd ' ')"
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dcudnn=enabled -Dcudnn_root="$(echo "$cudnn" | sed -n 1p)" -Dtest_python="$py" > "$OUT/build.log" 2>&1 ||
    { cat "$OUT/build.log"; exit 1; }
fi
case "${STUDY_PRECOMPILE:-0}" in 0|1) ;; *)
  echo "error: STUDY_PRECOMPILE must be 0 or 1, got '$STUDY_PRECOMPILE'" >&2; exit 2;; esac
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(layernorm_quick)
if [ "${STUDY_TARGETS:-}" = auto ]; then
  # One line per spec from the runner; a bad spec name stops the job here, before any build.
  spec_words() { local s; for s in "${specs[@]}"; do "$py" -m experiments.sweep --spec "$s" "$1" || return 2; done; }
  STUDY_TARGETS=$(spec_words --targets | tr ' ' '\n' | sort -u | tr '\n' ' ') || exit 2
  [ -n "${STUDY_TEST_ARGS:-}" ] || STUDY_TEST_ARGS=$(spec_words --tests | tr ' ' '\n' | sort -u | tr '\n' ' ') || exit 2
  # No version test among them (a spec of anchors only): the job's tests are none, not all.
  [ -n "${STUDY_TEST_ARGS// /}" ] || STUDY_TESTS=0
fi
build_targets=()
[ -n "${STUDY_TARGETS:-}" ] && build_targets=(${STUDY_TARGETS} common/ceilings)
log "building ${build_targets[*]:-everything}"
if ! ninja -C "$BUILD" "${build_targets[@]}" >> "$OUT/build.log" 2>&1; then
  grep -E "FAILED|error" "$OUT/build.log" | head -20
  log "the build failed (build.log): stopping"
  exit 1
fi
grep -A8 "^  Study" "$OUT/build.log" || true

if [ "${STUDY_TESTS:-1}" = 1 ]; then
  log "tests"
  rc=0
  STUDY_REQUIRE_GPU=1 meson test -C "$BUILD" --no-rebuild --print-errorlogs ${STUDY_TEST_ARGS:-} > "$OUT/tests.log" 2>&1 || rc=$?
  grep -E "^ *[0-9]+/[0-9]+ " "$OUT/tests.log" | grep -v " OK " || true
  { grep -E "^ *[0-9]+/[0-9]+ " "$OUT/tests.log"; grep -E "^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):" "$OUT/tests.log"; } \
    > "$RUN_DIR/tests.txt"
  grep -E "^(Ok|Fail|Skipped|Timeout):" "$OUT/tests.log"
  ((rc == 0)) || { log "tests failed (tests.log): stopping before any sweep"; exit 1; }
fi

if [ "${STUDY_SANITIZE:-0}" = 1 ]; then
  log "sanitizer suite"
  rc=0
  STUDY_REQUIRE_GPU=1 meson test -C "$BUILD" --no-rebuild --setup sanitize --suite sanitizer --print-errorlogs \
    > "$OUT/sanitizer.log" 2>&1 || rc=$?
  { grep -E "^ *[0-9]+/[0-9]+ " "$OUT/sanitizer.log"; grep -E "^(Ok|Fail|Skipped|Timeout):" "$OUT/sanitizer.log"; } \
    > "$RUN_DIR/sanitizer.txt"
  grep -E "^ *[0-9]+/[0-9]+ " "$OUT/sanitizer.log" | grep -v " OK " || true
  grep -E "^(Ok|Fail|Skipped|Timeout):" "$OUT/sanitizer.log"
  ((rc == 0)) || { log "the sanitizer suite failed (sanitizer.log): stopping"; exit 1; }
fi

if [ "${STUDY_MUTANTS:-0}" = 1 ]; then
  log "mutation suite (build-hooks)"
  HOOKS=build-hooks
  if [ ! -f "$HOOKS/build.ninja" ]; then
    meson setup "$HOOKS" -Dtest_hooks=true -Dtest_python="$py" -Dcudnn=enabled -Dcudnn_root="$(echo "$cudnn" | sed -n 1p)" \
      > "$OUT/build-hooks.log" 2>&1 || { cat "$OUT/build-hooks.log"; exit 1; }
  fi
  targets=$($py -c 'import sys; sys.path.insert(0, "tests"); import mutants; print(" ".join(sorted({m[1] for m in mutants.MUTANTS})))')
  ninja -C "$HOOKS" $targets >> "$OUT/build-hooks.log" 2>&1 || { log "the test-hook build failed (build-hooks.log)"; exit 1; }
  $py tests/mutants.py --build-dir "$HOOKS" --out "$RUN_DIR" > "$OUT/mutants.out" 2>&1 ||
    { tail -30 "$OUT/mutants.out"; log "a planted bug was not caught, or a control failed (mutants.md): stopping"; exit 1; }
  grep -E "^\*\*" "$RUN_DIR/mutants.md"
fi

if [ "${STUDY_WHEEL:-0}" = 1 ]; then
  log "the wheel, installed into a fresh venv"
  STUDY_PYTHON="$py" ./study wheel "$OUT/dist" > "$OUT/wheel_build.log" 2>&1 ||
    { tail -30 "$OUT/wheel_build.log"; log "the wheel did not build (wheel_build.log): stopping"; exit 1; }
  TORCH_PYTHON="$py" tests/wheel_fresh_venv.sh "$(ls "$OUT"/dist/vitstudy-*.whl | head -1)" "$RUN_DIR/wheel" ||
    { log "the installed wheel failed its checks ($RUN_DIR/wheel): stopping"; exit 1; }
fi

if [ "${STUDY_ASM:-1}" = 1 ]; then
log "asm resource reports"
for t in $(ninja -C "$BUILD" -t targets all 2>/dev/null | grep -o '^asm-[^:]*'); do
  ninja -C "$BUILD" "$t" > /dev/null 2>&1 || log "asm $t failed"
done
(cd "$BUILD" && tar czf "$OUT/asm.tgz" asm 2>/dev/null)
fi

[ "${STUDY_SWEEPS:-1}" = 1 ] || { log "done (no sweeps)"; exit 0; }
if [ "${STUDY_PRECOMPILE:-0}" = 1 ]; then
  log "compiling the specs' torch.compile anchors ahead, one at a time (precompile.log)"
  spec_args=(); for spec in "${specs[@]}"; do spec_args+=(--spec "$spec"); done
  "$py" -m experiments.anchors.precompile "${spec_args[@]}" --gpus 0 --python "$py" \
    --kernels "$RUN_DIR/compile_kernels.txt" > "$OUT/precompile.log" 2>&1 ||
    log "some anchor shapes did not compile ahead: the sitting compiles them itself"
  grep -E "compiled in|FAILED|^done|^error" "$OUT/precompile.log"
fi
log "ceilings"
$py -m experiments.sweep --spec ceilings --out "$RUN_DIR/ceilings.csv" --build-dir "$BUILD" --python "$py"
for spec in "${specs[@]}"; do
  # --run-dir: RUN_DIR/<name>.csv, or RUN_DIR/<name>/<name>.csv for a side experiment (where the
  # analysis looks for it).
  log "sweep $spec -> $RUN_DIR"
  $py -m experiments.sweep --spec "$spec" --run-dir "$RUN_DIR" --build-dir "$BUILD" --python "$py" ${STUDY_SWEEP_ARGS:-}
done
log "done: $RUN_DIR"
