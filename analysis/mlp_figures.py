"""The MLP's figures and main tables of one run (analysis/mlp.py draws them in this order): time
against batch, GEMM throughput, speedups, the summary and the ladder at the target sizes, and the
ViT widths. No roofline: at each row count every version moves the same bytes for the same flops,
so its points would share one intensity; the summary gives each version's share of its own
precision's GEMM ceiling instead."""
from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.ticker
import pandas as pd

from analysis import plots
from analysis.mlp_data import (
    GEMM, GRAPH, HIDDEN, KEY_BATCH, PARENTS, SUMMARY_FORMATS, TARGET_GEMM_RATIO, UNFUSED, drawing, is_fp8, label,
    widths_of)
from studylib import catalog, formatting, notes
from studylib.claims import claim


def time_vs_batch(data, ctx):
    """Time per call against batch, ViT-B at 224 and 384 px (log-log)."""
    S, order_s, style_s, sweep_prov = data.sweep_rows, data.drawn_s, data.style_s, data.sweep_prov
    sweep_tprov = data.sweep_tprov
    images = sorted(int(i) for i in set(S.vb["image_size"]))
    if images:
        fig, axes = plt.subplots(2, len(images), figsize=(plots.panels_width(len(images), 4.4), 7.6), squeeze=False,
                                 gridspec_kw={"height_ratios": [1.0, 0.8]})
        for ax, image in zip(axes[1], images):
            ratio_to_gemm(ax, S.vb[S.vb["image_size"] == image], order_s, style_s)
        for ax, image in zip(axes[0], images):
            d0 = S.vb[S.vb["image_size"] == image]
            for v in order_s:
                d = d0[d0["version"] == v].sort_values("batch")
                if len(d):
                    ax.plot(d["batch"], d["median_us"], **style_s[v])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ticks = sorted(int(b) for b in set(d0["batch"]))
            ax.set_xticks(ticks, [str(b) for b in ticks])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            tokens = d0["rows"].iloc[0] / d0["batch"].iloc[0]
            ax.set_xlabel(ctx.said(claim("batch_axis", tokens=tokens)))
            ax.set_title(ctx.said(claim("image_panel", image=image, hidden=HIDDEN)))
        axes[0][0].set_ylabel("median time per call (us)")
        axes[1][0].set_ylabel(ctx.said(claim("vs_gemm_axis", gemm=GEMM)))
        # The target's line is named in the legend: a label on it would sit on the versions' lines.
        target = plt.Line2D([], [], color="#444444", linewidth=0.8, linestyle="--",
                            label=ctx.said(claim("target_line_label", target=TARGET_GEMM_RATIO, gemm=GEMM)))
        fig.legend(handles=[plt.Line2D([], [], label=label(v), **style_s[v]) for v in order_s] + [target],
                   loc="lower center", ncol=min(len(order_s) + 1, 4), bbox_to_anchor=(0.5, -0.02))
        plots.titled(fig, ctx.said(claim("time_title", flush=S.flush_text)), sweep_tprov)
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        ctx.figure("mlp_time", fig, claim("time_caption", hidden=HIDDEN, mlp=4 * HIDDEN, target=TARGET_GEMM_RATIO,
                                          flush=S.flush_text, left_out=data.sweep_left_out, prov=sweep_prov))
    else:
        ctx.missing("figure", "mlp_time", claim("none_at_hidden", hidden=HIDDEN))


def ratio_to_gemm(ax, d0, order, style):
    """Each version's median time over gemm_only's at the same batch, against batch (the bottom
    row of mlp_time): linear, with the 1x line and the target's."""
    g = d0[d0["version"] == GEMM].set_index("batch")["median_us"]
    for v in order:
        if v == GEMM:
            continue
        d = d0[d0["version"] == v].set_index("batch")["median_us"]
        r = (d / g).dropna().sort_index()
        if len(r):
            ax.plot(r.index, r.values, **style[v])
    ax.axhline(1.0, color="#444444", linewidth=0.8)
    ax.axhline(TARGET_GEMM_RATIO, color="#444444", linewidth=0.8, linestyle="--")
    ax.set_xscale("log", base=2)
    ticks = sorted(int(b) for b in set(d0["batch"]))
    ax.set_xticks(ticks, [str(b) for b in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("batch")
    plots.not_from_zero(ax)


def throughput(data, ctx):
    """GEMM throughput against rows, against the measured GEMM ceiling."""
    S, order_s, style_s, sweep_ceiling = data.sweep_rows, data.drawn_s, data.style_s, data.sweep_ceiling
    sweep_prov, sweep_tprov = data.sweep_prov, data.sweep_tprov
    if len(S.vb):
        fig, ax = plt.subplots()
        for v in order_s:
            d = S.vb[S.vb["version"] == v].sort_values("rows")
            if len(d):
                ax.plot(d["rows"], d["tflops"], label=label(v), **style_s[v])
        if sweep_ceiling:
            ax.axhline(sweep_ceiling, color="#444444", linewidth=1.0)
            ax.text(S.vb["rows"].min(), sweep_ceiling,
                    " " + ctx.said(claim("ceiling_line", tflops=sweep_ceiling)), va="bottom",
                    fontsize=8)
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.set_xlabel(ctx.said(claim("rows_both_sizes_axis", hidden=HIDDEN)))
        ax.set_ylabel("TFLOP/s (4 x rows x hidden x 4 hidden / median time)")
        ax.legend(ncol=2, loc="lower right")  # curves rise from the lower left: keep it clear
        plots.titled(fig, "MLP: throughput of the two GEMMs' flops vs rows", sweep_tprov)
        ctx.figure("mlp_tflops", fig, claim("tflops_caption", hidden=HIDDEN, ceiling=bool(sweep_ceiling),
                                            ceiling_tflops=sweep_ceiling or 0.0, flush=S.flush_text,
                                            left_out=data.sweep_left_out, prov=sweep_prov))
    else:
        ctx.missing("figure", "mlp_tflops", claim("none_at_hidden", hidden=HIDDEN))


def speedup(data, ctx):
    """Speedup over unfused and over PyTorch's MLP replayed as a CUDA graph."""
    S, order_s, style_s, sweep_prov = data.sweep_rows, data.drawn_s, data.style_s, data.sweep_prov
    sweep_tprov = data.sweep_tprov
    baselines = [b for b in (UNFUSED, GRAPH) if b in set(S.vb["version"])]
    if baselines:
        fig = plots.speedup_panels(S.vb, order_s, baselines, label, style_s,
                                ctx.said(claim("rows_axis", hidden=HIDDEN)))
        plots.titled(fig, "MLP: speedup per rows (above 1 = faster than the baseline)", sweep_tprov)
        ctx.figure("mlp_speedup", fig, claim("speedup_caption", hidden=HIDDEN, baselines=[label(b) for b in baselines],
                                             left_out=data.sweep_left_out, prov=sweep_prov))
    else:
        ctx.missing("figure", "mlp_speedup", claim("no_speedup_baselines", unfused=UNFUSED, graph=GRAPH, hidden=HIDDEN))


def summary(data, ctx):
    """The summary table at the target sizes."""
    ceiling_note, flush_text, key_rows, prov = data.ceiling_note, data.flush_text, data.key_rows, ctx.provenance()
    rounds_caption, summary_rows = data.rounds_caption, data.summary_rows
    summary = summary_rows(key_rows).dropna(axis=1, how="all")
    if len(summary):
        ctx.table("mlp_summary", formatting.markdown_table(summary, SUMMARY_FORMATS),
                  claim("summary_caption", shapes=[claim("shape_at", rows=r, hidden=HIDDEN) for r in key_rows],
                        rounds=rounds_caption, ceiling_note=ceiling_note, flush=flush_text, prov=prov))
    else:
        ctx.missing("table", "mlp_summary", claim("none_at_hidden", hidden=HIDDEN))


def ladder(data, ctx):
    """The ladder at the target sizes: time, speedup over the previous step, ratio to gemm_only."""
    at, flush_text, key_rows, order, prov = data.at, data.flush_text, data.key_rows, data.order, ctx.provenance()
    rounds, rounds_caption = data.rounds, data.rounds_caption
    steps = [v for v in order if catalog.is_own(v) and v != GEMM]
    ceilings = ctx.run.ceilings()
    ladder, ladder_formats = formatting.ladder_table(
        order, steps, key_rows, lambda v, r, col: at(v, r, col), GEMM if GEMM in order else None,
        size_label=lambda r: f"{r} rows", spread=rounds, idea=lambda v: notes.idea("mlp", v),
        floor_share=lambda v, r: ceilings.floor_share(at(v, r, "tflops"), float("nan"), fp8=is_fp8(v)))
    if len(ladder):
        ctx.table("mlp_ladder", formatting.markdown_table(ladder, ladder_formats),
                  claim("ladder_caption", shapes=[claim("shape_at", rows=r, hidden=HIDDEN) for r in key_rows],
                        rounds=rounds_caption, steps_chain=" -> ".join(steps), gemm=GEMM, floor=claim("floor_columns"),
                        flush=flush_text, prov=prov))
        fp16_steps = [v for v in steps if not is_fp8(v)]
        fig = plots.ladder_figure(fp16_steps, key_rows, lambda v, r, col: at(v, r, col),
                                  GEMM if GEMM in order else None, lambda r: ctx.said(claim("rows_tick", rows=r)),
                                  ctx.said(claim("ladder_steps_title", hidden=HIDDEN, flush=flush_text)),
                                  ctx.title_provenance(),
                                  parents=PARENTS)
        if fig is not None:
            ctx.ladder_drawn(plots.ladder_rungs(fp16_steps, key_rows, lambda v, r, col: at(v, r, col),
                                                lambda r: ctx.said(claim("rows_tick", rows=r)), parents=PARENTS))
            ctx.figure("mlp_ladder_steps", fig,
                       claim("ladder_steps_caption", shapes=[claim("shape_at", rows=r, hidden=HIDDEN) for r in key_rows],
                             rounds=rounds_caption, unfused=UNFUSED, gemm=GEMM, scale=plots.LADDER_SCALE,
                             parents=[claim("parent_of", version=v, parent=p) for v, p in PARENTS.items()
                                      if v in fp16_steps], flush=flush_text, prov=prov))
        else:
            ctx.missing("figure", "mlp_ladder_steps", claim("none_at_hidden", hidden=HIDDEN))
    else:
        ctx.missing("table", "mlp_ladder", claim("none_at_hidden", hidden=HIDDEN))


def widths(data, ctx):
    """The ViT widths at batch 32, 224 px (hidden 384, 768, 1024)."""
    S, summary_rows, wrun = data.widths_rows, data.summary_rows, data.widths_run
    order_w = drawing(S.t)[0]
    w_ceiling = wrun.ceilings().gemm_tflops
    w_ceiling_note = data.own_ceiling_note(w_ceiling, "that run" if wrun is not data.run else "this run")
    w_prov = data.beside_prov(wrun, "the ViT widths")
    wide = S.t[(S.t["image_size"] == 224) & (S.t["batch"] == KEY_BATCH)]
    widths = widths_of(S.t)
    if len(widths) >= 2:
        parts = []
        for h in widths:
            r = int(wide.loc[wide["hidden"] == h, "rows"].iloc[0])
            d = summary_rows([r], hidden=h, image=224, batch=KEY_BATCH, table=S.t, ceiling=w_ceiling,
                             versions=order_w)
            model = wide.loc[wide["hidden"] == h, "model"].iloc[0]
            d.insert(0, "hidden", h)
            d.insert(0, "model", model if isinstance(model, str) and model else "-")
            parts.append(d.drop(columns=["rows"]))
        by_width = pd.concat(parts, ignore_index=True).dropna(axis=1, how="all")
        ctx.table("mlp_widths", formatting.markdown_table(by_width, SUMMARY_FORMATS),
                  claim("widths_caption", batch=KEY_BATCH, rows=int(wide['rows'].iloc[0]), ceiling_note=w_ceiling_note,
                        flush=S.flush_text, prov=w_prov))
    else:
        ctx.missing("table", "mlp_widths", claim("one_width" if widths else "no_width", hidden=widths[0] if widths else None,
                                                batch=KEY_BATCH))
    return widths
