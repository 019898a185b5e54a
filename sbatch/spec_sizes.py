#!/usr/bin/python3
"""The table of sweep sizes in sbatch/README.md, generated from the specs and the committed runs.

    python3 -m sbatch.spec_sizes           # rewrite the table in sbatch/README.md
    python3 -m sbatch.spec_sizes --check   # exit 1 when the table is stale

Per spec of experiments/specs/: its configurations (interleaved rounds counted), its timeout_s,
the whole sweep's time as measured in the newest committed CSV of that spec (the time between the
first and last row of each run id of the file, summed, so that a resumed sweep does not count the
pause; '-' where no committed run has that CSV; a CSV holding only some of the configurations,
a quick sweep's for its full spec, scaled up to all of them) and a `--time` per task for 8 shards:
three times a shard's share of the measured time, at least 10 minutes, and at most the bound no task can pass
(ceil(configurations / 8) x timeout_s); that bound where nothing was measured. Standard library
only, so that the cpu suite can keep the table current (tests/meson.build, spec_sizes).
"""
import argparse
import csv
import datetime
import math
import re
import sys
from pathlib import Path

from studylib import specs  # the spec loader and the configuration expansion
from studylib.paths import REPO

README = REPO / "sbatch" / "README.md"
START, END = "<!-- spec-sizes:start -->", "<!-- spec-sizes:end -->"
SHARDS = 8
MIN_TASK_S = 600


def measured(spec_path, spec, configs, results):
    """(seconds, configurations of the spec it holds, run folder) of the committed CSV of the
    spec's name that holds the most of the spec's configurations (the newest of equals), or
    None. A quick sweep's CSV has its full sweep's name and counts for it only partly."""
    name = Path(specs.output_name(spec_path, spec)).name
    best = None
    for path in results.rglob(name):   # a side folder may hold it one level down
        with open(path, newline="", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if r.get("utc")]
        keys = {specs.row_key(r) for r in rows}
        done = sum(all(k in keys for k in c.keys()) for c in configs)
        if done and (best is None or (done, max(r["utc"] for r in rows)) > best[:2]):
            best = (done, max(r["utc"] for r in rows), path, rows)
    if best is None:
        return None
    done, _, path, rows = best
    ours = {k for c in configs for k in c.keys()}
    spans = {}
    for r in rows:
        if specs.row_key(r) not in ours:   # another spec's rows in the same file
            continue
        t = datetime.datetime.fromisoformat(r["utc"].replace("Z", "+00:00"))
        lo, hi = spans.get(r.get("run_id", ""), (t, t))
        spans[r.get("run_id", "")] = (min(lo, t), max(hi, t))
    seconds = sum((hi - lo).total_seconds() for lo, hi in spans.values())
    return seconds, done, path.relative_to(results).parts[0]


def hms(seconds):
    m = math.ceil(seconds / 60)
    return f"{m // 60:02d}:{m % 60:02d}:00"


def minutes(seconds):
    m = round(seconds / 60)
    return "under a minute" if seconds < 60 else f"{m} minute{'s' if m > 1 else ''}"


def table(specs_dir, results):
    lines = ["| spec | configurations | timeout_s | measured, whole sweep (newest committed run) | "
             f"`--time` per task, {SHARDS} shards |", "|---|---:|---:|---|---|"]
    for spec_path in sorted(specs_dir.glob("*.toml")):
        spec = specs.load_spec(spec_path)
        configs = specs.expand(spec)
        n = len(configs)
        bound = math.ceil(n / SHARDS) * spec["timeout_s"]
        m = measured(spec_path, spec, configs, results)
        if m:
            seconds, done, folder = m
            whole = seconds * n / done   # a partial measurement, scaled to the whole sweep
            when = (f"{minutes(seconds)} ({folder})" if done == n else
                    f"{minutes(seconds)} for {done} of them ({folder})")
            task = min(bound, max(MIN_TASK_S, 3 * whole / SHARDS))
        else:
            when, task = "-", bound
        rounds = spec.get("rounds", 1)
        lines.append(f"| {spec_path.stem} | {n}" + (f" ({rounds} rounds)" if rounds > 1 else "")
                     + f" | {spec['timeout_s']} | {when} | `{hms(task)}` |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when sbatch/README.md's table is stale")
    ap.add_argument("--readme", type=Path, default=README)
    ap.add_argument("--specs", type=Path, default=REPO / "experiments" / "specs")
    ap.add_argument("--results", type=Path, default=REPO / "experiments" / "results")
    a = ap.parse_args(argv)
    text = a.readme.read_text()
    block = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)
    if not block.search(text):
        print(f"spec_sizes.py: error: {a.readme} has no {START} ... {END} block", file=sys.stderr)
        return 2
    try:
        new = block.sub(lambda _: f"{START}\n{table(a.specs, a.results)}\n{END}", text)
    except specs.SpecError as e:
        print(f"spec_sizes.py: error: {e}", file=sys.stderr)
        return 2
    if a.check:
        if new != text:
            print(f"{a.readme}: the spec-size table is stale: run python3 -m sbatch.spec_sizes",
                  file=sys.stderr)
            return 1
        print(f"{a.readme}: the spec-size table is current")
        return 0
    if new != text:
        a.readme.write_text(new)
    print(f"wrote the spec-size table of {a.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
