#!/usr/bin/env python3
"""Every committed row names a clean build: no `commit` ending in -dirty under
experiments/results/, except in the run folders of tests/dirty_rows_allowed.txt, measured before
rows named the commit their executable was built from (their READMEs say what was measured).
Commit first, then measure: a new folder with a -dirty row fails here. And one run id is one
sitting: within a CSV, no two consecutive rows of a run id lie more than studylib.row_file's
SITTING_GAP apart (rows merged from another day under one run id would pool two sittings unseen).
Usage: clean_rows.py REPO_ROOT"""
import csv
import datetime
import sys
from collections import Counter
from pathlib import Path

from studylib.row_file import SITTING_GAP, parse_utc
from studylib.schema import is_dirty


def allowed(path: Path) -> set[str]:
    return {line.split()[0] for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def widest_gap(times):
    """The longest wait between consecutive times (zero for fewer than two)."""
    times = sorted(times)
    return max((b - a for a, b in zip(times, times[1:])), default=datetime.timedelta(0))


def main(root):
    root = Path(root).resolve()
    results = root / "experiments" / "results"
    ok_folders = allowed(root / "tests" / "dirty_rows_allowed.txt")
    dirty = Counter()
    split = []
    for p in sorted(results.rglob("*.csv")):
        rel = p.relative_to(results)
        if "report" in rel.parts:
            continue
        with open(p, newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames or "commit" not in reader.fieldnames:
                continue
            times = {}
            for r in reader:
                if is_dirty(r.get("commit")):
                    dirty[rel] += 1
                t = parse_utc(r.get("utc"))
                if r.get("run_id") and t is not None:
                    times.setdefault(r["run_id"], []).append(t)
            split += [f"{rel}: run {rid} has rows {widest_gap(ts)} apart, more than one sitting allows "
                      f"({SITTING_GAP}): give the later rows their own run id"
                      for rid, ts in times.items() if widest_gap(ts) > SITTING_GAP]
    failures = [f"{rel}: {n} rows from a tree with uncommitted changes (-dirty)"
                for rel, n in dirty.items() if rel.parts[0] not in ok_folders]
    stale = sorted(ok_folders - {rel.parts[0] for rel in dirty})
    failures += [f"tests/dirty_rows_allowed.txt lists {f}, which has no -dirty row: remove it" for f in stale]
    failures += split
    for f in failures:
        print("FAIL " + f)
    print(f"{sum(dirty.values())} -dirty rows, all in the {len(ok_folders)} allowed folders"
          if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
