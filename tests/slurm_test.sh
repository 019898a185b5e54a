#!/bin/bash
# End-to-end test of a Slurm sweep as the README tells a user to run one: starts a throw-away
# single-node Slurm (slurm-wlm + munge, no systemd, everything under one temp dir), then
#   ./study slurm layernorm_quick 3 --results DIR     (job array of 3 shards, ceilings job, merge)
#   ./study report --run DIR                           (the run's report, inside DIR/report/)
# and checks that every shard and the ceilings job ran, that DIR is a run folder (DIR/layernorm.csv
# with every configuration exactly once, DIR/ceilings.csv), that its report was written, and
# that the committed report/ and results index are unchanged. Without a GPU every row is
# `skipped` (no CUDA device / torch not installed): the pipeline still runs end to end.
#
#   tests/slurm_test.sh BUILD_DIR      (meson passes its build dir; run as root)
# Exit 77 (meson: SKIP) when Slurm or munge is not installed or not root; KEEP=1 keeps the
# temp dir (daemon logs, job logs, CSVs) for a post-mortem.
set -uo pipefail

say() { echo "slurm_test: $*"; }
skip() { echo "slurm_test: SKIP: $*"; exit 77; }
fail() { echo "slurm_test: FAIL: $*" >&2; exit 1; }

build=${1:-}
[[ -n "$build" && -d "$build" ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$build" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=/usr/bin/python3  # Debian's python 3.11 (tomllib); the first python3 on PATH may be bare
shards=3
spec=layernorm_quick

for cmd in slurmctld slurmd munged mungekey sbatch sinfo scontrol; do
  command -v "$cmd" >/dev/null || skip "$cmd not installed (apt-get install -y --no-install-recommends slurm-wlm munge)"
done
((EUID == 0)) || skip "needs root (slurmd launches the jobs)"
[[ -x "$py" ]] || skip "$py not found"
"$py" -c 'import pandas, matplotlib' 2>/dev/null || skip "$py has no pandas/matplotlib (./study report needs them)"

tmp=$(mktemp -d /tmp/slurm_test.XXXXXX)
chmod 755 "$tmp"  # munged insists that the socket's directory be reachable by everyone
cleanup() {
  local rc=$?
  if [[ -f "$tmp/slurm.conf" ]]; then
    SLURM_CONF="$tmp/slurm.conf" scontrol shutdown >/dev/null 2>&1
    for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid"; do
      local pid; pid=$(cat "$pidfile" 2>/dev/null) || continue
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null
    done
  fi
  if [[ -S "$tmp/munge/munge.socket" ]]; then
    munged --stop --socket="$tmp/munge/munge.socket" >/dev/null 2>&1 ||
      kill "$(cat "$tmp/munge/munged.pid" 2>/dev/null)" 2>/dev/null
  fi
  if [[ "${KEEP:-0}" == 1 || $rc -ne 0 ]]; then
    say "kept $tmp (daemon logs: *.log, job logs: results/logs/)"
  else
    rm -rf "$tmp"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- munge: own key, socket, pid and log, so a system munged (if any) is left alone --------
say "starting munged in $tmp/munge"
mkdir -p "$tmp/munge" && chmod 755 "$tmp/munge"
mungekey -c -k "$tmp/munge/munge.key" || fail "mungekey could not create a key"
chmod 600 "$tmp/munge/munge.key"
munged --socket="$tmp/munge/munge.socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" \
  --seed-file="$tmp/munge/munged.seed" || fail "munged did not start: $(tail -3 "$tmp/munge/munged.log" 2>/dev/null)"

# ---- slurm.conf: one node, no cgroups (containers often have none: jobs would fail and the node
# drain), no accounting; free ports so a running Slurm is not disturbed ----------------------
host=$(hostname -s)
read -r ctld_port slurmd_port < <("$py" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" <<EOF
ClusterName=studytest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"

say "starting slurmctld (ports $ctld_port/$slurmd_port) and slurmd"
slurmctld -c || fail "slurmctld did not start: $(tail -3 "$tmp/slurmctld.log")"
slurmd || fail "slurmd did not start: $(tail -3 "$tmp/slurmd.log")"
state=""
for _ in $(seq 100); do
  state=$(sinfo -h -o %T 2>/dev/null | head -1)
  [[ "$state" == idle ]] && break
  sleep 0.2
done
[[ "$state" == idle ]] || fail "node not idle after 20 s (state '$state'): $(tail -3 "$tmp/slurmd.log")"
say "node $host idle"

# ---- the sweep, as README.md tells it ---------------------------------------------------------
results="$tmp/results"
# --skip-unbuilt: a build without cuDNN has no layernorm_cudnn; the expected count below
# leaves out the same versions.
expected=$(PYTHONPATH="$repo" "$py" -m experiments.sweep --spec "$spec" --build-dir "$build" \
  --skip-unbuilt --dry-run 2>/dev/null | wc -l)
((expected > 0)) || fail "dry run of $spec lists no configuration"
# The committed report and results index, to check that nothing below touches them.
fingerprint() { (cd "$repo" && find report experiments/results/README.md -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(fingerprint)
say "./study slurm $spec $shards --results DIR ($expected configurations; a ceilings job; merge; --wait)"
STUDY_BUILD_DIR=$build STUDY_PYTHON=$py STUDY_GRES=none "$repo/study" slurm "$spec" "$shards" \
  --results "$results" --run-id slurm-test --wait -- --skip-unbuilt --timeout 120
rc=$?
# sbatch --wait's status alone is not trusted (a drained node can still return 0): check files.
for ((i = 0; i < shards; i++)); do
  f="$results/shards/shard_$i.csv"
  [[ -s "$f" ]] || fail "shard $i did not run: $f missing or empty (log: $(tail -3 "$results/logs/shard_$i.out" 2>/dev/null))"
  grep -q '^done:' "$results/logs/shard_$i.out" || fail "shard $i did not finish: $(tail -3 "$results/logs/shard_$i.out")"
  grep -q 'gpu_arch' "$results/logs/shard_$i.out" || fail "shard $i's log does not state the build's GPU arch"
  say "shard $i: $(($(wc -l < "$f") - 1)) rows"
done
[[ -s "$results/shards/ceilings.csv" ]] && grep -q '^done:' "$results/logs/ceilings.out" ||
  fail "the ceilings job did not run: $(tail -3 "$results/logs/ceilings.out" 2>/dev/null)"
((rc == 0)) || fail "./study slurm --wait returned $rc (merge log above)"
[[ -s "$results/layernorm.csv" ]] || fail "no layernorm.csv in the run folder: $(ls "$results")"
[[ -s "$results/ceilings.csv" ]] || fail "no ceilings.csv in the run folder: $(ls "$results")"
csvs=$(cd "$results" && ls *.csv | tr '\n' ' ')
[[ "$csvs" == "ceilings.csv layernorm.csv " ]] || fail "the run folder holds other CSVs than the run's: $csvs"

PYTHONPATH="$repo" "$py" - "$build" "$spec" "$results" "$expected" <<'EOF' || fail "run folder check"
import collections, sys
from pathlib import Path
from studylib import row_file, specs
build, spec, results, expected = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
for name, spec_name, skip in (("layernorm.csv", spec, True), ("ceilings.csv", "ceilings", False)):
    rows, problems = row_file.read_csv(results / name)
    assert not problems, problems
    cfgs, _ = specs.select_configs(specs.load_spec(specs.find_spec(spec_name)), build, sys.executable, skip_unbuilt=skip, dry_run=True)
    want = collections.Counter(k for c in cfgs for k in c.keys())
    got = collections.Counter(specs.row_key(r) for r in rows)
    dups = [k for k, n in got.items() if n > 1]
    lost = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    assert not dups, f"{name}: duplicated rows: {dups[:3]}"
    assert not lost, f"{name}: configurations without a row: {lost[:3]}"
    assert not extra, f"{name}: rows of no configuration: {extra[:3]}"
    if name == "layernorm.csv":
        assert len(rows) == expected == sum(want.values()), (len(rows), expected)
    assert {r["run_id"] for r in rows} == {"slurm-test"}, {r["run_id"] for r in rows}
    status = collections.Counter((r["status"], r["note"].split(";")[0]) for r in rows)
    print(f"slurm_test: {name}: {len(rows)} rows, each configuration once; " + ", ".join(f"{s} '{n}': {c}" for (s, n), c in sorted(status.items())))
EOF

# ---- the run's report, as README.md tells it ---------------------------------------------------
say "./study report --run DIR"
"$repo/study" report --run "$results" || fail "./study report --run DIR failed"
[[ -s "$results/report/README.md" ]] || fail "no DIR/report/README.md"
grep -q "slurm-test" "$results/report/README.md" || fail "the run's report does not name the run (slurm-test)"
grep -q "LayerNorm\|layernorm" "$results/report/README.md" || fail "the run's report has no LayerNorm section"
after=$(fingerprint)
[[ "$before" == "$after" ]] || fail "the committed report/ or experiments/results/README.md changed: $(diff <(echo "$before") <(echo "$after") | head -5)"
say "report written to DIR/report/; the committed report/ is unchanged"
say "PASS"
