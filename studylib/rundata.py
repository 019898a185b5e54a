"""Reading run folders: every CSV of a run checked against the schema, the run a family's
section uses, its measured ceilings and provenance, and the interleaved rounds collapsed to
their medians."""
from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from studylib import DataError, catalog
from studylib.paths import REPO, RESULTS_ROOT
from studylib.schema import (CEILINGS, COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, LATER_COLUMNS,
                             SIDE_TABLE_SUFFIXES, STATUSES, is_dirty)
from studylib.specs import ROUND_RE, WEIGHTS_RE

def show_path(path: Path) -> str:
    """Paths in messages relative to the repository when they are inside it: shorter, and the
    same on every machine."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


# Checked frames by (shown path, content digest): one report build reads the same committed CSVs
# from many sections (each run's rows, every ceilings.csv for the FP8 roof), and parsing and
# checking them is most of its time. The digest makes a rewritten file a new entry.
_CHECKED: dict[tuple[str, str], pd.DataFrame] = {}


def read_csv(path) -> pd.DataFrame:
    """One CSV of the study schema, checked and with numeric columns as numbers.

    Adds `source` (file) and `line` (1-based line in the file) so later checks and tables can
    point back at the exact row. Each call returns its own copy: callers may change it.
    """
    path = Path(path)
    where = show_path(path)
    if not path.is_file():
        raise DataError(f"{where}: file not found")
    data = path.read_bytes()
    key = (where, hashlib.sha1(data).hexdigest())
    if key not in _CHECKED:
        _CHECKED[key] = _checked_frame(data, where)
    return _CHECKED[key].copy()


def _checked_frame(data: bytes, where: str) -> pd.DataFrame:
    try:
        # Everything as text first: a commit hash of digits must stay text, and a bad number
        # must be reported with its line instead of turning the whole column into text.
        raw = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
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
    frames = [read_csv(f) for f in files]
    sources = {}  # family -> the CSV files holding its rows
    for f, d in zip(files, frames):
        for fam in set(d["family"]):
            sources.setdefault(fam, set()).add(f.name)
    row_files = pd.Series([f.name for f, d in zip(files, frames) for _ in range(len(d))], dtype=object)
    return Run(run_dir, pd.concat(frames, ignore_index=True), sources, row_files)


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

    def floor_share(self, tflops: float, gbps: float, fp8: bool = False) -> float:
        """A row's time as a share of its floor: the floor is the longer of the problem's FLOPs
        at the GEMM ceiling of its precision and the bytes it must move at the copy bandwidth,
        so the share is the larger of the row's rates over those (tflops and gbps are the
        family's counts of the problem, the same for every version). NaN where neither is known."""
        ceiling = self.gemm_fp8_tflops if fp8 else self.gemm_tflops
        shares = [rate / limit for rate, limit in ((tflops, ceiling), (gbps, self.copy_gbps))
                  if limit and rate == rate and rate is not None]
        return max(shares) if shares else float("nan")


@dataclass(eq=False)  # identity, so a run can key a dict (report/build.py groups by run)
class Run:
    path: Path
    df: pd.DataFrame
    sources: dict = field(default_factory=dict)  # family -> names of the CSV files with its rows
    row_files: pd.Series | None = None  # the CSV file of each row of df (load_run), by position

    def only_file(self, name: str) -> "Run":
        """The rows of one of the folder's CSV files (with the folder's ceilings), as a run."""
        return self._keep((self.row_files == name).to_numpy() | (self.df["family"] == CEILINGS).to_numpy())

    def without_file(self, name: str) -> "Run":
        """The rows of every CSV file of the folder but one, as a run."""
        return self._keep((self.row_files != name).to_numpy())

    def _keep(self, keep) -> "Run":
        df = self.df[keep].reset_index(drop=True)
        files = self.row_files[keep].reset_index(drop=True)
        return Run(self.path, df, {f: set(files[(df["family"] == f).to_numpy()]) for f in set(df["family"])},
                   files)

    @property
    def name(self) -> str:
        return self.path.name

    def rows(self, family: str) -> pd.DataFrame:
        return self.df[self.df["family"] == family].copy()

    def ok(self, family: str) -> pd.DataFrame:
        """Timings to plot: status ok only (skipped and failed rows carry no timing)."""
        d = self.rows(family)
        return d[d["status"] == "ok"].copy()

    def clean(self, family: str) -> bool:
        """Whether every row of the family names the commit it was built from: none '-dirty'
        (built from a tree with uncommitted changes, which no one can rebuild)."""
        return not self.rows(family)["commit"].map(is_dirty).any()

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


def weights_phrase(df: pd.DataFrame) -> str:
    """Which weights whole-ViT rows ran, for a caption: timm's init where every row's note says
    so (spec key timm_weights, studylib/specs.py weights_tag), else the steps on the study's own
    draw beside the anchors on timm's init (a PyTorch anchor builds timm's model)."""
    seeds = df["note"].astype(str).str.extract(WEIGHTS_RE)[0]
    anchors = df["version"].map(catalog.is_anchor).any()
    if len(df) and seeds.notna().all():
        init = f"timm's init for seed {', '.join(sorted(set(seeds)))}"
        return f"Steps and anchors on the same weights, {init}." if anchors else f"On {init}."
    return ("The steps on the study's own weight draw, the anchors on timm's init." if anchors else
            "On the study's own weight draw.")


def folder_commits(df: pd.DataFrame) -> str:
    """The commits of some rows as a caption names a run folder's: the first (7 digits) and how
    many more ("run folder F (commit a + 2 more)", which tests/figure_sources.py reads)."""
    c = [short_commit(x, 7) for x in dict.fromkeys(df["commit"].astype(str).str.strip()) if x]
    return (c[0] + (f" + {len(c) - 1} more" if len(c) > 1 else "")) if c else "commit unknown"


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


# The L2 size of each GPU the study measured on (cudaDevAttrL2CacheSize). Both harnesses keep a
# scratch buffer of twice the L2 alive to flush it between repeats (flush_l2 = 1) and count it in
# the row's device_bytes (docs/method.md), so a figure of what a version itself allocates takes
# it out.
L2_BYTES = {"NVIDIA H200": 60 << 20, "NVIDIA H100 80GB HBM3": 50 << 20}


def flush_scratch_bytes(gpu: str) -> int | None:
    """The L2-flush scratch that a flushed row's device_bytes includes on `gpu`; None when the
    GPU's L2 size is not in L2_BYTES."""
    l2 = L2_BYTES.get(gpu)
    return 2 * l2 if l2 else None


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


# Families whose section tells its ladder from the newest run that timed more than the target
# shapes and judges its targets and headline on a targets sitting (targets_run): one measured
# after it, or its own folder's `<family>_targets.csv`.
TARGETS_APART = ("patch_embed", "layernorm", "attention")
# Families whose section is their newest targets sitting itself (every version, interleaved
# rounds), its figures over batch and width from the newest sweep beside it (sweep_run), even where
# that sweep is the newer: the MLP's sweep of every version over batch is one round, its ladder and
# targets need the rounds.
TARGETS_SECTION = ("mlp",)


def targets_sitting(run: Run, family: str) -> bool:
    """Whether the run's rows of `family` are only a targets sitting: every one of them in
    `<family>_targets.csv` (the family's target shapes, re-measured on their own)."""
    return run.sources.get(family) == {f"{family}_targets.csv"}


def one_round(run: Run, family: str) -> bool:
    """Whether the run timed each configuration of the family once (no interleaved rounds)."""
    ok = run.ok(family)
    keys = [c for c in ("version", "model", "batch", "image_size", "hidden", "rows", "streams", "flush_l2")
            if c in ok]
    return len(ok) > 0 and not ok.duplicated(keys).any()


def targets_run(runs: list[Run], family: str, section: Run | None) -> Run | None:
    """The sitting a family's targets and headline are judged on when it is not the whole of the
    section's run: the newest targets sitting of the family (targets_sitting) on the section run's
    GPU measured after the section's run, else the section run's own `<family>_targets.csv` where
    the run also holds other rows of the family (a sweep and its targets in one folder, two
    sweeps: the targets judged on one), else, where the section's run timed its configurations
    once (a one-round sweep has no band to judge "within noise" by), the newest targets sitting
    on its GPU measured before it; None when there is none of these (the section's run judges)."""
    if section is None or family not in TARGETS_APART:
        return None
    gpu = gpu_of(section)
    sittings = [r for r in runs if r is not section and targets_sitting(r, family) and gpu_of(r) == gpu
                and len(r.ok(family))]
    later = [r for r in sittings if r.newest_utc(family) > section.newest_utc(family)]
    if later:
        return max(later, key=lambda r: (r.newest_utc(family), r.name))
    own = f"{family}_targets.csv"
    if own in section.sources.get(family, set()) and len(section.sources[family]) > 1 \
            and section.row_files is not None:
        inside = section.only_file(own)
        return inside if len(inside.ok(family)) else None
    if sittings and one_round(section, family):
        return max(sittings, key=lambda r: (r.newest_utc(family), r.name))
    return None


def pick_run(runs: list[Run], family: str, gpu: str | None = None) -> Run | None:
    """Newest run with timings of this family, on `gpu` when given and any run there has
    timings of it (else on any GPU, so that a family measured elsewhere only still gets its
    section); a run where the family only has skipped or failed rows is used only when no run
    has timings (so its status table still shows). The encoder's section is the study's answer:
    once a final sitting is committed it comes from one (on `gpu` where there is one there, else
    from another GPU's), never from an older sitting that happens to be newer. For the families of
    TARGETS_APART a targets sitting is the section's run only where no other run timed them; for
    those of TARGETS_SECTION the newest targets sitting is, where there is one."""
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
    # A targets sitting judges the targets (targets_run); the section tells the whole ladder
    # from the newest run that timed more than the target shapes, where there is one.
    if family in TARGETS_APART:
        timed = [r for r in timed if not targets_sitting(r, family)] or timed
    if family in TARGETS_SECTION:
        timed = [r for r in timed if targets_sitting(r, family)] or timed
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
    largest of the rounds' values (the spread), `n` how many rows were collapsed, and
    `run_ids` the sweeps they came from (space-separated: more than one means a value pools
    sweeps). Further columns by named aggregation (`tflops=("tflops", "median")`). A
    single-round run gets lo_us = hi_us = its value and n = 1."""
    named = {value: (value, "median"), "lo_us": (value, "min"), "hi_us": (value, "max"),
             "n": (value, "size")}
    if "run_id" in df:
        named["run_ids"] = ("run_id", lambda s: " ".join(sorted(set(s.astype(str)))))
    named.update(agg)
    return df.groupby(keys, as_index=False, dropna=False).agg(**named)


def run_ids_of(table: pd.DataFrame) -> list[str]:
    """The sweeps a collapsed table's rows (or raw rows) came from, sorted."""
    col = "run_ids" if "run_ids" in table else "run_id"
    return sorted({r for v in table[col].dropna().astype(str) for r in v.split()}) if col in table else []


def multi_round(t: pd.DataFrame) -> bool:
    """Whether any configuration of a collapsed table was measured more than once."""
    return "n" in t and bool((t["n"] > 1).any())


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


def sections_runs(runs: list[Run]) -> dict:
    """The run each family's section of the report uses: per family the newest run with its
    timings on the primary GPU (elsewhere only when the primary GPU has none)."""
    gpu = primary_gpu(runs)
    fams = sorted({f for r in runs for f in r.families()})
    return {f: r for f in fams if (r := pick_run(runs, f, gpu)) is not None}
