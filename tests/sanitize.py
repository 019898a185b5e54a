#!/usr/bin/env python3
"""One Compute Sanitizer check of one executable: `compute-sanitizer --tool TOOL` on a bench run at
a small odd shape (docs/sanitizers.md says which tools run where, and why). Passes only when the
tool reports no error, the program itself succeeds, and every CSV row the program wrote says
`ok`: a bench that declines a shape (a `skipped` row, exit 0) ran no kernel, so it fails here.

  tests/sanitize.py TOOL EXECUTABLE [ARGS...]     (ARGS without --csv: this script adds its own)
  tests/sanitize.py TOOL --doctest TEST [ARGS...] a doctest program (a GPU suite) filtered by ARGS
                                                  (-tc, -sc): it must pass at least one test case

The program runs once without the tool first: it must pass plainly, and the CUTLASS layer's
per-shape kernel search (minutes under racecheck, and most of the host's memory) is then read
from its cache (~/.cache/vit-cuda-study), so the tool checks the kernels the program runs, not
the search.

Exit 77 (skip) where there is no compute-sanitizer or no GPU, unless STUDY_REQUIRE_GPU=1 (the GPU
job), which makes that a failure.
"""
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
ERROR_EXIT = 99


def find_sanitizer():
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        candidate = os.path.join(root, "bin", "compute-sanitizer")
        if root and os.access(candidate, os.X_OK):
            return candidate
    return None


def skip(why):
    if os.environ.get("STUDY_REQUIRE_GPU") == "1":
        print(f"{why}: failing (STUDY_REQUIRE_GPU=1)")
        return 1
    print(f"{why}: skipping")
    return 77


def rows_not_ok(path):
    """Why the rows at `path` do not show a run that checked its output, or '' when they do."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return "the program wrote no CSV"
    if not rows:
        return "the program wrote no row"
    bad = [r for r in rows if r.get("status") != "ok"]
    if bad:
        return f"the program ran nothing: status {bad[0].get('status')!r} ({bad[0].get('note', '')})"
    return ""


# doctest's summary line: "[doctest] test cases: 1 | 1 passed | 0 failed | 36 skipped".
DOCTEST_SUMMARY = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
SKIP_EXIT = 77


def doctest_not_run(output):
    """Why a doctest program's output shows no test case that ran and passed, or ''."""
    found = DOCTEST_SUMMARY.findall(output)
    if not found:
        return "no doctest summary in the output"
    _, passed, failed = map(int, found[-1])
    if failed:
        return f"{failed} test case(s) failed"
    return "" if passed else "the filters selected no test case"


def check_doctest(tool, program, sanitizer):
    """0 when the doctest `program` passes at least one test case plainly and under `tool`, 77
    when its GPU suite skips for want of a GPU (the program's own exit 77), else 1."""
    for label, cmd in (("without the tool", []),
                       (f"under {tool}", [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT),
                                          "--print-limit", "20"])):
        full = cmd + program
        print("$ " + " ".join(full), flush=True)
        r = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout, end="", flush=True)
        if not cmd and r.returncode == SKIP_EXIT:
            return skip("the test program skipped (no GPU)")
        if cmd and r.returncode == ERROR_EXIT:
            print(f"{tool} reported errors")
            return 1
        if r.returncode != 0:
            print(f"the program failed {label} (exit {r.returncode})")
            return 1
        why = doctest_not_run(r.stdout)
        if why:
            print(f"{why}, {label}")
            return 1
    return 0


def check(tool, program, sanitizer):
    """0 when `program` passes plainly and under `tool`, else 1 (the reason printed)."""
    if "--csv" in program:
        sys.exit("tests/sanitize.py adds --csv itself: leave it out of the arguments")
    with tempfile.TemporaryDirectory() as tmp:
        for label, cmd in (("without the tool", []),
                           (f"under {tool}", [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT),
                                              "--print-limit", "20"])):
            rows = os.path.join(tmp, f"{len(cmd)}.csv")
            full = cmd + program + ["--csv", rows]
            print("$ " + " ".join(full), flush=True)
            rc = subprocess.run(full).returncode
            if cmd and rc == ERROR_EXIT:
                print(f"{tool} reported errors")
                return 1
            if rc != 0:
                print(f"the program failed {label} (exit {rc})")
                return 1
            why = rows_not_ok(rows)
            if why:
                print(f"{why}, {label}")
                return 1
    return 0


def main(argv):
    if len(argv) < 3 or argv[1] not in TOOLS:
        sys.exit(__doc__)
    sanitizer = find_sanitizer()
    if not sanitizer:
        return skip("no compute-sanitizer on PATH or in the CUDA toolkit")
    if not os.path.exists("/dev/nvidiactl") and not os.path.exists("/dev/dxg"):
        return skip("no NVIDIA GPU device node")
    if argv[2] == "--doctest":
        if len(argv) < 4:
            sys.exit(__doc__)
        return check_doctest(argv[1], argv[3:], sanitizer)
    return check(argv[1], argv[2:], sanitizer)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
