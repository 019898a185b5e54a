"""The crash-safe CSV of a sweep's rows: read back with a truncated last line cut off, checked
against the schema's header, and appended one whole line at a time, flushed and fsynced, so that a
killed sweep resumes without losing or duplicating rows. Standard library only.
"""
import csv
import datetime
import fcntl
import io
import os
import tempfile
from pathlib import Path

from studylib.schema import COLUMNS, UTC_FORMAT
from studylib.specs import UsageError, row_key

HEADER_LINE = ",".join(COLUMNS)
# One run id is one sitting: a stopped sweep resumed within this of its last row keeps its run
# id (experiments/sweep/run.py), and no committed run id has rows further apart
# (tests/clean_rows.py).
SITTING_GAP = datetime.timedelta(hours=2)


def parse_utc(text):
    """A row's `utc` as an aware datetime; None where it is empty or not that format."""
    try:
        return datetime.datetime.strptime(str(text), UTC_FORMAT).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def clean_cell(v):
    return "" if v is None else str(v).replace("\r", " ").replace("\n", " ")


def format_row(row):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([clean_cell(row.get(c)) for c in COLUMNS])
    return buf.getvalue()


def header_difference(line):
    """What separates a header line from the schema's, in words (as common/harness/csv.cpp says it)."""
    got = next(csv.reader([line]), [])
    missing = [c for c in COLUMNS if c not in got]
    extra = [c or "(empty)" for c in got if c not in COLUMNS]
    parts = []
    if missing:
        parts.append("lacks column(s) " + ", ".join(missing))
    if extra:
        parts.append("has unknown column(s) " + ", ".join(extra))
    return "header " + ("; ".join(parts) if parts else "has the same columns in another order")


def parse_csv_text(text, source):
    """Rows of a study CSV as dicts. Returns (rows, problems): lines that are not rows of the
    schema are reported, not used. A text not ending in a newline has a truncated last line,
    which is dropped (and reported)."""
    problems = []
    if not text:
        return [], problems
    if not text.endswith("\n"):
        cut = text.rfind("\n") + 1
        problems.append(f"{source}: dropped a truncated last line ({len(text) - cut} bytes)")
        text = text[:cut]
    lines = text.splitlines()
    if not lines:
        return [], problems
    if lines[0] != HEADER_LINE:
        raise UsageError(f"{source}: {header_difference(lines[0])} of the study's CSV schema; "
                         "rows appended to it would land in the wrong columns: use a new "
                         "output file")
    rows = []
    for n, fields in enumerate(csv.reader(lines[1:]), start=2):
        if len(fields) != len(COLUMNS):
            problems.append(f"{source}:{n}: {len(fields)} fields instead of {len(COLUMNS)}, ignored")
            continue
        rows.append(dict(zip(COLUMNS, fields)))
    return rows, problems


def read_csv(path):
    with open(path, "r", encoding="utf-8", newline="") as f:
        return parse_csv_text(f.read(), str(path))


class Output:
    """The output CSV, held with an exclusive lock so two runners never interleave rows."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.f = open(self.path, "a+", encoding="utf-8", newline="")
        except OSError as e:
            raise UsageError(f"cannot write output CSV '{path}': {e.strerror}")
        try:
            fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another sweep runner is writing '{path}'")
        except OSError:
            pass  # a filesystem without locks: carry on, the README asks for one runner per file
        self.f.seek(0)
        text = self.f.read()
        self.rows, self.problems = parse_csv_text(text, str(path))
        if text and not text.endswith("\n"):
            # Cut the partial line off the file itself so the next row starts on its own line.
            self.f.truncate(text.rfind("\n") + 1)
        if self.f.seek(0, os.SEEK_END) == 0:
            self._write(HEADER_LINE + "\n")
        self.keys = {row_key(r) for r in self.rows}

    def _write(self, text):
        self.f.write(text)
        self.f.flush()
        os.fsync(self.f.fileno())

    def append(self, row):
        """Appends a row unless a row with its key is already there; returns whether it did."""
        k = row_key(row)
        if k in self.keys:
            return False
        self._write(format_row(row))
        self.keys.add(k)
        self.rows.append(row)
        return True

    def drop_statuses(self, statuses, keys):
        """Rewrites the file without the rows of `keys` whose status is in `statuses` (for
        --retry), atomically: a new file is written next to it and renamed over it."""
        keep = [r for r in self.rows if not (r["status"] in statuses and row_key(r) in keys)]
        dropped = len(self.rows) - len(keep)
        if not dropped:
            return 0
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as t:
            t.write(HEADER_LINE + "\n")
            for r in keep:
                t.write(format_row(r))
            t.flush()
            os.fsync(t.fileno())
        os.replace(tmp, self.path)
        old = self.f
        self.f = open(self.path, "a+", encoding="utf-8", newline="")
        try:
            fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass
        old.close()
        self.rows = keep
        self.keys = {row_key(r) for r in keep}
        return dropped
