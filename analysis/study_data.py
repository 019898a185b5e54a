"""Shared code of the analysis notebooks and of report/build.py.

Loading and checking the committed CSVs, picking a run, the measured ceilings of that run,
the provenance line every figure and table carries, one plot style, and the writers for
figures, tables and generated text. Each family notebook (analysis/<family>.py) stays a short
list of plots because everything it has in common with the others lives here.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
RESULTS_ROOT = REPO / "experiments" / "results"
REPORT_DIR = REPO / "report"

# The CSV schema (docs/method.md): the one column list that run_sweep.py and the anchors write
# (experiments/anchors/common.py; experiments/test_run_sweep.py checks it against common/harness/csv.cpp).
sys.path.insert(0, str(REPO / "experiments" / "anchors"))
from common import COLUMNS  # noqa: E402  (standard library only at module level)
sys.path.append(str(REPO / "experiments"))  # after analysis/ and anchors/: no name of theirs shadowed
from run_readme import compiled_shapes  # noqa: E402  (compile_kernels.txt: its writer's reader)
# Columns appended to the schema after the first runs were committed: a file without them is
# read with them empty. Every column up to `note` must be there.
LATER_COLUMNS = COLUMNS[COLUMNS.index("note") + 1:]
INT_COLUMNS = ["sm_count", "batch", "image_size", "tokens", "hidden", "heads", "head_dim",
               "streams", "warmup", "iters", "launches", "host_syncs", "device_bytes",
               "host_bytes", "rows", "sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "energy_calls"]
FLOAT_COLUMNS = ["mean_us", "std_us", "median_us", "min_us", "max_us", "routine_us", "gbps",
                 "tflops", "max_abs_err", "rel_l2_err", "h2d_us", "preprocess_us", "d2h_us",
                 "energy_j", "images_per_j", "power_w", "energy_sm_clock_mhz", "energy_s"]
# A family's side table beside the sweep's CSVs in a run folder, in its own columns (e.g.
# patch_embed_timeline.csv: per-launch timestamps); load_run leaves it to the family notebook.
SIDE_TABLE_SUFFIXES = ("_timeline.csv",)
STATUSES = ("ok", "skipped", "failed")
CEILINGS = "ceilings"

FIGURE_DPI = 150
ANCHOR_PREFIX = "pytorch_"
LIBRARY_PREFIXES = ("cudnn", "cublas")


class DataError(Exception):
    """Committed data (or the report template) cannot be used as is.

    report/build.py turns this into one line on stderr and exit code 2, so the message must
    name the file and, where it applies, the line and column.
    """


class FigureError(DataError):
    """A figure a reader could not use: two series drawn alike, or too wide for the report."""


class NoData(DataError):
    """No run holds rows of the requested family."""


# ---------------------------------------------------------------------------------------------
# Loading and checking
# ---------------------------------------------------------------------------------------------

def show_path(path: Path) -> str:
    """Paths in messages relative to the repository when they are inside it: shorter, and the
    same on every machine."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def read_csv(path) -> pd.DataFrame:
    """One CSV of the study schema, checked and with numeric columns as numbers.

    Adds `source` (file) and `line` (1-based line in the file) so later checks and tables can
    point back at the exact row.
    """
    path = Path(path)
    where = show_path(path)
    if not path.is_file():
        raise DataError(f"{where}: file not found")
    try:
        # Everything as text first: a commit hash of digits must stay text, and a bad number
        # must be reported with its line instead of turning the whole column into text.
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise DataError(f"{where}: empty file (expected a header with the {len(COLUMNS)} "
                        f"study columns)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise DataError(f"{where}: not a readable CSV ({str(e).strip()})") from None
    missing = [c for c in COLUMNS if c not in raw.columns and c not in LATER_COLUMNS]
    for c in LATER_COLUMNS:
        if c not in raw.columns:
            raw[c] = ""
    if missing:
        raise DataError(f"{where}: missing column{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(repr(c) for c in missing)}")
    # Short rows (a line cut off by a killed writer) come back as NaN: make them empty text so
    # the status check below names the line.
    df = raw.fillna("").astype(str)
    df["source"] = where
    df["line"] = np.arange(len(df)) + 2  # the header is line 1

    def fail(mask, column, what):
        i = int(np.flatnonzero(mask.to_numpy())[0])
        n = int(mask.sum())
        more = f" (and {n - 1} more row{'s' if n > 2 else ''})" if n > 1 else ""
        raise DataError(f"{where}:{df['line'].iat[i]}: column '{column}' {what} "
                        f"{raw[column].iat[i]!r}{more}")

    for c in INT_COLUMNS + FLOAT_COLUMNS:
        text = df[c].str.strip()
        num = pd.to_numeric(text.where(text != "", None), errors="coerce")
        # "nan"/"inf" are what common/harness/csv.cpp writes for non-finite values; anything else that
        # is not a number is a broken file.
        bad = (text != "") & num.isna() & ~text.str.lower().isin(["nan", "+nan", "-nan"])
        if bad.any():
            fail(bad, c, "has a non-numeric value")
        if c in INT_COLUMNS:
            frac = num.notna() & np.isfinite(num) & (num != np.round(num))
            if frac.any():
                fail(frac, c, "should be a whole number, got")
        df[c] = num.astype(float)

    flag = df["flush_l2"].str.strip().str.lower()
    mapping = {"1": 1.0, "true": 1.0, "yes": 1.0, "0": 0.0, "false": 0.0, "no": 0.0, "": np.nan}
    bad = ~flag.isin(list(mapping))
    if bad.any():
        fail(bad, "flush_l2", "should be 0/1 or true/false, got")
    df["flush_l2"] = flag.map(mapping).astype(float)

    df["status"] = df["status"].str.strip()
    bad = ~df["status"].isin(STATUSES)
    if bad.any():
        fail(bad, "status", f"should be one of {'|'.join(STATUSES)}, got")

    # An ok row is a timing the report will plot: it must carry the number that is plotted.
    ok = df["status"] == "ok"
    need = pd.Series("median_us", index=df.index)
    need[df["family"] == CEILINGS] = ""
    need[(df["family"] == CEILINGS) & (df["version"] == "copy")] = "gbps"
    need[(df["family"] == CEILINGS) & df["version"].isin(["gemm_fp16", "gemm_fp8"])] = "tflops"
    for c in ("median_us", "gbps", "tflops"):
        values = df[c]
        bad = ok & (need == c) & ~(np.isfinite(values) & (values > 0))
        if bad.any():
            fail(bad, c, "must be a positive number on a status 'ok' row, got")
    return df


def rows_of(df: pd.DataFrame) -> pd.Series:
    """The `rows` column; where a file predates it, the count the row's note gives
    ("rows=N", written by the layernorm and MLP benches and anchors), else batch x tokens."""
    from_note = pd.to_numeric(df["note"].astype(str).str.extract(r"\brows=(\d+)")[0],
                              errors="coerce")
    return df["rows"].fillna(from_note).fillna(df["batch"] * df["tokens"])


def load_run(run_dir) -> "Run":
    """Every CSV directly inside one run folder (layernorm.csv, ceilings.csv, anchors, ...).

    Sub-folders are not read on purpose: a merged Slurm sweep may keep its shards beside it,
    and reading both would count every row twice. Side tables (`*_timeline.csv`) are in
    their own columns and left to the family notebook (side_table()).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"{show_path(run_dir)}: run folder not found")
    files = sorted(f for f in run_dir.glob("*.csv") if not f.name.endswith(SIDE_TABLE_SUFFIXES))
    if not files:
        raise DataError(f"{show_path(run_dir)}: no CSV files in this run folder")
    df = pd.concat([read_csv(f) for f in files], ignore_index=True)
    return Run(run_dir, df)


def side_table(run_dir, name: str, columns: list[str], numeric: list[str]):
    """A family's side table `<run>/<name>` (see SIDE_TABLE_SUFFIXES), or None when the run
    has none. The columns must all be there and `numeric` ones must parse: a broken file is
    a DataError naming it, like a broken sweep CSV."""
    path = Path(run_dir) / name
    if not path.is_file():
        return None
    where = show_path(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise DataError(f"{where}: empty file (expected the columns {', '.join(columns)})") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise DataError(f"{where}: not a readable CSV ({str(e).strip()})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"{where}: missing column{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(repr(c) for c in missing)}")
    df = df.fillna("").astype(str)
    for c in numeric:
        num = pd.to_numeric(df[c].str.strip(), errors="coerce")
        if num.isna().any():
            i = int(np.flatnonzero(num.isna().to_numpy())[0])
            raise DataError(f"{where}:{i + 2}: column '{c}' has a non-numeric value "
                            f"{df[c].iat[i]!r}")
        df[c] = num.astype(float)
    return df


def run_folders(root=RESULTS_ROOT) -> list[Path]:
    """Run folders under the results root: the sub-folders that hold at least one CSV."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob("*.csv")))


def load_runs(root=RESULTS_ROOT) -> list["Run"]:
    return [load_run(p) for p in run_folders(root)]


def resolve_run_dir(arg, root=RESULTS_ROOT) -> Path:
    """--run accepts a path, or a folder name under the results root."""
    p = Path(arg)
    if p.is_dir():
        return p
    if (Path(root) / arg).is_dir():
        return Path(root) / arg
    raise DataError(f"run folder '{arg}' not found (neither a directory nor a folder under "
                    f"{show_path(Path(root))})")


@dataclass
class Ceilings:
    """The physical limits measured in the same run: device copy bandwidth (bytes read plus
    written), fp16 and FP8 (E4M3) tensor-core GEMM throughput. None where the run did not
    measure them (runs before the FP8 row have none)."""
    copy_gbps: float | None
    gemm_tflops: float | None
    gemm_fp8_tflops: float | None = None


@dataclass(eq=False)  # identity, so a run can key a dict (report/build.py groups by run)
class Run:
    path: Path
    df: pd.DataFrame

    @property
    def name(self) -> str:
        return self.path.name

    def rows(self, family: str) -> pd.DataFrame:
        return self.df[self.df["family"] == family].copy()

    def ok(self, family: str) -> pd.DataFrame:
        """Timings to plot: status ok only (skipped and failed rows carry no timing)."""
        d = self.rows(family)
        return d[d["status"] == "ok"].copy()

    def families(self) -> list[str]:
        return sorted(set(self.df["family"]) - {CEILINGS})

    def newest_utc(self, family: str | None = None) -> pd.Timestamp:
        d = self.df if family is None else self.rows(family)
        t = pd.to_datetime(d["utc"], utc=True, errors="coerce").max()
        return t if pd.notna(t) else pd.Timestamp.min.tz_localize("UTC")

    def ceilings(self) -> Ceilings:
        # The best of several measurements is the ceiling: a copy at a size too small to
        # saturate DRAM is not a limit a kernel has to respect.
        c = self.ok(CEILINGS)
        copy = c.loc[c["version"] == "copy", "gbps"]
        gemm = c.loc[c["version"] == "gemm_fp16", "tflops"]
        fp8 = c.loc[c["version"] == "gemm_fp8", "tflops"]
        return Ceilings(float(copy.max()) if len(copy) else None,
                        float(gemm.max()) if len(gemm) else None,
                        float(fp8.max()) if len(fp8) else None)

    def provenance(self, family: str | None = None) -> str:
        """'GPU <gpu>, run <run_id>, commit <commit>' of the rows shown (a family and its
        anchors, or the whole folder); several values are all listed so a mixed folder is
        visible in every caption instead of hidden."""
        d = self.df if family is None else self.rows(family)
        if d.empty:
            d = self.df

        def values(col, short=None):
            v = [x for x in dict.fromkeys(d[col].astype(str).str.strip()) if x]
            v = [short(x) for x in v] if short else v
            return " + ".join(v) if v else "unknown"

        return (f"GPU {values('gpu')}, run {values('run_id')}, "
                f"commit {values('commit', short_commit)}")

    def title_provenance(self, family: str | None = None) -> str:
        """The provenance a figure title has room for: GPU, run folder and commit (the first
        one and how many more; the caption and the run table list them all)."""
        d = self.df if family is None else self.rows(family)
        if d.empty:
            d = self.df
        gpus = [x for x in dict.fromkeys(d["gpu"].astype(str).str.strip()) if x]
        commits = [short_commit(x, 7) for x in dict.fromkeys(d["commit"].astype(str).str.strip()) if x]
        commit = (commits[0] + (f" + {len(commits) - 1} more" if len(commits) > 1 else "")
                  if commits else "unknown")
        gpu = gpus[0] + (f" + {len(gpus) - 1} more" if len(gpus) > 1 else "") if gpus else "unknown GPU"
        return f"{gpu}, {self.name}, commit {commit}"


def short_commit(c: str, digits: int = 12) -> str:
    """A full hash is unreadable in a caption; 12 hex digits stay unique (7 in a title).
    Suffixes such as '-dirty' are kept because they matter."""
    m = re.match(r"^([0-9a-fA-F]{%d,40})(.*)$" % (digits + 1), c)
    return m.group(1)[:digits] + m.group(2) if m else c


def gpu_of(run: Run) -> str:
    """The GPU a run folder was measured on (the most common `gpu` value of its rows)."""
    g = run.df["gpu"].astype(str).str.strip()
    g = g[g != ""]
    return g.value_counts().index[0] if len(g) else "unknown"


# GPUs that run the same binaries (one compute capability). A result that depends only on the
# kernels' arithmetic (an accuracy measurement, never a time) holds on every GPU of the family.
ARCHITECTURES = {"Hopper (sm_90)": ("H100", "H200", "H800", "GH200")}


def architecture_of(gpu: str) -> str | None:
    """The architecture family of a GPU name (ARCHITECTURES), None when it is not listed."""
    for arch, names in ARCHITECTURES.items():
        if any(re.search(rf"\b{n}\b", gpu) for n in names):
            return arch
    return None


def same_architecture(a: str, b: str) -> bool:
    """Whether two GPUs run the same binaries: one GPU model, or one listed architecture."""
    return a == b or (architecture_of(a) is not None and architecture_of(a) == architecture_of(b))


def fp8_ceiling_tflops(run: Run) -> float | None:
    """The FP8 GEMM ceiling (`ceilings`' gemm_fp8 row) on this run's GPU: the run's own, else
    the best of the committed run folders that measured one on that GPU (an FP8 experiment
    measured beside another run); None when there is none."""
    own = run.ceilings().gemm_fp8_tflops
    if own:
        return own
    best = None
    for f in RESULTS_ROOT.glob("**/ceilings.csv"):
        d = read_csv(f)
        d = d[(d["version"] == "gemm_fp8") & (d["status"] == "ok") & (d["gpu"].astype(str) == gpu_of(run))]
        if len(d):
            best = max(best or 0.0, float(d["tflops"].max()))
    return best


def primary_gpu(runs: list[Run]) -> str | None:
    """The GPU the report's family sections are measured on: the one with the most run
    folders (a tie goes to the GPU of the newest run). Runs on other GPUs are compared with
    it side by side (analysis/gpus.py), never mixed into its sections."""
    if not runs:
        return None
    counts: dict[str, int] = {}
    newest: dict[str, tuple] = {}
    for r in runs:
        g = gpu_of(r)
        counts[g] = counts.get(g, 0) + 1
        newest[g] = max(newest.get(g, (pd.Timestamp.min.tz_localize("UTC"), "")),
                        (r.newest_utc(), r.name))
    return max(counts, key=lambda g: (counts[g], newest[g]))


# A compiled anchor row's note: "compiled in this row (N s to its first call)". N this large means
# it compiled in the row's own (anchor) process; a load from a compile made ahead takes seconds.
COMPILED_HERE_RE = re.compile(r"compiled in this row \((\d+) s to its first call\)")
COMPILED_HERE_S = 30


def first_call_s(notes: pd.Series) -> pd.Series:
    """Seconds to the first call of each compiled anchor row made in that row (loaded from a
    compile made ahead, or compiled there), NaN for rows that reused a kept model or compile nothing."""
    return notes.astype(str).str.extract(COMPILED_HERE_RE)[0].astype(float)


def compiled_here_s(notes: pd.Series) -> pd.Series:
    """Seconds to the first call of each row that compiled in its own anchor process (at least
    COMPILED_HERE_S), NaN elsewhere: max-autotune run there picks a slower forward at small
    batches than one compiled ahead in a fresh process (docs/method.md, Timing)."""
    n = first_call_s(notes)
    return n.where(n >= COMPILED_HERE_S)


def holds_final_sitting(run: Run) -> bool:
    """Whether the run folder holds a final sitting (final.csv, `./study run final`)."""
    return (run.path / "final.csv").is_file()


def pick_run(runs: list[Run], family: str, gpu: str | None = None) -> Run | None:
    """Newest run with timings of this family, on `gpu` when given and any run there has
    timings of it (else on any GPU, so that a family measured elsewhere only still gets its
    section); a run where the family only has skipped or failed rows is used only when no run
    has timings (so its status table still shows). The encoder's section is the study's answer:
    once a final sitting is committed it comes from one (on `gpu` where there is one there, else
    from another GPU's), never from an older sitting that happens to be newer."""
    def key(r):
        return (r.newest_utc(family), r.name)
    if family == "encoder":
        finals = [r for r in runs if holds_final_sitting(r) and len(r.ok(family))]
        here = [r for r in finals if gpu is not None and gpu_of(r) == gpu]
        if here or finals:
            return max(here or finals, key=key)
    if gpu is not None:
        on_gpu = [r for r in runs if gpu_of(r) == gpu]
        if any(len(r.ok(family)) for r in on_gpu):
            runs = on_gpu
    timed = [r for r in runs if len(r.ok(family))]
    seen = [r for r in runs if len(r.rows(family))]
    pool = timed or seen
    return max(pool, key=key) if pool else None


def shapes_of(run: Run, family: str) -> int:
    """How many problem shapes (batch x image size) the run timed for a family."""
    d = run.ok(family)
    return len(d[["batch", "image_size"]].drop_duplicates()) if len(d) else 0


def sweep_run(run: Run, family: str, min_shapes: int = 3) -> Run:
    """The run whose rows of `family` draw its figures over batch and image size: `run` itself
    when it timed at least `min_shapes` shapes, else the newest run folder beside it, on the
    same GPU, that did (a sitting at the target shapes only draws its sweep from the one
    measured before it); `run` when there is none."""
    if shapes_of(run, family) >= min_shapes:
        return run
    gpu = gpu_of(run)
    others = [r for r in load_runs(run.path.parent) if r.path != run.path and gpu_of(r) == gpu
              and shapes_of(r, family) >= min_shapes]
    return max(others, key=lambda r: (r.newest_utc(family), r.name)) if others else run


# ---------------------------------------------------------------------------------------------
# Selections that every family needs
# ---------------------------------------------------------------------------------------------

def is_anchor(version: str) -> bool:
    return str(version).startswith(ANCHOR_PREFIX)


def is_library(version: str) -> bool:
    return str(version).startswith(LIBRARY_PREFIXES)


def is_own(version: str) -> bool:
    """A version written in this repository (not a library call, not a PyTorch anchor)."""
    return not is_anchor(version) and not is_library(version)


STAGES_DIR = REPO / "stages"


def family_versions(family: str) -> list[str]:
    """A family's versions in ladder order, from its one list (stages/<family>/versions.def; the
    encoder's from its step table, stages/encoder/steps.tsv)."""
    if family == "encoder":
        import steps
        return steps.ladder()
    path = STAGES_DIR / family / "versions.def"
    try:
        text = path.read_text()
    except OSError as e:
        raise DataError(f"{path}: cannot read the family's version list ({e.strerror})")
    return re.findall(r"^STUDY_VERSION\((\w+)\)", text, flags=re.M)


def rounds_wording(t: pd.DataFrame) -> tuple[bool, str, str]:
    """Whether t (collapse_rounds' output) holds several rounds, and the words a figure caption
    and a table's cells then add."""
    rounds = multi_round(t)
    caption = " (the median across rounds, and the range of the rounds' medians)" if rounds else ""
    cells = " (the median across rounds; in parentheses the range of the rounds' medians)" if rounds else ""
    return rounds, caption, cells


def status_finding(everything: pd.DataFrame, failed: str = "failed", label=str, what: str = "configuration",
                   shown: str = "plotted", all_ok: str = "Every configuration passed the correctness check and "
                                                         "was timed.") -> str:
    """The findings' closing sentence: how many rows were skipped or failed (`failed` is the
    verb phrase), and which versions (through `label`), or that every one passed."""
    n_skip = int((everything["status"] == "skipped").sum())
    n_fail = int((everything["status"] == "failed").sum())
    if not (n_skip or n_fail):
        return all_ok
    who = ", ".join(sorted(set(label(v) for v in everything.loc[everything["status"] != "ok", "version"])))
    return (f"{n_skip} {what}{'s' if n_skip != 1 else ''} skipped and {n_fail} {failed} ({who}); "
            f"the status table gives the reasons, and none of them is {shown}.")


def version_order(present, preferred) -> list[str]:
    """The family's ladder order first, then anything new (a version added after the notebook
    was written still shows up), anchors last."""
    present = list(dict.fromkeys(present))
    known = [v for v in preferred if v in present]
    extra = sorted(v for v in present if v not in preferred)
    order = known + extra
    return [v for v in order if not is_anchor(v)] + [v for v in order if is_anchor(v)]


# The sweep runner's tag of a multi-round sweep (experiments/run_sweep.py --rounds): each row
# of round k ends its note with "[round: k]"; a row without it is round 1.
ROUND_RE = re.compile(r"\[round: (\d+)\]")


def round_of(df: pd.DataFrame) -> pd.Series:
    """The round each row was measured in (1 where the note has no `[round: k]`)."""
    return (pd.to_numeric(df["note"].astype(str).str.extract(ROUND_RE)[0], errors="coerce")
            .fillna(1).astype(int))


def collapse_rounds(df: pd.DataFrame, keys: list[str], value: str = "median_us",
                    **agg) -> pd.DataFrame:
    """One row per configuration (`keys`). Rows that repeat a configuration, the interleaved
    rounds of a multi-round sweep or a re-run appended to the same folder, collapse to the
    median of their `value` (each row's own median over its timed calls): that median is the
    number every table, figure and target uses. `lo_us` and `hi_us` are the smallest and
    largest of the rounds' values (the spread), `n` how many rows were collapsed. Further
    columns by named aggregation (`tflops=("tflops", "median")`). A single-round run gets
    lo_us = hi_us = its value and n = 1."""
    named = {value: (value, "median"), "lo_us": (value, "min"), "hi_us": (value, "max"),
             "n": (value, "size")}
    named.update(agg)
    return df.groupby(keys, as_index=False, dropna=False).agg(**named)


def multi_round(t: pd.DataFrame) -> bool:
    """Whether any configuration of a collapsed table was measured more than once."""
    return "n" in t and bool((t["n"] > 1).any())


def fmt_spread(lo, hi, fmt=None) -> str:
    """The rounds' range as 'lo-hi' ('-' where not timed)."""
    fmt = fmt or fmt_us
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return "-"
    return f"{fmt(lo)}-{fmt(hi)}"


SPREAD_COLUMN = "rounds' range us"


def rounds_sentence(t: pd.DataFrame) -> str | None:
    """A findings sentence saying that times are medians across rounds; None for a run where
    every configuration was measured once (its report reads as a single-round report)."""
    if not multi_round(t):
        return None
    ns = sorted({int(n) for n in t["n"]})
    counts = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]} to {ns[-1]}"
    return (f"Each configuration was measured {counts} times (interleaved rounds: every "
            f"version of a shape, then all of them again); every time, ratio and target verdict "
            f"here is on the median across them, and the tables give the range of the rounds' "
            f"medians.")


def sweep_table(t: pd.DataFrame, index: list[str], columns: str, order: list[str],
                fmt=None, index_formats: dict | None = None, value: str = "median_us") -> str:
    """Markdown pivot of `value` (index x columns, columns in `order`). With more than one
    round, a cell reads 'median (min-max)' over the rounds; a single-round run gets plain
    numbers."""
    fmt = fmt or fmt_us
    if multi_round(t):
        d = t.copy()
        d["_cell"] = [fmt(m) if n <= 1 or lo == hi else f"{fmt(m)} ({fmt_spread(lo, hi, fmt)})"
                      for m, lo, hi, n in zip(d[value], d["lo_us"], d["hi_us"], d["n"])]
        p = d.pivot_table(index=index, columns=columns, values="_cell", aggfunc="first")
        cell = lambda x: x if isinstance(x, str) else "-"  # noqa: E731
    else:
        p = t.pivot_table(index=index, columns=columns, values=value)
        cell = fmt
    p = p[[c for c in order if c in p.columns]].reset_index()
    formats = {c: cell for c in p.columns if c not in index}
    formats.update({c: f for c, f in (index_formats or {}).items() if c in p.columns})
    return markdown_table(p, formats)


def ladder_table(order: list[str], steps: list[str], sizes: list, at, reference: str | None,
                 size_label=str, spread: bool = False):
    """The per-step ladder table: one row per version of `order`, and per size the median time,
    (with `spread`, the rounds' range), the speedup over the previous step of `steps` (its time
    / this time) and the time as a ratio to `reference` (below 1 = faster). `at(version, size,
    col)` looks a value up (NaN where not timed). Returns the table and its formats; versions
    timed at none of the sizes are left out."""
    rows, formats = [], {}
    for v in order:
        row = {"version": v}
        prev = steps[steps.index(v) - 1] if v in steps and steps.index(v) > 0 else None
        for n in sizes:
            key = size_label(n)
            m = at(v, n, "median_us")
            row[f"{key}: us"] = m
            formats[f"{key}: us"] = fmt_us
            if spread:
                row[f"{key}: range"] = fmt_spread(at(v, n, "lo_us"), at(v, n, "hi_us"))
            row[f"{key}: x prev"] = at(prev, n, "median_us") / m if prev else np.nan
            formats[f"{key}: x prev"] = fmt_ratio
            if reference:
                row[f"{key}: / {reference}"] = m / at(reference, n, "median_us")
                formats[f"{key}: / {reference}"] = fmt_ratio
        if any(np.isfinite(row[f"{size_label(n)}: us"]) for n in sizes):
            rows.append(row)
    return pd.DataFrame(rows), formats


def one_setting(df: pd.DataFrame, column: str = "flush_l2"):
    """Keep the most common value of a harness setting so that every compared timing used the
    same one (ratios between different L2 states mean nothing). Returns the kept rows, the
    value, and how many rows were left out."""
    if df.empty or df[column].nunique(dropna=False) <= 1:
        return df, (df[column].iloc[0] if len(df) else np.nan), 0
    counts = df[column].value_counts(dropna=False)
    value = counts.index[0]
    keep = df[column].isna() if pd.isna(value) else df[column] == value
    return df[keep].copy(), value, int((~keep).sum())


def status_table(df: pd.DataFrame) -> pd.DataFrame:
    """ok/skipped/failed counts per version with the distinct reasons of the rows that were
    not timed, so nothing that was left out of the plots goes unmentioned."""
    out = []
    for version, g in df.groupby("version", sort=False):
        counts = g["status"].value_counts()
        reasons = []
        for (status, note), n in (g[g["status"] != "ok"]
                                  .groupby(["status", "note"], sort=False).size().items()):
            note = " ".join(str(note).split()) or "no reason given"
            note = note if len(note) <= 110 else note[:107] + "..."
            reasons.append(f"{status} x{n}: {note}")
        out.append({"version": version,
                    **{s: int(counts.get(s, 0)) for s in STATUSES},
                    "reasons": "; ".join(reasons)})
    return pd.DataFrame(out, columns=["version", *STATUSES, "reasons"])


# ---------------------------------------------------------------------------------------------
# Number formats shared by tables and generated sentences (so they agree with each other)
# ---------------------------------------------------------------------------------------------

def fmt_us(x) -> str:
    if x is None or not np.isfinite(x):
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def fmt_gbps(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:,.0f}"


def fmt_pct(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.0f}%"


def fmt_ratio(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.2f}x"


def fmt_int(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{int(round(x))}"


def faster_or_slower(ratio: float) -> str:
    """'1.72x faster' / '1.30x slower' from baseline_time / our_time."""
    return f"{fmt_ratio(ratio)} faster" if ratio >= 1 else f"{fmt_ratio(1 / ratio)} slower"


def markdown_table(df: pd.DataFrame, formats: dict | None = None) -> str:
    """A GitHub markdown table; numbers right-aligned, missing values as '-'.

    `formats` maps a column to a function of the value; other columns print as text.
    """
    formats = formats or {}
    cols = list(df.columns)

    def cell(col, v):
        if col in formats:
            s = formats[col](v)
        elif isinstance(v, float) and not np.isfinite(v):
            s = "-"
        else:
            s = str(v)
        return s.replace("|", "\\|").replace("\n", " ")

    numeric = {c: c in formats or pd.api.types.is_numeric_dtype(df[c]) for c in cols}
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---:" if numeric[c] else "---" for c in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(cell(c, r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Plot style
# ---------------------------------------------------------------------------------------------

# Own versions: distinguishable colours in ladder order; red is kept for the library version
# and dark colours for the PyTorch anchors so the eye finds the baselines at once in every
# figure. No two series of a figure share colour and marker (check_series, at save time): the
# own versions walk the 9 x 9 pairs diagonally, so the tenth version differs from the first in
# its marker, not only in the order of the legend.
_OWN_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
               "#bcbd22", "#7f7f7f"]
_OWN_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">"]
_LIB_COLORS = ["#d62728", "#ff9896"]
_LIB_MARKERS = ["*", "p", "h"]
# PyTorch anchors: one colour per anchor; its eager run (dashed) and its CUDA-graph replay
# (dotted) share the colour and differ in marker as well as line.
_ANCHOR_COLORS = ["#000000", "#b8860b", "#556b2f", "#c71585", "#3a3a8c", "#843c39"]
_ANCHOR_MARKERS = [("x", "+"), ("^", "v"), ("s", "D"), ("h", "H"), ("<", ">"), ("1", "2")]
ANCHOR_EAGER_LINE, ANCHOR_GRAPH_LINE = "--", ":"
GRAPH_SUFFIX = "_graph"
# The fastest version of a figure (styles(fastest=...)) is drawn heavier than the rest.
_FASTEST = dict(linewidth=2.6, markersize=7, zorder=5)
MAX_FIGURE_PX = 2000   # widest PNG the report embeds at its full resolution
TITLE_CHARS = 110      # a provenance line longer than this wraps (a long title widens the PNG)
MAX_FIGURE_IN = 12.5   # widest figure drawn, in inches: 1,875 px at FIGURE_DPI, room for a legend


def panels_width(panels: int, per_panel: float, extra: float = 0.0) -> float:
    """Figure width for a row of panels, narrower panels where many would pass MAX_FIGURE_IN."""
    return min(per_panel * panels + extra, MAX_FIGURE_IN)


def anchor_base(version: str) -> str:
    """The anchor an eager or CUDA-graph row belongs to (`pytorch_x_graph` -> `pytorch_x`)."""
    return str(version).removesuffix(GRAPH_SUFFIX)


def apply_style():
    import matplotlib
    matplotlib.rcParams.update({
        "figure.figsize": (7.5, 4.6),
        "figure.dpi": 100,
        "savefig.dpi": FIGURE_DPI,
        "savefig.bbox": "tight",
        "font.size": 9,
        "axes.titlesize": 9,
        "axes.labelsize": 9,
        "legend.fontsize": 8,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "grid.linewidth": 0.6,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "lines.linewidth": 1.4,
        "lines.markersize": 4.5,
    })


def styles(order: list[str], fastest: str | None = None) -> dict[str, dict]:
    """Line style per version, fixed by the family's version order so one version looks the
    same in every figure of the family. Each PyTorch anchor has its own colour; its eager run
    is dashed and its CUDA-graph replay dotted, with markers of their own. `fastest`, the
    version a figure's findings name fastest, is drawn heavier."""
    out, own, lib = {}, 0, 0
    bases = list(dict.fromkeys(anchor_base(v) for v in order if is_anchor(v)))
    for v in order:
        if is_anchor(v):
            i = bases.index(anchor_base(v))
            graph = v.endswith(GRAPH_SUFFIX)
            out[v] = dict(color=_ANCHOR_COLORS[i % len(_ANCHOR_COLORS)],
                          marker=_ANCHOR_MARKERS[i % len(_ANCHOR_MARKERS)][graph],
                          linestyle=ANCHOR_GRAPH_LINE if graph else ANCHOR_EAGER_LINE)
        elif is_library(v):
            out[v] = dict(color=_LIB_COLORS[lib % 2], marker=_LIB_MARKERS[lib // 2 % 3],
                          linestyle="-.", markersize=7)
            lib += 1
        else:
            n = len(_OWN_COLORS)
            out[v] = dict(color=_OWN_COLORS[own % n], marker=_OWN_MARKERS[(own + own // n) % n],
                          linestyle="-")
            own += 1
    if fastest in out:
        out[fastest] = {**out[fastest], **_FASTEST}
    return out


def fastest_at(t: pd.DataFrame, exclude=(), **at) -> str | None:
    """The version a figure draws heavier: of the non-anchor versions of a collapsed table (not
    in `exclude`), the one with the lowest median time at one shape, `at` column=value (None:
    the column's largest value among those rows). None when no row matches."""
    d = t[[not is_anchor(v) and v not in exclude for v in t["version"]]]
    for col, value in at.items():
        if d.empty:
            return None
        d = d[d[col] == (d[col].max() if value is None else value)]
    return None if d.empty else str(d.loc[d["median_us"].idxmin(), "version"])


def _series_key(handle):
    """What tells a legend entry apart at a glance: colour, marker and whether the marker is
    filled (a line without a marker: colour and line style; a patch: colour and hatch)."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    if isinstance(handle, Line2D):
        marker = handle.get_marker()
        if marker in (None, "None", "none", "", " "):
            return ("line", to_hex(handle.get_color()), handle.get_linestyle())
        face = handle.get_markerfacecolor()
        filled = not (isinstance(face, str) and face.lower() == "none")
        return ("marker", to_hex(handle.get_color()), str(marker), filled)
    if isinstance(handle, Patch):
        return ("patch", to_hex(handle.get_facecolor()), handle.get_hatch())
    try:   # a scatter's PathCollection: its colour and its marker's outline
        return ("points", to_hex(handle.get_facecolor()[0]),
                handle.get_paths()[0].vertices.round(3).tobytes())
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def check_series(fig, name: str):
    """Raise FigureError when two entries of one legend of `fig` name different series drawn
    alike (same colour and marker), so a reader could not tell them apart."""
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    for lg in legends:
        if lg is None:
            continue
        seen = {}
        handles = getattr(lg, "legend_handles", None) or getattr(lg, "legendHandles", [])
        for h, t in zip(handles, lg.get_texts()):
            label = t.get_text()
            key = _series_key(h)
            if key is None:
                continue
            other = seen.setdefault(key, label)
            if other != label:
                raise FigureError(f"figure {name}: '{other}' and '{label}' are drawn alike "
                                  f"({', '.join(map(str, key[1:]))})")


def png_width(path: Path) -> int:
    """Pixel width from a PNG's IHDR chunk (bytes 16-19, big-endian)."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise FigureError(f"{path}: not a PNG")
    return int.from_bytes(head[16:20], "big")


def plot_ratios(ax, table: pd.DataFrame, order: list[str], baseline: str, key: str, label, style,
                speedup: bool):
    """One line per version of `order` but the baseline, against `key`: baseline median time /
    version median time (speedup=True) or its inverse, time as a ratio to the baseline."""
    base = table[table["version"] == baseline].set_index(key)["median_us"]
    for v in order:
        if v == baseline:
            continue
        d = table[table["version"] == v].set_index(key)["median_us"]
        r = ((base / d) if speedup else (d / base)).dropna().sort_index()
        if len(r):
            ax.plot(r.index, r.values, label=label(v), **style[v])


def speedup_panels(table: pd.DataFrame, order: list[str], baselines: list[str], label, style,
                   xlabel: str, panel_width: float = 4.3):
    """One panel per baseline: baseline median time / version median time against rows, for
    every other version in `order`, with one shared legend below the panels. Returns the
    figure; the caller titles it and saves it with its own caption."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(baselines), figsize=(panels_width(len(baselines), panel_width), 4.3),
                             squeeze=False)
    for ax, b in zip(axes[0], baselines):
        plot_ratios(ax, table, order, b, "rows", label, style, speedup=True)
        ax.axhline(1.0, color="#444444", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(f"vs {label(b)}")
    axes[0][0].set_ylabel("speedup (baseline time / version time)")
    # Each panel omits its own baseline, so the legend is shared.
    fig.legend(handles=[plt.Line2D([], [], label=label(v), **style[v]) for v in order],
               loc="lower center", ncol=min(len(order), 4), bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.12, 1, 0.92))
    return fig


def measured_ticks(ax, values, axis: str = "x", base: float = 10):
    """Log axis with a tick at every measured value (197, 577, 1025 tokens; batch 1 ... 256),
    printed as plain numbers, and no minor ticks."""
    import matplotlib.ticker as mt
    values = sorted({float(v) for v in values if np.isfinite(v)})
    a = getattr(ax, f"{axis}axis")
    getattr(ax, f"set_{axis}scale")("log", base=base)
    a.set_major_locator(mt.FixedLocator(values))
    a.set_major_formatter(mt.FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:g}"))
    a.set_minor_locator(mt.NullLocator())


def reference_line(ax, y: float, label: str, **kw):
    """A horizontal reference line that names itself in the legend."""
    kw = {"color": "#444444", "linewidth": 0.9, "linestyle": "-", **kw}
    return ax.axhline(y, label=label, **kw)


def legend_outside(ax, **kw):
    """The legend right of the axes, where it covers no data."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                     frameon=False, **kw)


def roofline_figure(points: pd.DataFrame, order: list[str], style: dict, label, ceilings,
                    what: str, provenance: str, headline: str | None = None):
    """The roofline of one family: every version at its arithmetic intensity (the family's
    flops over its bytes, the counts behind the row's TFLOP/s and GB/s) and its achieved
    TFLOP/s, under the run's measured ceilings: the copy bandwidth line (TFLOP/s = intensity x
    GB/s / 1000) and the fp16 GEMM rate. `points` holds version, shape (text), ai (flop/byte)
    and tflops; rows of the `headline` shape are filled, other shapes hollow. An anchor timed
    both eagerly and as a CUDA-graph replay is shown by its replay (GPU time, the same work).
    Returns the figure and a caption fragment naming the ceilings drawn."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mt
    p = points[np.isfinite(points["ai"]) & np.isfinite(points["tflops"])
               & (points["ai"] > 0) & (points["tflops"] > 0)]
    present = set(p["version"])
    order = [v for v in order if not (is_anchor(v) and not v.endswith(GRAPH_SUFFIX)
                                      and v + GRAPH_SUFFIX in present)]
    fig, ax = plt.subplots(figsize=(8.6, 4.8))
    handles = []
    for v in order:
        d = p[p["version"] == v]
        if not len(d):
            continue
        st = {k: val for k, val in style[v].items() if k != "linestyle"}
        st["markersize"] = max(st.get("markersize", 0), 6)
        if st.get("marker") == ".":
            st["marker"] = "o"
        filled = d[d["shape"] == headline] if headline else d
        hollow = d[d["shape"] != headline] if headline else d.iloc[:0]
        if len(filled):
            ax.plot(filled["ai"], filled["tflops"], linestyle="none", **st)
        if len(hollow):
            ax.plot(hollow["ai"], hollow["tflops"], linestyle="none", markerfacecolor="none",
                    **st)
        handles.append(plt.Line2D([], [], linestyle="none", label=label(v), **st))
    lo = p["ai"].min() / 3 if len(p) else 0.1
    hi = p["ai"].max() * 3 if len(p) else 100.0
    copy, gemm = ceilings.copy_gbps, ceilings.gemm_tflops
    parts = []
    if copy and gemm:
        ridge = gemm * 1000 / copy
        lo, hi = min(lo, ridge / 3), max(hi, ridge * 3)
    x = np.geomspace(lo, hi, 200)
    roof = np.full_like(x, np.inf)
    if copy:
        roof = np.minimum(roof, x * copy / 1000)
        parts.append(f"the copy bandwidth measured in the same run ({copy:,.0f} GB/s)")
    if gemm:
        roof = np.minimum(roof, np.full_like(x, gemm))
        parts.append(f"the fp16 GEMM rate measured in the same run ({gemm:,.0f} TFLOP/s)")
    if parts:
        ax.plot(x, roof, color="#444444", linewidth=1.2)
        if copy:
            handles.append(plt.Line2D([], [], color="#444444", linewidth=1.2,
                                      label=f"measured ceilings: copy {copy:,.0f} GB/s"
                                      + (f", GEMM {gemm:,.0f} TFLOP/s" if gemm else "")))
        else:
            handles.append(plt.Line2D([], [], color="#444444", linewidth=1.2,
                                      label=f"measured GEMM ceiling {gemm:,.0f} TFLOP/s"))
    if headline and (p["shape"] != headline).any():
        shapes = ", ".join(dict.fromkeys(p.loc[p["shape"] != headline, "shape"]))
        handles.append(plt.Line2D([], [], linestyle="none", marker="o", color="#444444",
                                  label=f"filled: {headline}"))
        handles.append(plt.Line2D([], [], linestyle="none", marker="o", color="#444444",
                                  markerfacecolor="none", label=f"hollow: {shapes}"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    top = max([p["tflops"].max() if len(p) else 1.0] + ([gemm] if gemm else []))
    bottom = p["tflops"].min() if len(p) else top / 1e3
    ax.set_ylim(bottom / 3, top * 2.5)
    for a in (ax.xaxis, ax.yaxis):
        a.set_major_locator(mt.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.set_minor_locator(mt.NullLocator())
        a.set_major_formatter(mt.FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:g}"))
    ax.set_xlabel("arithmetic intensity (flops / bytes the operation must move, flop/byte)")
    ax.set_ylabel("achieved TFLOP/s (flops / median time)")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              frameon=False, fontsize=7)
    titled(fig, what, provenance)
    fig.tight_layout()
    return fig, (" and ".join(parts) if parts else "no ceiling measured in this run")


def roofline_gap(points: pd.DataFrame, ceilings) -> str | None:
    """Why a roofline cannot be drawn, or None: it needs timed points with both rates and at
    least one ceiling measured in the same run (a roofline without its roof would mislead)."""
    if not len(points) or not np.isfinite(points["ai"]).any():
        return "no timed row records both GB/s and TFLOP/s"
    if not (ceilings.copy_gbps or ceilings.gemm_tflops):
        return ("this run measured no ceilings (experiments/specs/ceilings.toml), and a roofline "
                "without the run's own roof is not drawn")
    return None


def roofline_points(t: pd.DataFrame, shape) -> pd.DataFrame:
    """Roofline points of a collapsed table with median `tflops` and `gbps` columns: the
    arithmetic intensity of a row is its flops over its bytes, tflops x 1000 / gbps (both from
    the family's counts over the same median time). `shape` maps a row to its shape text."""
    p = t.copy()
    p["ai"] = 1000.0 * p["tflops"] / p["gbps"]
    p["shape"] = [shape(r) for _, r in p.iterrows()]
    return p


def titled(fig, what: str, provenance: str):
    """Figure title: what is shown, then the provenance line required on every figure (the
    short one, Run.title_provenance: the run table and the caption hold the run ids)."""
    import textwrap
    lines = [w for line in provenance.splitlines() for w in textwrap.wrap(line, TITLE_CHARS) or [""]]
    fig.suptitle("\n".join([what, *lines]), fontsize=9)


# ---------------------------------------------------------------------------------------------
# Notebook context: where the data comes from, where the outputs go, what was produced
# ---------------------------------------------------------------------------------------------

@dataclass
class Artifact:
    kind: str               # figure | table | text
    name: str
    path: Path | None       # None when it could not be produced
    caption: str = ""
    reason: str = ""        # why it was not produced


@dataclass
class Headline:
    """A family's line of README's headline table: the fastest version of all (libraries
    included, anchors not) at the family's headline shape, against its library version and its
    PyTorch anchors there, all from one run."""
    family: str                       # as the table names it ("LayerNorm")
    shape: str                        # the headline shape, in words
    fastest: str
    fastest_us: float
    library: str | None = None        # the library version (or reference) compared with
    library_us: float = float("nan")
    anchors: list = field(default_factory=list)   # [(label, median us)]
    unit: str = "us"                  # "us" or "ms" for the printed times
    # A side experiment's folder under the results root when the line comes from it (its own
    # sitting, every number of the line from it) rather than from the family's run.
    measured_in: str | None = None


@dataclass
class Target:
    """One of the study's targets (docs/method.md, Targets) as a notebook judged it on its run."""
    family: str
    what: str               # the target in words
    verdict: str            # "met", "missed" or "not judged"
    detail: str = ""        # the numbers behind the verdict
    run: str = ""           # the run folder judged


VERDICTS = ("met", "missed", "not judged")


@dataclass
class Context:
    """Handed to a notebook by report/build.py (as STUDY_CONTEXT), or built from the command
    line when the notebook runs on its own. The notebook writes through it, and build.py reads
    `artifacts` afterwards to fill the template markers."""
    family: str
    run: Run | None         # None for a notebook over every run (CROSS_RUN)
    out_dir: Path
    artifacts: dict = field(default_factory=dict)
    headline_entry: Headline | None = None
    runs: list = field(default_factory=list)   # CROSS_RUN notebooks: every run folder...
    used: dict = field(default_factory=dict)   # ...and the run each family section uses
    targets: list = field(default_factory=list)  # [Target] judged by the notebook
    answer: str | None = None  # the study's one answer (encoder, from a final sitting): markdown

    def headline(self, **kw):
        """The family's line of README's headline table (report/build.py writes the table)."""
        self.headline_entry = Headline(**kw)

    def target(self, what: str, verdict: str, detail: str = ""):
        """A study target judged on this run; README lists every one (report/build.py)."""
        if verdict not in VERDICTS:
            raise ValueError(f"target verdict must be one of {VERDICTS}, got {verdict!r}")
        self.targets.append(Target(self.family, what, verdict, detail,
                                   self.run.name if self.run is not None else ""))

    def _path(self, sub: str, name: str, ext: str) -> Path:
        # Family-prefixed names let build.py clean a family's stale outputs safely.
        if not name.startswith(self.family + "_"):
            raise ValueError(f"artifact name '{name}' must start with '{self.family}_'")
        d = self.out_dir / sub
        d.mkdir(parents=True, exist_ok=True)
        return d / f"{name}.{ext}"

    def provenance(self) -> str:
        return self.run.provenance(self.family)

    def title_provenance(self) -> str:
        return self.run.title_provenance(self.family)

    def figure(self, name: str, fig, caption: str):
        """Save `fig` as figures/NAME.png, after checking that no two of its series are drawn
        alike; a PNG wider than MAX_FIGURE_PX is an error (FigureError names it)."""
        import matplotlib.pyplot as plt
        path = self._path("figures", name, "png")
        try:
            check_series(fig, name)
            fig.savefig(path, dpi=FIGURE_DPI)
        finally:
            plt.close(fig)
        width = png_width(path)
        if width > MAX_FIGURE_PX:
            raise FigureError(f"figure {name} is {width} px wide, more than {MAX_FIGURE_PX}: "
                              "shorten its title, legend or panels")
        self.artifacts[name] = Artifact("figure", name, path, caption)
        return path

    def table(self, name: str, table_md: str, caption: str):
        path = self._path("tables", name, "md")
        path.write_text(f"*{caption}*\n\n{table_md}")
        self.artifacts[name] = Artifact("table", name, path, caption)
        return path

    def text(self, name: str, sentences: list[str], bullets: bool = True):
        """Generated sentences; a bullet list by default so each finding reads on its own."""
        path = self._path("text", name, "md")
        items = [s.strip() for s in sentences if s.strip()]
        path.write_text(("\n".join(f"- {s}" for s in items) if bullets else
                         "\n\n".join(items)) + "\n")
        self.artifacts[name] = Artifact("text", name, path)
        return path

    def missing(self, kind: str, name: str, reason: str):
        """Record that an output could not be made from this run (for example no baseline
        rows); the report prints the reason at its marker instead of failing."""
        self.artifacts[name] = Artifact(kind, name, None, reason=reason)


# Notebooks that read every run folder instead of one (their template block is filled after
# the families' blocks, with the runs those used).
CROSS_RUN = ("gpus",)


def sections_runs(runs: list[Run]) -> dict:
    """The run each family's section of the report uses: per family the newest run with its
    timings on the primary GPU (elsewhere only when the primary GPU has none)."""
    gpu = primary_gpu(runs)
    fams = sorted({f for r in runs for f in r.families()})
    return {f: r for f in fams if (r := pick_run(runs, f, gpu)) is not None}


def notebook_context(family: str, namespace: dict) -> Context:
    """The context build.py injected, or one from this notebook's own command line:
    `--run DIR`, `--results ROOT`, `--out DIR` (parse_known_args: Jupyter adds its own)."""
    given = namespace.get("STUDY_CONTEXT")
    if given is not None:
        return given
    os.environ.setdefault("MPLBACKEND", "Agg")
    p = argparse.ArgumentParser(description=f"{family} analysis notebook")
    p.add_argument("--run", help="run folder (path or name under the results root)")
    p.add_argument("--results", default=str(RESULTS_ROOT), help="results root")
    p.add_argument("--out", help="output folder (figures/, tables/); default report/, or with "
                                 "--run the run's DIR/report/")
    args, _ = p.parse_known_args()
    if family in CROSS_RUN:
        try:
            runs = [load_run(resolve_run_dir(args.run, args.results))] if args.run else \
                load_runs(args.results)
        except DataError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        return Context(family, None, Path(args.out or REPORT_DIR), runs=runs,
                       used=sections_runs(runs))
    try:
        if args.run:
            run_dir = resolve_run_dir(args.run, args.results)
            args.out = args.out or str(run_dir / "report")
            run = load_run(run_dir)
        else:
            runs = load_runs(args.results)
            run = pick_run(runs, family, primary_gpu(runs))
        if run is None or run.rows(family).empty:
            raise NoData(f"no committed run has rows with family '{family}' "
                         f"(looked in {show_path(Path(args.run or args.results))})")
    except DataError as e:
        # The same one line and exit code 2 that report/build.py gives.
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    return Context(family, run, Path(args.out or REPORT_DIR))
