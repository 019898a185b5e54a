"""The attention section's figures: scaling with tokens, time against batch, time relative to the
best cuDNN result, the ladder's steps and the share of the tensor-core ceiling.
analysis/attention.py calls them."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import plots
from analysis.attention_data import (
    BEST_CUDNN, CUDNN, CUDNN_GRAPH, FASTEST_TARGET, FIGURE_FROM, HEAD_DIM, HEADS, TWIN_OF_V9, V9, label)
from studylib import catalog
from studylib.claims import claim

# Versions within ON_LINE of v9's time at every token count would hide under its line on the log
# axis: left to the tables and named in the caption (the vs-cuDNN figure draws them apart).
ON_LINE = 0.05
# Eight series a reader can tell apart: three steps of the tiled ladder (v0, v3's tensor cores,
# v6 its last), the flash kernels up to v9 (v8 within 2% of v9, v12 and TWIN_OF_V9 on v9's point
# at this batch), our cuDNN SDPA and PyTorch's flash backend replayed (its cuDNN backend sits on
# our cuDNN SDPA's point; efficient and math are in the tables).
ROOFLINE_SERIES = ("v0_naive", "v3_wmma", "v6_coalesced_k", "v7_flash_mma", "v7_flash", "v9_softmax_overlap",
                   CUDNN, "pytorch_sdpa_flash_graph")


def scaling(data, ctx):
    """Time per call against tokens at the key batch (log-log), with a tokens^2 slope."""
    kb, style = data.kb, data.style
    v9_us = kb[kb["version"] == V9].set_index("tokens")["median_us"]

    def off_v9(version):
        """The largest relative distance of a version's times from v9's, NaN where v9 lacks one."""
        r = kb[kb["version"] == version].set_index("tokens")["median_us"] / v9_us
        return float((r - 1).abs().max()) if len(r) and r.notna().all() else np.nan

    distance = {v: off_v9(v) for v in data.near_order if v != V9 and not catalog.is_anchor(v)}
    on_v9_line = {v: x for v, x in distance.items() if x <= ON_LINE}
    scaling_order = [v for v in data.near_order if v not in on_v9_line]
    fig, ax = plt.subplots()
    for v in scaling_order:
        d = kb[kb["version"] == v].sort_values("tokens")
        if len(d):
            ax.plot(d["tokens"], d["median_us"], label=label(v), **style[v])
    if len(kb):
        # A tokens^2 slope through the geometric middle of the data: parallel lines scale as N^2.
        n = np.array(sorted(set(kb["tokens"])), dtype=float)
        shown = kb.loc[kb["version"].isin(scaling_order), "median_us"]
        mid = np.exp(np.log(shown).mean()) if len(shown) and (shown > 0).all() else 1.0
        ref = mid * (n / np.exp(np.log(n).mean())) ** 2
        ax.plot(n, ref, color="#444444", linewidth=0.8, linestyle=":", label="slope tokens^2")
    plots.measured_ticks(ax, kb["tokens"])
    ax.set_yscale("log")
    ax.set_xlabel(ctx.said(claim("tokens_axis", batch=data.key_batch, heads=HEADS, head_dim=HEAD_DIM)))
    ax.set_ylabel("median time per call (us)")
    plots.legend_outside(ax, fontsize=8)
    plots.titled(fig, ctx.said(claim("scaling_title", flush=data.flush_said)), data.tprov)
    ctx.figure("attention_scaling", fig,
               claim("scaling_caption", batch=data.key_batch, heads=HEADS, head_dim=HEAD_DIM, first=FIGURE_FROM,
                     twin=TWIN_OF_V9, on_line=bool(on_v9_line), on_line_names=list(on_v9_line), v9=V9,
                     on_line_max=max(on_v9_line.values(), default=0.0), cudnn=CUDNN, flush=data.flush_said,
                     prov=data.prov))


def batch(data, ctx):
    """Time per call against batch, one panel per token count."""
    timed, style, figure_order = data.timed, data.style, data.figure_order
    if not (data.token_counts and len(data.batches) > 1):
        ctx.missing("figure", "attention_batch", claim("few_batches"))
        return
    fig, axes = plt.subplots(1, len(data.token_counts),
                             figsize=(plots.panels_width(len(data.token_counts), 4.0), 4.2), squeeze=False)
    for ax, n in zip(axes[0], data.token_counts):
        d0 = timed[timed["tokens"] == n]
        for v in figure_order:
            d = d0[d0["version"] == v].sort_values("batch")
            if len(d):
                ax.plot(d["batch"], d["median_us"], **style[v])
        plots.measured_ticks(ax, d0["batch"], base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_title(tokens_tick(ctx, n))
    axes[0][0].set_ylabel("median time per call (us)")
    fig.legend(handles=[plt.Line2D([], [], label=label(v), **style[v]) for v in figure_order],
               loc="lower center", ncol=min(len(figure_order), 4), bbox_to_anchor=(0.5, -0.02),
               fontsize=8)
    plots.titled(fig, "Attention: median time per call vs batch", data.tprov)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    ctx.figure("attention_batch", fig,
               claim("batch_caption", first=FIGURE_FROM, cudnn=CUDNN, flush=data.flush_said, prov=data.prov))


def best_cudnn_rows(data):
    """The best cuDNN result at each token count of the key batch as rows of their own, with
    their rounds' range."""
    at, rows = data.at, []
    for n in sorted(set(data.kb["tokens"])):
        m, v = data.best_cudnn(n)
        rows.append({"version": BEST_CUDNN, "tokens": n, "median_us": m,
                     "lo_us": at(v, n, col="lo_us") if v else np.nan, "hi_us": at(v, n, col="hi_us") if v else np.nan})
    best = pd.DataFrame(rows)
    return best[np.isfinite(best["median_us"])] if len(best) else best


def vs_cudnn(data, ctx):
    """Time relative to the best cuDNN result at the key batch, the target's line and the fastest
    version named at each token count."""
    at, kb, near_order = data.at, data.kb, data.near_order
    best_rows = best_cudnn_rows(data)
    if not len(best_rows):
        ctx.missing("figure", "attention_vs_cudnn", claim("no_cudnn", cudnn=CUDNN, graph=CUDNN_GRAPH))
        return
    fig, ax = plt.subplots()
    plots.plot_ratios(ax, pd.concat([kb, best_rows]), near_order,
                      BEST_CUDNN, "tokens", label, data.style, speedup=False, band=True)
    plots.reference_line(ax, 1.0, ctx.said(claim("cudnn_line", cudnn=BEST_CUDNN)))
    plots.reference_line(ax, FASTEST_TARGET, ctx.said(claim("target_line", ratio=FASTEST_TARGET)), linestyle="--")
    plots.measured_ticks(ax, kb["tokens"])
    # The fastest version at each token count, named under its point (the first and last token
    # counts' names run inward, so no name leaves the axes).
    points = list(zip(best_rows["tokens"], best_rows["median_us"]))
    for i, (n, best) in enumerate(points):
        mine = [(at(v, n) / best, v) for v in near_order if not catalog.is_anchor(v) and np.isfinite(at(v, n))]
        if mine:
            r, v = min(mine)
            ha = "left" if i == 0 and len(points) > 1 else "right" if i == len(points) - 1 and i > 0 else "center"
            ax.annotate(ctx.said(claim("fastest_mark", version=v.split("_")[0], ratio=r)), xy=(n, r), xytext=(0, -12),
                        textcoords="offset points", ha=ha, va="top", fontsize=8, fontweight="bold")
    lo = ax.get_ylim()[0]
    ax.set_ylim(lo - 0.05, ax.get_ylim()[1])
    plots.not_from_zero(ax, corner="right")
    ax.set_xlabel(ctx.said(claim("tokens_at_batch_axis", batch=data.key_batch)))
    ax.set_ylabel(ctx.said(claim("vs_cudnn_axis", cudnn=BEST_CUDNN)))
    plots.legend_outside(ax, fontsize=8)
    plots.titled(fig, ctx.said(claim("vs_cudnn_title", cudnn=BEST_CUDNN)), data.tprov)
    ctx.figure("attention_vs_cudnn", fig,
               claim("vs_cudnn_caption", batch=data.key_batch, cudnn=CUDNN, graph=label(CUDNN_GRAPH),
                     target=FASTEST_TARGET, first=FIGURE_FROM, twin=TWIN_OF_V9, prov=data.prov))


def tokens_tick(ctx, n):
    return ctx.said(claim("tokens_tick", tokens=int(n)))


def ladder_steps(data, ctx):
    """Every own version's time at the key batch and its gain over the step above it (v9's twin
    left out)."""
    steps = [v for v in data.order if catalog.is_own(v) and v != TWIN_OF_V9]
    title = ctx.said(claim("ladder_steps_title", batch=data.key_batch, flush=data.flush_said))
    tokens = sorted(int(n) for n in set(data.kb["tokens"]))
    fig = plots.ladder_figure(steps, tokens, lambda v, n, col: data.at(v, n, col=col), CUDNN,
                              lambda n: tokens_tick(ctx, n), title, data.tprov)
    if fig is None:
        ctx.missing("figure", "attention_ladder_steps", claim("none_at_batch", batch=data.key_batch))
        return
    ctx.ladder_drawn(plots.ladder_rungs(steps, tokens, lambda v, n, col: data.at(v, n, col=col),
                                        lambda n: tokens_tick(ctx, n)))
    ctx.figure("attention_ladder_steps", fig,
               claim("ladder_steps_caption", batch=data.key_batch, rounds=data.rounds_caption, twin=TWIN_OF_V9,
                     cudnn=CUDNN, scale=plots.LADDER_SCALE, flush=data.flush_said, prov=data.prov))


def peak_share(data, ctx):
    """Every drawn version's achieved TFLOP/s over the run's fp16 GEMM rate at the target tokens."""
    kb = data.kb
    rl_tokens = [n for n in data.key_tokens if n in set(kb["tokens"])]
    rl = plots.roofline_points(kb[kb["tokens"].isin(rl_tokens)], lambda r: tokens_tick(ctx, r["tokens"]))
    rl_order = [v for v in data.order if v in ROOFLINE_SERIES]
    gemm_ceiling = data.run.ceilings().gemm_tflops
    if not (len(rl) and gemm_ceiling):
        ctx.missing("figure", "attention_peak_share", claim("no_gemm_ceiling" if len(rl) else "no_tflops"))
        return
    fig = plots.peak_share_figure(rl, rl_order, data.style, label, gemm_ceiling, "measured fp16 GEMM ceiling",
                                  ctx.said(claim("peak_share_title", batch=data.key_batch)), data.tprov)
    ctx.figure("attention_peak_share", fig,
               claim("peak_share_caption", batch=data.key_batch, heads=HEADS, head_dim=HEAD_DIM, ceiling=gemm_ceiling,
                     tokens=list(rl_tokens), versions=[label(v) for v in rl_order], twin=TWIN_OF_V9,
                     flush=data.flush_said, prov=data.prov))
