"""Patch embedding's per-launch timeline of v3 (one lane per stream, one stream against many,
from per-launch CUDA events): the Gantt chart and its sentence."""
from __future__ import annotations

import matplotlib.pyplot as plt

from analysis import plots
from analysis.patch_embed_data import FAMILY, STREAM_VERSIONS, TIMELINE_COLUMNS, TIMELINE_FILE, V3
from studylib import rundata
from studylib.claims import claim


def overlap(d):
    """Most launches running at once (start/end sweep)."""
    ev = sorted([(s, 1) for s in d["start_us"]] + [(e, -1) for e in d["end_us"]],
                key=lambda x: (x[0], x[1]))
    cur = peak = 0
    for _, step in ev:
        cur += step
        peak = max(peak, cur)
    return peak


def timeline_source(run):
    """The run whose timeline table the chart draws: `run` where it holds one, else the newest
    run folder beside it on the same GPU that does (v3_streams is frozen, and the probe is a run
    of its own: experiments/probes/patch_embed_timeline.sh); `run` where none does."""
    if (run.path / TIMELINE_FILE).is_file():
        return run
    gpu = rundata.gpu_of(run)
    for folder in sorted(rundata.run_folders(run.path.parent), key=lambda p: p.name, reverse=True):
        if folder != run.path and (folder / TIMELINE_FILE).is_file():
            other = rundata.load_run(folder)
            if rundata.gpu_of(other) == gpu:
                return other
    return run


def timeline_figure(data, ctx):
    """The Gantt chart of v3's launches at the shape with the most stream counts recorded; returns
    the findings' sentence on it."""
    source = timeline_source(data.run)
    timeline = rundata.side_table(source.path, TIMELINE_FILE, TIMELINE_COLUMNS,
                             ["batch", "image_size", "hidden", "streams", "stream", "launch",
                              "start_us", "end_us"])
    # Where the table comes from another folder, the caption and the sentence say so and give
    # that folder's provenance.
    elsewhere = source is not data.run
    tl_sentence = None
    if timeline is None or timeline.empty:
        why = (claim("no_timeline_file", file=TIMELINE_FILE, v3=V3) if timeline is None
               else claim("empty_timeline", file=TIMELINE_FILE))
        ctx.missing("figure", f"{FAMILY}_timeline", why)
        tl_sentence = claim("no_timeline", why=why)
    else:
        tl_version = next((v for v in STREAM_VERSIONS if v in set(timeline["version"])),
                          timeline["version"].iloc[0])
        tv = timeline[timeline["version"] == tl_version]
        # The shape with the most stream counts recorded; ties go to the larger problem.
        c = (tv.groupby(["batch", "image_size", "hidden"])["streams"].nunique().reset_index(name="n")
               .sort_values(["n", "image_size", "batch"], ascending=False))
        tb, ti, th = (int(c.iloc[0][k]) for k in ("batch", "image_size", "hidden"))
        at_shape = timeline[(timeline["batch"] == tb) & (timeline["image_size"] == ti)
                            & (timeline["hidden"] == th)]
        counts_tl = sorted({int(n) for n in at_shape.loc[at_shape["version"] == tl_version, "streams"]})
        lanes = [(tl_version, counts_tl[0])]
        if len(counts_tl) > 1:
            lanes.append((tl_version, counts_tl[-1]))
        for v in STREAM_VERSIONS:
            if v != tl_version and len(at_shape[at_shape["version"] == v]):
                lanes.append((v, int(at_shape.loc[at_shape["version"] == v, "streams"].max())))

        fig, axes = plt.subplots(1, len(lanes), figsize=(plots.panels_width(len(lanes), 4.6), 4.4), squeeze=False,
                                 sharex=True)
        spans = []
        for ax, (v, n) in zip(axes[0], lanes):
            d = at_shape[(at_shape["version"] == v) & (at_shape["streams"] == n)]
            t0 = d["start_us"].min()
            palette = plt.get_cmap("tab20")
            for s, g in d.groupby("stream"):
                ax.broken_barh(list(zip(g["start_us"] - t0, g["end_us"] - g["start_us"])),
                               (s - 0.4, 0.8), facecolors=palette(int(s) % 20), linewidth=0)
            span = float(d["end_us"].max() - t0)
            spans.append((v, n, span, len(d), overlap(d)))
            n_lanes = int(d["stream"].nunique())
            ax.set_ylim(-0.6, max(n_lanes, 1) - 0.4)
            ax.invert_yaxis()
            if n_lanes <= 16:
                ax.set_yticks(sorted(d["stream"].unique()))
            ax.set_xlabel("time since the first launch (us)")
            ax.set_title(v + ", " + data.stream_label(n) + "\n"
                         + ctx.said(claim("timeline_panel", launches=len(d), us=span, at_once=spans[-1][4])), fontsize=8)
            ax.grid(axis="y", visible=False)
        axes[0][0].set_ylabel("stream (one lane each)")
        plots.titled(fig, ctx.said(claim("timeline_title", batch=tb, image=ti, hidden=th)),
                     source.title_provenance(FAMILY))
        fig.tight_layout()
        ctx.figure(f"{FAMILY}_timeline", fig,
                   # The probe's table records no run id: the folder's own rows give the sitting.
                   claim("timeline_caption", versions=list(dict.fromkeys(v for v, _ in lanes)), batch=tb, image=ti,
                         hidden=th, file=TIMELINE_FILE, elsewhere=elsewhere, source=source.name,
                         lanes=[data.stream_label(n) for _, n in lanes], no_run_id=not len(source.rows(FAMILY)),
                         prov=source.provenance(FAMILY)))
        one, many = spans[0], spans[1] if len(spans) > 1 else None
        tl_sentence = claim("timeline", version=one[0], batch=tb, image=ti, hidden=th, elsewhere=elsewhere,
                            source=source.name, one_streams=data.stream_label(one[1]), launches=one[3], one_us=one[2],
                            one_at_once=one[4], many=many is not None,
                            many_streams=data.stream_label(many[1]) if many else None,
                            many_us=many[2] if many else None, many_at_once=many[4] if many else None,
                            change=span_change(one[2], many[2]) if many else None)
    return tl_sentence


def span_change(one_us, many_us):
    """'1.1x shorter' or '1.14x longer': the many-stream span against the one-stream span."""
    return (claim("span_shorter", ratio=one_us / many_us) if many_us <= one_us
            else claim("span_longer", ratio=many_us / one_us))
