#!/usr/bin/env python3
"""Every stage version directory carries a NOTES.md with its changelog entry: the technique,
the predicted effect (written before measuring) and the measured effect, and the "In short"
lines the report lists (studylib/notes.py: predicted, measured, why); and the version
directories are exactly the family's list (stages/<family>/versions.def, the encoder's
steps.tsv): no version is built without its notes, no folder is left outside the list.
Run from the checkout (PYTHONPATH=. python3 tests/notes_present.py .), as meson does."""
import pathlib
import re
import sys

from studylib import notes as notes_md

REQUIRED = ["## Technique", "## Prediction", "## Measured"]


def listed(family):
    """The family's version list, or None for a folder without one."""
    if (family / "versions.def").is_file():
        return re.findall(r"^STUDY_VERSION\((\w+)\)", (family / "versions.def").read_text(), flags=re.M)
    if (family / "steps.tsv").is_file():
        rows = [line.split("\t") for line in (family / "steps.tsv").read_text().splitlines()]
        return [r[0] for r in rows if len(r) > 1 and r[1] == "step"]
    return None


def main(root):
    stages = pathlib.Path(root) / "stages"
    problems, checked = [], 0
    for family in sorted(p for p in stages.iterdir() if p.is_dir()):
        folders = {p.name for p in family.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
        names = listed(family)
        if names is None:
            problems.append(f"{family.relative_to(root)}: no versions.def (or steps.tsv) lists its versions")
        else:
            for v in sorted(set(names) - folders):
                problems.append(f"{family.relative_to(root)}: lists {v}, which has no folder")
            for v in sorted(folders - set(names)):
                problems.append(f"{family.relative_to(root)}/{v}: a folder its family's list does not name")
        for version in sorted(family / name for name in folders):
            checked += 1
            notes = version / "NOTES.md"
            if not notes.is_file():
                problems.append(f"{version.relative_to(root)}: no NOTES.md")
                continue
            text = notes.read_text()
            for heading in REQUIRED:
                if heading not in text:
                    problems.append(f"{notes.relative_to(root)}: missing section '{heading}'")
            try:
                notes_md.in_short(text)
            except notes_md.NotesError as e:
                problems.append(f"{notes.relative_to(root)}: {e}")
    for p in problems:
        print("FAIL", p)
    print(f"{checked} version directories checked, {len(problems)} problem(s)")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
