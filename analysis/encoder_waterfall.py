"""The waterfalls as experiments/probes/waterfall.py committed them (`<run folder>/waterfall/
waterfall.csv` at batch 1, `waterfall_bB.csv` at batch B): per step, from the floor (every weight
read once, or the FLOPs at the ceiling) through the floor at the bench's clock, the L2 traffic, the
dependent work and the hand-offs to one traced replay, beside the bench's rounds; predicted steps
hatched with their range. The newest such folder whose bench rows ran on the section run's GPU,
else the newest on any GPU (the caption says which)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import Patch

from analysis import plots
from analysis.encoder_data import TARGET_B1_FLOOR_MS
from studylib import DataError, rundata
from studylib.claims import claim

NAME = "encoder_waterfall"
BARS = ("floor", "clock", "l2", "chain", "handoffs")
COLORS = {"floor": "#4d4d4d", "clock": "#9467bd", "l2": "#1f77b4", "chain": "#ff7f0e", "handoffs": "#d62728"}
TARGET_COLORS = {"fp16": "green", "FP8": "purple"}
FP8_PRECISIONS = ("fp8_e4m3", "fp8")


def bench_rows(folder) -> pd.DataFrame:
    """The encoder rows of a waterfall folder's sweeps (its first-level sub-folders' study CSVs)."""
    found = []
    for path in sorted(folder.glob("*/*.csv")):
        try:
            d = rundata.read_csv(path)
        except DataError:  # a kernel table, a task clock, the waterfall itself: not study rows
            continue
        d = d[(d["family"] == "encoder") & (d["status"] == "ok")]
        if len(d):
            found.append(d)
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame()


def csv_name(batch: int) -> str:
    """The file waterfall.py writes at `batch`."""
    return "waterfall.csv" if batch == 1 else f"waterfall_b{batch}.csv"


def newest_waterfall(run, batch: int = 1):
    """(folder, its bench rows, whether they ran on another GPU than `run`'s) of the newest run
    folder beside `run` with a waterfall at `batch`, preferring `run`'s GPU; None without one."""
    found = []
    for path in run.path.parent.glob(f"*/waterfall/{csv_name(batch)}"):
        rows = bench_rows(path.parent.parent)
        if len(rows):
            found.append((pd.to_datetime(rows["utc"]).max(), path.parent.parent, rows))
    gpu = rundata.gpu_of(run)
    here = [f for f in found if gpu in set(f[2]["gpu"].astype(str))]
    if not (here or found):
        return None
    _, folder, rows = max(here or found, key=lambda f: (f[0], f[1].name))
    return folder, rows, not here


def step_name(ctx, r) -> str:
    precision = "FP8" if r["precision"] in FP8_PRECISIONS else "fp16"
    return ctx.said(claim("waterfall_step", step=r["step"], precision=precision, predicted=r["kind"] == "predicted"))


class Scale:
    """The figure's unit: us at batch 1, ms at a larger batch (a forward of tens of ms)."""

    def __init__(self, batch: int):
        self.per_us, self.unit, self.digits = (1.0, "us", 0) if batch == 1 else (1e-3, "ms", 1)

    def __call__(self, us) -> float:
        return float(us) * self.per_us


def bar_width(r, bar: str) -> float:
    """A bar in us; 0 where the CSV predates the bar (the clock bar before waterfall.py drew it)."""
    value = r.get(f"{bar}_bar_us")
    return 0.0 if value is None or pd.isna(value) else float(value)


def draw_row(ax, ctx, y, r, right, scale):
    """One step's stacked bars, its bench marker (measured) or predicted range, and its label."""
    left, predicted = 0.0, r["kind"] == "predicted"
    unit = dict(unit=scale.unit, digits=scale.digits)
    for bar in BARS:
        width = scale(bar_width(r, bar))
        ax.barh(y, width, left=left, color=COLORS[bar], alpha=0.55 if predicted else 0.9,
                hatch="//" if predicted else None, edgecolor="white", height=0.62)
        if width >= 0.05 * right:
            ax.text(left + width / 2, y, f"{width:.{scale.digits}f}", ha="center", va="center", fontsize=8,
                    color="white", fontweight="bold")
        left += width
    if predicted:
        low, high = scale(r["low_us"]), scale(r["high_us"])
        ax.plot([low, high], [y, y], color="black", lw=1.2, marker="|", ms=12)
        label = claim("waterfall_predicted_label", low=low, high=high, **unit)
        end = max(left, high)
    else:
        bench, lo, hi = scale(r["bench_us"]), scale(r["bench_low_us"]), scale(r["bench_high_us"])
        ax.errorbar(bench, y + 0.38, xerr=[[bench - lo], [hi - bench]], fmt="D", color="black", ms=5, capsize=3,
                    lw=1)
        label = claim("waterfall_measured_label", traced=scale(r["total_us"]), bench=bench, **unit)
        end = max(left, hi)
    ax.text(end + 0.01 * right, y, ctx.said(label), va="center", fontsize=8)


def figure_name(batch: int) -> str:
    return NAME if batch == 1 else f"{NAME}_b{batch}"


def waterfall_figure(data, ctx, section: str = "", batch: int = 1):
    """The waterfall figure at `batch` (encoder_waterfall at batch 1, encoder_waterfall_bB); a note
    at its marker without one."""
    name = figure_name(batch)
    picked = newest_waterfall(data.run, batch)
    if picked is None:
        ctx.missing("figure", name, claim("no_waterfall", batch=batch))
        return
    folder, rows, other_gpu = picked
    w = pd.read_csv(folder / "waterfall" / csv_name(batch))
    side = rundata.Run(folder, rows)
    scale = Scale(batch)
    right = scale(pd.concat([w["total_us"], w["bench_high_us"], w["high_us"]]).max())
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(w) + 2.8))
    ys = list(range(len(w)))[::-1]
    for y, (_, r) in zip(ys, w.iterrows()):
        draw_row(ax, ctx, y, r, right, scale)
    ax.set_yticks(ys, [step_name(ctx, r) for _, r in w.iterrows()], fontsize=9)
    for precision, ms in (TARGET_B1_FLOOR_MS.items() if batch == 1 else ()):  # the targets are batch 1's
        ax.axvline(1e3 * ms, color=TARGET_COLORS[precision], ls="--", lw=1)
        ax.text(1e3 * ms, 1.005, ctx.said(claim("waterfall_target", precision=precision, us=1e3 * ms)),
                va="bottom", ha="right" if precision == "FP8" else "left", fontsize=8,
                color=TARGET_COLORS[precision], transform=ax.get_xaxis_transform())
    ax.set_xlim(0, right * 1.35)
    ax.set_ylim(-0.6, len(w) - 0.2)
    ax.set_xlabel(ctx.said(claim("waterfall_axis", batch=batch, unit=scale.unit)))
    drawn = [b for b in BARS if b != "clock" or any(bar_width(r, b) > 0 for _, r in w.iterrows())]
    handles = [Patch(color=COLORS[b], label=ctx.said(claim(f"waterfall_bar_{b}"))) for b in drawn]
    handles.append(plt.Line2D([], [], marker="D", color="black", ls="", label=ctx.said(claim("waterfall_bench"))))
    if (w["kind"] == "predicted").any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//",
                             label=ctx.said(claim("waterfall_predicted"))))
    plots.legend_outside(ax, handles=handles, fontsize=8)
    plots.titled(fig, ctx.said(claim("waterfall_title", batch=batch)), side.title_provenance())
    fig.tight_layout()
    measured = w[w["kind"] == "measured"]
    l2_tbps = float((measured["l2_mb"] / measured["l2_us"]).median())  # MB per us: TB/s
    clock = measured.get("clock_ratio")
    clocked = clock is not None and bool(clock.notna().any())
    ctx.figure(name, fig, claim("waterfall_caption", folder=folder.name, other_gpu=other_gpu, l2_tbps=l2_tbps,
                                batch=batch, clocked=clocked, clock_ratio=float(clock.max()) if clocked else 1.0,
                                at_one=batch == 1, any_predicted=bool((w["kind"] == "predicted").any()),
                                prov=side.provenance()), section=section)
