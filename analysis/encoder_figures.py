"""The whole ViT's figures of one run (analysis/encoder.py draws them in this order): throughput,
speedup over torch.compile, batch-1 latency, energy, the per-component breakdown and streams."""
from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.ticker
from matplotlib.markers import MarkerStyle
import numpy as np
import pandas as pd

from analysis import plots
from analysis.encoder_data import (
    ANCHORS, COMPILE, E3, E4, EAGER_LINE, GRAPH_LINE, KEYS, KEY_IMAGE, KEY_MODEL, TARGET_B1_MS,
    TARGET_COMPILE, fmt_ms, is_module)
from studylib import catalog, formatting, rundata
from studylib.claims import claim, say


# The figures' captions name the line styles: eager runs dashed, graph replays solid.
LINE_STYLES = claim("line_styles")
# The figures whose points of one step and its module row would cover each other leave the
# module out, and say where it is drawn.
MODULE_ELSEWHERE = claim("module_elsewhere")



def rounds_spread(t):
    """'; the rounds' medians of each point lie within X% of each other' (a claim) for rows collapsed from
    rounds (lo_us, hi_us), '' for one round: the figure draws no bars, the caption gives the spread."""
    if "lo_us" not in t or not len(t) or not (t["hi_us"] > t["lo_us"]).any():
        return ""
    spread = float((t["hi_us"] / t["lo_us"]).max() - 1)
    return claim("rounds_within", spread=spread)

def batch_axis(ax, batches):
    """Log-2 batch axis with a tick at every measured batch, labelled as plain numbers."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(batches))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def plain_log_y(ax):
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:,.0f}"))
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def legend_below(fig, handles, bottom):
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 3),
               bbox_to_anchor=(0.5, 0.0), frameon=False)
    fig.tight_layout(rect=(0, bottom, 1, 0.93))


def largest_batch_bars(ax, data, d0, image):
    """Images per second of every version at the panel's largest batch, bars on a linear axis from
    zero (the bars of the throughput figure's bottom row), with the target at batch 256 where it
    applies."""
    if not len(d0):
        ax.set_axis_off()
        return
    b = int(d0["batch"].max())
    d = d0[d0["batch"] == b]
    versions = [v for v in data.order if not is_module(v) and v in set(d["version"])]
    rows = [d[d["version"] == v].iloc[0] for v in versions]
    ys = [float(r["img_s"]) for r in rows]
    best = int(np.argmax(ys))
    for i, (v, r, y) in enumerate(zip(versions, rows, ys)):
        lo, hi = b / float(r["hi_us"]) * 1e6, b / float(r["lo_us"]) * 1e6
        eager = data.style[v]["linestyle"] == EAGER_LINE  # hatched, as in encoder_vs_compile
        ax.bar(i, y, color=data.style[v]["color"], alpha=0.85, hatch="//" if eager else None,
               edgecolor="white" if eager else data.style[v]["color"],
               yerr=[[max(y - lo, 0.0)], [max(hi - y, 0.0)]], error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.text(i, y, f"{y:,.0f}", ha="center", va="bottom", fontsize=8,
                fontweight="bold" if i == best else "normal")
    c = data.at(COMPILE, 256, image=image)
    if b == 256 and image == KEY_IMAGE and data.key_model == KEY_MODEL and np.isfinite(c):
        goal = TARGET_COMPILE * 256 / c * 1e6
        ax.axhline(goal, color="#444444", linewidth=0.9, linestyle="--")
        line = say(claim("compile_target_line", ratio=TARGET_COMPILE), "encoder")
        ax.text(len(versions) - 0.5, goal, line + " ", ha="right", va="bottom",
                fontsize=8, color="#444444")
    ax.set_xticks(range(len(versions)), [data.label(v) for v in versions], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, max(ys) * 1.2)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:,.0f}"))
    ax.set_title(say(claim("largest_batch_title", batch=b, image=image), "encoder"), fontsize=9)


def throughput(data, ctx):
    """Images per second against batch, one panel per image size."""
    at, custom_key, flush_text, images = data.at, data.custom_key, data.flush_text, data.images
    key_model, km, label, order, prov = data.key_model, data.km, data.label, data.order, ctx.provenance()
    style, tprov = data.style, ctx.title_provenance()
    if len(km):
        fig, axes = plt.subplots(2, len(images), figsize=(plots.panels_width(len(images), 5.2), 8.2), squeeze=False,
                                 gridspec_kw={"height_ratios": [1.0, 0.9]})
        handles = {}
        for ax, image in zip(axes[0], images):
            d0 = km[km["image_size"] == image]
            for v in [v for v in order if not is_module(v)]:
                d = d0[d0["version"] == v].sort_values("batch")
                if not len(d):
                    continue
                y = d["img_s"].to_numpy()
                lo, hi = d["batch"] / d["hi_us"] * 1e6, d["batch"] / d["lo_us"] * 1e6
                ax.errorbar(d["batch"], y, yerr=[y - lo.to_numpy(), hi.to_numpy() - y], capsize=2,
                            elinewidth=0.7, **style[v])
                handles[v] = plt.Line2D([], [], label=label(v), **style[v])
            c = at(COMPILE, 256, image=image)
            if image == KEY_IMAGE and key_model == KEY_MODEL and np.isfinite(c):
                goal = TARGET_COMPILE * 256 / c * 1e6
                ax.plot([256], [goal], linestyle="none", marker="_", markersize=22,
                        markeredgewidth=2, color="#444444")
                handles["_goal"] = plt.Line2D([], [], linestyle="none", marker="_", markersize=14,
                                              markeredgewidth=2, color="#444444",
                                              label=ctx.said(claim("throughput_target_label", ratio=TARGET_COMPILE)))
            batch_axis(ax, sorted(int(b) for b in set(d0["batch"])))
            plain_log_y(ax)
            ax.set_xlabel("batch (images per forward)")
            ax.set_title(ctx.said(claim("model_at_size", model=key_model, image=image)))
        for ax, image in zip(axes[1], images):
            largest_batch_bars(ax, data, km[km["image_size"] == image], image)
        axes[0][0].set_ylabel("images per second (median of rounds)")
        axes[1][0].set_ylabel("images per second, linear from 0")
        plots.titled(fig, ctx.said(claim("throughput_title", flush=flush_text)), tprov)
        legend_below(fig, list(handles.values()), 0.04 + 0.02 * ((len(handles) + 2) // 3))
        ctx.figure("encoder_throughput", fig,
                   claim("throughput_caption", model=key_model, styles=LINE_STYLES, module=any(map(is_module, order)),
                         elsewhere=MODULE_ELSEWHERE, custom=custom_key, flush=flush_text, prov=prov))
    else:
        ctx.missing("figure", "encoder_throughput", claim("no_encoder_rows"))


def vs_compile(data, ctx):
    """Every step's and anchor's speedup over torch.compile, one panel per batch."""
    at, at_key, custom_key, flush_text, label = data.at, data.at_key, data.custom_key, data.flush_text, data.label
    order, prov, style, targets_apply = data.order, ctx.provenance(), data.style, data.targets_apply
    tprov, where = ctx.title_provenance(), data.where
    vc_batches = [b for b in sorted(int(x) for x in set(at_key["batch"])) if np.isfinite(at(COMPILE, b))]
    vc_order = [v for v in order if v != COMPILE and any(np.isfinite(at(v, b)) for b in vc_batches)]
    if vc_batches and vc_order:
        fig, axes = plt.subplots(1, len(vc_batches), figsize=(plots.panels_width(len(vc_batches), 3.3, 2.2),
                                                              0.28 * len(vc_order) + 1.9),
                                 sharey=True, squeeze=False)
        for ax, b in zip(axes[0], vc_batches):
            c = at(COMPILE, b)
            ratio = [c / at(v, b) for v in vc_order]
            steps_here = [(r, v) for v, r in zip(vc_order, ratio) if np.isfinite(r) and not catalog.is_anchor(v)]
            top = max(steps_here)[1] if steps_here else None
            for i, (v, r) in enumerate(zip(vc_order, ratio)):
                if not np.isfinite(r):
                    continue
                ax.barh(i, r, color=style[v]["color"], alpha=0.85,
                        hatch="//" if style[v]["linestyle"] == EAGER_LINE else None,
                        edgecolor="white" if style[v]["linestyle"] == EAGER_LINE else style[v]["color"],
                        linewidth=2.0 if v == top else 0.5)
                # The rounds' band: torch.compile's fastest round over the step's slowest, and the
                # other way (the band the targets' verdicts use).
                lo = at(COMPILE, b, "lo_us") / at(v, b, "hi_us")
                hi = at(COMPILE, b, "hi_us") / at(v, b, "lo_us")
                if np.isfinite(lo) and np.isfinite(hi) and hi > lo:
                    ax.errorbar(r, i, xerr=[[max(r - lo, 0.0)], [max(hi - r, 0.0)]], fmt="none", ecolor="#222222",
                                elinewidth=0.9, capsize=2.5)
                ax.text(max(r, hi) if np.isfinite(hi) else r, i, f" {r:.2f}x", va="center", fontsize=8)
            ax.axvline(1.0, color="#444444", linewidth=0.8)
            target = b == 256 and targets_apply
            if target:
                # Named in the panel's title: a label inside the panel would sit on bars or ticks.
                ax.axvline(TARGET_COMPILE, color="#444444", linewidth=0.9, linestyle=":")
            ax.set_xlim(0, max(np.nanmax(ratio), TARGET_COMPILE if b == 256 else 1.0) * 1.3)
            lines = [claim("vs_compile_panel", batch=b, compile_ms=fmt_ms(c))]
            lines += [claim("vs_compile_panel_target", ratio=TARGET_COMPILE)] if target else []
            ax.set_title("\n".join(map(ctx.said, lines)), fontsize=9)
            ax.set_xlabel("torch.compile time / step time")
        axes[0][0].set_yticks(range(len(vc_order)), [label(v) for v in vc_order], fontsize=8)
        axes[0][0].invert_yaxis()
        plots.titled(fig, ctx.said(claim("vs_compile_title", where=where)), tprov)
        fig.tight_layout(rect=(0, 0, 1, 0.9))
        ctx.figure("encoder_vs_compile", fig,
                   claim("vs_compile_caption", where=where, target_line=targets_apply, target=TARGET_COMPILE,
                         custom=custom_key, flush=flush_text, prov=prov))
    else:
        ctx.missing("figure", "encoder_vs_compile", claim("no_compile", where=where))


def latency(data, ctx):
    """Batch-1 time of every step and anchor against the target, the fastest anchor and the weight-read floor."""
    at_key, b1_depth, best_anchor, custom_key = data.at_key, data.depth, data.best_anchor, data.custom_key
    floor_us, flush_text, label, order = data.floor_us, data.flush_text, data.label, data.order
    prov, style, targets_apply, tprov = ctx.provenance(), data.style, data.targets_apply, ctx.title_provenance()
    where = data.where
    b1 = at_key[at_key["batch"] == 1]
    b1_order = [v for v in order if v in set(b1["version"])]
    if b1_order:
        fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(b1_order) + 1.8))
        # One slow forward (timm eager at batch 1 is ~10x the rest) must not squeeze every other bar
        # into a sliver: the axis ends a little past the slowest forward within 3x of the median,
        # and a bar beyond that is cut there with its value written at the cut.
        his = b1.set_index("version").loc[b1_order, "hi_us"] / 1e3
        typical = float(np.median(b1.set_index("version").loc[b1_order, "median_us"])) / 1e3
        in_range = his[his <= 3 * typical]
        x_end = 1.3 * float(in_range.max() if len(in_range) else his.max())
        cut = []
        for i, v in enumerate(b1_order):
            r = b1[b1["version"] == v].iloc[0]
            ms, lo, hi = r["median_us"] / 1e3, r["lo_us"] / 1e3, r["hi_us"] / 1e3
            eager = style[v]["linestyle"] == EAGER_LINE
            kernels = (r["lpl"] * b1_depth if v not in ANCHORS and np.isfinite(r.get("lpl", np.nan))
                       else np.nan)  # the anchors' counts include work outside the forward
            text = "  " + ctx.said(claim("latency_bar_text", ms=fmt_ms(r["median_us"]), kernels=kernels,
                                         counted=bool(np.isfinite(kernels))))
            if hi > x_end:
                cut.append(label(v))
                ax.barh(i, x_end, color=style[v]["color"], alpha=0.85, hatch="//" if eager else None,
                        edgecolor="white" if eager else style[v]["color"])
                ax.text(x_end, i, ctx.said(claim("axis_cut", text=text)), va="center", fontsize=8)
                continue
            ax.barh(i, ms, color=style[v]["color"], alpha=0.85, hatch="//" if eager else None,
                    edgecolor="white" if eager else style[v]["color"],
                    xerr=[[ms - lo], [hi - ms]], capsize=2, error_kw=dict(elinewidth=0.7))
            ax.text(hi, i, text, va="center", fontsize=8)
        ax.set_yticks(range(len(b1_order)), [label(v) for v in b1_order])
        ax.invert_yaxis()
        ax.set_xlabel("median time of one forward at batch 1 (ms)")
        refs = []
        if targets_apply:
            refs.append(ax.axvline(TARGET_B1_MS, color="#444444", linewidth=0.9, linestyle=":",
                                   label=ctx.said(claim("b1_target_label", ms=TARGET_B1_MS))))
        a, a_us = best_anchor(1)
        if a:
            refs.append(ax.axvline(a_us / 1e3, color=style[a]["color"], linewidth=0.8,
                                   linestyle="-.", label=ctx.said(claim("fastest_anchor_label", anchor=label(a)))))
        if np.isfinite(floor_us):
            refs.append(ax.axvline(floor_us / 1e3, color="#2ca02c", linewidth=1.0, linestyle="--",
                                   label=ctx.said(claim("weight_floor_label", floor=floor_us))))
        ax.set_xlim(0, max(x_end, ax.get_xlim()[1] if not cut else 0) * 1.3)  # room for the value labels
        refs.append(plt.Rectangle((0, 0), 1, 1, facecolor="#999999", hatch="//", edgecolor="white",
                                  label="eager (hatched); solid bars: graph replay"))
        plots.titled(fig, ctx.said(claim("latency_title", where=where)), tprov)
        fig.legend(handles=refs, loc="lower center", ncol=min(len(refs), 3), frameon=False,
                   bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, 0.08 + 0.04 * (len(refs) > 3), 1, 0.92))
        ctx.figure("encoder_latency", fig,
                   claim("latency_caption", where=where, cut=cut, custom=custom_key, flush=flush_text, prov=prov))
    else:
        ctx.missing("figure", "encoder_latency", claim("no_batch1", where=where))


def energy(data, ctx):
    """Time against energy per image at batch 256, and images per joule of every row with energy."""
    at_key, label, prov, style = data.at_key, data.label, ctx.provenance(), data.style
    tprov, where = ctx.title_provenance(), data.where
    EB = 256
    e = at_key[(at_key["batch"] == EB) & at_key["energy_j"].notna()] if "energy_j" in at_key else at_key.iloc[0:0]
    modules = e["version"].map(is_module)
    e = e[~modules]
    if len(e):
        fig, ax = plt.subplots(figsize=(9.0, 4.8))
        for _, r in e.iterrows():
            v = r["version"]
            x, y = r["median_us"] / EB / 1e3, r["energy_j"] / EB * 1e3
            # Hollow markers: two steps of nearly one time and energy (e10, e14) stay both visible.
            # (Line markers such as x and + have no face: they keep their colour.)
            filled = MarkerStyle(style[v]["marker"]).is_filled()
            ax.scatter(x, y, edgecolors=style[v]["color"], facecolors="none" if filled else style[v]["color"],
                       linewidths=1.4, marker=style[v]["marker"], s=44, zorder=3,
                       label=ctx.said(claim("energy_point_label", step=label(v), watts=r["power_w"],
                                                 mhz=r["energy_mhz"], clock=bool(np.isfinite(r["energy_mhz"])))))
        # Both axes from zero, so that a line through the origin is one power: the rows' median.
        watts = float(e["power_w"].median())
        x_max = float((e["median_us"] / EB / 1e3).max()) * 1.1
        ax.plot([0, x_max], [0, watts * x_max], color="#999999", linestyle="--", linewidth=0.9, zorder=1)
        ax.text(x_max, watts * x_max, f" {watts:.0f} W", va="center", fontsize=8, color="#666666")
        ax.set_xlim(0, x_max)
        ax.set_ylim(0, None)
        ax.set_xlabel(ctx.said(claim("energy_time_axis", batch=EB)))
        ax.set_ylabel(ctx.said(claim("energy_axis", batch=EB)))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
        plots.titled(fig, ctx.said(claim("energy_title", batch=EB, where=where)), tprov)
        fig.tight_layout(rect=(0, 0, 1, 0.92))
        ctx.figure("encoder_energy", fig,
                   claim("energy_caption", batch=EB, where=where, module=bool(modules.any()), elsewhere=MODULE_ELSEWHERE,
                         prov=prov))
    else:
        ctx.missing("figure", "encoder_energy", claim("no_energy", batch=EB, where=where))

    # Images per joule of every step and anchor with energy, against torch.compile's at the same batch.
    energy_rows = at_key[at_key["energy_j"].notna()] if "energy_j" in at_key else at_key.iloc[0:0]
    if len(energy_rows):
        comp = {int(r["batch"]): r["batch"] / r["energy_j"]
                for _, r in energy_rows[energy_rows["version"] == COMPILE].iterrows()}
        et = pd.DataFrame([{
            "version": label(r["version"]), "batch": int(r["batch"]), "ms": r["median_us"] / 1e3,
            "images/J": r["batch"] / r["energy_j"], "W": r["power_w"], "MHz": r["energy_mhz"],
            "x torch.compile images/J": (r["batch"] / r["energy_j"] / comp[int(r["batch"])]
                                         if int(r["batch"]) in comp else np.nan)}
            for _, r in energy_rows.sort_values(["batch", "median_us"]).iterrows()])
        ctx.table("encoder_images_per_joule", formatting.markdown_table(et, {
            "batch": formatting.fmt_int, "ms": lambda x: f"{x:.3f}", "images/J": lambda x: f"{x:.1f}",
            "W": lambda x: f"{x:.0f}", "MHz": lambda x: "-" if not np.isfinite(x) else f"{x:.0f}",
            "x torch.compile images/J": lambda x: "-" if not np.isfinite(x) else f"{x:.2f}x"}),
            claim("images_per_joule_caption", where=where, prov=prov))
    else:
        ctx.missing("table", "encoder_images_per_joule", claim("no_energy_rows", where=where))


def breakdown_panel(ax, data, bd, b, vs, comp_colors):
    """One batch's panel of encoder_breakdown: each component's share of the versions' eager
    components' sum, stacked to 100%, with the measured forward and the sum above each bar."""
    at, components, label = data.at, data.components, data.label
    # Shares of the eager components' sum, not their sum against the measured forward: at
    # small batches the events and launches between components make the sum exceed the
    # graph replay's time, and bars taller than the forward would mislead.
    total = np.array([bd.loc[(bd["version"] == v) & (bd["batch"] == b), "us"].sum() for v in vs])
    bottom = np.zeros(len(vs))
    for comp in components:
        us = np.array([bd.loc[(bd["version"] == v) & (bd["batch"] == b)
                              & (bd["component"] == comp), "us"].sum() for v in vs])
        h = 100.0 * us / total
        ax.bar(range(len(vs)), h, bottom=bottom, color=comp_colors[comp], width=0.7)
        for i, (y0, dh) in enumerate(zip(bottom, h)):
            if dh >= 6:  # the share where it fits
                ax.text(i, y0 + dh / 2, f"{dh:.0f}%", ha="center", va="center", fontsize=8, color="white")
        bottom += h
    for i, v in enumerate(vs):
        ax.text(i, 101, say(claim("breakdown_forward", ms=at(v, b) / 1e3), "encoder") + "\n"
                + say(claim("breakdown_components", ms=total[i] / 1e3), "encoder"),
                ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(vs)), [label(v) for v in vs], rotation=30, ha="right")
    ax.set_ylabel("% of the eager components' time")
    ax.set_title(say(claim("at_batch", batch=b), "encoder"), pad=26)
    ax.set_ylim(0, 100)


def breakdown(data, ctx):
    """Per-component device time of one eager forward; returns (the breakdown rows shown, their versions)."""
    at, at_key, components, key_image = data.at, data.at_key, data.components, data.key_image
    key_model, label, lad, order, parts = data.key_model, data.label, data.lad, data.order, data.parts
    prov, tprov, where = ctx.provenance(), ctx.title_provenance(), data.where
    bd_batches = [b for b in (256, 1) if b in set(at_key["batch"])]
    bd = parts.merge(lad[KEYS], on=KEYS) if len(parts) else parts
    bd = bd[(bd["model"] == key_model) & (bd["image_size"] == key_image)
            & bd["batch"].isin(bd_batches)] if len(bd) else bd
    bd_versions = [v for v in order if v in set(bd["version"])] if len(bd) else []
    comp_colors = dict(zip(components, plt.get_cmap("tab10").colors))
    if len(bd_versions):
        panels = [b for b in bd_batches if b in set(bd["batch"])]
        fig, axes = plt.subplots(1, len(panels), figsize=(plots.panels_width(len(panels), 5.0), 4.6), squeeze=False)
        for ax, b in zip(axes[0], panels):
            breakdown_panel(ax, data, bd, b, [v for v in bd_versions if len(bd[(bd["version"] == v) & (bd["batch"] == b)])],
                            comp_colors)
        handles = [plt.Rectangle((0, 0), 1, 1, color=comp_colors[c], label=c) for c in components]
        plots.titled(fig, ctx.said(claim("breakdown_title", where=where)), tprov)
        # Below the panels, not beside them: a legend to the right widens the PNG past what a
        # report column shows at a readable size.
        fig.legend(handles=handles, loc="lower center", ncol=min(5, len(handles)),
                   bbox_to_anchor=(0.5, 0.0), frameon=False)
        fig.tight_layout(rect=(0, 0.12, 1, 0.92))
        # Where the components add up to less than the measured forward, the gap is not overhead:
        # say where, and what differs between the two measurements.
        below = [claim("below_at", version=label(v), batch=b) for b in panels for v in bd_versions
                 if len(bd[(bd["version"] == v) & (bd["batch"] == b)])
                 and bd.loc[(bd["version"] == v) & (bd["batch"] == b), "us"].sum() < at(v, b)]
        ctx.figure("encoder_breakdown", fig,
                   claim("breakdown_caption", where=where, batches=list(panels), below=below, prov=prov))
        rows = []
        for b in panels:
            for v in bd_versions:
                d = bd[(bd["version"] == v) & (bd["batch"] == b)]
                if not len(d):
                    continue
                row = {"batch": b, "version": label(v)}
                row.update({c: d.loc[d["component"] == c, "us"].sum() if c in set(d["component"])
                            else np.nan for c in components})
                row["sum"] = d["us"].sum()
                row["measured"] = at(v, b)
                rows.append(row)
        bt = pd.DataFrame(rows)
        ctx.table("encoder_components", formatting.markdown_table(
            bt, {c: formatting.fmt_us for c in components + ["sum", "measured"]} | {"batch": formatting.fmt_int}),
            claim("components_caption", where=where, prov=prov))
    else:
        why = claim("no_breakdown_note") if not len(parts) else claim("no_breakdown_here", where=where)
        ctx.missing("figure", "encoder_breakdown", why)
        ctx.missing("table", "encoder_components", why)

    return bd, bd_versions


def stream_counts_table(e3, e4, stream_counts):
    """Per batch: one stream's time, e4's at every stream count, its fastest count and that time
    over one stream's (us; NaN where not run)."""
    rows = []
    for b in sorted(set(e4["batch"]) | set(e3.index)):
        row = {"batch": b, "one stream ms": e3["median_us"].get(b, np.nan)}
        best_s, best = None, np.inf
        for s in stream_counts:
            x = e4.loc[(e4["streams"] == s) & (e4["batch"] == b), "median_us"]
            x = float(x.iloc[0]) if len(x) else np.nan
            row[f"{s} streams ms"] = x
            if np.isfinite(x) and x < best:
                best_s, best = s, x
        row["fastest streams"] = best_s if best_s else np.nan
        row["fastest / one stream"] = best / row["one stream ms"] if best_s else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def streams(data, ctx):
    """e4_streams at every stream count against one stream; returns (the one-stream rows by
    batch, e4's rows at more streams)."""
    key_image, key_model, prov, run, t = data.key_image, data.key_model, ctx.provenance(), data.run, data.timed
    tprov, where = ctx.title_provenance(), data.where
    # The streams experiment is not repeated in every run: without e4 rows here, the newest run on
    # this GPU that timed e4 (its e3 rows beside it) is shown, and the caption names it.
    streams_t, streams_prov, streams_tprov, streams_from = t, prov, tprov, None
    if not (t["version"] == E4).any():
        for other in sorted(rundata.load_runs(), key=lambda r: r.name, reverse=True):
            o = other.ok("encoder")
            if rundata.gpu_of(other) != rundata.gpu_of(run) or not (o["version"] == E4).any():
                continue
            o = o.assign(streams=o["streams"].fillna(1))
            o = o[~o["note"].astype(str).str.contains(r"\blayers=\d+", regex=True)]
            streams_t = rundata.collapse_rounds(o, KEYS)
            streams_prov, streams_tprov = other.provenance("encoder"), other.title_provenance("encoder")
            streams_from = claim("streams_from", folder=other.name, e4=E4)
            break
    e4 = streams_t[(streams_t["version"] == E4) & (streams_t["model"] == key_model)
                   & (streams_t["image_size"] == key_image)]
    # The one-stream baseline: e4 on one stream where the sitting timed it (e3_graph's forward, e4
    # being e3 plus streams, in the same sitting as the stream counts), else e3_graph's own rows.
    one = e4[e4["streams"] == 1]
    if len(one):
        e3, e4 = one.set_index("batch"), e4[e4["streams"] > 1]
        e3.attrs["label"] = ctx.said(claim("e4_one_stream", e4=E4, e3=E3))
    else:
        e3 = streams_t[(streams_t["version"] == E3) & (streams_t["model"] == key_model)
                       & (streams_t["image_size"] == key_image) & (streams_t["streams"] == 1)].set_index("batch")
        e3.attrs["label"] = ctx.said(claim("e3_one_stream", e3=E3))
    base = e3.attrs["label"]
    stream_counts = sorted(int(s) for s in set(e4["streams"]))
    if len(e4) and len(e3):
        fig, ax = plt.subplots()
        palette = plt.get_cmap("viridis")(np.linspace(0.1, 0.85, max(len(stream_counts), 1)))
        handles = []
        for s, color in zip(stream_counts, palette):
            d = e4[e4["streams"] == s].set_index("batch")
            r = (d["median_us"] / e3["median_us"]).dropna().sort_index()
            if len(r):
                ax.plot(r.index, r.values, color=color, marker="o", linestyle=GRAPH_LINE)
                handles.append(plt.Line2D([], [], color=color, marker="o",
                                          label=ctx.said(claim("streams_label", e4=E4, streams=s, plural=s > 1))))
        ref = ax.axhline(1.0, color="#444444", linewidth=0.9, linestyle=":",
                         label=ctx.said(claim("one_stream_line", base=base)))
        handles.append(ref)
        batch_axis(ax, sorted(int(b) for b in set(e4["batch"]) & set(e3.index)))
        ax.set_xlabel("batch (images per forward)")
        ax.set_ylabel("time / one stream's time (below 1 = faster)")
        plots.not_from_zero(ax, corner="right")
        plots.titled(fig, ctx.said(claim("streams_title", where=where)), streams_tprov)
        legend_below(fig, handles, 0.06 + 0.035 * ((len(handles) + 2) // 3))
        ctx.figure("encoder_streams", fig,
                   claim("streams_caption", base=base, where=where, **{"from": streams_from}, spread=rounds_spread(e4),
                         prov=streams_prov))
        st_tab = stream_counts_table(e3, e4, stream_counts)
        ctx.table("encoder_stream_counts", formatting.markdown_table(st_tab, {
            c: (formatting.fmt_int if c in ("batch", "fastest streams") else
                formatting.fmt_ratio if c == "fastest / one stream" else fmt_ms) for c in st_tab.columns}),
            claim("stream_counts_caption", base=base, where=where, **{"from": streams_from}, prov=streams_prov))
    else:
        why = claim("no_e4", e4=E4, where=where) if not len(e4) else claim("no_e3", e3=E3, e4=E4, where=where)
        ctx.missing("figure", "encoder_streams", why)
        ctx.missing("table", "encoder_stream_counts", why)

    return e3, e4
