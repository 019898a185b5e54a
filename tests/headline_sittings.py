#!/usr/bin/env python3
"""The README's headlines and targets rest on clean, single sittings: every line of the headline
table and every judged target names a run folder with no -dirty row (tests/clean_rows.py) and a
README that names the spec of each of its CSVs, and no headline pools rows of several run ids
(report/build.py writes "rows of N run ids" where one does).
Usage: headline_sittings.py REPO_ROOT"""
import re
import sys
from pathlib import Path

POOLED = re.compile(r"\*\*rows of (\d+) run ids\*\*")
FOLDER = re.compile(r"experiments/results/([^/)\s]+)/")
TARGET_RUN = re.compile(r"; run `([^`]+)`\.$")


def listed(path: Path) -> set[str]:
    return {line.split()[0] for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


HEADER = "| component | headline shape |"


def headline_rows(readme: str) -> list[list[str]]:
    """The cells of the headline table's rows (the table under HEADER, up to its first blank line)."""
    if HEADER not in readme:
        return []
    table = readme.split(HEADER, 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table if line.startswith("|")]
    return [r for r in rows if r and not set(r[0]) <= {"-"}]


def folder_problems(results: Path, folder: str, dirty_ok: set[str]) -> list[str]:
    path = results / folder.split("/")[0]
    if not path.is_dir():
        return [f"{folder}: no such run folder"]
    out = []
    if folder.split("/")[0] in dirty_ok:
        out.append(f"{folder}: its folder holds -dirty rows (tests/dirty_rows_allowed.txt)")
    readme = results / folder / "README.md"
    if not readme.is_file():
        return out + [f"{folder}: no README.md"]
    text = readme.read_text()
    for csv_file in sorted((results / folder).glob("*.csv")):
        if f"spec `{csv_file.stem}`" not in text and csv_file.stem != "ceilings":
            out.append(f"{folder}/README.md does not name the spec of {csv_file.name}")
    return out


def main(root):
    root = Path(root).resolve()
    results = root / "experiments" / "results"
    readme = (root / "README.md").read_text()
    dirty_ok = listed(root / "tests" / "dirty_rows_allowed.txt")
    failures, pooled = [], set()
    rows = headline_rows(readme)
    if not rows:
        failures.append("README.md has no headline table")
    for r in rows:
        family, cell = r[0], r[-1]
        m = FOLDER.search(cell)
        if not m:
            failures.append(f"{family}: the headline names no run folder")
            continue
        failures += [f"{family} headline: {p}" for p in folder_problems(results, m.group(1), dirty_ok)]
        if m := POOLED.search(cell):
            pooled.add(family)
            failures.append(f"{family} headline pools rows of {m.group(1)} run ids: re-measure it in one sitting")
    targets = [line for line in readme.split("**Targets**", 1)[-1].split("\n\n", 2)[1].splitlines()
               if line.startswith("- ")] if "**Targets**" in readme else []
    for line in targets:
        m = TARGET_RUN.search(line)
        if m:
            failures += [f"target '{line[2:60]}...': {p}" for p in folder_problems(results, m.group(1), dirty_ok)]
    for f in failures:
        print("FAIL " + f)
    print(f"{len(rows)} headlines and {len(targets)} targets checked; {len(pooled)} headlines pool run ids "
          f"({', '.join(sorted(pooled)) or 'none'})")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
