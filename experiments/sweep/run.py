"""Sweep runner: expands a spec (experiments/specs/*.toml) into configurations, runs each as a
subprocess (a stage bench or a PyTorch anchor) and appends its rows to one CSV.

Crash safety: every configuration writes into a private temporary CSV; its rows are appended
to the output only once the subprocess has ended, one whole line at a time, flushed and
fsynced. On start the output is read back (a truncated last line is cut off) and every
configuration whose rows are already there is skipped, so a killed sweep resumes without
losing or duplicating rows.

  python3 -m experiments.sweep --spec layernorm_quick --out results/ln.csv
  python3 -m experiments.sweep --spec layernorm --dry-run
  python3 -m experiments.sweep --spec layernorm --shard 1 --num-shards 4 --out s1.csv

See experiments/README.md for the spec format.
"""
import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from experiments.sweep.process import AnchorWorker, Terminated, _on_signal, run_config, runner_row, with_extra_note
from studylib import run_folder
from studylib.paths import REPO, with_checkout_on_path
from studylib.progress import hms
from studylib.row_file import SITTING_GAP, Output, parse_utc, read_csv
from studylib.schema import UTC_FORMAT, is_dirty
from studylib.specs import (EXIT_FAILED_ROWS, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, SpecError, UsageError,
                            NO_DEVICE, STATUSES, build_targets, estimate_device_bytes, extra_text, find_spec, load_spec,
                            output_name, row_key, select_configs)


@dataclass
class Sweep:
    """What one sweep runs and where its rows go, as main() resolved it from the command line
    and the spec."""
    args: argparse.Namespace
    spec: dict
    todo: list                # configurations left to run, in order
    commands: dict            # configuration index -> its command line
    env: dict                 # the subprocesses' environment (run id, commit, device)
    prov: dict                # run_id, commit, host of the runner's own rows
    timeout_s: float
    budget: int               # device bytes a configuration may need (0: no budget)
    out: Output
    counts: dict = field(default_factory=lambda: {s: 0 for s in STATUSES})

    @property
    def commit(self):
        return self.prov["commit"]


def git_commit():
    try:
        r = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=REPO,
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", required=True, help="spec file, or a name in experiments/specs/")
    p.add_argument("--out", help="output CSV (appended to; resumed when it has rows)")
    p.add_argument("--run-dir", help="run folder: the output is RUN_DIR/<spec name>.csv, or "
                                     "RUN_DIR/<spec name>/<spec name>.csv for a side experiment "
                                     "(instead of --out)")
    p.add_argument("--build-dir", default=str(REPO / "build"), help="meson build dir (default: build)")
    p.add_argument("--shard", type=int, default=0, help="run configurations i with i %% n == shard")
    p.add_argument("--num-shards", type=int, default=1)
    p.add_argument("--rounds", type=int,
                   help="interleaved rounds: every configuration N times, all versions of a "
                        "shape, then all again (default: the spec's `rounds`, else 1); rows "
                        "are tagged [round: k] in the note")
    p.add_argument("--dry-run", action="store_true", help="list the configurations, run nothing")
    p.add_argument("--check-only", action="store_true",
                   help="validate the spec and that every binary exists, then exit (submit.sh uses it)")
    p.add_argument("--targets", action="store_true",
                   help="print the ninja targets the spec's rows need (benches, their GPU tests, "
                        "the Python module) on one line, then exit")
    p.add_argument("--tests", action="store_true",
                   help="print the names of the GPU tests of the spec's versions on one line, then exit")
    p.add_argument("--run-id", help="provenance run id (default: $STUDY_RUN_ID, else UTC time + host)")
    p.add_argument("--timeout", type=float, help="seconds per configuration (default: the spec's timeout_s)")
    p.add_argument("--max-minutes", type=float, default=0,
                   help="start no configuration after this many minutes; exit 4, rerun to resume")
    p.add_argument("--device", type=int, default=0, help="CUDA device index passed to every bench")
    p.add_argument("--python", default=os.environ.get("STUDY_PYTHON") or sys.executable,
                   help="python that runs the anchors (default: $STUDY_PYTHON, else this one)")
    p.add_argument("--skip-unbuilt", action="store_true",
                   help="leave out versions whose binary is not built instead of failing")
    p.add_argument("--retry", default="", metavar="STATUSES",
                   help="comma list (failed,skipped): drop this spec's rows with that status and rerun them")
    p.add_argument("--strict", action="store_true", help="exit 1 when a row of this run failed")
    p.add_argument("--verbose", action="store_true", help="show commands and their output")
    a = p.parse_args(argv)
    if a.num_shards < 1 or not 0 <= a.shard < a.num_shards:
        raise UsageError(f"need 0 <= --shard < --num-shards, got {a.shard} and {a.num_shards}")
    if a.out and a.run_dir:
        raise UsageError("give --out or --run-dir, not both")
    if not (a.dry_run or a.check_only or a.targets or a.tests) and not (a.out or a.run_dir):
        raise UsageError("--out or --run-dir is required (unless --dry-run, --check-only, --targets or --tests)")
    if a.rounds is not None and a.rounds < 1:
        raise UsageError(f"--rounds must be >= 1, got {a.rounds}")
    if a.timeout is not None and a.timeout <= 0:
        raise UsageError("--timeout must be positive")
    a.retry = [s for s in a.retry.split(",") if s]
    bad = [s for s in a.retry if s not in STATUSES]
    if bad:
        raise UsageError(f"--retry takes statuses from {STATUSES}, got {bad}")
    return a


def varying(cfg, spec):
    """The axes of the progress line beyond version, batch and image: only those the spec varies."""
    parts = []
    if len(spec["models"]) > 1:
        parts.append(cfg.model)
    if len(spec["streams"]) > 1:
        parts.append(f"streams={cfg.streams}")
    if len(spec["flush_l2"]) > 1:
        parts.append(f"flush={int(cfg.flush_l2)}")
    if cfg.extra:
        parts.append(extra_text(cfg.extra))
    if cfg.rounds > 1:
        parts.append(f"round {cfg.round}/{cfg.rounds}")
    return "".join(" " + p for p in parts)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spec_path = find_spec(args.spec)
    try:
        spec = load_spec(spec_path)
    except SpecError as e:
        raise UsageError(f"bad spec {spec_path}: {e}")
    if args.targets or args.tests:
        targets, tests = build_targets(spec)
        print(" ".join(targets if args.targets else tests))
        return EXIT_OK
    if args.run_dir:
        args.out = str(Path(args.run_dir) / output_name(spec_path, spec))
    build_dir = Path(args.build_dir).resolve()
    configs, commands = select_configs(spec, build_dir, args.python, args.shard,
                                       args.num_shards, args.skip_unbuilt, args.dry_run,
                                       args.rounds)

    if args.check_only:
        print(f"{spec_path}: {len(configs)} configurations in shard {args.shard} of "
              f"{args.num_shards}, all binaries present")
        return EXIT_OK

    if args.dry_run:
        # Read-only: a dry run never creates or repairs the output.
        done = set()
        if args.out and Path(args.out).is_file():
            done = {row_key(r) for r in read_csv(args.out)[0]}
        todo = [c for c in configs if not all(k in done for k in c.keys())]
        todo_ids = {c.index for c in todo}
        for c in configs:
            print(c.describe() + ("" if c.index in todo_ids else "  (done)"))
        rows = sum(len(c.expect) for c in configs)
        print(f"{len(configs)} configurations ({rows} rows), {len(configs) - len(todo)} already "
              f"in the output; shard {args.shard} of {args.num_shards}", file=sys.stderr)
        return EXIT_OK

    out = Output(args.out)
    for p in out.problems:
        print("warning: " + p, file=sys.stderr)
    if args.retry:
        n = out.drop_statuses(set(args.retry), {k for c in configs for k in c.keys()})
        print(f"retry: dropped {n} row(s) with status {','.join(args.retry)}", flush=True)
    todo = [c for c in configs if not all(k in out.keys for k in c.keys())]

    # A resumed sweep continues its run: the run id of the rows it already wrote, where they have
    # one, so that a sitting stopped by --max-minutes (or a kill) and resumed stays one run id.
    # Rows that ended more than SITTING_GAP ago are another sitting's (another day, often
    # another machine): the rows added now get a run id of their own.
    spec_keys = {k for c in configs for k in c.keys()}
    written = [r for r in out.rows if r.get("run_id") and row_key(r) in spec_keys]
    resumed = sorted({r["run_id"] for r in written})
    now = datetime.datetime.now(datetime.timezone.utc)
    ended = max(filter(None, (parse_utc(r.get("utc")) for r in written)), default=None)
    if len(resumed) == 1 and ended is not None and now - ended > SITTING_GAP:
        print(f"{args.out}: the rows of run {resumed[0]} end at {ended:{UTC_FORMAT}}, more than "
              f"{SITTING_GAP.total_seconds() / 3600:g} h ago: another sitting, so the rows added now get a run id "
              "of their own", flush=True)
        resumed = []
    run_id = args.run_id or os.environ.get("STUDY_RUN_ID") or (resumed[0] if len(resumed) == 1 else None) or (
        now.strftime("%Y%m%dT%H%M%SZ") + "-" + socket.gethostname())
    commit = os.environ.get("STUDY_COMMIT") or git_commit()
    env = with_checkout_on_path(dict(os.environ, STUDY_RUN_ID=run_id, STUDY_COMMIT=commit,
                                     STUDY_SWEEP_DEVICE=str(args.device)), build_dir)
    # The GEMM layer's search choices (common/gemm/cutlass_gemm.hpp) in one file beside the CSV:
    # a sitting starts from no other sitting's choices, every process of it (benches, the kept
    # anchor process) runs the same choice per shape, and the folder keeps what was chosen.
    env.setdefault("STUDY_CUTLASS_CACHE", str(Path(args.out).resolve().parent / "cutlass_gemm.tsv"))
    prov = {"run_id": run_id, "commit": commit, "host": socket.gethostname()}
    if is_dirty(commit):
        print(f"warning: this checkout has uncommitted changes, so every row will name {commit}: "
              "commit first, then measure (tests/clean_rows.py refuses -dirty rows in a new folder "
              "under experiments/results/)", file=sys.stderr, flush=True)
    # A CSV holds the rows of one commit: resuming it from another checkout would mix two codes.
    others = sorted({r["commit"] for r in out.rows if r.get("commit")} - {commit})
    if others:
        print(f"error: {args.out} holds rows of commit {', '.join(others)}, and this checkout is at "
              f"{commit}: measure into a new file or run folder", file=sys.stderr)
        return EXIT_USAGE
    timeout_s = args.timeout or spec["timeout_s"]
    budget = spec["max_device_gib"] * (1 << 30)
    if spec["timm_weights"] and todo:
        give_timm_weights(todo, args.python)

    rounds = max((c.rounds for c in configs), default=1)
    print(f"sweep {spec_path.name}: {len(configs)} configurations"
          f"{f' ({rounds} interleaved rounds)' if rounds > 1 else ''} in shard {args.shard}/"
          f"{args.num_shards}, {len(configs) - len(todo)} already in {args.out}, "
          f"{len(todo)} to run; run {run_id}, commit {commit}", flush=True)
    signal.signal(signal.SIGTERM, _on_signal)  # Slurm's time limit / scancel: stop cleanly
    try:
        return sweep(Sweep(args=args, spec=spec, todo=todo, commands=commands, env=env, prov=prov,
                           timeout_s=timeout_s, budget=budget, out=out))
    finally:
        if args.run_dir:   # the folder's README summarizes its CSVs, even after a stop
            try:
                run_folder.write(args.run_dir)
            except OSError as e:
                print(f"warning: {args.run_dir}/README.md not updated: {e}", file=sys.stderr)


def weights_dir() -> Path:
    """Where the exported timm state dicts are kept between sweeps (hundreds of MB each: never in
    a run folder): $STUDY_WEIGHTS_DIR, else ~/.cache/vit-cuda-study/weights."""
    given = os.environ.get("STUDY_WEIGHTS_DIR")
    return Path(given) if given else Path.home() / ".cache" / "vit-cuda-study" / "weights"


def give_timm_weights(configs, python):
    """Spec key timm_weights: each configuration's --weights, timm's own init of its model, image
    size and seed, exported once by reference/export_timm_fixture.py with `python` (which needs
    torch and timm). A failed export is a UsageError naming the command."""
    exporter = REPO / "reference" / "export_timm_fixture.py"
    for shape in sorted({(c.model, c.image_size, c.seed) for c in configs}):
        model, image, seed = shape
        path = weights_dir() / f"timm_{model}_{image}px_seed{seed}.safetensors"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(f"{path.name}.{os.getpid()}.part")  # shards of one sweep may export at once
            cmd = [python, str(exporter), "--model", model, "--image-size", str(image), "--seed", str(seed),
                   "--out", str(part)]
            print(f"exporting timm's init of {model} at {image} px, seed {seed}: {path}", flush=True)
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0 or not part.is_file():
                last = ((r.stderr or r.stdout).strip().splitlines() or ["no output"])[-1]
                raise UsageError(f"timm_weights: {' '.join(cmd)} failed (exit {r.returncode}): {last}")
            part.replace(path)
        for c in configs:
            if (c.model, c.image_size, c.seed) == shape:
                c.weights = path


def sweep(s: Sweep):
    """Run the configurations left to do, appending each row as it comes."""
    args, todo, commands, env, prov, commit = s.args, s.todo, s.commands, s.env, s.prov, s.commit
    timeout_s, budget, out, counts, spec = s.timeout_s, s.budget, s.out, s.counts, s.spec
    start = time.monotonic()
    ran = 0
    workers = {}   # anchor script -> its kept process (spec keep_anchors)
    try:
        for k, c in enumerate(todo, start=1):
            elapsed = time.monotonic() - start
            if args.max_minutes and elapsed > 60 * args.max_minutes:
                print(f"stopped: --max-minutes {args.max_minutes:g} reached, {len(todo) - k + 1} "
                      "configurations left; rerun the same command to resume", flush=True)
                return EXIT_INCOMPLETE
            est = estimate_device_bytes(c) if budget else None
            if est is not None and est > budget:
                note = (f"over budget: needs about {est / (1 << 30):.1f} GiB of device memory, "
                        f"max_device_gib is {spec['max_device_gib']:g}")
                rows = [with_extra_note(runner_row(c, v, "skipped", note, prov), c) for v in c.expect]
            else:
                if c.kind == "anchor" and spec["keep_anchors"]:
                    script = tuple(commands[c.index][:2])   # python, the anchor script
                    worker = workers.setdefault(script, AnchorWorker(list(script), env))
                    o = worker.run(c, timeout_s, args.verbose)
                else:
                    o = run_config(c, commands[c.index], env, timeout_s, args.verbose)
                rows = [with_extra_note(r, c) for r in o.rows]
                got = {row_key(r) for r in rows}
                for key in got - set(c.keys()):
                    print(f"  warning: {c.label}: wrote a row of another configuration: "
                          f"{','.join(key)}", file=sys.stderr)
                # An invocation that found no GPU after writing some of its rows (ceilings
                # writes copy, then gemm_fp16) skipped the rest too: not a failure.
                nodev = rows and all(r["status"] == "skipped" and r["note"].startswith(NO_DEVICE)
                                     for r in rows)
                for v, key in zip(c.expect, c.keys()):
                    if key not in got:
                        rows.append(with_extra_note(
                            runner_row(c, v, "skipped", NO_DEVICE, prov) if nodev else
                            runner_row(c, v, "failed", o.reason(timeout_s), prov), c))
            # Each bench row names the commit its executable was built from: a stale build
            # (a failed or forgotten rebuild) would time old code under the new commit.
            stale = sorted({r["commit"] for r in rows if r.get("commit") and r["commit"] != commit})
            if stale:
                print(f"error: {c.label}: its executable was built from {', '.join(stale)}, and this "
                      f"checkout is at {commit}: rebuild (ninja -C {args.build_dir}) before measuring; "
                      "its rows were not written", file=sys.stderr, flush=True)
                return EXIT_USAGE
            shown = []
            for r in rows:
                # SIGTERM waits until the row is whole on disk.
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                try:
                    appended = out.append(r)
                finally:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                if appended:
                    counts[r["status"]] = counts.get(r["status"], 0) + 1
                    med = f" {r['median_us']} us" if r.get("median_us") else ""
                    shown.append(f"{r['status']}{med}"
                                 + (f" ({r['note']})" if r["status"] != "ok" and r.get("note") else ""))
            ran += 1
            elapsed = time.monotonic() - start
            eta = elapsed / ran * (len(todo) - k)
            shape = "" if c.shapeless else f" b={c.batch:<4} img={c.image_size:<4}"
            print(f"[{k}/{len(todo)}] {c.label:<24}{shape}{varying(c, spec)} -> "
                  f"{'; '.join(shown) or 'already present'}  ({hms(elapsed)} elapsed, "
                  f"ETA {hms(eta)})", flush=True)
    except Terminated as t:
        print(f"terminated by signal {t.args[0]}: the running configuration left no row and "
              "reruns on resume", file=sys.stderr, flush=True)
        return 128 + t.args[0]
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume", file=sys.stderr, flush=True)
        return 130
    finally:
        for w in workers.values():
            w.close()
    print(f"done: {ran} configurations, rows ok {counts['ok']}, skipped {counts['skipped']}, "
          f"failed {counts['failed']}; {args.out}", flush=True)
    return EXIT_FAILED_ROWS if args.strict and counts["failed"] else EXIT_OK


def cli():
    try:
        return main()
    except UsageError as e:
        print(f"sweep: error: {e}", file=sys.stderr)
        return EXIT_USAGE
