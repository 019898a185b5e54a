#!/usr/bin/env python3
"""Every stage version directory carries a NOTES.md with its changelog entry: the technique,
the predicted effect (written before measuring) and the measured effect."""
import pathlib
import sys

REQUIRED = ["## Technique", "## Prediction", "## Measured"]


def main(root):
    stages = pathlib.Path(root) / "stages"
    problems, checked = [], 0
    for family in sorted(p for p in stages.iterdir() if p.is_dir()):
        for version in sorted(p for p in family.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            checked += 1
            notes = version / "NOTES.md"
            if not notes.is_file():
                problems.append(f"{version.relative_to(root)}: no NOTES.md")
                continue
            text = notes.read_text()
            for heading in REQUIRED:
                if heading not in text:
                    problems.append(f"{notes.relative_to(root)}: missing section '{heading}'")
    for p in problems:
        print("FAIL", p)
    print(f"{checked} version directories checked, {len(problems)} problem(s)")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
