#!/usr/bin/env python3
"""Every figure and table of the report is drawn from clean rows of one commit and one sweep: no
caption of report/README.md or its appendix pages names a -dirty commit, rows of several commits
or of several sweeps (run ids) but those of POOLED_SITTINGS. A table (report/tables/NAME.md,
drawn where its caption stands in a page) is judged by the commits and run ids its caption names;
one that names no commit (lessons from the NOTES, a folder's accuracy probe) is not judged.
Usage: figure_sources.py REPO_ROOT"""
import re
import sys
from pathlib import Path

# A figure as report/build.py writes it: the image, a blank line, then its caption, which ends
# with the rows' provenance (studylib/rundata.py provenance: "GPU .., run .., commit a + b").
FIGURE = re.compile(r"^!\[(\w+)\]\([^)]*\)\n\n\*Figure: (.*)\*$", re.M)
HASH = r"[0-9a-f]{7,40}(?:-dirty)?"
COMMITS = re.compile(rf"commit ({HASH}(?: \+ {HASH})*)\.?$")
# A figure over several run folders (the across-GPUs one) names each folder's commits instead:
# "run folder F (commit a + 4 more)".
FOLDER_COMMITS = re.compile(rf"run folder (\S+) \(commit ({HASH})(?: \+ (\d+) more)?\)")
# The run ids of a caption's rows ("run A + B, commit ..."), one a sweep.
RUN_ID = r"\d{8}T\d{6}Z-[\w.-]+"
RUN_IDS = re.compile(rf"run ({RUN_ID}(?: \+ {RUN_ID})*), commit")
# Sittings whose section still draws several of its sweeps into one figure or table, by the first
# run id of the pool, until a sitting of one sweep per figure replaces each: the patch-embedding
# sweeps of 20261202_NVIDIA_H200_patch_embed, the MLP widths and cuBLASLt algorithms of
# 20261122_NVIDIA_H200_mlp, the streams timeline of 20261203_NVIDIA_H200_sweeps.
POOLED_SITTINGS = {"20261202T202519Z-vm", "20261122T014711Z-vm", "20261203T101645Z-vm"}


def caption_problems(caption: str) -> str | None:
    """Why the rows a caption names are not one clean commit's ('' where they are); None where
    it names no commit."""
    if m := COMMITS.search(caption.strip()):
        commits = m.group(1).split(" + ")
        why = [f"rows of {len(commits)} commits"] if len(commits) > 1 else []
        why += [f"-dirty commit {c}" for c in commits if c.endswith("-dirty")]
    elif folders := FOLDER_COMMITS.findall(caption):
        why = [f"{f}: rows of {int(more) + 1} commits" for f, _, more in folders if more]
        why += [f"{f}: -dirty commit {c}" for f, c, _ in folders if c.endswith("-dirty")]
    else:
        return None
    if (r := RUN_IDS.search(caption)) and len(ids := r.group(1).split(" + ")) > 1 and ids[0] not in POOLED_SITTINGS:
        why.append(f"rows of {len(ids)} sweeps ({', '.join(ids)})")
    return "; ".join(why)


def figure_problems(pages: list[str]) -> dict[str, str]:
    """figure name -> why its rows are not one clean commit's; every figure found is a key
    ('' where it passes)."""
    out = {}
    for page in pages:
        for name, caption in FIGURE.findall(page):
            why = caption_problems(caption)
            out[name] = "its caption names no commit" if why is None else why
    return out


def table_problems(pages: list[str], tables: dict[str, str]) -> dict[str, str]:
    """table name -> why its rows are not one clean commit's, for every table of `tables` (name
    -> its file's text, caption first) that a page draws and whose caption names a commit."""
    out = {}
    for name, text in tables.items():
        caption = text.split("\n", 1)[0]
        if not any(f"\n{caption}\n" in page for page in pages):
            continue
        why = caption_problems(caption.strip("*"))
        if why is not None:
            out[name] = why
    return out


def main(root):
    root = Path(root).resolve()
    report = root / "report"
    pages = [(report / "README.md").read_text()]
    pages += [p.read_text() for p in sorted((report / "appendix").glob("*.md"))]
    problems = figure_problems(pages)
    figures = len(problems)
    tables = {p.stem: p.read_text() for p in sorted((report / "tables").glob("*.md"))}
    problems.update(table_problems(pages, tables))
    failures = []
    if not figures:
        failures.append("no figure found in report/README.md or its appendix pages")
    failures += [f"{name}: {why}: draw it from one clean sitting" for name, why in sorted(problems.items()) if why]
    for f in failures:
        print(f"figure_sources: {f}", file=sys.stderr)
    dirty = sum(1 for why in problems.values() if why)
    print(f"{figures} figures and {len(problems) - figures} tables naming their commits checked; "
          f"{dirty} not from one clean commit and sweep")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
