#!/usr/bin/env python3
"""Write the generated part of a run folder's README.md from what the folder holds.

    python3 -m studylib.run_folder RUN_DIR

A run folder's README says how it was made; what it holds is better read off its files than
retyped: per CSV (the top level's and every sub-folder's) the rows by status, the commits the
executables were built from, the GPUs, SM clocks, run ids and the UTC span, and the test,
sanitizer and mutation summaries the GPU job left beside them (tests.txt, sanitizer.txt,
mutants.md). That part goes between `<!-- run-summary:start -->` and `<!-- run-summary:end -->`;
the rest of the README (the hand-written reason for the run and how to reproduce it) is kept.
A folder without a README gets one: a title and the generated part. The sweep runner (`--run-dir`)
calls this after every sweep and `experiments/gpu_job.sh` at its end, so the summary never lags
the CSVs. Standard library only (and studylib.schema, which is). Exit 0, or 2 with one line on stderr (no such folder, an
unwritable README).
"""
import csv
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

from studylib.schema import is_dirty

START, END = "<!-- run-summary:start -->", "<!-- run-summary:end -->"
# A CSV named after a spec (experiments/specs/<name>.toml) holds that spec's sweep: the sweep
# runner writes a spec's rows to <name>.csv or <name>/<name>.csv.
SPECS = Path(__file__).resolve().parent.parent / "experiments" / "specs"
BLOCK = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
SUMMARY_LINE = re.compile(r"^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):\s*(\d+)")
MESON_TEST_LINE = re.compile(r"^\d+/\d+ .+?\s(OK|SKIP|FAIL|TIMEOUT|INTERRUPT|ERROR|EXPECTEDFAIL|UNEXPECTEDPASS)\s+[\d.]+s")
DOCTEST_CASES = re.compile(r"^\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed \|\s*(\d+) skipped")


def short(commit):
    """12 hex digits of a recorded commit, its '-dirty' kept."""
    m = re.match(r"^([0-9a-fA-F]{13,40})(.*)$", commit)
    return m.group(1)[:12] + m.group(2) if m else commit


def csv_summary(path):
    """One line about a study CSV, or None for a CSV without study rows (an Nsight table)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if not rows or "status" not in rows[0] or "commit" not in rows[0]:
        return None

    def values(col):
        return list(dict.fromkeys(r.get(col, "").strip() for r in rows if r.get(col, "").strip()))

    status = {s: sum(r.get("status") == s for r in rows) for s in ("ok", "skipped", "failed")}
    clocks = [float(r["sm_clock_mhz"]) for r in rows if r.get("sm_clock_mhz", "").strip()
              and r.get("status") == "ok"]
    utc = sorted(values("utc"))
    dirty = sum(is_dirty(r.get("commit")) for r in rows)
    parts = ([f"spec `{path.stem}`"] if (SPECS / f"{path.stem}.toml").is_file() else []) + [
             f"{len(rows)} rows ({status['ok']} ok, {status['skipped']} skipped, {status['failed']} failed)",
             "commit " + ", ".join(f"`{short(c)}`" for c in values("commit")) +
             (f" ({dirty} rows from a tree with uncommitted changes)" if dirty else ""),
             "GPU " + (" + ".join(values("gpu")) or "none")]
    if clocks:
        parts.append(f"SM clock {min(clocks):,.0f}-{max(clocks):,.0f} MHz (median "
                     f"{statistics.median(clocks):,.0f})")
    runs = values("run_id")
    if runs:
        parts.append(f"{len(runs)} run id{'s' if len(runs) > 1 else ''} ({', '.join(runs[:3])}"
                     f"{', ...' if len(runs) > 3 else ''})")
    if utc:
        parts.append(f"UTC {utc[0]} .. {utc[-1]}")
    return "; ".join(parts)


def test_summary(path):
    """'Ok 20, Fail 0, Skipped 1' from a meson test summary file (without its summary, meson's
    per-test lines counted by status: 'tests OK 60, SKIP 5, INTERRUPT 1'); for the doctest
    binaries' own outputs one after another, their test cases added up ('3 doctest runs: 36 test
    cases, 36 passed, 0 failed, 0 skipped'); None where none of these is found."""
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    counts = [f"{m.group(1)} {m.group(2)}" for line in lines if (m := SUMMARY_LINE.match(line))]
    if not counts:
        statuses = Counter(m.group(1) for line in lines if (m := MESON_TEST_LINE.match(line)))
        if statuses:
            counts.append("tests " + ", ".join(f"{k} {n}" for k, n in statuses.most_common()))
    runs = [[int(g) for g in m.groups()] for line in lines if (m := DOCTEST_CASES.match(line))]
    if runs:
        cases, passed, failed, skipped = (sum(col) for col in zip(*runs))
        counts.append(f"{len(runs)} doctest runs: {cases} test cases, {passed} passed, {failed} failed, "
                      f"{skipped} skipped")
    return ", ".join(counts) or None


def mutants_summary(path):
    """The bold verdict line(s) of tests/mutants.py's report."""
    lines = [line.strip().strip("*").rstrip(".") for line in path.read_text(errors="replace").splitlines()
             if line.startswith("**")]
    return "; ".join(lines) or None


COMPILED_FORWARD = re.compile(r"^== .*\(images (\d+) x 3 x (\d+) x \d+\)$")


def forward_header(module, shape):
    """A compile_kernels.txt section's first line: the generated module and its input images'
    (batch, 3, H, W), or None where not found. COMPILED_FORWARD reads it back."""
    what = f"images {shape[0]} x 3 x {shape[1]} x {shape[2]}" if shape else "input shape not found"
    return f"== {module} ({what})"


def compiled_shapes(text):
    """(image size, batch) of each forward a compile_kernels.txt lists, in its order."""
    return [(int(m.group(2)), int(m.group(1))) for line in text.splitlines()
            if (m := COMPILED_FORWARD.match(line.strip()))]


def kernels_summary(path):
    """'3 generated forwards and the kernels each calls: batch 1, 32, 256 at 224 px' from
    precompile_anchors.py's --kernels file."""
    text = path.read_text(errors="replace")
    shapes = compiled_shapes(text)
    if not shapes:
        return "no forward generated there" if "no generated forward" in text else None
    by_px = {}
    for px, b in sorted(set(shapes)):
        by_px.setdefault(px, []).append(str(b))
    n = len(shapes)
    return f"{n} generated forward{'s' if n > 1 else ''} and the kernels each calls: " + "; ".join(
        f"batch {', '.join(bs)} at {px} px" for px, bs in by_px.items())


def gemm_choices_summary(path):
    """'12 shapes searched (7 on CUTLASS kernels, 5 on cuBLASLt)' from the GEMM layer's choices
    file that a sweep keeps beside its CSV (cutlass_gemm.tsv); a later line of a key wins."""
    last = {}
    for line in path.read_text(errors="replace").splitlines():
        f = line.split("\t")
        if len(f) == 11:
            last[tuple(f[:6] + f[10:])] = f[6]
    if not last:
        return None
    lib = sum(k == "cublaslt" for k in last.values())
    return (f"{len(last)} shape{'s' if len(last) > 1 else ''} searched in this sitting "
            f"({len(last) - lib} on CUTLASS kernels, {lib} on cuBLASLt)")


def summary(run_dir):
    run_dir = Path(run_dir)
    lines = [START, "## What this folder holds (generated by studylib/run_folder.py)", ""]
    csvs = sorted(p for p in run_dir.rglob("*.csv") if "report" not in p.relative_to(run_dir).parts)
    shown = 0
    for p in csvs:
        s = csv_summary(p)
        if s:
            lines.append(f"- `{p.relative_to(run_dir)}`: {s}.")
            shown += 1
    other = len(csvs) - shown
    if other:
        lines.append(f"- {other} other CSV file{'s' if other > 1 else ''} (Nsight Compute pages, "
                     "probes): no study rows.")
    if not csvs:
        lines.append("- No CSV.")
    for name, what, read in (("tests.txt", "test suites", test_summary),
                             ("sanitizer.txt", "sanitizer suite", test_summary),
                             ("mutants.md", "planted bugs", mutants_summary),
                             ("compile_kernels.txt", "compiled forwards", kernels_summary),
                             ("cutlass_gemm.tsv", "GEMM choices", gemm_choices_summary)):
        for p in sorted(run_dir.rglob(name)):
            s = read(p)
            lines.append(f"- {what} (`{p.relative_to(run_dir)}`): {s or 'no summary line'}.")
    lines += ["", END]
    return "\n".join(lines)


def write(run_dir):
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder")
    readme = run_dir / "README.md"
    block = summary(run_dir)
    if readme.is_file():
        text = readme.read_text()
        text = BLOCK.sub(lambda _: block, text) if BLOCK.search(text) else text.rstrip("\n") + "\n\n" + block + "\n"
    else:
        text = f"# {run_dir.name}\n\n{block}\n"
    readme.write_text(text)
    return readme


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python3 -m studylib.run_folder RUN_DIR", file=sys.stderr)
        return 2
    try:
        print(f"wrote {write(argv[0])}")
    except OSError as e:
        print(f"run_folder: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
