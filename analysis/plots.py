"""The analysis notebooks' plot style and figure helpers: one line style per version (fixed by
the family's order), speedup panels, measured ticks, legends beside the axes, rooflines, and the
provenance title every figure carries."""
from __future__ import annotations

import numpy as np
import pandas as pd

from studylib.catalog import is_anchor, is_library
from studylib import notebook
from studylib.notebook import FIGURE_DPI
from studylib.claims import claim, say

# Own versions: distinguishable colours in ladder order; red is kept for the library version
# and dark colours for the PyTorch anchors so the eye finds the baselines at once in every
# figure. The 14 colours, the longest ladder's own versions, are distinct (the last five the
# light twins of the first four and of brown), so no colour repeats among them; past 14 the
# versions walk the colour x marker pairs diagonally, and no two series of a figure ever share
# colour and marker (check_series, at save time).
_OWN_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
               "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94"]


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

TITLE_CHARS = 110      # a provenance line longer than this wraps (a long title widens the PNG)

MAX_FIGURE_IN = 10.0   # widest figure drawn, in inches: 1,500 px at FIGURE_DPI (text stays readable scaled to a column), room for a legend


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
            out[v] = dict(color=_OWN_COLORS[own % n],
                          marker=_OWN_MARKERS[(own + own // n) % len(_OWN_MARKERS)], linestyle="-")
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


def plot_ratios(ax, table: pd.DataFrame, order: list[str], baseline: str, key: str, label, style,
                speedup: bool, band: bool = False):
    """One line per version of `order` but the baseline, against `key`: baseline median time /
    version median time (speedup=True) or its inverse, time as a ratio to the baseline. band:
    and a whisker at each point from one side's fastest round over the other's slowest to the
    other way (columns lo_us and hi_us; a side without them counts its median)."""
    base_t = table[table["version"] == baseline].set_index(key)
    base = base_t["median_us"]
    for v in order:
        if v == baseline:
            continue
        d_t = table[table["version"] == v].set_index(key)
        d = d_t["median_us"]
        r = ((base / d) if speedup else (d / base)).dropna().sort_index()
        if len(r):
            ax.plot(r.index, r.values, label=label(v), **style[v])
            if band:
                ratio_whiskers(ax, r, base_t, d_t, speedup, style[v]["color"])


def ratio_whiskers(ax, r, base_t, d_t, speedup, color):
    """plot_ratios' whiskers of the ratios r (by key), from the rounds of the baseline (base_t)
    and of the version (d_t)."""
    def rounds(t):
        m = t["median_us"]
        lo = t["lo_us"].fillna(m) if "lo_us" in t else m
        hi = t["hi_us"].fillna(m) if "hi_us" in t else m
        return lo, hi
    (bl, bh), (dl, dh) = rounds(base_t), rounds(d_t)
    lo, hi = ((bl / dh, bh / dl) if speedup else (dl / bh, dh / bl))
    lo, hi = lo.reindex(r.index), hi.reindex(r.index)
    ok = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    if ok.any():
        ax.errorbar(r.index[ok], r.values[ok], yerr=[(r - lo)[ok].clip(lower=0), (hi - r)[ok].clip(lower=0)],
                    fmt="none", ecolor=color, elinewidth=0.8, capsize=2)


def not_from_zero(ax, corner: str = "left"):
    """Says so in the panel's top left (or right) corner where its y axis does not start at zero."""
    if ax.get_ylim()[0] > 0:
        ax.text(0.01 if corner == "left" else 0.99, 0.98, "axis not from 0", transform=ax.transAxes, ha=corner,
                va="top", fontsize=8, color="#555555")


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
        ax.set_title(say(claim("vs_baseline", baseline=label(b))))
        not_from_zero(ax)
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


# A ladder panel spanning more than this factor goes on a log axis, and the steps within ZOOM_SPAN
# of the fastest time there (or of the reference) get a second row on a linear axis from zero:
# the answer lives among them, and a log axis crushes it.
LOG_SPAN, ZOOM_SPAN = 20.0, 3.0


# What ladder_figure's captions say of its axes.
LADDER_SCALE = claim("ladder_scale", log_span=LOG_SPAN, zoom_span=ZOOM_SPAN)


def ladder_bars(ax, steps, times, gains, ranges):
    """Horizontal bars of `times` (us) in ladder order, each with the rounds' range as whiskers
    (`ranges`: (lo, hi), NaN where one round) and labelled past them with its time and its gain
    over the step above it in the full ladder (`gains`, NaN for none)."""
    for i, (m, g, (lo, hi)) in enumerate(zip(times, gains, ranges)):
        if np.isfinite(m):
            whiskers = np.isfinite(lo) and np.isfinite(hi) and hi > lo
            ax.barh(i, m, color="#4c72b0", alpha=0.85,
                    xerr=[[m - lo], [hi - m]] if whiskers else None, error_kw={"elinewidth": 0.8, "capsize": 2})
            ax.text(hi if whiskers else m, i, " " + bar_time(m) + (f", {g:.2f}x" if np.isfinite(g) else ""),
                    va="center", fontsize=8)


def bar_time(us: float) -> str:
    """A ladder bar's time as its label shows it (and the report's line for the step says it)."""
    return f"{us:,.1f} us"


def _ladder_values(steps: list[str], sizes: list, at, parents: dict | None):
    """Per size the steps' median times, the rounds' ranges and each step's gain with the step it
    is over: over the step above it (a chain) or, with `parents`, over its parent (a tree)."""
    times = {n: [at(v, n, "median_us") for v in steps] for n in sizes}
    ranges = {n: [(at(v, n, "lo_us"), at(v, n, "hi_us")) for v in steps] for n in sizes}
    gains, over = {}, {}
    for n, ts in times.items():
        if parents is None:
            above = [next((j for j in reversed(range(i)) if np.isfinite(ts[j])), None) for i in range(len(ts))]
            over[n] = [steps[j] if j is not None else "" for j in above]
            gains[n] = [ts[j] / m if j is not None else np.nan for j, m in zip(above, ts)]
        else:
            over[n] = [parents.get(v, "") for v in steps]
            gains[n] = [at(parents[v], n, "median_us") / m if v in parents else np.nan for v, m in zip(steps, ts)]
    return times, ranges, gains, over


def ladder_rungs(steps: list[str], sizes: list, at, size_label, parents: dict | None = None) -> list:
    """The steps as ladder_figure draws them (the same lookups), one notebook.Rung per step and
    size it timed: the report's line for each step reads these (Context.ladder_drawn)."""
    sizes = [n for n in sizes if any(np.isfinite(at(v, n, "median_us")) for v in steps)]
    times, _, gains, over = _ladder_values(steps, sizes, at, parents)
    return [notebook.Rung(v, size_label(n), bar_time(times[n][i]), gains[n][i], over[n][i])
            for i, v in enumerate(steps) for n in sizes if np.isfinite(times[n][i])]


def ladder_figure(steps: list[str], sizes: list, at, reference: str | None, size_label, what: str,
                  provenance: str, parents: dict | None = None):
    """The ladder of one family from one sitting: per size a panel of the steps' median times in
    ladder order, top to bottom, each bar labelled with its time and its speedup over the step
    above it (with `parents`, {step: the version it changes}, over its parent instead), and the `reference` (a library version, or the plain GEMMs) as a dashed line. A
    panel spanning more than LOG_SPAN is on a log axis, and then a second row draws the steps
    within ZOOM_SPAN of the fastest on a linear axis from zero. `at` is formatting.ladder_table's
    lookup. None when no step is timed at any size."""
    import matplotlib.pyplot as plt
    sizes = [n for n in sizes if any(np.isfinite(at(v, n, "median_us")) for v in steps)]
    steps = [v for v in steps if any(np.isfinite(at(v, n, "median_us")) for n in sizes)]
    if not sizes:
        return None
    times, ranges, gains, _ = _ladder_values(steps, sizes, at, parents)
    refs = {n: at(reference, n, "median_us") if reference else np.nan for n in sizes}
    finite = {n: [t for t in ts + [refs[n]] if np.isfinite(t)] for n, ts in times.items()}
    logs = {n: max(f) / min(f) > LOG_SPAN for n, f in finite.items()}
    fast = [i for i, v in enumerate(steps)
            if all(not np.isfinite(times[n][i]) or times[n][i] <= ZOOM_SPAN * min(finite[n]) for n in sizes)
            and any(np.isfinite(times[n][i]) for n in sizes)] if any(logs.values()) else []
    rows = 2 if fast else 1
    heights = [0.42 * len(steps) + 1.2] + ([0.42 * len(fast) + 1.0] if fast else [])
    fig, axes = plt.subplots(rows, len(sizes), figsize=(panels_width(len(sizes), 4.6, 1.4), sum(heights) + 0.4),
                             squeeze=False, sharey="row", gridspec_kw={"height_ratios": heights})
    for ax, n in zip(axes[0], sizes):
        ladder_bars(ax, steps, times[n], gains[n], ranges[n])
        ref = refs[n]
        if np.isfinite(ref):
            ax.axvline(ref, color="#444444", linestyle="--", linewidth=1.0)
        if logs[n]:
            ax.set_xscale("log")
            ax.set_xlim(min(finite[n]) / 1.5, max(finite[n]) * 12)
        else:
            ax.set_xlim(0, max(finite[n]) * 1.6)
        # Two lines: side by side, three panels' one-line titles run into each other.
        dashed = "\n" + say(claim("ladder_reference", reference=reference, us=ref)) if np.isfinite(ref) else ""
        ax.set_title(size_label(n) + dashed, fontsize=9)
        ax.set_xlabel("median time per call (us)" + (", log axis" if logs[n] else ""))
    axes[0][0].set_yticks(range(len(steps)), steps)
    axes[0][0].set_ylim(len(steps) - 0.4, -0.6)
    if fast:
        for ax, n in zip(axes[1], sizes):
            ladder_bars(ax, [steps[i] for i in fast], [times[n][i] for i in fast], [gains[n][i] for i in fast],
                        [ranges[n][i] for i in fast])
            top = max([times[n][i] for i in fast if np.isfinite(times[n][i])] + [refs[n] if np.isfinite(refs[n]) else 0])
            if np.isfinite(refs[n]):
                ax.axvline(refs[n], color="#444444", linestyle="--", linewidth=1.0)
            ax.set_xlim(0, top * 1.6)
            ax.set_title(say(claim("ladder_fastest", size=size_label(n))), fontsize=9)
            ax.set_xlabel("median time per call (us)")
        axes[1][0].set_yticks(range(len(fast)), [steps[i] for i in fast])
        axes[1][0].set_ylim(len(fast) - 0.4, -0.6)
    titled(fig, what, provenance)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def peak_share_figure(points: pd.DataFrame, order: list[str], style: dict, label, ceiling: float, ceiling_name: str,
                      what: str, provenance: str):
    """Where every version of a family shares one arithmetic intensity per shape (the bytes it
    must move, not the bytes it moves), a roofline only stacks them in one column: this draws
    each version's achieved TFLOP/s as a share of the run's measured `ceiling` instead, one bar
    per shape (points' `shape` column) and version, on a linear axis from zero to 100%, each
    bar labelled, the best share of each shape in bold."""
    import matplotlib.pyplot as plt
    p = points[np.isfinite(points["tflops"]) & points["version"].isin(order)]
    shapes = list(dict.fromkeys(p["shape"]))
    versions = [v for v in order if v in set(p["version"])]
    fig, ax = plt.subplots(figsize=(7.6, 0.34 * len(versions) * max(len(shapes), 1) + 1.8))
    height = 0.8 / max(len(shapes), 1)
    colors = plt.get_cmap("tab10")
    for j, sh in enumerate(shapes):
        at = p[p["shape"] == sh].set_index("version")["tflops"]
        best = at.max()
        for i, v in enumerate(versions):
            if v not in at.index:
                continue
            share = 100.0 * float(at[v]) / ceiling
            y = i + (j - (len(shapes) - 1) / 2) * height
            ax.barh(y, share, height=height * 0.95, color=colors(j), label=sh if i == 0 else None)
            ax.text(share, y, f" {share:.2g}%" if share < 1 else f" {share:.1f}%", va="center", fontsize=8,
                    fontweight="bold" if at[v] == best else "normal")
    ax.set_yticks(range(len(versions)), [label(v) for v in versions], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel(say(claim("peak_share_axis", ceiling_name=ceiling_name, ceiling=ceiling)))
    legend_outside(ax, fontsize=8)
    titled(fig, what, provenance)
    fig.tight_layout()
    return fig


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


def open_notebook(family: str, namespace: dict):
    """A family notebook's first cell: its context (report/build.py's, or one built from the
    notebook's own command line) with the plot style applied. Returns the context, its run, and
    the provenance for captions (every run id and commit) and for titles (GPU, run folder,
    commit)."""
    ctx = notebook.notebook_context(family, namespace)
    apply_style()
    return ctx, ctx.run, ctx.provenance(), ctx.title_provenance()

