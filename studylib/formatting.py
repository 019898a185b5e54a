"""Number formats and markdown tables shared by every table and generated sentence, so that they
agree with each other; rounds shown as a median with the range of the rounds' medians."""
from __future__ import annotations

import numpy as np
import pandas as pd

from studylib.rundata import multi_round
from studylib.schema import STATUSES

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
            f"the status table (the section's appendix) gives the reasons, and none of them is {shown}.")


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
                 size_label=str, spread: bool = False, floor_share=None, idea=None):
    """The per-step ladder table: one row per version of `order`, and per size the median time,
    (with `spread`, the rounds' range), the speedup over the previous step of `steps` (its time
    / this time), the time as a ratio to `reference` (below 1 = faster) and, with
    `floor_share(version, size)`, its floor's share of the time (Ceilings.floor_share); with
    `idea(version)`, what the version is. `at(version, size, col)` looks a value up (NaN where
    not timed). Returns the table and its formats; versions timed at none of the sizes are left
    out."""
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
            if floor_share:
                row[f"{key}: % of floor"] = 100 * floor_share(v, n) if np.isfinite(m) else np.nan
                formats[f"{key}: % of floor"] = fmt_pct
        if idea:
            row["idea"] = idea(v)
        if any(np.isfinite(row[f"{size_label(n)}: us"]) for n in sizes):
            rows.append(row)
    return pd.DataFrame(rows), formats


def status_in_order(df: pd.DataFrame, order: list) -> pd.DataFrame:
    """status_table of the rows with the versions in `order` first, in that order, then the rest
    by name (the section's ladder order)."""
    rank = df["version"].map({v: i for i, v in enumerate(order)}).fillna(len(order))
    return status_table(df.assign(_o=rank).sort_values(["_o", "version"], kind="stable"))


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


def fmt_us(x) -> str:
    if x is None or not np.isfinite(x):
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def fmt_ms(us) -> str:
    """Milliseconds from microseconds: 3 significant digits below 10 ms."""
    if us is None or not np.isfinite(us):
        return "-"
    ms = us / 1000
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 10 else f"{ms:.1f}"


def fmt_gbps(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:,.0f}"


def fmt_pct(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.0f}%"


def fmt_ratio(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.2f}x"


def band_text(band, what: str = "rounds") -> str:
    """'; rounds 0.99-1.01x' for the band (lo, hi) of a ratio that the measurements allow
    (`what` names them); '' when it is unknown (NaN) or a point (one round)."""
    lo, hi = band
    return f"; {what} {lo:.2f}-{hi:.2f}x" if np.isfinite(lo) and np.isfinite(hi) and lo != hi else ""


def fmt_int(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{int(round(x))}"


def join_and(items) -> str:
    """'a', 'a and b', 'a, b and c'; '' for none."""
    items = list(items)
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def faster_or_slower(ratio: float) -> str:
    """'1.72x faster' / '1.30x slower' from baseline_time / our_time; 100x and more without
    decimals ('7,176x faster')."""
    x = ratio if ratio >= 1 else 1 / ratio
    text = f"{x:,.0f}x" if np.isfinite(x) and x >= 100 else fmt_ratio(x)
    return f"{text} faster" if ratio >= 1 else f"{text} slower"


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
