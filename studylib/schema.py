"""The CSV schema of every row the study writes (the C++ benches through
common/harness/csv.cpp, the PyTorch anchors and the sweep runner through append_row), the model
table, and how a row is formatted and appended. Standard library only: a GPU node's anchors
import it without pandas.
"""
import math
import os

# The `utc` column: when the row was measured, in UTC, to the second.
UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def is_dirty(commit) -> bool:
    """Whether a row's `commit` (git describe --dirty) names a tree with uncommitted changes, which
    no one can rebuild."""
    return str(commit or "").strip().endswith("-dirty")

# Column order of every CSV of the study; must equal csv_columns() in common/harness/csv.cpp
# (experiments/sweep/test_sweep.py checks that). Columns after "note" were added later; files
# written before them lack them (studylib.rundata reads such files as empty columns).
COLUMNS = [
    "run_id", "utc", "commit", "gpu", "sm_count", "driver", "cuda", "cudnn", "cublas", "host",
    "family", "version", "model", "batch", "image_size", "tokens", "hidden", "heads",
    "head_dim", "streams", "warmup", "iters", "flush_l2", "mean_us", "std_us", "median_us",
    "min_us", "max_us", "routine_us", "gbps", "tflops", "launches", "host_syncs",
    "device_bytes", "host_bytes", "max_abs_err", "rel_l2_err", "status", "note",
    # Appended later, so that readers of older files keep their column positions; files
    # written before them simply lack them (the analysis reads them as empty).
    "rows", "h2d_us", "preprocess_us", "d2h_us", "sm_clock_mhz", "mem_clock_mhz",
    "power_limit_w", "precision",
    "energy_j", "images_per_j", "power_w", "energy_sm_clock_mhz", "energy_s", "energy_calls", "energy_why_not"]

# name -> (hidden, heads, depth), as common/vit_config.cpp.
MODELS = {"vit_ti": (192, 3, 12), "vit_s": (384, 6, 12), "vit_b": (768, 12, 12),
          "vit_l": (1024, 16, 24)}

PATCH = 16


def format_cell(value):
    """A CSV cell formatted like the C++ Row::set overloads (%.6g doubles, 1/0 bools)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf"
        return format(value, ".6g")
    return str(value)


def csv_escape(field):
    # Same rule as csv.cpp: quote only when needed; newlines become spaces so one row is
    # always one line (the sweep runner's resume logic relies on that).
    if not any(c in field for c in ',"\n\r'):
        return field
    return '"' + field.replace('"', '""').replace("\n", " ").replace("\r", " ") + '"'


def format_line(values):
    return ",".join(csv_escape(format_cell(values.get(c))) for c in COLUMNS) + "\n"


def append_row(path, values):
    """Appends one row (header first when the file is new or empty), flushed and fsynced."""
    with open(path, "a", encoding="utf-8") as f:
        if f.tell() == 0:
            f.write(",".join(COLUMNS) + "\n")
        f.write(format_line(values))
        f.flush()
        os.fsync(f.fileno())


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
