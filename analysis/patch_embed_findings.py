"""The patch-embedding section's findings as claim records, its targets judged (>= 10x F.conv2d
at batch 256, faster than patchify + F.linear at batch 32 and 256, ViT-B at 224 px) and README's
headline line. The targets and the headline read the rows they are judged on (`judged`, a
PatchEmbedData: the family's targets sitting where one was measured after this run, else the
run's); the other findings read the run's. analysis/patch_embed.py calls them."""
from __future__ import annotations

import numpy as np

from analysis.patch_embed_costs import ROUTINE_PARTS
from analysis.patch_embed_data import (
    CONV, CONV_BATCH, CONV_TARGET, CPU, CUDNN, KEY_IMAGE, KNEE, LADDER, LINEAR, LINEAR_BATCHES, MAIN_MODEL, SHORT,
    V1, V3, V3G, V4, knee, label, shape_text)
from studylib import catalog, formatting, notebook, rundata
from studylib.claims import claim


def fastest(src, model, image, batch, own_only=False):
    """Fastest version shown at a shape in `src` (a PatchEmbedData; libraries included unless
    own_only), or None."""
    b = src.best
    d = b[(b["model"] == model) & (b["image_size"] == image) & (b["batch"] == batch)
          & ~b["version"].map(catalog.is_anchor)]
    if own_only:
        d = d[d["version"].map(catalog.is_own)]
    return d.loc[d["median_us"].idxmin()] if len(d) else None


def anchor_at(src, a, model, image, batch):
    return claim("anchor_at", short=SHORT[a], us=src.at(a, model, image, batch), how=src.how(a, model, image, batch))


def conv_target(judged, ctx):
    """The F.conv2d target: batch 256, 224 px, ViT-B."""
    f = fastest(judged, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
    conv = judged.at(CONV, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
    where = claim("where_conv", batch=CONV_BATCH, image=KEY_IMAGE, model=MAIN_MODEL)
    if f is None or not np.isfinite(conv):
        return [claim("conv_unjudged", has_version=f is not None, where=where, target=CONV_TARGET)]
    r = conv / f["median_us"]
    band = judged.speedup_band(f, CONV, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
    target = claim("conv_target", where=where, version=f["version"], us=f["median_us"], ratio=r,
                   anchor=anchor_at(judged, CONV, MAIN_MODEL, KEY_IMAGE, CONV_BATCH), target=CONV_TARGET, band=band,
                   verdict=notebook.verdict(r, CONV_TARGET, band))
    ctx.judge(target)
    out = [target]
    fo = fastest(judged, MAIN_MODEL, KEY_IMAGE, CONV_BATCH, own_only=True)
    if fo is not None and fo["version"] != f["version"]:
        out.append(claim("own_vs_conv", version=fo["version"], us=fo["median_us"], ratio=conv / fo["median_us"],
                         where=where))
    return out


def batch1(data):
    """Batch 1, outside the targets, where the launch and the pipeline's fill are the whole call:
    stated, whichever way it goes."""
    f1, lin1 = fastest(data, MAIN_MODEL, KEY_IMAGE, 1), data.at(LINEAR, MAIN_MODEL, KEY_IMAGE, 1)
    if f1 is None or not np.isfinite(lin1):
        return []
    return [claim("batch1", image=KEY_IMAGE, version=f1["version"], us=f1["median_us"],
                  ratio=lin1 / f1["median_us"], anchor=anchor_at(data, LINEAR, MAIN_MODEL, KEY_IMAGE, 1),
                  pytorch_faster=f1["median_us"] > lin1)]


def ladder_losses(data):
    """A rung more than 10% slower than an earlier one at some image size (the largest batch of
    each), which a headline at 224 px would not show."""
    at, best, out = data.at, data.best, []
    own_ladder = [v for v in data.order if catalog.is_own(v) and v != CPU]
    for image in sorted(int(i) for i in set(best.loc[best["model"] == MAIN_MODEL, "image_size"])):
        at_image = best[(best["model"] == MAIN_MODEL) & (best["image_size"] == image)]
        if not len(at_image):
            continue
        b = int(at_image["batch"].max())
        for i, v in enumerate(own_ladder):
            earlier = [(at(u, MAIN_MODEL, image, b), u) for u in own_ladder[:i]
                       if np.isfinite(at(u, MAIN_MODEL, image, b))]
            m = at(v, MAIN_MODEL, image, b)
            if earlier and np.isfinite(m) and m > 1.1 * min(earlier)[0]:
                t0, u = min(earlier)
                out.append(claim("ladder_loss", image=image, batch=b, version=v, us=m, ratio=m / t0, earlier=u,
                                 earlier_us=t0))
    return out


def linear_target(judged, ctx):
    """The patchify + F.linear target: batch 32 and 256, 224 px."""
    out, parts, unjudged = [], [], []
    for b in LINEAR_BATCHES:
        f = fastest(judged, MAIN_MODEL, KEY_IMAGE, b)
        lin = judged.at(LINEAR, MAIN_MODEL, KEY_IMAGE, b)
        if f is None or not np.isfinite(lin):
            unjudged.append((b, f is not None))
            continue
        band = judged.speedup_band(f, LINEAR, MAIN_MODEL, KEY_IMAGE, b)
        parts.append(claim("linear_part", batch=b, ratio=lin / f["median_us"], version=f["version"], band=band,
                           verdict=notebook.verdict(lin / f["median_us"], 1.0, band)))
        out.append(claim("linear_at", batch=b, image=KEY_IMAGE, version=f["version"], us=f["median_us"],
                         ratio=lin / f["median_us"], anchor=anchor_at(judged, LINEAR, MAIN_MODEL, KEY_IMAGE, b)))
    for has_version in dict.fromkeys(h for _, h in unjudged):
        out.append(claim("linear_unjudged", has_version=has_version,
                         batches=[b for b, h in unjudged if h == has_version], image=KEY_IMAGE, model=MAIN_MODEL))
    if len(parts) == len(LINEAR_BATCHES):
        target = claim("linear_target", batches=list(LINEAR_BATCHES), image=KEY_IMAGE, parts=parts,
                       verdict=notebook.combined_verdict([p.verdict for p in parts]))
        out.append(target)
        ctx.judge(target)
    return out


def stream_findings(data, sr, v):
    """Where more streams stop helping version v, at the stream shape's largest batch."""
    timed, (sm, simage) = data.timed, sr.shape
    d = sr.rows[sr.rows["version"] == v]
    per_batch = {int(b): knee(g) for b, g in d.groupby("batch") if g["streams"].nunique() > 1}
    if not per_batch:
        return [claim("streams_one_count", version=v, streams=data.stream_label(d["streams"].iloc[0]))]
    b = max(per_batch)
    k, kt, bs, bt = per_batch[b]
    one = data.at(v, sm, simage, b, table=timed[timed["streams"] == 1])
    most = int(d["streams"].max())
    most_t = data.at(v, sm, simage, b, table=timed[(timed["version"] == v) & (timed["streams"] == most)])
    rest = claim("streams_rest", knee_share=KNEE, best_us=bt, best=data.stream_label(bs), most_us=most_t,
                 most=data.stream_label(most))
    out = [claim("streams_no_help", version=v, shape=shape_text(sm, simage, b), knee_us=kt, rest=rest) if k == 1 else
           claim("streams_knee", version=v, knee=data.stream_label(k), shape=shape_text(sm, simage, b),
                 has_one=bool(np.isfinite(one)), one_us=one, knee_us=kt, rest=rest)]
    if len(per_batch) > 1:
        out.append(claim("knee_per_batch", version=v, knee_share=KNEE, model=sm, image=simage,
                         parts=[claim("knee_at", batch=bb, knee=per_batch[bb][0]) for bb in sorted(per_batch)]))
    return out


def against_cpu(data, key_shapes):
    """The ladder against the CPU, and v1 (the first GPU step) against it, at each key shape."""
    at, out = data.at, []
    for m, image, b in key_shapes:
        c = at(CPU, m, image, b)
        f = fastest(data, m, image, b)
        if not np.isfinite(c) or f is None or f["version"] == CPU:
            continue
        v1 = at(V1, m, image, b)
        v1_too = bool(np.isfinite(v1)) and f["version"] != V1
        out.append(claim("vs_cpu", shape=shape_text(m, image, b), version=f["version"], ratio=c / f["median_us"],
                         cpu=CPU, cpu_us=c, v1_too=v1_too, v1=V1, v1_ratio=c / v1 if v1_too else 1.0))
    return out


def routine(rt, key_shapes):
    """Where v4's routine goes, at the largest key shape with a split (rt: routine_figure's table)."""
    for m, image, b in reversed(key_shapes):
        r = rt[(rt["version"] == V4) & (rt["model"] == m) & (rt["image_size"] == image)
               & (rt["batch"] == b)]
        if len(r) and np.isfinite(r[ROUTINE_PARTS].iloc[0]).all():
            r = r.iloc[0]
            return [claim("routine", shape=shape_text(m, image, b), v4=V4, routine_us=r["routine_us"],
                          share=(r["h2d_us"] + r["d2h_us"]) / r["routine_us"], h2d=r["h2d_us"], d2h=r["d2h_us"],
                          us=r["median_us"])]
    return []


def findings(data, ctx, judged, ladder, key_shapes, sr, rt, timeline):
    """Every finding of the section, in order; the targets judged into ctx (judged: the rows they
    are judged on; ladder: the rows of the ladder at the key shapes, judged's where that sitting
    holds them; sr: stream_rows; rt: the routine table; timeline: the timeline figure's finding,
    or None)."""
    out = [s for s in [formatting.rounds_sentence(data.timed)] if s]
    scope = ("The targets, the headline, the ladder at the key shapes (its table, its speedup figure and "
             "the findings on it)" if ladder is judged and judged is not data else "The targets and the headline below")
    out += [s for s in [ctx.judged_apart(scope)] if s]
    out += conv_target(judged, ctx) + batch1(ladder) + ladder_losses(ladder) + linear_target(judged, ctx)
    if sr.shape is not None:
        for v in sr.versions:
            out += stream_findings(data, sr, v)
    else:
        out.append(claim("no_streams", v3=V3, v3g=V3G))
    if timeline:
        out.append(timeline)
    out += against_cpu(ladder, key_shapes) + routine(rt, key_shapes)
    missing_versions = [v for v in LADDER if v not in set(data.everything["version"])]
    if missing_versions:
        out.append(claim("missing_versions", versions=missing_versions))
    out.append(formatting.status_finding(data.everything))
    return out


def headline(judged, ctx):
    """README's headline line: the fastest version of all at batch 256, 224 px on ViT-B."""
    top = fastest(judged, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
    if top is None:
        return

    def anchor_name(a):
        h = judged.how(a, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)
        return f"{label(a)} ({h})" if h else label(a)
    anchors = [a for a in (CONV, LINEAR) if np.isfinite(judged.at(a, MAIN_MODEL, KEY_IMAGE, CONV_BATCH))]
    jb = judged.best
    shown = jb[(jb["model"] == MAIN_MODEL) & (jb["image_size"] == KEY_IMAGE) & (jb["batch"] == CONV_BATCH)
               & jb["version"].isin([top["version"], CUDNN, *anchors])]
    ctx.headline(family="Patch embedding",
                 shape=ctx.said(claim("headline_shape", model=MAIN_MODEL, batch=CONV_BATCH, image=KEY_IMAGE)),
                 fastest=top["version"], fastest_us=float(top["median_us"]),
                 library=CUDNN if CUDNN in judged.order else None,
                 library_us=judged.at(CUDNN, MAIN_MODEL, KEY_IMAGE, CONV_BATCH),
                 anchors=[(anchor_name(a), judged.at(a, MAIN_MODEL, KEY_IMAGE, CONV_BATCH)) for a in anchors],
                 run_ids=rundata.run_ids_of(shown))
