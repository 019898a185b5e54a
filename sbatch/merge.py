#!/usr/bin/python3
"""Merges the shard CSVs of a sweep into one CSV: header once, every configuration once.

  merge.py --results DIR --num-shards N --out DIR/merged.csv [--spec SPEC --build-dir B]
  merge.py --out merged.csv a.csv b.csv ...

Shards are DIR/shard_<i>.csv for i in 0..N-1 (what sweep_array.sbatch writes); a missing or
empty shard means its task never ran, and the merge fails (exit 1) rather than hand on a
silently partial result. Rows are deduplicated on the sweep runner's configuration key
(family, version, model, batch, image size, streams, L2 flush, extra arguments); of two rows
with one key the better status (ok, then skipped, then failed) is kept, else the first.
With --spec, the merged rows are also checked against the spec's configurations: a missing
one fails the merge. The output is written to a temporary file and renamed, so a reader
never sees half a merge.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
import run_sweep as rs  # noqa: E402  (one definition of the schema and of the key)

RANK = {"ok": 0, "skipped": 1, "failed": 2}


def shard_path(results, i):
    return Path(results) / f"shard_{i}.csv"


def merge(inputs, out, expected=None, log=print):
    """Returns the exit code. expected: the configuration keys that must all be present."""
    missing = [str(p) for p in inputs if not Path(p).is_file() or Path(p).stat().st_size == 0]
    if missing:
        log(f"merge: error: missing or empty shard(s): {', '.join(missing)}")
        return 1
    best, order, dups = {}, [], 0
    for p in inputs:
        rows, problems = rs.read_csv(p)
        for msg in problems:
            log(f"merge: warning: {msg}")
        log(f"merge: {p}: {len(rows)} rows")
        for r in rows:
            k = rs.row_key(r)
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
        f.write(rs.HEADER_LINE + "\n")
        for k in order:
            f.write(rs.format_row(best[k]))
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", help="folder with shard_<i>.csv")
    p.add_argument("--num-shards", type=int, help="how many shards the sweep had")
    p.add_argument("--out", required=True, help="merged CSV to write (replaced)")
    p.add_argument("--spec", help="check that every configuration of this spec has a row")
    p.add_argument("--build-dir", default=str(rs.REPO / "build"),
                   help="with --spec and --skip-unbuilt: where the benches are")
    p.add_argument("--skip-unbuilt", action="store_true",
                   help="with --spec: expect no rows for versions that are not built (as the runner)")
    p.add_argument("inputs", nargs="*", help="more CSV files to merge")
    a = p.parse_args(argv)
    inputs = []
    if a.results or a.num_shards is not None:
        if not a.results or not a.num_shards or a.num_shards < 1:
            print("merge: error: --results and --num-shards (>= 1) go together", file=sys.stderr)
            return 2
        inputs += [shard_path(a.results, i) for i in range(a.num_shards)]
    inputs += [Path(x) for x in a.inputs]
    if not inputs:
        print("merge: error: nothing to merge (give --results/--num-shards or files)", file=sys.stderr)
        return 2
    if Path(a.out).resolve() in {Path(x).resolve() for x in inputs}:
        print("merge: error: --out must not be one of the inputs", file=sys.stderr)
        return 2
    expected = None
    try:
        if a.spec:
            spec = rs.load_spec(rs.find_spec(a.spec))
            configs, _ = rs.select_configs(spec, Path(a.build_dir).resolve(), sys.executable,
                                           skip_unbuilt=a.skip_unbuilt, dry_run=True)
            expected = [k for c in configs for k in c.keys()]
        return merge(inputs, a.out, expected, log=lambda m: print(m, flush=True))
    except (rs.UsageError, rs.SpecError) as e:
        print(f"merge: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
