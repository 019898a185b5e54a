"""What a patch-embedding call costs beside its time (analysis/patch_embed.py draws them): the
device and host memory each version allocates, and where the host-to-host routine of the
versions that copy from and to the host goes."""
from __future__ import annotations

import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np

from analysis import plots
from analysis.patch_embed_data import CPU, FAMILY, ROUTINE_VERSIONS, V4, shape_text, shared_legend
from studylib import formatting, rundata
from studylib.claims import claim

# The routine's three measured parts, and its parts as stacked segments: (column, label, colour).
ROUTINE_PARTS = ["h2d_us", "preprocess_us", "d2h_us"]
SEGMENTS = [("h2d_us", "copy up (H2D)", "#1f77b4"), ("preprocess_us", "preprocessing", "#2ca02c"),
            ("rest_us", "kernels, launches and syncs", "#ff7f0e"), ("d2h_us", "copy down (D2H)", "#9467bd"),
            ("unsplit_us", "routine (no split recorded)", "#bbbbbb")]


def memory_figure(data, ctx, shapes):
    """Device and host bytes per version at each of `shapes` (model, image, batch) that has them,
    without the harness's L2-flush scratch (rundata.flush_scratch_bytes)."""
    best, order, at, prov = data.best, data.order, data.at, ctx.provenance()
    mem = best[np.isfinite(best["device_bytes"]) | np.isfinite(best["host_bytes"])]
    panels = [s for s in shapes if s is not None and len(
        mem[(mem["model"] == s[0]) & (mem["image_size"] == s[1]) & (mem["batch"] == s[2])])]
    if not panels:
        ctx.missing("figure", f"{FAMILY}_memory", claim("no_memory"))
        return
    scratch = rundata.flush_scratch_bytes(rundata.gpu_of(data.run))
    fig, axes = plt.subplots(1, len(panels), figsize=(plots.panels_width(len(panels), 5.2), 4.4), squeeze=False)
    for ax, (m, image, b) in zip(axes[0], panels):
        d = mem[(mem["model"] == m) & (mem["image_size"] == image) & (mem["batch"] == b)]
        vs = [v for v in order if v in set(d["version"])]
        x = np.arange(len(vs))
        # Without the harness's L2-flush scratch where the row flushed (cpu_baseline runs on the CPU).
        dev = [(at(v, m, image, b, "device_bytes") - (scratch or 0) * (at(v, m, image, b, "flush_l2") == 1
                                                                     and v != CPU)) / 2**20 for v in vs]
        host = [at(v, m, image, b, "host_bytes") / 2**20 for v in vs]
        bars = ax.bar(x - 0.2, np.nan_to_num(dev), 0.4, color="#1f77b4", label="device")
        ax.bar_label(bars, labels=[f"{d:,.0f}" if d >= 10 else f"{d:.1f}" for d in np.nan_to_num(dev)],
                     fontsize=8, padding=1)
        ax.bar(x + 0.2, np.nan_to_num(host), 0.4, color="#ff7f0e", label="host (pinned)")
        ax.set_xticks(x)
        ax.set_xticklabels(vs, rotation=35, ha="right", fontsize=8)
        ax.set_title(shape_text(m, image, b))
        ax.set_ylabel("MiB allocated")
    handles = [matplotlib.patches.Patch(color="#1f77b4", label="device memory"),
               matplotlib.patches.Patch(color="#ff7f0e", label="host memory (pinned buffers)")]
    plots.titled(fig, "Patch embedding: memory allocated per version", ctx.title_provenance())
    shared_legend(fig, handles, bottom=0.1)
    ctx.figure(f"{FAMILY}_memory", fig,
               claim("memory_caption", shapes=[shape_text(*sh) for sh in panels], scratch=bool(scratch),
                     scratch_mib=(scratch or 0) / 2**20, v4=V4, prov=prov))


def routine_figure(data, ctx, key_shapes):
    """The host-to-host routine of ROUTINE_VERSIONS as shares of its time, per model at its
    largest key shape with routine rows; returns those rows with the parts the sentences read
    (rest_us: the routine less its three measured parts)."""
    best, order, prov = data.best, data.order, ctx.provenance()
    rt = best[best["version"].isin(ROUTINE_VERSIONS) & np.isfinite(best["routine_us"])].copy()
    has_split = np.isfinite(rt[ROUTINE_PARTS]).all(axis=1)
    rt["rest_us"] = (rt["routine_us"] - rt[ROUTINE_PARTS].sum(axis=1)).where(has_split).clip(lower=0)
    rt["unsplit_us"] = rt["routine_us"].where(~has_split)
    panels = []
    for s in reversed(key_shapes):  # per model, the largest key shape with routine rows
        if s[0] in [p[0] for p in panels]:
            continue
        if len(rt[(rt["model"] == s[0]) & (rt["image_size"] == s[1]) & (rt["batch"] == s[2])]):
            panels.append(s)
    panels = [s for s in key_shapes if s in panels]
    if not panels and len(rt):
        r0 = rt.sort_values(["image_size", "batch"]).iloc[-1]
        panels = [(r0["model"], int(r0["image_size"]), int(r0["batch"]))]
    if not panels:
        ctx.missing("figure", f"{FAMILY}_routine", claim("no_routine", versions=list(ROUTINE_VERSIONS)))
        return rt
    fig, axes = plt.subplots(1, len(panels), figsize=(plots.panels_width(len(panels), 4.8), 4.4),
                             squeeze=False)
    for ax, (m, image, b) in zip(axes[0], panels):
        d = rt[(rt["model"] == m) & (rt["image_size"] == image) & (rt["batch"] == b)]
        d = d.set_index("version").loc[[v for v in order if v in set(d["version"])]]
        x = np.arange(len(d))
        bottom = np.zeros(len(d))
        total = d["routine_us"].to_numpy()
        for col, _, color in SEGMENTS:
            share = 100 * np.nan_to_num(d[col].to_numpy(dtype=float)) / total
            ax.bar(x, share, 0.6, bottom=bottom, color=color)
            bottom += share
        for xi, tot in zip(x, total):
            ax.text(xi, 101, f"{formatting.fmt_us(tot)} us", ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, 112)
        ax.set_xlim(-0.75, max(len(d), 3) - 0.25)  # one bar stays a bar, not a wall
        ax.set_xticks(x)
        ax.set_xticklabels(d.index, rotation=35, ha="right", fontsize=8)
        ax.set_title(shape_text(m, image, b))
        ax.set_ylabel("share of the routine (%)")
    used = [s for s in SEGMENTS if np.nansum(rt[s[0]].to_numpy(dtype=float)) > 0]
    plots.titled(fig, "Patch embedding: where the host-to-host routine goes", ctx.title_provenance())
    shared_legend(fig, [matplotlib.patches.Patch(color=c, label=l) for _, l, c in used],
                  bottom=0.12, ncol=5)
    ctx.figure(f"{FAMILY}_routine", fig,
               claim("routine_caption", versions=[v for v in ROUTINE_VERSIONS if v in set(rt['version'])], prov=prov))
    return rt
