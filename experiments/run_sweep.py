#!/usr/bin/python3
"""Sweep runner: expands a spec (experiments/specs/*.toml) into configurations, runs each as a
subprocess (a stage bench or a PyTorch anchor) and appends its rows to one CSV.

Crash safety: every configuration writes into a private temporary CSV; its rows are appended
to the output only once the subprocess has ended, one whole line at a time, flushed and
fsynced. On start the output is read back (a truncated last line is cut off) and every
configuration whose rows are already there is skipped, so a killed sweep resumes without
losing or duplicating rows.

  /usr/bin/python3 experiments/run_sweep.py --spec layernorm_quick --out results/ln.csv
  /usr/bin/python3 experiments/run_sweep.py --spec layernorm --dry-run
  /usr/bin/python3 experiments/run_sweep.py --spec layernorm --shard 1 --num-shards 4 --out s1.csv

See experiments/README.md for the spec format.
"""

import argparse
import csv
import datetime
import fcntl
import io
import os
import json
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parent
REPO = EXPERIMENTS.parent
sys.path.insert(0, str(EXPERIMENTS / "anchors"))
from common import COLUMNS, MODELS, PATCH, SERVE_DONE  # noqa: E402  (the one schema, shared with anchors)
sys.path.insert(0, str(EXPERIMENTS.parent / "analysis"))
import steps as step_table  # noqa: E402  (the encoder's step table, stages/encoder/steps.tsv)
sys.path.insert(0, str(EXPERIMENTS))
import run_readme  # noqa: E402  (the run folder's README: what its CSVs hold)

EXIT_OK, EXIT_FAILED_ROWS, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 4
STATUSES = ("ok", "skipped", "failed")
HEADER_LINE = ",".join(COLUMNS)
NO_DEVICE = "no CUDA device"  # the benches' and anchors' note when there is no GPU

# The CSV schema has no column for a configuration's extra arguments, yet they are part of its
# identity; the runner records them at the end of the row's note, in this form.
EXTRA_RE = re.compile(r"\s*\[extra: (.*)\]$")
# `streams = ["sm"]`: the bench writes the resolved count in the streams column; the runner
# tags the row's note so that the row keeps the configuration's identity ("sm").
STREAMS_SM = "sm"
STREAMS_SM_TAG = "[streams: sm]"
# Interleaved rounds (`--rounds N`, spec key `rounds`): every configuration runs N times, all
# versions of a shape once, then all again. Each row of a multi-round sweep is tagged with its
# round in the note; a row without the tag is round 1 (a single-round sweep writes no tag).
ROUND_RE = re.compile(r"\[round: (\d+)\]")


def round_tag(k):
    return f"[round: {k}]"


class SpecError(Exception):
    pass


class UsageError(Exception):
    pass


# ---- spec -------------------------------------------------------------------------------------

SPEC_KEYS = {
    "description": str, "family": str, "versions": list, "anchors": list, "anchor_script": str,
    "binary": str, "row_versions": list, "models": list, "batches": list, "image_sizes": list,
    "streams": list, "warmup": int, "iters": int, "seed": int, "flush_l2": (bool, list),
    "check": bool, "timeout_s": (int, float), "extra_args": list, "max_device_gib": (int, float),
    "shapeless": bool, "side_experiment": bool, "rounds": int, "energy_s": (int, float),
    "keep_anchors": bool,
}
DEFAULT_BINARY = "stages/{family}/{family}_{version}"


def _need_list_of(spec, key, kind, positive=False, allow_empty=False):
    value = spec[key]
    if not isinstance(value, list) or (not value and not allow_empty):
        raise SpecError(f"'{key}' must be a non-empty list")
    for v in value:
        if not isinstance(v, kind) or isinstance(v, bool) is not (kind is bool):
            raise SpecError(f"'{key}' must hold only {kind.__name__} values, got {v!r}")
        if positive and v <= 0:
            raise SpecError(f"'{key}' values must be positive, got {v!r}")
    if len(set(map(repr, value))) != len(value):
        raise SpecError(f"'{key}' lists a value twice")
    return value


def load_spec(path):
    """Reads and validates a spec; SpecError names the offending key."""
    try:
        with open(path, "rb") as f:
            spec = tomllib.load(f)
    except OSError as e:
        raise SpecError(f"cannot read spec: {e.strerror}")
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"not valid TOML: {e}")
    for key, value in spec.items():
        if key not in SPEC_KEYS:
            raise SpecError(f"unknown key '{key}' (known: {', '.join(sorted(SPEC_KEYS))})")
        kinds = SPEC_KEYS[key] if isinstance(SPEC_KEYS[key], tuple) else (SPEC_KEYS[key],)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise SpecError(f"'{key}' has the wrong type ({type(value).__name__})")
    s = dict(spec)
    # shapeless: the rows leave model, batch and image_size empty (ceilings measures the GPU,
    # not a ViT shape), so those columns are not part of a row's identity.
    s.setdefault("shapeless", False)
    # side_experiment: its rows go into their own sub-folder of a run folder (--run-dir), so
    # they never merge into the family's main sweep when the run is read.
    s.setdefault("side_experiment", False)
    if s["shapeless"]:
        for key, default in (("models", ["vit_b"]), ("batches", [1]), ("image_sizes", [224])):
            if len(s.setdefault(key, default)) != 1:
                raise SpecError(f"'{key}' takes one value at most with shapeless = true")
    for key in ("family", "models", "batches", "image_sizes"):
        if key not in s:
            raise SpecError(f"missing required key '{key}'")
    s.setdefault("versions", [])
    s.setdefault("anchors", [])
    s.setdefault("streams", [1])
    s.setdefault("warmup", 5)
    s.setdefault("iters", 10)
    s.setdefault("seed", 1234)
    s.setdefault("flush_l2", False)
    s.setdefault("check", True)
    s.setdefault("timeout_s", 600)
    s.setdefault("extra_args", [[]])
    s.setdefault("max_device_gib", 0)
    s.setdefault("binary", DEFAULT_BINARY)
    s.setdefault("row_versions", [])
    s.setdefault("rounds", 1)
    # energy_s: each row's energy loop after its timing (--energy; docs/method.md, "Energy").
    s.setdefault("energy_s", 0)
    # keep_anchors: the anchor script answers every row in one process (--serve, AnchorWorker),
    # so what it compiles for a shape serves every later round of that shape.
    s.setdefault("keep_anchors", False)
    if not 0 <= s["energy_s"] <= 600:
        raise SpecError("'energy_s' must be seconds between 0 and 600")
    if s["rounds"] < 1:
        raise SpecError(f"'rounds' must be >= 1, got {s['rounds']}")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", s["family"]):
        raise SpecError(f"'family' must be a plain lower-case name, got {s['family']!r}")
    for m in _need_list_of(s, "models", str):
        if m not in MODELS:
            raise SpecError(f"'models' has unknown model '{m}' (known: {', '.join(MODELS)})")
    _need_list_of(s, "batches", int, positive=True)
    for size in _need_list_of(s, "image_sizes", int, positive=True):
        if size % PATCH:
            raise SpecError(f"'image_sizes' value {size} is not a multiple of the patch size 16")
    # "sm": one stream per SM of the GPU, which the bench resolves and records as a number.
    streams = s["streams"]
    if not isinstance(streams, list) or not streams:
        raise SpecError("'streams' must be a non-empty list")
    for v in streams:
        if v != STREAMS_SM and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
            raise SpecError(f"'streams' values must be positive integers or \"sm\", got {v!r}")
    if len(set(map(repr, streams))) != len(streams):
        raise SpecError("'streams' lists a value twice")
    if s["warmup"] < 0 or s["iters"] < 1 or s["seed"] < 0:
        raise SpecError("'warmup' must be >= 0, 'iters' >= 1 and 'seed' >= 0")
    if s["timeout_s"] <= 0:
        raise SpecError("'timeout_s' must be positive")
    if s["max_device_gib"] < 0:
        raise SpecError("'max_device_gib' must be >= 0 (0: no memory budget)")
    s["flush_l2"] = s["flush_l2"] if isinstance(s["flush_l2"], list) else [s["flush_l2"]]
    _need_list_of(s, "flush_l2", bool)
    if not isinstance(s["extra_args"], list) or not s["extra_args"] or not all(
            isinstance(a, list) and all(isinstance(x, str) for x in a) for a in s["extra_args"]):
        raise SpecError("'extra_args' must be a list of argument lists, e.g. [[], [\"--rows\", \"64\"]]")
    if len({tuple(a) for a in s["extra_args"]}) != len(s["extra_args"]):
        raise SpecError("'extra_args' lists an argument list twice")
    versioned = "{version}" in s["binary"]
    if versioned:
        if s["row_versions"]:
            raise SpecError("'row_versions' is only for a 'binary' without {version}")
    else:
        if s["versions"]:
            raise SpecError("'binary' has no {version} placeholder, so 'versions' cannot be used: "
                            "list the rows one invocation writes in 'row_versions'")
        _need_list_of(s, "row_versions", str)
    for key in ("versions", "anchors"):
        if s[key]:
            _need_list_of(s, key, str)
    if s["anchors"] and "anchor_script" not in s:
        raise SpecError("'anchors' needs 'anchor_script' (a script in experiments/anchors/, or a "
                        "path ending in .py)")
    if s["keep_anchors"] and not s["anchors"]:
        raise SpecError("'keep_anchors' needs 'anchors'")
    if not s["versions"] and not s["anchors"] and not s["row_versions"]:
        raise SpecError("nothing to run: give 'versions', 'anchors' or 'row_versions'")
    s["versions"] = resolve_versions(s["family"], s["versions"])
    clash = set(s["versions"]) & set(s["anchors"])
    if clash:
        raise SpecError(f"'versions' and 'anchors' both list {sorted(clash)}")
    return s


def resolve_versions(family, names):
    """A spec's versions with the version lists' words resolved: "@versions" is every version of
    the family in its list's order (stages/<family>/versions.def; the encoder's step table); for
    the encoder an alias (fastest_fp16, fastest_fp8) is the step it names. A version named twice
    runs once."""
    aliases = step_table.aliases() if family == "encoder" else {}
    out = []
    for name in names:
        if name == "@versions":
            out += family_versions(family)
        else:
            out.append(aliases[name]["step"] if name in aliases else name)
    return list(dict.fromkeys(out))


def family_versions(family):
    if family == "encoder":
        return step_table.ladder()
    path = EXPERIMENTS.parent / "stages" / family / "versions.def"
    if not path.is_file():
        raise SpecError(f"'@versions': family '{family}' has no version list ({path})")
    return re.findall(r"^STUDY_VERSION\((\w+)\)", path.read_text(), flags=re.M)


def output_name(spec_path, spec):
    """Where a spec's rows go inside a run folder: <name>.csv, or <name>/<name>.csv for a side
    experiment; <name> is the spec's file name without `.toml` and without `_quick` (a quick
    sweep lands where its full sweep would)."""
    name = Path(spec_path).stem
    name = name[:-len("_quick")] if name.endswith("_quick") else name
    return Path(name, name + ".csv") if spec["side_experiment"] else Path(name + ".csv")


def find_spec(name):
    """A path as given, else experiments/specs/<name>[.toml]."""
    p = Path(name)
    if p.is_file():
        return p
    for cand in (EXPERIMENTS / "specs" / name, EXPERIMENTS / "specs" / (name + ".toml")):
        if cand.is_file():
            return cand
    raise UsageError(f"spec '{name}' not found (neither a file nor in {EXPERIMENTS / 'specs'})")


# ---- configurations and keys ------------------------------------------------------------------

def extra_text(extra):
    return " ".join(shlex.quote(a) for a in extra)


def make_key(family, version, model, batch, image_size, streams, flush_l2, extra="", round_=1):
    """A configuration's identity in one round; rows with equal keys are the same
    measurement."""
    return (str(family).strip(), str(version).strip(), str(model).strip(),
            _norm_int(batch), _norm_int(image_size), _norm_int(streams),
            "1" if str(flush_l2).strip().lower() in ("1", "true") else "0", str(extra).strip(),
            str(int(round_)))


def _norm_int(v):
    text = str(v).strip()
    return str(int(text)) if re.fullmatch(r"[+-]?\d+", text) else text


def row_key(row):
    note = row.get("note", "") or ""
    m = EXTRA_RE.search(note)
    streams = STREAMS_SM if STREAMS_SM_TAG in note else row.get("streams", "")
    return make_key(row.get("family", ""), row.get("version", ""), row.get("model", ""),
                    row.get("batch", ""), row.get("image_size", ""), streams,
                    row.get("flush_l2", ""), m.group(1) if m else "", row_round(row))


def row_round(row):
    """The round a row was measured in: its note's `[round: k]`, else 1."""
    m = ROUND_RE.search(row.get("note", "") or "")
    return int(m.group(1)) if m else 1


class Config:
    """One subprocess invocation; `expect` are the versions of the rows it must write."""

    def __init__(self, index, spec, kind, label, expect, model, batch, image_size, streams,
                 flush_l2, extra, round_=1, rounds=1):
        self.index, self.kind, self.label, self.expect = index, kind, label, tuple(expect)
        # Round round_ of rounds; every round of a configuration shares its index (and shard).
        self.round, self.rounds = round_, rounds
        self.family = spec["family"]
        self.model, self.batch, self.image_size = model, batch, image_size
        self.streams, self.flush_l2, self.extra = streams, flush_l2, tuple(extra)
        self.warmup, self.iters, self.seed = spec["warmup"], spec["iters"], spec["seed"]
        self.check, self.timeout_s = spec["check"], spec["timeout_s"]
        self.shapeless, self.energy_s = spec["shapeless"], spec["energy_s"]

    def keys(self):
        shape = ("", "", "") if self.shapeless else (self.model, self.batch, self.image_size)
        return [make_key(self.family, v, *shape, self.streams, "1" if self.flush_l2 else "0",
                         extra_text(self.extra), self.round)
                for v in self.expect]

    def describe(self):
        s = (f"#{self.index} {self.label} model={self.model} batch={self.batch} "
             f"image_size={self.image_size} streams={self.streams} flush_l2={int(self.flush_l2)}")
        s += f" extra={extra_text(self.extra)}" if self.extra else ""
        return s + (f" round={self.round}/{self.rounds}" if self.rounds > 1 else "")

    def args(self, csv_path, device):
        a = ["--batch", str(self.batch), "--image-size", str(self.image_size),
             "--model", self.model, "--streams", str(self.streams),
             "--warmup", str(self.warmup), "--iters", str(self.iters),
             "--seed", str(self.seed), "--csv", csv_path, "--device", str(device)]
        if self.flush_l2:
            a.append("--flush-l2")
        if not self.check:
            a.append("--no-check")
        if self.energy_s:
            a += ["--energy", f"{self.energy_s:g}"]
        return a + list(self.extra)


def expand(spec, rounds=None):
    """All configurations in a fixed order: shapes outside, versions inside, so the versions
    of one shape run close together in time (fairer comparisons), and index i is stable for
    a given spec (sharding takes i % n). With rounds > 1 (default: the spec's `rounds`) the
    versions of a shape run once, then again, `rounds` times (interleaved rounds: a slow
    moment of the machine lands on one round of every version, not on every round of one);
    the rounds of a configuration share its index, so they stay in one shard."""
    rounds = spec.get("rounds", 1) if rounds is None else rounds
    runs = [("bench", v, [v]) for v in spec["versions"]]
    if spec["row_versions"]:
        runs.append(("bench", "+".join(spec["row_versions"]), spec["row_versions"]))
    runs += [("anchor", a, [a]) for a in spec["anchors"]]
    out, index = [], 0
    for model in spec["models"]:
        for image in spec["image_sizes"]:
            for batch in spec["batches"]:
                for streams in spec["streams"]:
                    for flush in spec["flush_l2"]:
                        for extra in spec["extra_args"]:
                            first = index
                            for k in range(1, rounds + 1):
                                index = first
                                for kind, label, expect in runs:
                                    out.append(Config(index, spec, kind, label, expect, model,
                                                      batch, image, streams, flush, extra,
                                                      k, rounds))
                                    index += 1
    return out


# ---- memory budget hook -----------------------------------------------------------------------

def _extra_value(extra, flag):
    for i, a in enumerate(extra):
        if a == flag and i + 1 < len(extra):
            return int(extra[i + 1])
        if a.startswith(flag + "="):
            return int(a.split("=", 1)[1])
    return None


def estimate_device_bytes(cfg):
    """Rough device memory a configuration needs, or None when the family has no estimate.
    Only used to skip configurations above the spec's max_device_gib with a clear reason."""
    hidden, heads, _ = MODELS[cfg.model]
    tokens = (cfg.image_size // PATCH) ** 2 + 1
    try:
        rows = _extra_value(cfg.extra, "--rows") or cfg.batch * tokens
        hidden = _extra_value(cfg.extra, "--hidden") or hidden
    except ValueError:
        return None
    h = 2  # fp16 bytes
    if cfg.family == "layernorm":
        return 2 * rows * hidden * h + 2 * hidden * h
    if cfg.family == "attention":  # packed QKV + output, plus a materialized fp32 score matrix
        return rows * 4 * hidden * h + cfg.batch * heads * tokens * tokens * 4
    if cfg.family == "patch_embed":  # images, their patch-major copy, GEMM product, token rows
        images = cfg.batch * 3 * cfg.image_size ** 2 * h
        return 2 * images + 2 * rows * hidden * h + hidden * 768 * h
    if cfg.family == "mlp":  # x, 4x intermediate, y, residual and both weight matrices
        return rows * hidden * h * 7 + 8 * hidden * hidden * h
    if cfg.family == "patch_embed":  # images twice (v4's second copy), token rows, weights
        return (2 * cfg.batch * 3 * cfg.image_size ** 2 * h + rows * hidden * h
                + (3 * PATCH * PATCH + 1 + tokens) * hidden * h)
    return None


# ---- CSV files --------------------------------------------------------------------------------

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


# ---- running one configuration ----------------------------------------------------------------

class Terminated(Exception):
    pass


def _on_signal(signum, _frame):
    raise Terminated(signum)


def runner_row(cfg, version, status, note, prov):
    """A row the runner writes itself (the subprocess wrote none, or the budget skipped it)."""
    try:
        hidden = _extra_value(cfg.extra, "--hidden") or MODELS[cfg.model][0]
    except ValueError:
        hidden = ""
    row = {"family": cfg.family, "version": version, "model": cfg.model, "batch": cfg.batch,
           "image_size": cfg.image_size, "tokens": (cfg.image_size // PATCH) ** 2 + 1,
           "hidden": hidden, "streams": "" if cfg.streams == STREAMS_SM else cfg.streams,
           "warmup": cfg.warmup, "iters": cfg.iters,
           "flush_l2": "1" if cfg.flush_l2 else "0", "status": status, "note": note}
    try:
        row["rows"] = _extra_value(cfg.extra, "--rows") or cfg.batch * (
            _extra_value(cfg.extra, "--tokens") or row["tokens"])
    except ValueError:
        row["rows"] = ""
    if cfg.shapeless:
        row.update(model="", batch="", image_size="", tokens="", hidden="", rows="")
    row.update(prov)
    row["utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return row


def with_extra_note(row, cfg):
    """The runner's tags at the end of the note: `[streams: sm]`, `[round: k]` (multi-round
    sweeps only), then `[extra: ...]`, which stays last."""
    note = row.get("note", "") or ""
    m = EXTRA_RE.search(note)
    body = EXTRA_RE.sub("", note)
    tags = []
    if cfg.streams == STREAMS_SM and STREAMS_SM_TAG not in note:
        tags.append(STREAMS_SM_TAG)
    if cfg.rounds > 1 and not ROUND_RE.search(note):
        tags.append(round_tag(cfg.round))
    if tags:
        row["note"] = " ".join(([body] if body else []) + tags) + (m.group(0) if m else "")
    if cfg.extra:
        note = EXTRA_RE.sub("", row.get("note", "") or "")
        row["note"] = (note + " " if note else "") + f"[extra: {extra_text(cfg.extra)}]"
    return row


class Outcome:
    def __init__(self, rows, returncode, timed_out, last_stderr):
        self.rows, self.returncode = rows, returncode
        self.timed_out, self.last_stderr = timed_out, last_stderr

    def reason(self, timeout_s):
        """Why a row is missing, for the `failed` row the runner writes in its place."""
        tail = f": {self.last_stderr}" if self.last_stderr else ""
        if self.timed_out:
            return f"timeout after {timeout_s:g} s{tail}"
        if self.returncode is None:
            return self.last_stderr
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}, no row{tail}"
        return f"exit code {self.returncode}, no row{tail}"


def collect(cfg, csv_path, lines):
    """The rows a configuration wrote into its private CSV; a problem reading them is added to
    `lines` (its stderr), whose last line explains a missing row."""
    rows = []
    if os.path.exists(csv_path):
        try:
            rows, problems = read_csv(csv_path)
        except UsageError as e:
            rows, problems = [], [str(e)]
        for p in problems:
            print(f"  warning: {cfg.label}: {p}", file=sys.stderr)
            lines.append(p)
    return rows


def run_config(cfg, cmd, env, timeout_s, verbose):
    """Runs one configuration into a private temporary CSV and returns its Outcome."""
    with tempfile.TemporaryDirectory(prefix="study_sweep_") as tmpdir:
        csv_path = os.path.join(tmpdir, "rows.csv")
        full = cmd + cfg.args(csv_path, env["STUDY_SWEEP_DEVICE"])
        if verbose:
            print("  $ " + " ".join(shlex.quote(c) for c in full), flush=True)
        # Own session, so a timeout or an interrupted runner kills the bench and its children.
        try:
            proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, errors="replace", env=env, start_new_session=True)
        except OSError as e:  # e.g. the binary is being relinked right now
            return Outcome([], None, False, f"cannot run {full[0]}: {e.strerror}")
        timed_out = False
        try:
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            raise
        if verbose:
            for line in (out + err).strip().splitlines():
                print("  | " + line, flush=True)
        lines = [l.strip() for l in err.splitlines() if l.strip()]
        rows = collect(cfg, csv_path, lines)
        return Outcome(rows, proc.returncode, timed_out, lines[-1] if lines else "")


class AnchorWorker:
    """One long-lived process of an anchor script (`SCRIPT --serve`, anchors/common.py serve())
    answering the rows of a sweep's anchors in turn: a compiled model is then compiled once per
    shape, not once per round. A row keeps its own timeout: past it the process is killed (its
    row is `failed`) and the next row starts a new one. stderr goes to a file opened for
    appending, read back from where each row began."""

    def __init__(self, cmd, env):
        self.cmd, self.env = cmd, env
        self.proc = self.err = None

    def _start(self):
        if self.err is not None:
            self.err.close()
        self.err = tempfile.TemporaryFile(mode="a+", errors="replace")
        # Unbuffered bytes: readline() then never reads past the line select() saw arrive, so
        # the next select() cannot miss a line already read into a buffer.
        self.proc = subprocess.Popen(self.cmd + ["--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, bufsize=0,
                                     env=self.env, start_new_session=True)

    def _kill(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            self.proc = None

    def close(self):
        """Ends the process: end of its input, then a kill if it does not exit in 30 s."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        if self.err is not None:
            self.err.close()
            self.err = None

    def run(self, cfg, timeout_s, verbose):
        with tempfile.TemporaryDirectory(prefix="study_sweep_") as tmpdir:
            csv_path = os.path.join(tmpdir, "rows.csv")
            argv = ["--version", cfg.label] + cfg.args(csv_path, self.env["STUDY_SWEEP_DEVICE"])
            if self.proc is None or self.proc.poll() is not None:
                self._kill()
                try:
                    self._start()
                except OSError as e:
                    return Outcome([], None, False, f"cannot run {self.cmd[0]}: {e.strerror}")
            if verbose:
                print("  $ (kept) " + " ".join(shlex.quote(c) for c in self.cmd + argv), flush=True)
            self.err.seek(0, os.SEEK_END)
            err_from = self.err.tell()
            code, timed_out = None, False
            deadline = time.monotonic() + timeout_s
            try:
                self.proc.stdin.write((json.dumps(argv) + "\n").encode())
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                        timed_out = True
                        break
                    line = self.proc.stdout.readline().decode(errors="replace")
                    if not line:   # the process ended without answering
                        break
                    answer = line.split()
                    if len(answer) == 2 and answer[0] == SERVE_DONE and answer[1].lstrip("-").isdigit():
                        code = int(answer[1])
                        break
                    if verbose:
                        print("  | " + line.rstrip(), flush=True)
            except (BrokenPipeError, ValueError):
                pass
            except BaseException:
                self._kill()
                raise
            if code is None:   # timed out or died: the next row gets a fresh process
                if not timed_out:
                    try:
                        code = self.proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:   # closed its output, still running
                        pass
                self._kill()
            self.err.seek(err_from)
            lines = [l.strip() for l in self.err.read().splitlines() if l.strip()]
            rows = collect(cfg, csv_path, lines)
            return Outcome(rows, code, timed_out, lines[-1] if lines else "")


# ---- main -------------------------------------------------------------------------------------

def git_commit():
    try:
        r = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=REPO,
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def hms(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", required=True, help="spec file, or a name in experiments/specs/")
    p.add_argument("--out", help="output CSV (appended to; resumed when it has rows)")
    p.add_argument("--run-dir", help="run folder: the output is RUN_DIR/<spec name>.csv, or "
                                     "RUN_DIR/<spec name>/<spec name>.csv for a side experiment "
                                     "(instead of --out)")
    p.add_argument("--build-dir", default=str(REPO / "build"), help="meson build dir (default: build)")
    p.add_argument("--shard", type=int, default=0, help="run configurations i with i %% n == shard")
    p.add_argument("--num-shards", type=int, default=1)
    p.add_argument("--rounds", type=int,
                   help="interleaved rounds: every configuration N times, all versions of a "
                        "shape, then all again (default: the spec's `rounds`, else 1); rows "
                        "are tagged [round: k] in the note")
    p.add_argument("--dry-run", action="store_true", help="list the configurations, run nothing")
    p.add_argument("--check-only", action="store_true",
                   help="validate the spec and that every binary exists, then exit (submit.sh uses it)")
    p.add_argument("--run-id", help="provenance run id (default: $STUDY_RUN_ID, else UTC time + host)")
    p.add_argument("--timeout", type=float, help="seconds per configuration (default: the spec's timeout_s)")
    p.add_argument("--max-minutes", type=float, default=0,
                   help="start no configuration after this many minutes; exit 4, rerun to resume")
    p.add_argument("--device", type=int, default=0, help="CUDA device index passed to every bench")
    p.add_argument("--python", default=os.environ.get("STUDY_PYTHON") or sys.executable,
                   help="python that runs the anchors (default: $STUDY_PYTHON, else this one)")
    p.add_argument("--skip-unbuilt", action="store_true",
                   help="leave out versions whose binary is not built instead of failing")
    p.add_argument("--retry", default="", metavar="STATUSES",
                   help="comma list (failed,skipped): drop this spec's rows with that status and rerun them")
    p.add_argument("--strict", action="store_true", help="exit 1 when a row of this run failed")
    p.add_argument("--verbose", action="store_true", help="show commands and their output")
    a = p.parse_args(argv)
    if a.num_shards < 1 or not 0 <= a.shard < a.num_shards:
        raise UsageError(f"need 0 <= --shard < --num-shards, got {a.shard} and {a.num_shards}")
    if a.out and a.run_dir:
        raise UsageError("give --out or --run-dir, not both")
    if not (a.dry_run or a.check_only) and not (a.out or a.run_dir):
        raise UsageError("--out or --run-dir is required (unless --dry-run or --check-only)")
    if a.rounds is not None and a.rounds < 1:
        raise UsageError(f"--rounds must be >= 1, got {a.rounds}")
    if a.timeout is not None and a.timeout <= 0:
        raise UsageError("--timeout must be positive")
    a.retry = [s for s in a.retry.split(",") if s]
    bad = [s for s in a.retry if s not in STATUSES]
    if bad:
        raise UsageError(f"--retry takes statuses from {STATUSES}, got {bad}")
    return a


def command_for(cfg, spec, build_dir, python):
    if cfg.kind == "anchor":
        name = spec["anchor_script"]   # a script of experiments/anchors/, or a path to one
        script = Path(name) if name.endswith(".py") else EXPERIMENTS / "anchors" / (name + ".py")
        return [python, str(script), "--version", cfg.label], script
    rel = spec["binary"].format(family=spec["family"], version=cfg.label)
    binary = Path(build_dir) / rel
    return [str(binary)], binary


def varying(cfg, spec):
    """The axes of the progress line beyond version, batch and image: only those the spec varies."""
    parts = []
    if len(spec["models"]) > 1:
        parts.append(cfg.model)
    if len(spec["streams"]) > 1:
        parts.append(f"streams={cfg.streams}")
    if len(spec["flush_l2"]) > 1:
        parts.append(f"flush={int(cfg.flush_l2)}")
    if cfg.extra:
        parts.append(extra_text(cfg.extra))
    if cfg.rounds > 1:
        parts.append(f"round {cfg.round}/{cfg.rounds}")
    return "".join(" " + p for p in parts)


def select_configs(spec, build_dir, python, shard=0, num_shards=1, skip_unbuilt=False,
                   dry_run=False, rounds=None):
    """This shard's configurations and their commands. Every binary must exist before anything
    runs (a sweep that dies an hour in on a missing version wastes the allocation), unless
    skip_unbuilt leaves those versions out, or dry_run only warns."""
    configs = [c for c in expand(spec, rounds) if c.index % num_shards == shard]
    commands, missing = {}, {}
    for c in configs:
        cmd, path = command_for(c, spec, build_dir, python)
        commands[c.index] = cmd
        if not path.is_file():
            missing.setdefault(path, []).append(c)
    if missing:
        anchors = [p for p, cs in missing.items() if cs[0].kind == "anchor"]
        if anchors:
            raise UsageError(f"anchor script {anchors[0]} not found (spec key 'anchor_script')")
        names = ", ".join(str(p) for p in missing)
        if skip_unbuilt:
            print(f"warning: not built, left out: {names}", file=sys.stderr)
            left_out = {c.index for cs in missing.values() for c in cs}
            configs = [c for c in configs if c.index not in left_out]
        elif dry_run:
            print(f"warning: not built yet: {names}", file=sys.stderr)
        elif not Path(build_dir).is_dir():
            raise UsageError(f"build dir {build_dir} does not exist: run `meson setup "
                             f"{build_dir}` and `ninja -C {build_dir}` first")
        else:
            raise UsageError(f"bench binaries not found: {names}; run `ninja -C {build_dir}` "
                             "first (or --skip-unbuilt to leave those versions out)")
    return configs, commands


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spec_path = find_spec(args.spec)
    try:
        spec = load_spec(spec_path)
    except SpecError as e:
        raise UsageError(f"bad spec {spec_path}: {e}")
    if args.run_dir:
        args.out = str(Path(args.run_dir) / output_name(spec_path, spec))
    build_dir = Path(args.build_dir).resolve()
    configs, commands = select_configs(spec, build_dir, args.python, args.shard,
                                       args.num_shards, args.skip_unbuilt, args.dry_run,
                                       args.rounds)

    if args.check_only:
        print(f"{spec_path}: {len(configs)} configurations in shard {args.shard} of "
              f"{args.num_shards}, all binaries present")
        return EXIT_OK

    if args.dry_run:
        # Read-only: a dry run never creates or repairs the output.
        done = set()
        if args.out and Path(args.out).is_file():
            done = {row_key(r) for r in read_csv(args.out)[0]}
        todo = [c for c in configs if not all(k in done for k in c.keys())]
        todo_ids = {c.index for c in todo}
        for c in configs:
            print(c.describe() + ("" if c.index in todo_ids else "  (done)"))
        rows = sum(len(c.expect) for c in configs)
        print(f"{len(configs)} configurations ({rows} rows), {len(configs) - len(todo)} already "
              f"in the output; shard {args.shard} of {args.num_shards}", file=sys.stderr)
        return EXIT_OK

    out = Output(args.out)
    for p in out.problems:
        print("warning: " + p, file=sys.stderr)
    if args.retry:
        n = out.drop_statuses(set(args.retry), {k for c in configs for k in c.keys()})
        print(f"retry: dropped {n} row(s) with status {','.join(args.retry)}", flush=True)
    todo = [c for c in configs if not all(k in out.keys for k in c.keys())]

    run_id = args.run_id or os.environ.get("STUDY_RUN_ID") or (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        + "-" + socket.gethostname())
    commit = os.environ.get("STUDY_COMMIT") or git_commit()
    env = dict(os.environ, STUDY_RUN_ID=run_id, STUDY_COMMIT=commit,
               STUDY_SWEEP_DEVICE=str(args.device))
    prov = {"run_id": run_id, "commit": commit, "host": socket.gethostname()}
    if commit.endswith("-dirty"):
        print(f"warning: this checkout has uncommitted changes, so every row will name {commit}: "
              "commit first, then measure (tests/clean_rows.py refuses -dirty rows in a new folder "
              "under experiments/results/)", file=sys.stderr, flush=True)
    # A CSV holds the rows of one commit: resuming it from another checkout would mix two codes.
    others = sorted({r["commit"] for r in out.rows if r.get("commit")} - {commit})
    if others:
        print(f"error: {args.out} holds rows of commit {', '.join(others)}, and this checkout is at "
              f"{commit}: measure into a new file or run folder", file=sys.stderr)
        return EXIT_USAGE
    timeout_s = args.timeout or spec["timeout_s"]
    budget = spec["max_device_gib"] * (1 << 30)

    rounds = max((c.rounds for c in configs), default=1)
    print(f"sweep {spec_path.name}: {len(configs)} configurations"
          f"{f' ({rounds} interleaved rounds)' if rounds > 1 else ''} in shard {args.shard}/"
          f"{args.num_shards}, {len(configs) - len(todo)} already in {args.out}, "
          f"{len(todo)} to run; run {run_id}, commit {commit}", flush=True)
    counts = {s: 0 for s in STATUSES}
    signal.signal(signal.SIGTERM, _on_signal)  # Slurm's time limit / scancel: stop cleanly
    try:
        return sweep(args, todo, commands, env, prov, commit, timeout_s, budget, out, counts, spec)
    finally:
        if args.run_dir:   # the folder's README summarizes its CSVs, even after a stop
            try:
                run_readme.write(args.run_dir)
            except OSError as e:
                print(f"warning: {args.run_dir}/README.md not updated: {e}", file=sys.stderr)


def sweep(args, todo, commands, env, prov, commit, timeout_s, budget, out, counts, spec):
    """Run the configurations left to do, appending each row as it comes."""
    start = time.monotonic()
    ran = 0
    workers = {}   # anchor script -> its kept process (spec keep_anchors)
    try:
        for k, c in enumerate(todo, start=1):
            elapsed = time.monotonic() - start
            if args.max_minutes and elapsed > 60 * args.max_minutes:
                print(f"stopped: --max-minutes {args.max_minutes:g} reached, {len(todo) - k + 1} "
                      "configurations left; rerun the same command to resume", flush=True)
                return EXIT_INCOMPLETE
            est = estimate_device_bytes(c) if budget else None
            if est is not None and est > budget:
                note = (f"over budget: needs about {est / (1 << 30):.1f} GiB of device memory, "
                        f"max_device_gib is {spec['max_device_gib']:g}")
                rows = [with_extra_note(runner_row(c, v, "skipped", note, prov), c) for v in c.expect]
            else:
                if c.kind == "anchor" and spec["keep_anchors"]:
                    script = tuple(commands[c.index][:2])   # python, the anchor script
                    worker = workers.setdefault(script, AnchorWorker(list(script), env))
                    o = worker.run(c, timeout_s, args.verbose)
                else:
                    o = run_config(c, commands[c.index], env, timeout_s, args.verbose)
                rows = [with_extra_note(r, c) for r in o.rows]
                got = {row_key(r) for r in rows}
                for key in got - set(c.keys()):
                    print(f"  warning: {c.label}: wrote a row of another configuration: "
                          f"{','.join(key)}", file=sys.stderr)
                # An invocation that found no GPU after writing some of its rows (ceilings
                # writes copy, then gemm_fp16) skipped the rest too: not a failure.
                nodev = rows and all(r["status"] == "skipped" and r["note"].startswith(NO_DEVICE)
                                     for r in rows)
                for v, key in zip(c.expect, c.keys()):
                    if key not in got:
                        rows.append(with_extra_note(
                            runner_row(c, v, "skipped", NO_DEVICE, prov) if nodev else
                            runner_row(c, v, "failed", o.reason(timeout_s), prov), c))
            # Each bench row names the commit its executable was built from: a stale build
            # (a failed or forgotten rebuild) would time old code under the new commit.
            stale = sorted({r["commit"] for r in rows if r.get("commit") and r["commit"] != commit})
            if stale:
                print(f"error: {c.label}: its executable was built from {', '.join(stale)}, and this "
                      f"checkout is at {commit}: rebuild (ninja -C {args.build_dir}) before measuring; "
                      "its rows were not written", file=sys.stderr, flush=True)
                return EXIT_USAGE
            shown = []
            for r in rows:
                # SIGTERM waits until the row is whole on disk.
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                try:
                    appended = out.append(r)
                finally:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                if appended:
                    counts[r["status"]] = counts.get(r["status"], 0) + 1
                    med = f" {r['median_us']} us" if r.get("median_us") else ""
                    shown.append(f"{r['status']}{med}"
                                 + (f" ({r['note']})" if r["status"] != "ok" and r.get("note") else ""))
            ran += 1
            elapsed = time.monotonic() - start
            eta = elapsed / ran * (len(todo) - k)
            shape = "" if c.shapeless else f" b={c.batch:<4} img={c.image_size:<4}"
            print(f"[{k}/{len(todo)}] {c.label:<24}{shape}{varying(c, spec)} -> "
                  f"{'; '.join(shown) or 'already present'}  ({hms(elapsed)} elapsed, "
                  f"ETA {hms(eta)})", flush=True)
    except Terminated as t:
        print(f"terminated by signal {t.args[0]}: the running configuration left no row and "
              "reruns on resume", file=sys.stderr, flush=True)
        return 128 + t.args[0]
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume", file=sys.stderr, flush=True)
        return 130
    finally:
        for w in workers.values():
            w.close()
    print(f"done: {ran} configurations, rows ok {counts['ok']}, skipped {counts['skipped']}, "
          f"failed {counts['failed']}; {args.out}", flush=True)
    return EXIT_FAILED_ROWS if args.strict and counts["failed"] else EXIT_OK


def cli():
    try:
        return main()
    except UsageError as e:
        print(f"run_sweep: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(cli())
