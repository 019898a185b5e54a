#!/bin/bash
# Submits a sweep as a Slurm job array (one shard per task), one job measuring the GPU's
# ceilings, and a merge job that runs once they have all ended and lays the results out as a
# run folder (RESULTS/<spec name>.csv + RESULTS/ceilings.csv, for ./study report --run).
# Prints the job ids; with --wait, returns when the merge is done, with its exit status.
# See sbatch/README.md.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: sbatch/submit.sh --spec SPEC --shards N --results DIR [options] [-- RUNNER_ARGS...]

  --spec SPEC          spec file or name in experiments/specs/ (e.g. layernorm)
  --shards N           array tasks; task i runs configurations i, i+N, i+2N, ...
  --results DIR        the run folder (on a filesystem the nodes share): shards/, logs/, and
                       after the merge <spec name>.csv and ceilings.csv
  --build-dir DIR      meson build dir with the benches (default: <repo>/build)
  --gres GRES          per task (default: $STUDY_GRES or gpu:1); 'none' for a cluster without GPUs
  --partition P, --account A, --time T, --max-parallel M (array throttle %M)
  --exclusive          whole nodes for the array and ceilings jobs (for timings: no neighbour
                       shares the node's GPUs, CPUs, PCIe or power budget)
  --no-ceilings        no ceilings job (a run folder without ceilings shows no "% of peak")
  --sbatch-arg ARG     any further sbatch option, for both jobs (repeatable)
  --python PY          python >= 3.11 on the nodes (default: $STUDY_PYTHON, /usr/bin/python3)
  --run-id ID          provenance run id for all shards (default: UTC time + submit host)
  --wait               block until the merge job has finished; exit with its status
  -- RUNNER_ARGS       passed to the sweep runner (python3 -m experiments.sweep) (e.g. --skip-unbuilt --timeout 120)
USAGE
}

die() { echo "submit.sh: error: $*" >&2; exit 2; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
spec="" shards="" results="" build_dir="$repo/build" gres=${STUDY_GRES:-gpu:1}
ceilings_job="" partition="" account="" time_limit="" max_parallel="" run_id="" wait=0 exclusive=0 ceilings=1
python=${STUDY_PYTHON:-}
[[ -z "$python" && -x /usr/bin/python3 ]] && python=/usr/bin/python3
python=${python:-python3}
sbatch_args=() runner_args=()
while (($#)); do
  case "$1" in
    --spec) spec=${2:?}; shift 2 ;;
    --shards) shards=${2:?}; shift 2 ;;
    --results) results=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    --gres) gres=${2:?}; shift 2 ;;
    --partition) partition=${2:?}; shift 2 ;;
    --account) account=${2:?}; shift 2 ;;
    --time) time_limit=${2:?}; shift 2 ;;
    --max-parallel) max_parallel=${2:?}; shift 2 ;;
    --sbatch-arg) sbatch_args+=("${2:?}"); shift 2 ;;
    --python) python=${2:?}; shift 2 ;;
    --run-id) run_id=${2:?}; shift 2 ;;
    --wait) wait=1; shift ;;
    --exclusive) exclusive=1; shift ;;
    --no-ceilings) ceilings=0; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; runner_args=("$@"); break ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
done
[[ -n "$spec" && -n "$results" ]] || { usage >&2; die "--spec and --results are required"; }
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "--shards needs a positive integer, got '$shards'"
[[ -z "$max_parallel" || "$max_parallel" =~ ^[1-9][0-9]*$ ]] || die "--max-parallel needs a positive integer"
command -v sbatch >/dev/null || die "sbatch not found: is this a Slurm login node?"

mkdir -p "$results/logs" "$results/shards" || die "cannot create results dir '$results'"
results=$(cd "$results" && pwd)
build_dir=$(cd "$build_dir" 2>/dev/null && pwd) || die "build dir not found: run meson setup + ninja first"
# Resolve the spec now (the nodes get an absolute path) and fail here, not in N tasks, on a
# bad spec or a missing binary.
case "$spec" in
  */*|*.toml) spec_path=$(cd "$(dirname "$spec")" && pwd)/$(basename "$spec") ;;
  *) spec_path="$repo/experiments/specs/$spec.toml" ;;
esac
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m experiments.sweep --spec "$spec_path" --build-dir "$build_dir" \
  --check-only ${runner_args[@]+"${runner_args[@]}"} >/dev/null || die "the sweep does not validate (see above)"
[[ "$(basename "$spec_path")" == ceilings.toml ]] && ceilings=0  # the sweep is the ceilings
if ((ceilings)); then
  PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m experiments.sweep --spec ceilings --build-dir "$build_dir" --check-only \
    >/dev/null || die "the ceilings spec does not validate (see above; --no-ceilings to go without)"
fi

skip_unbuilt=0
for a in ${runner_args[@]+"${runner_args[@]}"}; do [[ "$a" == --skip-unbuilt ]] && skip_unbuilt=1; done
run_id=${run_id:-${STUDY_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-$(hostname -s)}}
commit=${STUDY_COMMIT:-$(git -C "$repo" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)}

env_file="$results/sweep.env"
{
  echo "# written by sbatch/submit.sh $(date -u +%FT%TZ); read by the array and merge jobs"
  printf 'STUDY_REPO=%q\nSPEC=%q\nBUILD_DIR=%q\nRESULTS=%q\nNUM_SHARDS=%q\nPYTHON=%q\n' \
    "$repo" "$spec_path" "$build_dir" "$results" "$shards" "$python"
  printf 'STUDY_RUN_ID=%q\nSTUDY_COMMIT=%q\nSKIP_UNBUILT=%q\nCEILINGS=%q\n' "$run_id" "$commit" "$skip_unbuilt" "$ceilings"
  printf 'RUNNER_ARGS=('; printf '%q ' ${runner_args[@]+"${runner_args[@]}"}; printf ')\n'
} > "$env_file"

common=(--parsable --chdir="$repo")
[[ -n "$partition" ]] && common+=(--partition="$partition")
[[ -n "$account" ]] && common+=(--account="$account")
[[ -n "$time_limit" ]] && common+=(--time="$time_limit")
common+=(${sbatch_args[@]+"${sbatch_args[@]}"})
measure=()  # the jobs that time something: a GPU each, the node to themselves with --exclusive
[[ "$gres" != none ]] && measure+=(--gres="$gres")
((exclusive)) && measure+=(--exclusive)
array=(--array="0-$((shards - 1))${max_parallel:+%$max_parallel}" --output="$results/logs/shard_%a.out")

array_job=$(sbatch "${common[@]}" ${measure[@]+"${measure[@]}"} "${array[@]}" "$repo/sbatch/sweep_array.sbatch" "$env_file")
array_job=${array_job%%;*}
echo "array_job=$array_job  ($shards shards of $(basename "$spec_path"), run $run_id, logs $results/logs/)"
after="afterany:$array_job"
if ((ceilings)); then
  ceilings_job=$(sbatch "${common[@]}" ${measure[@]+"${measure[@]}"} --output="$results/logs/ceilings.out" \
    "$repo/sbatch/ceilings.sbatch" "$env_file")
  ceilings_job=${ceilings_job%%;*}
  echo "ceilings_job=$ceilings_job  (copy bandwidth and GEMM rate of the GPU, into the same run)"
  after+=":$ceilings_job"
fi

# afterany, not afterok: the merge must run (and report the missing shard) even when a task
# failed; with afterok it would stay pending forever and --wait would never return.
merge=(--dependency="$after" --kill-on-invalid-dep=yes --output="$results/logs/merge.out")
next="run folder $results (./study report --run $results writes its report to $results/report/)"
if ((wait)); then
  echo "merge: waiting for the array, the ceilings and the merge job..."
  rc=0
  merge_job=$(sbatch "${common[@]}" "${merge[@]}" --wait "$repo/sbatch/merge.sbatch" "$env_file") || rc=$?
  merge_job=${merge_job%%;*}
  echo "merge_job=$merge_job"
  cat "$results/logs/merge.out" 2>/dev/null || true
  echo "$next"
  exit $rc
fi
merge_job=$(sbatch "${common[@]}" "${merge[@]}" "$repo/sbatch/merge.sbatch" "$env_file")
merge_job=${merge_job%%;*}
echo "merge_job=$merge_job"
echo "$next, complete when job $merge_job ends (squeue -j $array_job${ceilings_job:+,$ceilings_job},$merge_job)"
