"""The LayerNorm section's figures: time and bandwidth against rows, the speedups over v1_shared
and the PyTorch anchors, and the ladder at the target sizes. analysis/layernorm.py calls them."""
from __future__ import annotations

import matplotlib.pyplot as plt

from analysis import plots
from analysis.layernorm_data import EAGER, GRAPH, HIDDEN, NOT_TIMED, TARGET_FRACTION, V1, label
from studylib.claims import claim


def time_vs_rows(data, ctx):
    """Median time per call against rows, log-log."""
    if not len(data.timed):
        ctx.missing("figure", "layernorm_time", NOT_TIMED)
        return
    fig, ax = plt.subplots()
    for v in data.order:
        d = data.timed[data.timed["version"] == v].sort_values("rows")
        ax.plot(d["rows"], d["median_us"], label=label(v), **data.style[v])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(ctx.said(claim("rows_axis", hidden=HIDDEN)))
    ax.set_ylabel("median time per call (us)")
    plots.legend_outside(ax)
    plots.titled(fig, ctx.said(claim("time_title", flush=data.flush_said)), data.tprov)
    ctx.figure("layernorm_time", fig, claim("time_caption", hidden=HIDDEN, flush=data.flush_said, prov=data.prov))


def bandwidth(data, ctx):
    """Achieved bandwidth against rows, as a share of the copy bandwidth measured in the run."""
    if not len(data.timed):
        ctx.missing("figure", "layernorm_gbps", NOT_TIMED)
        return
    # LayerNorm moves each byte once, so the copy kernel's bandwidth, measured in the same run, is
    # its ceiling: the y axis is the share of it (GB/s where the run has no copy ceiling).
    timed, copy = data.timed, data.copy
    fig, ax = plt.subplots()
    scale = 100.0 / copy if copy else 1.0
    for v in data.order:
        d = timed[timed["version"] == v].sort_values("rows")
        ax.plot(d["rows"], d["gbps"] * scale, label=label(v), **data.style[v])
    if copy:
        ax.axhline(100.0, color="#444444", linewidth=1.0)
        ax.axhline(100.0 * TARGET_FRACTION, color="#444444", linewidth=0.8, linestyle=":")
        ax.text(timed["rows"].min(), 100.0, " " + ctx.said(claim("copy_line", copy=copy)), va="bottom", fontsize=8)
        target = " " + ctx.said(claim("target_line", fraction=TARGET_FRACTION))
        ax.text(timed["rows"].min(), 100.0 * TARGET_FRACTION, target,
                va="bottom", fontsize=8)
        ax.set_ylim(0, 110)
        ax.set_ylabel("% of the measured copy bandwidth")
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("achieved GB/s (bytes read + written / median time)")
    ax.set_xscale("log")
    ax.set_xlabel(ctx.said(claim("rows_axis", hidden=HIDDEN)))
    plots.legend_outside(ax)  # right of the axes: the curves fill the whole plot
    plots.titled(fig, "LayerNorm: achieved bandwidth vs rows" + (", % of copy" if copy else ""), data.tprov)
    ctx.figure("layernorm_gbps", fig, claim("gbps_caption" if copy else "gbps_caption_no_ceiling", hidden=HIDDEN,
                                            copy=copy, target=TARGET_FRACTION, flush=data.flush_said, prov=data.prov))


def speedup(data, ctx):
    """Each version's speedup over v1_shared and over the PyTorch anchors, per rows."""
    baselines = [b for b in (V1, GRAPH, EAGER) if b in data.order]
    if not baselines:
        ctx.missing("figure", "layernorm_speedup", claim("no_baselines", v1=V1, graph=GRAPH, eager=EAGER))
        return
    fig = plots.speedup_panels(data.timed, data.order, baselines, label, data.style, "rows (batch x tokens)")
    plots.titled(fig, "LayerNorm: speedup per rows (above 1 = faster than the baseline)", data.tprov)
    ctx.figure("layernorm_speedup", fig,
               claim("speedup_caption", baselines=[label(b) for b in baselines], prov=data.prov))


def ladder_steps(data, ctx):
    """The ladder's steps at the target sizes (plots.ladder_figure)."""
    title = ctx.said(claim("ladder_steps_title", hidden=HIDDEN, flush=data.flush_said))
    fig = plots.ladder_figure(data.steps, data.key_rows, data.ladder_at, data.library,
                              lambda r: ctx.said(claim("rows_tick", rows=r)), title, data.ladder_tprov)
    if fig is None:
        ctx.missing("figure", "layernorm_ladder_steps", NOT_TIMED)
        return
    ctx.ladder_drawn(plots.ladder_rungs(data.steps, data.key_rows, data.ladder_at,
                                        lambda r: ctx.said(claim("rows_tick", rows=r))))
    ctx.figure("layernorm_ladder_steps", fig,
               claim("ladder_steps_caption", sizes=data.key_rows, hidden=HIDDEN, rounds=data.ladder_rounds_caption,
                     library=data.library, scale=plots.LADDER_SCALE, flush=data.flush_said, prov=data.ladder_prov))
