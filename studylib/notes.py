"""A version's NOTES.md as the report reads it: its title (what the version is) and its
"In short" section, three one-line bullets that the report lists version by version:

    ## In short

    - **Predicted**: the effect written down before the version was measured.
    - **Measured**: the effect measured, with the numbers that show it.
    - **Why**: why the two differ (or "As predicted", with what confirmed it).

The long sections (Technique, Prediction, Measured, Why, Lesson) hold the evidence; these lines are
what a reader of the report sees of each version, so each must stand alone and stay short."""
import re
from pathlib import Path

FIELDS = ("Predicted", "Measured", "Why")
MAX_CHARS = 220  # a line of the report's version list, not a paragraph
HEADING = "## In short"
_SECTION = re.compile(r"^## In short\s*\n(.*?)(?=^## |\Z)", re.M | re.S)
_BULLET = re.compile(r"^- \*\*(\w+)\*\*: (.+)$")


class NotesError(ValueError):
    """A NOTES.md whose "In short" section is missing or malformed."""


def title(text: str, version: str) -> str:
    """What a version is, from the title of its NOTES.md ('# name: what' or '# name — what')."""
    first = text.split("\n", 1)[0].lstrip("# ").strip()
    m = re.match(r"^" + re.escape(version) + r"\s*(?:[:\u2014-]+)\s*(.+)$", first)
    return m.group(1) if m else first


def in_short(text: str) -> dict:
    """The "In short" bullets as {field: line}; NotesError naming the first fault."""
    m = _SECTION.search(text)
    if not m:
        raise NotesError(f"no '{HEADING}' section")
    found = {}
    for line in m.group(1).strip().splitlines():
        b = _BULLET.match(line)
        if not b:
            raise NotesError(f"'{HEADING}': a line that is not '- **Field**: text': {line[:60]!r}")
        field, body = b.groups()
        if field not in FIELDS:
            raise NotesError(f"'{HEADING}': unknown field '{field}' (fields: {', '.join(FIELDS)})")
        if field in found:
            raise NotesError(f"'{HEADING}': '{field}' twice")
        if len(body) > MAX_CHARS:
            raise NotesError(f"'{HEADING}': '{field}' is {len(body)} characters (at most {MAX_CHARS})")
        found[field] = body.strip()
    missing = [f for f in FIELDS if f not in found]
    if missing:
        raise NotesError(f"'{HEADING}': no {', '.join(missing)}")
    return {f: found[f] for f in FIELDS}


def idea(family: str, version: str) -> str:
    """What a version of a family is (its NOTES.md title), "-" for one without NOTES (an anchor)."""
    from studylib.paths import REPO
    path = REPO / "stages" / family / version / "NOTES.md"
    return title(path.read_text(), version) if path.is_file() else "-"


def read(path: Path, version: str) -> dict:
    """{'title': ..., 'Predicted': ..., 'Measured': ..., 'Why': ...} of one NOTES.md; NotesError
    names the file."""
    text = Path(path).read_text()
    try:
        return {"title": title(text, version), **in_short(text)}
    except NotesError as e:
        raise NotesError(f"{path}: {e}") from None
