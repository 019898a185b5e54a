#!/usr/bin/env python3
"""Copy-paste detector: blocks of at least MIN_LINES consecutive source lines that stand again,
the same to the letter, elsewhere, after normalizing (white space folded; blank lines, comments,
includes/imports and lone punctuation passed over). Each maximal run shared by two places counts
once. (Comparing strings and numbers as placeholders too flags every table of like rows, the
step table's included, so near-copies are left to review.)

  tests/copy_paste.py ROOT [--list N] [--max COUNT]

Prints the count (and the N largest blocks); with --max, exits 1 when the count exceeds COUNT,
the bound the CPU suite holds the tree to (tests/meson.build).
"""
import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

# The configuration: what is read, and how long a shared block must be.
MIN_LINES = 6
SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".py", ".sh", ".build", ".meson", ".in")
SKIP = re.compile(r"^(#include|#pragma once|import |from \S+ import|using namespace)|^[{}()\[\];,:]*$")
COMMENT = re.compile(r"^(//|#(?!define|if|else|endif|undef))")

def source_files(root):
    out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True).stdout
    return [root / f for f in out.splitlines()
            if f.endswith(SUFFIXES) and (root / f).is_file() and not (root / f).is_symlink()]


def normalized(path):
    """[(text, line number)] of the lines that count."""
    out = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for n, line in enumerate(lines, 1):
        t = " ".join(line.split())
        if t and not COMMENT.match(t) and not SKIP.match(t):
            out.append((t, n))
    return out


def blocks(root):
    """Maximal shared runs: [(length, (file, first line, last line), (file, first line, last line))]."""
    files = {p: normalized(p) for p in source_files(root)}
    where = collections.defaultdict(list)
    for p, lines in files.items():
        for i in range(len(lines) - MIN_LINES + 1):
            where[tuple(t for t, _ in lines[i:i + MIN_LINES])].append((p, i))
    pairs = set()
    for places in where.values():
        if len(places) < 2:
            continue
        for a in range(len(places)):
            for b in range(a + 1, len(places)):
                (pa, ia), (pb, ib) = places[a], places[b]
                if pa == pb and abs(ia - ib) < MIN_LINES:
                    continue  # a run overlapping itself
                pairs.add((pa, ia, pb, ib))
    out = []
    for pa, ia, pb, ib in pairs:
        if (pa, ia - 1, pb, ib - 1) in pairs:
            continue  # not the start of its run
        n = 0
        while (pa, ia + n, pb, ib + n) in pairs:
            n += 1
        length = n + MIN_LINES - 1
        la, lb = files[pa], files[pb]
        out.append((length, (pa.relative_to(root), la[ia][1], la[ia + length - 1][1]),
                    (pb.relative_to(root), lb[ib][1], lb[ib + length - 1][1])))
    return sorted(out, key=lambda b: (-b[0], str(b[1])))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root")
    p.add_argument("--list", type=int, default=0, help="print the N largest blocks")
    p.add_argument("--max", type=int, help="exit 1 above this many blocks")
    args = p.parse_args(argv)
    found = blocks(Path(args.root).resolve())
    for length, a, b in found[:args.list]:
        print(f"{length:4d} lines  {a[0]}:{a[1]}-{a[2]}  ~  {b[0]}:{b[1]}-{b[2]}")
    print(f"{len(found)} duplicated blocks of {MIN_LINES}+ lines")
    if args.max is not None and len(found) > args.max:
        print(f"more than the {args.max} the tree is held to: share the code (or raise the bound with a reason)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
