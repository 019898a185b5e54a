"""The patch-embedding section's figures: time against image size and batch, v3's streams and
where more of them stop helping, the speedups along the ladder and the share of the tensor-core
ceiling. analysis/patch_embed.py calls them (the memory, routine and timeline figures are
patch_embed_costs.py's and patch_embed_timeline.py's)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from analysis import plots
from analysis.patch_embed_data import (
    CONV, CPU, FAMILY, GEMM_FROM, KNEE, LADDER, LINEAR, MAIN_MODEL, ON_V9S_LINE, V1, V2, V3, V3G, knee, label,
    main_shapes, pow2_ticks, shape_text, shared_legend)
from studylib import catalog
from studylib.claims import claim

# v8 and v9 are left to the tables in the figure over image size: v10, which picks the tile width
# per shape, runs within 2% of the faster of v7 and v9 at every size this figure shows (its NOTES).
SIZE_FIGURE_OMITS = ("v8_balanced_tiles", "v9_pos_first")
# The steps whose gains over their predecessors are a narrow band around 1x: the implicit GEMMs on.
NEAR_ONE_STEPS = LADDER[LADDER.index("v6_implicit_gemm"):]


def draw_versions(data, ax, rows, versions, x):
    """Each of `versions` that `rows` holds as its line on ax, against column x; the ones drawn."""
    drawn = []
    for v in versions:
        d = rows[rows["version"] == v]
        if len(d):
            data.plot_version(ax, d, v, x)
            drawn.append(v)
    return drawn


def image_size(data, ctx):
    """Time per call against image size at batch 1, every version: the rungs before the GEMMs
    above (log y), the GEMM-based ones, the library and the anchors below (linear from 0)."""
    b1 = data.best[data.best["batch"] == 1]
    panels = [m for m in data.models if len(b1[b1["model"] == m])]
    if not panels:
        ctx.missing("figure", f"{FAMILY}_image_size", claim("none_at_batch1"))
        return
    drawn = [v for v in data.order if v not in SIZE_FIGURE_OMITS]
    first_gemm = drawn.index("v5_im2col_gemm") if "v5_im2col_gemm" in drawn else len(drawn)
    rows_of = [("before the GEMMs", drawn[:first_gemm]), ("GEMM-based, library, PyTorch", drawn[first_gemm:])]
    rows_of = [(what, vs) for what, vs in rows_of if any(len(b1[b1["version"] == v]) for v in vs)]
    fig, axes = plt.subplots(len(rows_of), len(panels), squeeze=False,
                             figsize=(plots.panels_width(len(panels), 4.2, 3.2), 3.3 * len(rows_of) + 0.6))
    for row, (what, versions) in enumerate(rows_of):
        shown = []
        for ax, m in zip(axes[row], panels):
            d0 = b1[b1["model"] == m]
            shown += draw_versions(data, ax, d0, versions, "image_size")
            pow2_ticks(ax, d0["image_size"])
            # The slow rungs span five decades (log y); the GEMM-based ones and the baselines sit
            # within 10-150 us, which a linear axis from zero shows apart.
            if row == 0 and first_gemm > 0:
                ax.set_yscale("log")
            else:
                ax.set_ylim(0, None)
            ax.set_title(ctx.said(claim("image_size_panel", model=m, what=what)), fontsize=8)
            if row == len(rows_of) - 1:
                ax.set_xlabel(ctx.said(claim("image_size_axis", model=m, hidden=data.hidden_of[m])))
        axes[row][0].set_ylabel("median time per call (us)")
        plots.legend_outside(axes[row][-1], handles=data.legend_handles([v for v in versions if v in shown]),
                             fontsize=8)
    plots.titled(fig, ctx.said(claim("image_size_title", flush=data.flush_said)), ctx.title_provenance())
    fig.tight_layout()
    ctx.figure(f"{FAMILY}_image_size", fig, claim("image_size_caption", flush=data.flush_said, prov=ctx.provenance()))


def streams(data, ctx, sr):
    """v3 against batch with its stream count varied (sr: stream_rows), v1 and v2 on one stream
    beside it."""
    if sr.shape is None:
        ctx.missing("figure", f"{FAMILY}_streams", claim("no_stream_rows", v3=V3, v3g=V3G))
        return
    (sm, simage), sv, sd3, counts = sr
    timed, style = data.timed, data.style
    cmap = plt.get_cmap("viridis")
    colors = {n: cmap(i / max(1, len(counts) - 1) * 0.9) for i, n in enumerate(counts)}
    markers = dict(zip(counts, ["o", "s", "^", "D", "v", "P", "X", "<", ">"] * 3))
    fig, axes = plt.subplots(1, len(sv), figsize=(plots.panels_width(len(sv), 4.8), 4.4), squeeze=False,
                             sharey=True)
    at_shape = timed[(timed["model"] == sm) & (timed["image_size"] == simage)]
    side = [v for v in (V1, V2) if v in set(at_shape["version"])]
    for ax, v in zip(axes[0], sv):
        for n in counts:
            d = sd3[(sd3["version"] == v) & (sd3["streams"] == n)].sort_values("batch")
            if len(d):
                ax.plot(d["batch"], d["median_us"], color=colors[n], marker=markers[n],
                        linestyle="-", label=data.stream_label(n))
        for w in side:
            data.plot_version(ax, at_shape[at_shape["version"] == w], w, "batch", linestyle=":")
        pow2_ticks(ax, sd3["batch"])
        ax.set_yscale("log")
        ax.set_xlabel(ctx.said(claim("streams_batch_axis", model=sm, image=simage)))
        ax.set_title(v)
    axes[0][0].set_ylabel("median time per call (us)")
    handles = [plt.Line2D([], [], color=colors[n], marker=markers[n], label=data.stream_label(n))
               for n in counts]
    handles += [plt.Line2D([], [], label=ctx.said(claim("synced_label", version=w)),
                           **dict(style[w], linestyle=":")) for w in side]
    plots.titled(fig, ctx.said(claim("streams_title", model=sm, image=simage)), ctx.title_provenance())
    shared_legend(fig, handles, bottom=0.2)
    ctx.figure(f"{FAMILY}_streams", fig, claim("streams_caption", versions=list(sv), model=sm, image=simage,
                                               side=list(side), flush=data.flush_said, prov=ctx.provenance()))


def streams_count(data, ctx, sr):
    """v3's time against its stream count, one line per batch, each line's knee circled."""
    if sr.shape is None or len(sr.counts) <= 1:
        ctx.missing("figure", f"{FAMILY}_streams_count", claim("one_stream_count"))
        return
    (sm, simage), sv, sd3, counts = sr
    fig, axes = plt.subplots(1, len(sv), figsize=(plots.panels_width(len(sv), 4.8), 4.4), squeeze=False,
                             sharey=True)
    batches3 = sorted({int(b) for b in sd3["batch"]})
    bcolors = {b: plt.get_cmap("plasma")(i / max(1, len(batches3) - 1) * 0.85)
               for i, b in enumerate(batches3)}
    for ax, v in zip(axes[0], sv):
        for b in batches3:
            d = sd3[(sd3["version"] == v) & (sd3["batch"] == b)].sort_values("streams")
            if len(d) < 2:
                continue
            ax.plot(d["streams"], d["median_us"], color=bcolors[b], marker="o",
                    label=ctx.said(claim("at_batch", batch=b)))
            k, kt, _, _ = knee(d)
            ax.plot([k], [kt], linestyle="none", marker="o", markersize=11,
                    markerfacecolor="none", color=bcolors[b])
        pow2_ticks(ax, counts)
        ax.set_yscale("log")
        ax.set_xlabel(ctx.said(claim("streams_axis", model=sm, image=simage)))
        ax.set_title(v)
    axes[0][0].set_ylabel("median time per call (us)")
    handles = [plt.Line2D([], [], color=bcolors[b], marker="o", label=ctx.said(claim("at_batch", batch=b)))
               for b in batches3]
    handles.append(plt.Line2D([], [], linestyle="none", marker="o", markersize=11,
                              markerfacecolor="none", color="#444444",
                              label=ctx.said(claim("knee_label", within=KNEE))))
    plots.titled(fig, ctx.said(claim("streams_count_title", model=sm, image=simage)), ctx.title_provenance())
    shared_legend(fig, handles, bottom=0.18, ncol=5)
    ctx.figure(f"{FAMILY}_streams_count", fig, claim("streams_count_caption", versions=list(sv), model=sm, image=simage,
                                                     knee=KNEE, flush=data.flush_said, prov=ctx.provenance()))


def batch(data, ctx):
    """Time against batch on ViT-B: v4 onward against cuDNN and the two PyTorch anchors (v8 on
    v9's line left out)."""
    order, best = data.order, data.best
    gemm_versions = [v for v in order if (v in LADDER[LADDER.index(GEMM_FROM):] or
                                          (v not in LADDER and not catalog.is_anchor(v))) and v not in ON_V9S_LINE]
    mb = best[(best["model"] == MAIN_MODEL) & best["version"].isin(gemm_versions)]
    images = sorted({int(i) for i in mb["image_size"]})
    if not (images and mb["batch"].nunique() > 1):
        ctx.missing("figure", f"{FAMILY}_batch", claim("no_batch_rows", model=MAIN_MODEL))
        return
    near = near_linear(mb, gemm_versions)
    rows = 2 if near else 1
    fig, axes = plt.subplots(rows, len(images), figsize=(plots.panels_width(len(images), 4.2), 4.4 + 3.2 * (rows - 1)),
                             squeeze=False, gridspec_kw={"height_ratios": [1.0, 0.75][:rows]})
    shown = []
    for ax, image in zip(axes[0], images):
        d0 = mb[mb["image_size"] == image]
        shown += draw_versions(data, ax, d0, gemm_versions, "batch")
        pow2_ticks(ax, d0["batch"])
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_title(ctx.said(claim("batch_panel", model=MAIN_MODEL, image=image, patches=(image // 16) ** 2)))
    axes[0][0].set_ylabel("median time per call (us)")
    if near:
        for ax, image in zip(axes[1], images):
            over_linear_panel(data, ax, mb[mb["image_size"] == image], near)
        axes[1][0].set_ylabel(ctx.said(claim("over_linear_axis", linear=label(LINEAR))))
    plots.titled(fig, ctx.said(claim("batch_title", model=MAIN_MODEL, flush=data.flush_said)), ctx.title_provenance())
    shared_legend(fig, data.legend_handles([v for v in gemm_versions if v in shown]), bottom=0.2 / rows)
    ctx.figure(f"{FAMILY}_batch", fig,
               claim("batch_caption", model=MAIN_MODEL, hidden=data.hidden_of.get(MAIN_MODEL, 768),
                     versions=[v for v in gemm_versions if not catalog.is_anchor(v)], conv=label(CONV),
                     linear=label(LINEAR), on_line=list(ON_V9S_LINE), near=[label(v) for v in near],
                     within=NEAR_LINEAR, flush=data.flush_said, prov=ctx.provenance()))


# The batch figure's second row: the versions within this factor of PyTorch's patchify + F.linear
# at every batch, as their time over its (the answer lives among them, and a log axis crushes it).
NEAR_LINEAR = 3.0


def over_linear(rows, v):
    """Version v's time over the linear anchor's at each batch of `rows` (one image size), by batch."""
    t = rows.set_index(["version", "batch"])["median_us"]
    if v not in t.index.get_level_values(0) or LINEAR not in t.index.get_level_values(0):
        return None
    r = (t.loc[v] / t.loc[LINEAR]).dropna()
    return r if len(r) else None


def near_linear(mb, versions):
    """The versions (not the linear anchor) within NEAR_LINEAR of it at every batch and image size."""
    out = []
    for v in versions:
        if v == LINEAR:
            continue
        ratios = [over_linear(mb[mb["image_size"] == i], v) for i in sorted(set(mb["image_size"]))]
        if all(r is not None and (r <= NEAR_LINEAR).all() for r in ratios):
            out.append(v)
    return out


def over_linear_panel(data, ax, rows, versions):
    """One image size's versions in `versions` as their time over the linear anchor's, linear axis."""
    for v in versions:
        r = over_linear(rows, v)
        if r is not None:
            ax.plot(r.index, r.values, **data.style[v])
    ax.axhline(1.0, color=data.style[LINEAR]["color"], linewidth=1.0, linestyle="--")
    pow2_ticks(ax, rows["batch"])
    ax.set_ylim(0, None)
    ax.set_xlabel("batch")


def speedup(data, ctx, ladder):
    """Each version's speedup over cpu_baseline per key shape (log), and each GEMM step's gain
    over the step before (linear from 0), from the ladder table."""
    if not (len(ladder) and ladder["version"].map(catalog.is_own).any()):
        ctx.missing("figure", f"{FAMILY}_speedup", claim("no_ladder_at_key"))
        return
    steps_all = [v for v in data.order if not catalog.is_anchor(v) and v in set(ladder["version"])]
    xpos = {v: i for i, v in enumerate(steps_all)}
    shapes = list(dict.fromkeys(ladder["shape"]))
    # The right panel: each step's gain over the one before from the first GPU-GEMM step on, where
    # the gains are a narrow band around 1x, on a linear axis (the earlier steps' gains, 0.001x to
    # several hundred x, are the left panel's spread and the ladder table's numbers).
    has_gain = (set(ladder.loc[np.isfinite(ladder["x previous"].astype(float)), "version"])
                if "x previous" in ladder else set())
    near_one = [v for v in steps_all if v in NEAR_ONE_STEPS and v in has_gain]
    fig, axes = plt.subplots(1, 2, figsize=(9.4, 4.8), squeeze=False,
                             gridspec_kw={"width_ratios": [len(steps_all), 1.6 * max(len(near_one), 1) + 1]})
    shape_colors = plt.get_cmap("tab10")
    left, right = axes[0]
    width = 0.8 / max(len(shapes), 1)
    top = 1.0
    for i, sh in enumerate(shapes):
        d = ladder[(ladder["shape"] == sh) & ladder["version"].isin(steps_all)]
        e = d[np.isfinite(d[f"x {CPU}"].astype(float))] if f"x {CPU}" in d else d.iloc[:0]
        if len(e):
            left.plot(e["version"].map(xpos), e[f"x {CPU}"], marker="o", color=shape_colors(i), label=sh)
        e = d[d["version"].isin(near_one)]
        e = e[np.isfinite(e["x previous"].astype(float))] if len(e) else e
        for _, r in e.iterrows():
            # Horizontal bars: each value reads level at the bar's end, none over its neighbour.
            y = near_one.index(r["version"]) + (i - (len(shapes) - 1) / 2) * width
            right.barh(y, r["x previous"], height=width * 0.9, color=shape_colors(i))
            right.text(r["x previous"], y, f" {r['x previous']:.2f}", ha="left", va="center", fontsize=8)
            top = max(top, float(r["x previous"]))
    left.set_yscale("log")
    left.set_xticks(range(len(steps_all)))
    left.set_xticklabels(steps_all, rotation=35, ha="right", fontsize=9)
    left.set_title(ctx.said(claim("speedup_left_title", cpu=CPU)), fontsize=10)
    left.set_ylabel(ctx.said(claim("speedup_left_axis", cpu=CPU)))
    right.set_yticks(range(len(near_one)))
    right.set_yticklabels(near_one, fontsize=9)
    right.invert_yaxis()
    right.set_xlim(0, top * 1.22)
    right.set_title("over the previous step, GEMM steps (linear, from 0)", fontsize=10)
    right.set_xlabel("previous step's time / version time (x)")
    left.axhline(1.0, color="#444444", linewidth=0.8)
    right.axvline(1.0, color="#444444", linewidth=0.8)
    left.annotate("1x: no change", xy=(0, 1.0), xycoords=("axes fraction", "data"),
                  xytext=(2, 2), textcoords="offset points", fontsize=9, color="#444444")
    handles = [plt.Line2D([], [], color=shape_colors(i), marker="o", label=sh) for i, sh in enumerate(shapes)]
    plots.titled(fig, "Patch embedding: speedup along the ladder (above 1 = faster)", data.run.title_provenance(FAMILY))
    shared_legend(fig, handles, bottom=0.14)
    ctx.figure(f"{FAMILY}_speedup", fig, claim("speedup_caption", cpu=CPU, shapes=list(shapes), near_one=list(near_one),
                                               prov=data.run.provenance(FAMILY)))


def peak_share(data, ctx):
    """Every GPU version's achieved TFLOP/s over the run's fp16 GEMM rate at the main shapes (the
    launch-per-output versions, 1e-4 to 1e-2 TFLOP/s, left to the streams figures and the table)."""
    best, rl_shapes = data.best, main_shapes(data)
    rl = best[~best["version"].isin([CPU, V1, V2, V3, V3G, *ON_V9S_LINE])]
    rl = rl[[(m, int(i), int(b)) in rl_shapes for m, i, b in
             zip(rl["model"], rl["image_size"], rl["batch"])]]
    rl = plots.roofline_points(rl, lambda r: shape_text(r["model"], int(r["image_size"]), int(r["batch"])))
    gemm_ceiling = data.run.ceilings().gemm_tflops
    if not (len(rl) and gemm_ceiling):
        ctx.missing("figure", f"{FAMILY}_peak_share",
                    claim("no_gemm_ceiling" if len(rl) else "no_tflops", model=MAIN_MODEL))
        return
    fig = plots.peak_share_figure(rl, data.order, data.style, label, gemm_ceiling, "measured fp16 GEMM ceiling",
                                  ctx.said(claim("peak_share_title", model=MAIN_MODEL)),
                                  ctx.title_provenance())
    ctx.figure(f"{FAMILY}_peak_share", fig,
               claim("peak_share_caption", shapes=[shape_text(*sh) for sh in rl_shapes], ceiling=gemm_ceiling, cpu=CPU,
                     on_line=list(ON_V9S_LINE), flush=data.flush_said, prov=ctx.provenance()))
