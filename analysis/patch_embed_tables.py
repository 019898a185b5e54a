"""The patch-embedding section's tables: the ladder at the key shapes, every timed configuration
and the rows' status. analysis/patch_embed.py calls them; each returns its table."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.patch_embed_data import CONV, CPU, CUDNN, FAMILY, LINEAR, SHORT, STREAM_VERSIONS, fmt_x, shape_text
from studylib import catalog, formatting, notebook, notes
from studylib.claims import claim


def ladder(data, ctx, key_shapes):
    """Every version at each key shape: time, its rounds' range, the gain over the previous step
    and over cpu_baseline, the time over cuDNN's and over the faster PyTorch anchor's."""
    at, order = data.at, data.order
    own_order = [v for v in order if catalog.is_own(v)]
    ceilings = data.run.ceilings()
    rows = []
    for m, image, b in key_shapes:
        present = [v for v in order if np.isfinite(at(v, m, image, b))]
        steps = [v for v in own_order if v in present]
        anchors_here = {a: at(a, m, image, b) for a in (CONV, LINEAR) if a in present}
        best_anchor = min(anchors_here, key=anchors_here.get) if anchors_here else None
        for v in present:
            us = at(v, m, image, b)
            prev = steps[steps.index(v) - 1] if v in steps and steps.index(v) > 0 else None
            rows.append({
                "shape": shape_text(m, image, b), "version": v,
                "streams": at(v, m, image, b, "streams") if v in STREAM_VERSIONS else np.nan,
                "median us": us,
                **({formatting.SPREAD_COLUMN: formatting.fmt_spread(at(v, m, image, b, "lo_us"),
                                                                    at(v, m, image, b, "hi_us"))} if data.rounds else {}),
                "previous step": prev or "-",
                "x previous": at(prev, m, image, b) / us if prev else np.nan,
                f"x {CPU}": at(CPU, m, image, b) / us if v != CPU else np.nan,
                f"time / {CUDNN}": us / at(CUDNN, m, image, b) if v != CUDNN else np.nan,
                "time / faster anchor": (us / anchors_here[best_anchor]
                                         if best_anchor and v != best_anchor else np.nan),
                "faster anchor": SHORT.get(best_anchor, "-"),
                # The floor is the GPU's: the CPU version's time is not measured against it.
                "% of floor": (100 * ceilings.floor_share(at(v, m, image, b, "tflops"), at(v, m, image, b, "gbps"))
                               if v != CPU else np.nan),
                "idea": notes.idea(FAMILY, v)})
    table = pd.DataFrame(rows)
    if not len(table):
        ctx.missing("table", f"{FAMILY}_ladder", claim("no_key_shape"))
        return table
    ctx.ladder_drawn(notebook.Rung(x["version"], x["shape"], formatting.fmt_us(x["median us"]) + " us",
                                   x["x previous"], x["previous step"] if x["previous step"] != "-" else "")
                     for x in rows if catalog.is_own(x["version"]))
    table = table.dropna(axis=1, how="all")
    fmts = {"streams": formatting.fmt_int, "median us": formatting.fmt_us, "x previous": fmt_x,
            f"x {CPU}": fmt_x, f"time / {CUDNN}": fmt_x, "time / faster anchor": fmt_x,
            "% of floor": formatting.fmt_pct}
    ctx.table(f"{FAMILY}_ladder", formatting.markdown_table(table, {k: f for k, f in fmts.items()
                                                                   if k in table.columns}),
              claim("ladder_caption", rounds=data.rounds_caption, cpu=CPU, cudnn=CUDNN, floor=claim("floor_columns"),
                    flush=data.flush_said, prov=data.run.provenance(FAMILY)))
    return table


def sweep_and_status(data, ctx):
    """Every timed configuration (median us), and the status of every row in ladder order."""
    everything, order = data.everything, data.order
    ctx.table(f"{FAMILY}_sweep", formatting.sweep_table(
        data.timed, ["model", "image_size", "batch", "streams"], "version", order, formatting.fmt_us,
        {c: formatting.fmt_int for c in ("image_size", "batch", "streams")}),
        claim("sweep_caption", cells=data.rounds_cells, flush=data.flush_said, prov=ctx.provenance()))
    st = formatting.status_in_order(everything, order)
    left_out = [claim("other_flush", count=data.flush_dropped)] if data.flush_dropped else []
    ctx.table(f"{FAMILY}_status", formatting.markdown_table(st),
              claim("status_caption", family="Patch-embedding", left_out=left_out, prov=ctx.provenance()))
    return st
