"""The attention section's findings as claim records, its target judged (the fastest version at
most 0.9x the best cuDNN result at batch 32 and every target token count) and README's headline
line, on the rows the target is judged on (AttentionData.judged). analysis/attention.py calls
them."""
from __future__ import annotations

import numpy as np

from analysis.attention_data import CUDNN, CUDNN_GRAPH, FASTEST_TARGET, HEAD_DIM, HEADS, KEY_BATCH, KEY_TOKENS, \
    TWIN_OF_V9, V6, label
from studylib import catalog, formatting, notebook, rundata
from studylib.claims import claim

ANCHORS_COMPARED = (CUDNN, CUDNN_GRAPH, "pytorch_sdpa_flash_graph")


def against_cudnn(data, ctx):
    """At each target token count, the fastest own version against the best cuDNN result (and v6
    against it), against each anchor; the 0.9x target judged."""
    at, judged, out, parts = data.at, data.judged, [], []
    for n in data.key_tokens:
        c, c_source = data.best_cudnn(n, judged)
        b = data.fastest_own(n)
        if b is None:
            continue
        if np.isfinite(c):
            ratio = b["median_us"] / c
            band = notebook.ratio_band(b["lo_us"], b["hi_us"], at(c_source, n, col="lo_us", table=judged),
                                       at(c_source, n, col="hi_us", table=judged))
            parts.append(claim("cudnn_target_part", tokens=n, ratio=ratio, version=b["version"], band=band,
                               verdict=notebook.verdict(ratio, FASTEST_TARGET, band, at_most=True)))
            out.append(claim("fastest_vs_cudnn", tokens=n, batch=data.key_batch, version=b["version"],
                             us=b["median_us"], tflops=b["tflops"], ratio=ratio, cudnn_us=c, source=label(c_source)))
            v6 = at(V6, n, table=judged)
            if np.isfinite(v6) and b["version"] != V6:
                out.append(claim("v6_vs_cudnn", tokens=n, v6=V6, us=v6, ratio=v6 / c))
        else:
            out.append(claim("fastest_no_cudnn", tokens=n, version=b["version"], us=b["median_us"], cudnn=CUDNN,
                             graph=label(CUDNN_GRAPH)))
        for anchor in ANCHORS_COMPARED:
            a = at(anchor, n, table=judged)
            if np.isfinite(a):
                out.append(claim("vs_anchor", tokens=n, version=b["version"], ratio=a / b["median_us"],
                                 anchor=label(anchor), anchor_us=a))
    if parts and data.key_batch == KEY_BATCH and data.key_tokens == list(KEY_TOKENS):
        target = claim("cudnn_target", target=FASTEST_TARGET, cudnn=CUDNN, graph=label(CUDNN_GRAPH), batch=KEY_BATCH,
                       sizes=list(KEY_TOKENS), parts=parts,
                       verdict=notebook.combined_verdict([p.verdict for p in parts]))
        out.append(target)
        ctx.judge(target)
    return out


def findings(data, ctx):
    """Every finding of the section, in order; the target judged into ctx."""
    out = [s for s in [formatting.rounds_sentence(data.timed)] if s]
    out += [s for s in [ctx.judged_apart("The targets and the headline (the sentences up to the "
                                         "target's verdict)")] if s]
    out += against_cudnn(data, ctx)
    # Growth from the smallest to the largest token count against tokens^2.
    if len(data.key_tokens) >= 2:
        lo, hi = min(data.key_tokens), max(data.key_tokens)
        for v in [v for v in data.order if catalog.is_own(v) or catalog.is_library(v)]:
            a, b = data.at(v, lo), data.at(v, hi)
            if np.isfinite(a) and np.isfinite(b):
                out.append(claim("growth", version=v, growth=b / a, lo=lo, hi=hi, square=(hi / lo) ** 2))
    out.append(formatting.status_finding(data.everything))
    return out


def headline(data, ctx):
    """README's headline line: the fastest version of all at batch 32, 197 tokens (ViT-B, 224 px)."""
    at, judged, jk, key_tokens = data.at, data.judged, data.judged_kb, data.key_tokens
    head_tokens = KEY_TOKENS[0] if KEY_TOKENS[0] in key_tokens else (key_tokens[0] if key_tokens else None)
    top = jk[(jk["tokens"] == head_tokens) & ~jk["version"].map(catalog.is_anchor)
             & (jk["version"] != TWIN_OF_V9)] if head_tokens else jk.iloc[:0]
    if not len(top):
        return
    top = top.loc[top["median_us"].idxmin()]
    anchors = [a for a in ("pytorch_sdpa_cudnn_graph", "pytorch_sdpa_flash_graph")
               if np.isfinite(at(a, head_tokens, table=judged))]
    ctx.headline(family="Attention", shape=ctx.said(claim("headline_shape", batch=data.key_batch, tokens=head_tokens,
                                                           heads=HEADS, head_dim=HEAD_DIM)),
                 fastest=top["version"], fastest_us=float(top["median_us"]),
                 library=CUDNN if CUDNN in set(jk["version"]) else None,
                 library_us=at(CUDNN, head_tokens, table=judged),
                 anchors=[(label(a), at(a, head_tokens, table=judged)) for a in anchors],
                 run_ids=rundata.run_ids_of(jk[(jk["tokens"] == head_tokens)
                                               & jk["version"].isin([top["version"], CUDNN, *anchors])]))
