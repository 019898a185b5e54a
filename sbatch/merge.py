#!/usr/bin/python3
"""Merges the shard CSVs of a sweep into a run folder: header once, every configuration once.

  python3 -m sbatch.merge --results DIR --num-shards N --spec SPEC [--ceilings] [--build-dir B]
  python3 -m sbatch.merge --out merged.csv a.csv b.csv ...

With --results, DIR is the run folder that sbatch/submit.sh lays out: the shards are
DIR/shards/shard_<i>.csv for i in 0..N-1, and the merged sweep goes where ./study run puts it,
DIR/<spec name>.csv (without `_quick`; DIR/<name>/<name>.csv for a side experiment), so that
`./study report --run DIR` reads DIR as any run folder. With --ceilings, the ceilings job's
DIR/shards/ceilings.csv is merged into DIR/ceilings.csv too (checked against the ceilings spec).

A missing or empty shard means its task never ran, and the merge fails (exit 1) rather than
hand on a silently partial result. So does a merge of rows measured on different GPU models
(the `gpu` column): one run folder is one GPU, or its ratios and ceilings mean nothing; nothing
is written then. Rows are deduplicated on the sweep runner's configuration key (family,
version, model, batch, image size, streams, L2 flush, extra arguments); of two rows with one key
the better status (ok, then skipped, then failed) is kept, else the first. With --spec, the
merged rows are also checked against the spec's configurations: a missing one fails the merge.
Each output is written to a temporary file and renamed, so a reader never sees half a merge.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

from studylib import row_file, specs  # one definition of the schema and of the key
from studylib.paths import REPO

RANK = {"ok": 0, "skipped": 1, "failed": 2}


SHARDS = "shards"  # sub-folder of the run folder: the report reads only the folder's own CSVs
NO_GPU = {"", "none", "unknown"}


def shard_path(results, i):
    return Path(results) / SHARDS / f"shard_{i}.csv"


def ceilings_shard(results):
    return Path(results) / SHARDS / "ceilings.csv"


def gpu_models(inputs):
    """{GPU model: [files with rows of it]} over the rows that name a GPU (a row skipped for
    want of a device names none)."""
    models = {}
    for p in inputs:
        if not Path(p).is_file():
            continue
        rows, _ = row_file.read_csv(p)
        for g in dict.fromkeys(r["gpu"].strip() for r in rows):
            if g.lower() not in NO_GPU:
                models.setdefault(g, []).append(Path(p).name)
    return models


def check_one_gpu(inputs, log=print):
    """0, or 1 with the reason when the inputs hold rows of more than one GPU model."""
    models = gpu_models(inputs)
    if len(models) <= 1:
        return 0
    log("merge: error: the rows come from " + str(len(models)) + " GPU models ("
        + "; ".join(f"{g}: {', '.join(files)}" for g, files in sorted(models.items()))
        + "). One run folder holds one GPU model, or its ratios and ceilings mean nothing: "
        "nothing was merged. Pin the jobs to one model (e.g. --gres gpu:<type>:1 or "
        "--sbatch-arg=--constraint=<feature>) and resubmit into a new --results folder.")
    return 1


def merge(inputs, out, expected=None, log=print):
    """Returns the exit code. expected: the configuration keys that must all be present."""
    missing = [str(p) for p in inputs if not Path(p).is_file() or Path(p).stat().st_size == 0]
    if missing:
        log(f"merge: error: missing or empty shard(s): {', '.join(missing)}")
        return 1
    best, order, dups = {}, [], 0
    for p in inputs:
        rows, problems = row_file.read_csv(p)
        for msg in problems:
            log(f"merge: warning: {msg}")
        log(f"merge: {p}: {len(rows)} rows")
        for r in rows:
            k = specs.row_key(r)
            if k not in best:
                best[k] = r
                order.append(k)
                continue
            dups += 1
            if RANK.get(r["status"], 3) < RANK.get(best[k]["status"], 3):
                best[k] = r
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", dir=out.parent)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(row_file.HEADER_LINE + "\n")
        for k in order:
            f.write(row_file.format_row(best[k]))
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    status = {}
    for k in order:
        status[best[k]["status"]] = status.get(best[k]["status"], 0) + 1
    log(f"merge: {len(order)} rows into {out} ({dups} duplicate(s) dropped; "
        + ", ".join(f"{s} {n}" for s, n in sorted(status.items())) + ")")
    if expected is not None:
        lost = [k for k in expected if k not in best]
        extra = [k for k in order if k not in set(expected)]
        if extra:
            log(f"merge: warning: {len(extra)} row(s) are not configurations of the spec")
        if lost:
            log(f"merge: error: {len(lost)} configuration(s) of the spec have no row, e.g. "
                + "; ".join(",".join(k) for k in lost[:5]))
            return 1
        log(f"merge: all {len(expected)} configurations of the spec are present")
    return 0


def expected_keys(spec_name, build_dir, skip_unbuilt):
    spec = specs.load_spec(specs.find_spec(spec_name))
    configs, _ = specs.select_configs(spec, Path(build_dir).resolve(), sys.executable,
                                   skip_unbuilt=skip_unbuilt, dry_run=True)
    return [k for c in configs for k in c.keys()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", help="run folder with shards/shard_<i>.csv (what submit.sh lays out)")
    p.add_argument("--num-shards", type=int, help="how many shards the sweep had")
    p.add_argument("--out", help="merged CSV to write (replaced); default with --results and "
                                 "--spec: DIR/<spec name>.csv, as in any run folder")
    p.add_argument("--spec", help="check that every configuration of this spec has a row")
    p.add_argument("--ceilings", action="store_true",
                   help="with --results: also merge DIR/shards/ceilings.csv into DIR/ceilings.csv")
    p.add_argument("--build-dir", default=str(REPO / "build"),
                   help="with --spec and --skip-unbuilt: where the benches are")
    p.add_argument("--skip-unbuilt", action="store_true",
                   help="with --spec: expect no rows for versions that are not built (as the runner)")
    p.add_argument("inputs", nargs="*", help="more CSV files to merge")
    a = p.parse_args(argv)

    def usage(msg):
        print(f"merge: error: {msg}", file=sys.stderr)
        return 2

    inputs = []
    if a.results or a.num_shards is not None:
        if not a.results or not a.num_shards or a.num_shards < 1:
            return usage("--results and --num-shards (>= 1) go together")
        inputs += [shard_path(a.results, i) for i in range(a.num_shards)]
    elif a.ceilings:
        return usage("--ceilings needs --results")
    inputs += [Path(x) for x in a.inputs]
    if not inputs:
        return usage("nothing to merge (give --results/--num-shards or files)")
    log = lambda m: print(m, flush=True)  # noqa: E731
    try:
        out = a.out
        if out is None:
            if not (a.results and a.spec):
                return usage("--out is required (or --results with --spec: DIR/<spec name>.csv)")
            spec_path = specs.find_spec(a.spec)
            out = Path(a.results) / specs.output_name(spec_path, specs.load_spec(spec_path))
        if Path(out).resolve() in {Path(x).resolve() for x in inputs}:
            return usage("--out must not be one of the inputs")
        ceilings = ceilings_shard(a.results) if a.ceilings else None
        if check_one_gpu(inputs + ([ceilings] if ceilings else []), log):
            return 1
        expected = expected_keys(a.spec, a.build_dir, a.skip_unbuilt) if a.spec else None
        rc = merge(inputs, out, expected, log=log)
        if ceilings is not None:
            # The GPU's copy bandwidth and GEMM rate, measured by a job of the same sweep.
            rc = max(rc, merge([ceilings], Path(a.results) / "ceilings.csv",
                               expected_keys("ceilings", a.build_dir, False), log=log))
        if rc == 0 and a.results:
            log(f"merge: run folder {a.results} is ready: ./study report --run {a.results}")
        return rc
    except (specs.UsageError, specs.SpecError) as e:
        print(f"merge: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
