#!/usr/bin/env python3
"""Every committed row names a clean build: no `commit` ending in -dirty under
experiments/results/, except in the run folders of tests/dirty_rows_allowed.txt, measured before
rows named the commit their executable was built from (their READMEs say what was measured).
Commit first, then measure: a new folder with a -dirty row fails here.
Usage: clean_rows.py REPO_ROOT"""
import csv
import sys
from collections import Counter
from pathlib import Path


def allowed(path: Path) -> set[str]:
    return {line.split()[0] for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def main(root):
    root = Path(root).resolve()
    results = root / "experiments" / "results"
    ok_folders = allowed(root / "tests" / "dirty_rows_allowed.txt")
    dirty = Counter()
    for p in sorted(results.rglob("*.csv")):
        rel = p.relative_to(results)
        if "report" in rel.parts:
            continue
        with open(p, newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames or "commit" not in reader.fieldnames:
                continue
            for r in reader:
                if (r.get("commit") or "").strip().endswith("-dirty"):
                    dirty[rel] += 1
    failures = [f"{rel}: {n} rows from a tree with uncommitted changes (-dirty)"
                for rel, n in dirty.items() if rel.parts[0] not in ok_folders]
    stale = sorted(ok_folders - {rel.parts[0] for rel in dirty})
    failures += [f"tests/dirty_rows_allowed.txt lists {f}, which has no -dirty row: remove it" for f in stale]
    for f in failures:
        print("FAIL " + f)
    print(f"{sum(dirty.values())} -dirty rows, all in the {len(ok_folders)} allowed folders"
          if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
