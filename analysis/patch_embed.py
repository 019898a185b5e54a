# %% [markdown]
# # Patch embedding: from one launch per dot product to tensor cores, and what streams buy
#
# The patch embedding is a convolution 3 -> hidden with a 16 x 16 kernel and stride 16, that
# is a GEMM [B*P, 768] x [768, hidden] once the image is cut into its P = (S/16)^2 patches,
# followed by the cls token and the position embedding. The ladder starts from the CPU
# (cpu_baseline), goes through launch-bound versions (v1: one launch per 16-wide dot product,
# v2: one per output element, both with a host sync after every launch; v3: v2's launches over
# N streams, also replayed from a CUDA graph), one copy of the whole batch (v4), and ends on
# tensor cores (v5 im2col + GEMM, v6 implicit GEMM) against cuDNN and two PyTorch anchors
# (F.conv2d, what timm runs, and patchify + F.linear). v1-v3 run only at small sizes on ViT-Ti
# (their launch counts explode); the rest on ViT-B at 224/384/512 px. Runs on its own
# (`MPLBACKEND=Agg python3 -m analysis.patch_embed [--run DIR] [--out DIR]`) or from
# `report/build.py`, which hands it `STUDY_CONTEXT`.
#
# The rows (timed rows, one L2 setting, duplicates merged, v3's best stream count per shape) and
# the figures' shared helpers: analysis/patch_embed_data.py.

# %%
import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import plots
from analysis.patch_embed_data import (
    CONV, CONV_BATCH, CONV_TARGET, CPU, CUDNN, FAMILY, GEMM_FROM, KEY_BATCHES, KEY_IMAGE, KNEE, LADDER,
    LINEAR, LINEAR_BATCHES, MAIN_MODEL, SHORT, STREAM_VERSIONS, V1, V2, V3, V3G, V4,
    PatchEmbedData, fmt_x, label, pow2_ticks, shape_text, shared_legend)
from analysis.patch_embed_costs import ROUTINE_PARTS, memory_figure, routine_figure
from analysis.patch_embed_timeline import timeline_figure
from studylib import catalog, formatting, notebook, rundata
from studylib.claims import claim

ctx, run, prov, tprov = plots.open_notebook(FAMILY, globals())
data = PatchEmbedData(run)
everything, best, order, style = data.everything, data.best, data.order, data.style
models, hidden_of = data.models, data.hidden_of
timed, rounds, rounds_caption, rounds_cells = data.timed, data.rounds, data.rounds_caption, data.rounds_cells
flush_text, flush_said, flush_dropped = data.flush_text, data.flush_said, data.flush_dropped
at, how, stream_label, plot_version, legend_handles = (data.at, data.how, data.stream_label, data.plot_version,
                                                        data.legend_handles)


def draw_versions(ax, rows, versions, x):
    """Each of `versions` that `rows` holds as its line on ax, against column x; the ones drawn."""
    drawn = []
    for v in versions:
        d = rows[rows["version"] == v]
        if len(d):
            plot_version(ax, d, v, x)
            drawn.append(v)
    return drawn


timed

# %% [markdown]
# ## Key shapes: where the ladder is compared

# %%
def small_shape():
    """The shape (off the main model) timed by the most ladder versions: v1-v3 only run at
    small sizes, so this is where the early steps meet; ties go to the larger problem."""
    d = best[(best["model"] != MAIN_MODEL) & ~best["version"].map(catalog.is_anchor)]
    if d.empty:
        return None
    c = (d.groupby(["model", "image_size", "batch"]).agg(n=("version", "nunique"))
          .reset_index().sort_values(["n", "image_size", "batch"], ascending=False))
    r = c.iloc[0]
    return (r["model"], int(r["image_size"]), int(r["batch"]))


def main_shapes():
    d = best[best["model"] == MAIN_MODEL]
    if d.empty:
        return []
    shapes = [(MAIN_MODEL, KEY_IMAGE, b) for b in KEY_BATCHES
              if len(d[(d["image_size"] == KEY_IMAGE) & (d["batch"] == b)])]
    if not shapes:  # a sweep without the target sizes: its smallest and largest batch
        image = int(d["image_size"].min())
        bs = sorted({int(b) for b in d.loc[d["image_size"] == image, "batch"]})
        shapes = [(MAIN_MODEL, image, b) for b in dict.fromkeys([bs[0], bs[-1]])]
    return shapes


key_shapes = ([small_shape()] if small_shape() else []) + main_shapes()
key_shapes

# %% [markdown]
# ## Time per call vs image size at batch 1, every version (log y)

# %%
b1 = best[best["batch"] == 1]
panels = [m for m in models if len(b1[b1["model"] == m])]
# v8 and v9 are left to the tables here: v10, which picks the tile width per shape, runs within
# 2% of the faster of v7 and v9 at every size this figure shows (its NOTES).
SIZE_FIGURE_OMITS = ("v8_balanced_tiles", "v9_pos_first")
if panels:
    # Two rows of panels, at most ~8 series each: the rungs before the GEMM formulation (CPU,
    # one launch per dot product, streams, one copy) above, the GEMM-based rungs with the library
    # and the PyTorch anchors below; each row its own legend.
    drawn = [v for v in order if v not in SIZE_FIGURE_OMITS]
    first_gemm = drawn.index("v5_im2col_gemm") if "v5_im2col_gemm" in drawn else len(drawn)
    rows_of = [("before the GEMMs", drawn[:first_gemm]), ("GEMM-based, library, PyTorch", drawn[first_gemm:])]
    rows_of = [(what, vs) for what, vs in rows_of if any(len(b1[b1["version"] == v]) for v in vs)]
    fig, axes = plt.subplots(len(rows_of), len(panels), squeeze=False,
                             figsize=(plots.panels_width(len(panels), 4.2, 3.2), 3.3 * len(rows_of) + 0.6))
    for row, (what, versions) in enumerate(rows_of):
        shown = []
        for ax, m in zip(axes[row], panels):
            d0 = b1[b1["model"] == m]
            shown += draw_versions(ax, d0, versions, "image_size")
            pow2_ticks(ax, d0["image_size"])
            # The slow rungs span five decades (log y); the GEMM-based ones and the baselines sit
            # within 10-150 us, which a linear axis from zero shows apart.
            if row == 0 and first_gemm > 0:
                ax.set_yscale("log")
            else:
                ax.set_ylim(0, None)
            ax.set_title(f"{m}, batch 1: {what}", fontsize=8)
            if row == len(rows_of) - 1:
                ax.set_xlabel(f"image size (px), {m} (hidden {hidden_of[m]})")
        axes[row][0].set_ylabel("median time per call (us)")
        plots.legend_outside(axes[row][-1], handles=legend_handles([v for v in versions if v in shown]), fontsize=8)
    plots.titled(fig, f"Patch embedding: time per call vs image size, batch 1 ({flush_text})", tprov)
    fig.tight_layout()
    ctx.figure(f"{FAMILY}_image_size", fig, claim("image_size_caption", flush=flush_said, prov=prov))
else:
    ctx.missing("figure", f"{FAMILY}_image_size", claim("none_at_batch1"))

# %% [markdown]
# ## Streams: v3 vs batch with the stream count varied, v1/v2 on one stream beside it

# %%
s3 = timed[timed["version"].isin(STREAM_VERSIONS)]
stream_shape = None
if len(s3):
    c = (s3.groupby(["model", "image_size"]).size().reset_index(name="n")
           .sort_values(["n", "image_size"], ascending=False))
    stream_shape = (c.iloc[0]["model"], int(c.iloc[0]["image_size"]))
    sm, simage = stream_shape
    sv = [v for v in STREAM_VERSIONS if v in set(s3["version"])]
    sd3 = s3[(s3["model"] == sm) & (s3["image_size"] == simage)]
    counts = sorted({int(n) for n in sd3["streams"]})
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
                        linestyle="-", label=stream_label(n))
        for w in side:
            plot_version(ax, at_shape[at_shape["version"] == w], w, "batch", linestyle=":")
        pow2_ticks(ax, sd3["batch"])
        ax.set_yscale("log")
        ax.set_xlabel(f"batch ({sm}, {simage} px)")
        ax.set_title(v)
    axes[0][0].set_ylabel("median time per call (us)")
    handles = [plt.Line2D([], [], color=colors[n], marker=markers[n], label=stream_label(n))
               for n in counts]
    handles += [plt.Line2D([], [], label=f"{w} (1 stream, host sync per launch)",
                           **dict(style[w], linestyle=":")) for w in side]
    plots.titled(fig, f"Patch embedding: v3 time per call vs batch, stream count varied "
                   f"({sm}, {simage} px)", tprov)
    shared_legend(fig, handles, bottom=0.2)
    ctx.figure(f"{FAMILY}_streams", fig, claim("streams_caption", versions=list(sv), model=sm, image=simage, side=list(side),
                                               flush=flush_said, prov=prov))
else:
    ctx.missing("figure", f"{FAMILY}_streams", claim("no_stream_rows", v3=V3, v3g=V3G))

# %% [markdown]
# ## Where more streams stop helping: time vs stream count, one line per batch

# %%
def knee(d):
    """(knee streams, its time, best streams, best time) of one version and shape's rows:
    the smallest stream count within KNEE of the fastest."""
    d = d.sort_values("streams")
    m = d["median_us"].min()
    k = d[d["median_us"] <= (1 + KNEE) * m].iloc[0]
    b = d.loc[d["median_us"].idxmin()]
    return int(k["streams"]), float(k["median_us"]), int(b["streams"]), float(m)


knees = {}
if stream_shape is not None and len(counts) > 1:
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
                    label=f"batch {b}")
            k, kt, _, _ = knees.setdefault((v, b), knee(d))
            ax.plot([k], [kt], linestyle="none", marker="o", markersize=11,
                    markerfacecolor="none", color=bcolors[b])
        pow2_ticks(ax, counts)
        ax.set_yscale("log")
        ax.set_xlabel(f"streams ({sm}, {simage} px)")
        ax.set_title(v)
    axes[0][0].set_ylabel("median time per call (us)")
    handles = [plt.Line2D([], [], color=bcolors[b], marker="o", label=f"batch {b}")
               for b in batches3]
    handles.append(plt.Line2D([], [], linestyle="none", marker="o", markersize=11,
                              markerfacecolor="none", color="#444444",
                              label=f"knee: fewest streams within {KNEE:.0%} of the fastest"))
    plots.titled(fig, f"Patch embedding: v3 time per call vs stream count ({sm}, {simage} px)", tprov)
    shared_legend(fig, handles, bottom=0.18, ncol=5)
    ctx.figure(f"{FAMILY}_streams_count", fig, claim("streams_count_caption", versions=list(sv), model=sm, image=simage,
                                                     knee=KNEE, flush=flush_said, prov=prov))
else:
    ctx.missing("figure", f"{FAMILY}_streams_count", claim("one_stream_count"))

# %% [markdown]
# ## Time vs batch on ViT-B: v4 onward against cuDNN and the two PyTorch anchors

# %%
# v8 is left to the tables in the figures over batch and the roofline: its points lie on v9's (v8
# with the position embedding read first; 0.99-1.12x of it over the full sweep): 9 series a panel.
ON_V9S_LINE = ("v8_balanced_tiles",)
gemm_versions = [v for v in order if (v in LADDER[LADDER.index(GEMM_FROM):] or
                                      (v not in LADDER and not catalog.is_anchor(v))) and v not in ON_V9S_LINE]
mb = best[(best["model"] == MAIN_MODEL) & best["version"].isin(gemm_versions)]
images = sorted({int(i) for i in mb["image_size"]})
if images and mb["batch"].nunique() > 1:
    fig, axes = plt.subplots(1, len(images), figsize=(plots.panels_width(len(images), 4.2), 4.4), squeeze=False)
    shown = []
    for ax, image in zip(axes[0], images):
        d0 = mb[mb["image_size"] == image]
        shown += draw_versions(ax, d0, gemm_versions, "batch")
        pow2_ticks(ax, d0["batch"])
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_title(f"{MAIN_MODEL}, {image} px ({(image // 16) ** 2} patches)")
    axes[0][0].set_ylabel("median time per call (us)")
    plots.titled(fig, f"Patch embedding: time per call vs batch, {MAIN_MODEL} ({flush_text})", tprov)
    shared_legend(fig, legend_handles([v for v in gemm_versions if v in shown]), bottom=0.2)
    ctx.figure(f"{FAMILY}_batch", fig,
               claim("batch_caption", model=MAIN_MODEL, hidden=hidden_of.get(MAIN_MODEL, 768),
                     versions=[v for v in gemm_versions if not catalog.is_anchor(v)], conv=label(CONV),
                     linear=label(LINEAR), on_line=list(ON_V9S_LINE), flush=flush_said, prov=prov))
else:
    ctx.missing("figure", f"{FAMILY}_batch", claim("no_batch_rows", model=MAIN_MODEL))

# %% [markdown]
# ## The ladder: time, speedup over the previous step and over cpu_baseline, ratio to cuDNN
# ## and to the faster anchor, at the key shapes

# %%
own_order = [v for v in order if catalog.is_own(v)]
ladder_rows = []
for m, image, b in key_shapes:
    present = [v for v in order if np.isfinite(at(v, m, image, b))]
    steps = [v for v in own_order if v in present]
    anchors_here = {a: at(a, m, image, b) for a in (CONV, LINEAR) if a in present}
    best_anchor = min(anchors_here, key=anchors_here.get) if anchors_here else None
    for v in present:
        us = at(v, m, image, b)
        prev = steps[steps.index(v) - 1] if v in steps and steps.index(v) > 0 else None
        ladder_rows.append({
            "shape": shape_text(m, image, b), "version": v,
            "streams": at(v, m, image, b, "streams") if v in STREAM_VERSIONS else np.nan,
            "median us": us,
            **({formatting.SPREAD_COLUMN: formatting.fmt_spread(at(v, m, image, b, "lo_us"),
                                                at(v, m, image, b, "hi_us"))} if rounds else {}),
            "previous step": prev or "-",
            "x previous": at(prev, m, image, b) / us if prev else np.nan,
            f"x {CPU}": at(CPU, m, image, b) / us if v != CPU else np.nan,
            f"time / {CUDNN}": us / at(CUDNN, m, image, b) if v != CUDNN else np.nan,
            "time / faster anchor": (us / anchors_here[best_anchor]
                                     if best_anchor and v != best_anchor else np.nan),
            "faster anchor": SHORT.get(best_anchor, "-")})
ladder = pd.DataFrame(ladder_rows)
if len(ladder):
    ladder = ladder.dropna(axis=1, how="all")
    fmts = {"streams": formatting.fmt_int, "median us": formatting.fmt_us, "x previous": fmt_x,
            f"x {CPU}": fmt_x, f"time / {CUDNN}": fmt_x, "time / faster anchor": fmt_x}
    ctx.table(f"{FAMILY}_ladder", formatting.markdown_table(ladder, {k: f for k, f in fmts.items()
                                                             if k in ladder.columns}),
              claim("ladder_caption", rounds=rounds_caption, cpu=CPU, cudnn=CUDNN, flush=flush_said, prov=prov))
else:
    ctx.missing("table", f"{FAMILY}_ladder", claim("no_key_shape"))
ladder

# %% [markdown]
# ## Speedup over cpu_baseline and over the previous step, per key shape

# %%
# The steps whose gains over their predecessors are a narrow band around 1x: the implicit GEMMs on.
NEAR_ONE_STEPS = LADDER[LADDER.index("v6_implicit_gemm"):]

# %%
if len(ladder) and ladder["version"].map(catalog.is_own).any():
    steps_all = [v for v in order if not catalog.is_anchor(v) and v in set(ladder["version"])]
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
    left.set_title(f"speedup over {CPU} (log axis)", fontsize=10)
    left.set_ylabel(f"{CPU} time / version time")
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
    plots.titled(fig, "Patch embedding: speedup along the ladder (above 1 = faster)", tprov)
    shared_legend(fig, handles, bottom=0.14)
    ctx.figure(f"{FAMILY}_speedup", fig, claim("speedup_caption", cpu=CPU, shapes=list(shapes), near_one=list(near_one),
                                               prov=prov))
else:
    ctx.missing("figure", f"{FAMILY}_speedup", claim("no_ladder_at_key"))

# %% [markdown]
# ## Share of the tensor-core ceiling: every GPU version's achieved TFLOP/s over the run's GEMM rate
# (every version moves the same minimum bytes per shape, so a roofline would stack them in one
# column: the share of the measured ceiling says the same without pretending otherwise)

# %%
rl_shapes = main_shapes()
# The launch-per-output versions (v1-v3, one kernel per output channel and patch) reach 1e-4 to
# 1e-2 TFLOP/s where they run at ViT-B at all; the streams figures and the ladder table give them.
rl = best[~best["version"].isin([CPU, V1, V2, V3, V3G, *ON_V9S_LINE])]
rl = rl[[(m, int(i), int(b)) in rl_shapes for m, i, b in
         zip(rl["model"], rl["image_size"], rl["batch"])]]
rl = plots.roofline_points(rl, lambda r: shape_text(r["model"], int(r["image_size"]), int(r["batch"])))
gemm_ceiling = run.ceilings().gemm_tflops
if len(rl) and gemm_ceiling:
    fig = plots.peak_share_figure(rl, order, style, label, gemm_ceiling, "measured fp16 GEMM ceiling",
                                  f"Patch embedding: share of the tensor-core ceiling on {MAIN_MODEL}", tprov)
    ctx.figure(f"{FAMILY}_peak_share", fig,
               claim("peak_share_caption", shapes=[shape_text(*sh) for sh in rl_shapes], ceiling=gemm_ceiling, cpu=CPU,
                     on_line=list(ON_V9S_LINE), flush=flush_said, prov=prov))
else:
    ctx.missing("figure", f"{FAMILY}_peak_share", claim("no_gemm_ceiling" if len(rl) else "no_tflops", model=MAIN_MODEL))

# %% [markdown]
# ## Device and host memory per version

# %%
memory_figure(data, ctx, list(dict.fromkeys(
    [s for s in key_shapes[:1]] + ([max(main_shapes(), key=lambda s: s[2])] if main_shapes() else []))))

# %% [markdown]
# ## The host-to-host routine of v1-v4: copy up, preprocessing, kernels, copy down

# %%
rt = routine_figure(data, ctx, key_shapes)

# %% [markdown]
# ## Timeline of v3: one lane per stream, one stream against many (per-launch CUDA events)

# %%
tl_sentence = timeline_figure(data, ctx)

# %% [markdown]
# ## Every timed configuration (median us), and the status of every row

# %%
ctx.table(f"{FAMILY}_sweep", formatting.sweep_table(
    timed, ["model", "image_size", "batch", "streams"], "version", order, formatting.fmt_us,
    {c: formatting.fmt_int for c in ("image_size", "batch", "streams")}),
    claim("sweep_caption", cells=rounds_cells, flush=flush_said, prov=prov))

st = formatting.status_table(everything.assign(
    _o=everything["version"].map({v: i for i, v in enumerate(order)}).fillna(len(order)))
    .sort_values(["_o", "version"], kind="stable"))
left_out = [claim("other_flush", count=flush_dropped)] if flush_dropped else []
ctx.table(f"{FAMILY}_status", formatting.markdown_table(st),
          claim("status_caption", family="Patch-embedding", left_out=left_out, prov=prov))
st

# %% [markdown]
# ## Findings, as sentences generated from the numbers above

# %%
findings = [s for s in [formatting.rounds_sentence(timed)] if s]


# The targets and the headline are judged on the family's targets sitting where one was measured
# after this run (its own clean sitting of the target shapes), else on this run.
judged = PatchEmbedData(ctx.take_targets_run()) if ctx.targets_run is not None else data
findings += [s for s in [ctx.judged_apart("The targets and the headline below")] if s]


def fastest(model, image, batch, own_only=False, source=None):
    """Fastest version shown at a shape (libraries included unless own_only), or None; from
    `source` (a PatchEmbedData; default this run's)."""
    b = (source or data).best
    d = b[(b["model"] == model) & (b["image_size"] == image) & (b["batch"] == batch)
          & ~b["version"].map(catalog.is_anchor)]
    if own_only:
        d = d[d["version"].map(catalog.is_own)]
    return d.loc[d["median_us"].idxmin()] if len(d) else None


def anchor_at(a, model, image, batch, source=None):
    src = source or data
    h = src.how(a, model, image, batch)
    return claim("anchor_at", short=SHORT[a], us=src.at(a, model, image, batch), how=h)


# The F.conv2d target: batch 256, 224 px, ViT-B.
f = fastest(MAIN_MODEL, KEY_IMAGE, CONV_BATCH, source=judged)
conv = judged.at(CONV, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
where = claim("where_conv", batch=CONV_BATCH, image=KEY_IMAGE, model=MAIN_MODEL)
if f is not None and np.isfinite(conv):
    r = conv / f["median_us"]
    band = judged.speedup_band(f, CONV, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
    target = claim("conv_target", where=where, version=f["version"], us=f["median_us"], ratio=r,
                   anchor=anchor_at(CONV, MAIN_MODEL, KEY_IMAGE, CONV_BATCH, judged), target=CONV_TARGET, band=band,
                   verdict=notebook.verdict(r, CONV_TARGET, band))
    findings.append(target)
    ctx.judge(target)
    fo = fastest(MAIN_MODEL, KEY_IMAGE, CONV_BATCH, own_only=True, source=judged)
    if fo is not None and fo["version"] != f["version"]:
        findings.append(claim("own_vs_conv", version=fo["version"], us=fo["median_us"], ratio=conv / fo["median_us"],
                              where=where))
else:
    findings.append(claim("conv_unjudged", has_version=f is not None, where=where, target=CONV_TARGET))

# Batch 1, outside the targets, where the launch and the pipeline's fill are the whole call: stated,
# whichever way it goes.
f1, lin1 = fastest(MAIN_MODEL, KEY_IMAGE, 1), at(LINEAR, MAIN_MODEL, KEY_IMAGE, 1)
if f1 is not None and np.isfinite(lin1):
    findings.append(claim("batch1", image=KEY_IMAGE, version=f1["version"], us=f1["median_us"],
                          ratio=lin1 / f1["median_us"], anchor=anchor_at(LINEAR, MAIN_MODEL, KEY_IMAGE, 1),
                          pytorch_faster=f1["median_us"] > lin1))

# Losses along the ladder: a rung more than 10% slower than an earlier one at some image size
# (the largest batch of each), which a headline at 224 px would not show.
own_ladder = [v for v in order if catalog.is_own(v) and v != CPU]
for image in sorted(int(i) for i in set(best.loc[best["model"] == MAIN_MODEL, "image_size"])):
    at_image = best[(best["model"] == MAIN_MODEL) & (best["image_size"] == image)]
    if not len(at_image):
        continue
    b = int(at_image["batch"].max())
    for i, v in enumerate(own_ladder):
        earlier = [(at(u, MAIN_MODEL, image, b), u) for u in own_ladder[:i] if np.isfinite(at(u, MAIN_MODEL, image, b))]
        m = at(v, MAIN_MODEL, image, b)
        if earlier and np.isfinite(m) and m > 1.1 * min(earlier)[0]:
            t0, u = min(earlier)
            findings.append(claim("ladder_loss", image=image, batch=b, version=v, us=m, ratio=m / t0, earlier=u,
                                  earlier_us=t0))

# The patchify + F.linear target: batch 32 and 256, 224 px.
parts, unjudged = [], []
for b in LINEAR_BATCHES:
    f = fastest(MAIN_MODEL, KEY_IMAGE, b, source=judged)
    lin = judged.at(LINEAR, MAIN_MODEL, KEY_IMAGE, b)
    if f is None or not np.isfinite(lin):
        unjudged.append((b, f is not None))
        continue
    band = judged.speedup_band(f, LINEAR, MAIN_MODEL, KEY_IMAGE, b)
    parts.append(claim("linear_part", batch=b, ratio=lin / f["median_us"], version=f["version"], band=band,
                       verdict=notebook.verdict(lin / f["median_us"], 1.0, band)))
    findings.append(claim("linear_at", batch=b, image=KEY_IMAGE, version=f["version"], us=f["median_us"],
                          ratio=lin / f["median_us"], anchor=anchor_at(LINEAR, MAIN_MODEL, KEY_IMAGE, b, judged)))
for has_version in dict.fromkeys(h for _, h in unjudged):
    findings.append(claim("linear_unjudged", has_version=has_version, batches=[b for b, h in unjudged if h == has_version],
                          image=KEY_IMAGE, model=MAIN_MODEL))
if len(parts) == len(LINEAR_BATCHES):
    target = claim("linear_target", batches=list(LINEAR_BATCHES), image=KEY_IMAGE, parts=parts,
                   verdict=notebook.combined_verdict([p.verdict for p in parts]))
    findings.append(target)
    ctx.judge(target)


def stream_findings(v):
    """Where more streams stop helping version v, at the stream shape's largest batch."""
    d = sd3[sd3["version"] == v]
    per_batch = {int(b): knee(g) for b, g in d.groupby("batch") if g["streams"].nunique() > 1}
    if not per_batch:
        return [claim("streams_one_count", version=v, streams=stream_label(d["streams"].iloc[0]))]
    b = max(per_batch)
    k, kt, bs, bt = per_batch[b]
    one = at(v, sm, simage, b, table=timed[timed["streams"] == 1])
    most = int(d["streams"].max())
    most_t = at(v, sm, simage, b, table=timed[(timed["version"] == v) & (timed["streams"] == most)])
    rest = claim("streams_rest", knee_share=KNEE, best_us=bt, best=stream_label(bs), most_us=most_t,
                 most=stream_label(most))
    out = [claim("streams_no_help", version=v, shape=shape_text(sm, simage, b), knee_us=kt, rest=rest) if k == 1 else
           claim("streams_knee", version=v, knee=stream_label(k), shape=shape_text(sm, simage, b),
                 has_one=bool(np.isfinite(one)), one_us=one, knee_us=kt, rest=rest)]
    if len(per_batch) > 1:
        out.append(claim("knee_per_batch", version=v, knee_share=KNEE, model=sm, image=simage,
                         parts=[claim("knee_at", batch=bb, knee=per_batch[bb][0]) for bb in sorted(per_batch)]))
    return out


# Where more streams stop helping.
if stream_shape is not None:
    for v in sv:
        findings += stream_findings(v)
else:
    findings.append(claim("no_streams", v3=V3, v3g=V3G))
if tl_sentence:
    findings.append(tl_sentence)

# The ladder against the CPU, and v1 (the first GPU step) against it.
for m, image, b in key_shapes:
    c = at(CPU, m, image, b)
    f = fastest(m, image, b)
    if not np.isfinite(c) or f is None or f["version"] == CPU:
        continue
    v1 = at(V1, m, image, b)
    v1_too = bool(np.isfinite(v1)) and f["version"] != V1
    findings.append(claim("vs_cpu", shape=shape_text(m, image, b), version=f["version"], ratio=c / f["median_us"],
                          cpu=CPU, cpu_us=c, v1_too=v1_too, v1=V1, v1_ratio=c / v1 if v1_too else 1.0))

# Where v4's routine goes, at the largest key shape with a split.
for m, image, b in reversed(key_shapes):
    r = rt[(rt["version"] == V4) & (rt["model"] == m) & (rt["image_size"] == image)
           & (rt["batch"] == b)]
    if len(r) and np.isfinite(r[ROUTINE_PARTS].iloc[0]).all():
        r = r.iloc[0]
        findings.append(claim("routine", shape=shape_text(m, image, b), v4=V4, routine_us=r["routine_us"],
                              share=(r["h2d_us"] + r["d2h_us"]) / r["routine_us"], h2d=r["h2d_us"], d2h=r["d2h_us"],
                              us=r["median_us"]))
        break

missing_versions = [v for v in LADDER if v not in set(everything["version"])]
if missing_versions:
    findings.append(claim("missing_versions", versions=missing_versions))
findings.append(formatting.status_finding(everything))

findings_text = ctx.claims(f"{FAMILY}_findings", findings)

# README's headline line: the fastest version of all at batch 256, 224 px on ViT-B.
top = fastest(MAIN_MODEL, KEY_IMAGE, CONV_BATCH, source=judged)
if top is not None:
    def anchor_name(a):
        h = judged.how(a, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
        return f"{label(a)} ({h})" if h else label(a)
    anchors = [a for a in (CONV, LINEAR) if np.isfinite(judged.at(a, MAIN_MODEL, KEY_IMAGE, CONV_BATCH))]
    jb = judged.best
    shown = jb[(jb["model"] == MAIN_MODEL) & (jb["image_size"] == KEY_IMAGE) & (jb["batch"] == CONV_BATCH)
               & jb["version"].isin([top["version"], CUDNN, *anchors])]
    ctx.headline(family="Patch embedding",
                 shape=f"{MAIN_MODEL}, batch {CONV_BATCH}, {KEY_IMAGE} px",
                 fastest=top["version"], fastest_us=float(top["median_us"]),
                 library=CUDNN if CUDNN in judged.order else None,
                 library_us=judged.at(CUDNN, MAIN_MODEL, KEY_IMAGE, CONV_BATCH),
                 anchors=[(anchor_name(a), judged.at(a, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)) for a in anchors],
                 run_ids=rundata.run_ids_of(shown))
print(findings_text.read_text())
