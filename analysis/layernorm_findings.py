"""The LayerNorm section's findings as claim records, its targets judged (80% of the copy
bandwidth, faster than PyTorch in a CUDA graph at both target sizes) and README's headline line,
on the rows the targets are judged on (LayerNormData.judged). analysis/layernorm.py calls them."""
from __future__ import annotations

import numpy as np

from analysis.layernorm_data import EAGER, GRAPH, HIDDEN, KEY_ROWS, TARGET_FRACTION, V1, label
from studylib import catalog, formatting, notebook, rundata
from studylib.claims import claim


def fastest_first(data, ctx, big):
    """The fastest version at the largest target size: its share of copy (the 80% target judged
    on the study's own kernels) and its gain over v1_shared."""
    best = data.fastest(big, data.judged)
    if best is None:
        return []
    judged, judged_copy, out = data.judged, data.judged_copy, []
    v, m, g = best["version"], best["median_us"], best["gbps"]
    shape = dict(rows=big, hidden=HIDDEN)
    if judged_copy:
        out.append(claim("fastest_share", version=v, library=catalog.is_library(v), share=g / judged_copy,
                         gbps=g, copy=judged_copy, us=m, **shape))
        own = judged[(judged["rows"] == big) & judged["version"].map(catalog.is_own)]
        if big == KEY_ROWS[1] and len(own):
            # The target is for the study's own kernels, whatever a library reaches.
            mine = own.loc[own["median_us"].idxmin()]
            # The fraction's band over the rounds: its bytes over the slowest and fastest round.
            share = mine["gbps"] / judged_copy
            band = (share * mine["median_us"] / mine["hi_us"], share * mine["median_us"] / mine["lo_us"])
            target = claim("copy_target", version=mine["version"], first=mine["version"] == v, gbps=mine["gbps"],
                           copy=judged_copy, target=TARGET_FRACTION, value=share, band=band,
                           verdict=notebook.verdict(share, TARGET_FRACTION, band), **shape)
            out.append(target)
            ctx.judge(target)
    else:
        out.append(claim("fastest_no_ceiling", version=v, library=catalog.is_library(v), us=m, gbps=g, **shape))
    if v != V1 and np.isfinite(data.at(V1, big, table=judged)):
        v1 = data.at(V1, big, table=judged)
        out.append(claim("over_v1", version=v, ratio=v1 / m, v1=V1, v1_us=v1, **shape))
    return out


def against_anchors(data, ctx):
    """At each target size, the fastest own kernel against a library that is faster and against
    the PyTorch anchors; the target "faster than PyTorch in a CUDA graph at both sizes" judged."""
    judged, at, out, beats = data.judged, data.at, [], []
    for r in data.key_rows:
        b, first = data.fastest_own(r, judged), data.fastest(r, judged)
        if b is None:
            continue
        own = dict(rows=r, hidden=HIDDEN, version=b["version"], us=b["median_us"], first=first["version"] == b["version"])
        if catalog.is_library(first["version"]):
            out.append(claim("library_first", library=first["version"], library_us=first["median_us"], **own))
        g, e = at(GRAPH, r, table=judged), at(EAGER, r, table=judged)
        vs = dict(graph=g / b["median_us"], graph_us=g, eager=e / b["median_us"], eager_us=e, **own)
        kind = {(True, True): "vs_both_anchors", (True, False): "vs_graph", (False, True): "vs_eager"}.get(
            (bool(np.isfinite(g)), bool(np.isfinite(e))))
        if kind:
            out.append(claim(kind, **vs))
        if np.isfinite(g):
            band = notebook.ratio_band(at(GRAPH, r, "lo_us", judged), at(GRAPH, r, "hi_us", judged),
                                       b["lo_us"], b["hi_us"])
            beats.append(claim("beat_target_part", rows=r, ratio=g / b["median_us"], version=b["version"], band=band,
                               verdict=notebook.verdict(g / b["median_us"], 1.0, band)))
    if beats and data.key_rows == list(KEY_ROWS):
        target = claim("beat_target", sizes=list(KEY_ROWS), parts=beats,
                       verdict=notebook.combined_verdict([p.verdict for p in beats]))
        out.append(target)
        ctx.judge(target)
    return out


def findings(data, ctx):
    """Every finding of the section, in order; the targets judged into ctx."""
    timed, copy = data.timed, data.copy
    out = [s for s in [formatting.rounds_sentence(timed)] if s] if len(timed) else []
    out += [s for s in [ctx.judged_apart("The targets, the headline (the sentences up to the last target's "
                                         "verdict), the target sizes' tables and the ladder figure")] if s]
    big = max(data.key_rows) if data.key_rows else None  # None: nothing timed in this run
    if big is not None:
        out += fastest_first(data, ctx, big)
    out += against_anchors(data, ctx)
    for lib in [v for v in data.order if catalog.is_library(v)]:
        m, judged_copy = data.ladder_at(lib, big), data.judged_copy
        if np.isfinite(m):
            out.append(claim("library_time_share" if judged_copy else "library_time", library=lib, us=m, rows=big,
                             hidden=HIDDEN,
                             share=data.ladder_at(lib, big, "gbps") / judged_copy if judged_copy else None))
    if copy and data.flush == 0.0:
        over = timed[timed["gbps"] > copy]
        if len(over):
            sizes = sorted(int(r) for r in set(over["rows"]))
            out.append(claim("served_from_l2", sizes=sizes, versions=sorted(set(over["version"])),
                             mb=4.0 * max(sizes) * HIDDEN / 1e6))
    out.append(formatting.status_finding(data.everything, "failed the correctness check"))
    return out


def headline(data, ctx):
    """README's headline line: the fastest version of all at the largest target size."""
    big = max(data.key_rows) if data.key_rows else None
    top = data.fastest(big, data.judged) if big is not None else None
    if top is None:
        return
    judged, at, lib = data.judged, data.at, data.library
    anchors = [a for a in (GRAPH, EAGER) if np.isfinite(at(a, big, table=judged))]
    ctx.headline(family="LayerNorm", shape=ctx.said(claim("headline_shape", rows=big, hidden=HIDDEN)),
                 fastest=top["version"], fastest_us=float(top["median_us"]),
                 library=lib, library_us=at(lib, big, table=judged) if lib else np.nan,
                 anchors=[(label(a), at(a, big, table=judged)) for a in anchors],
                 run_ids=rundata.run_ids_of(judged[(judged["rows"] == big)
                                                   & judged["version"].isin([top["version"], lib, *anchors])]))
