"""The LayerNorm section's tables: the target sizes' summary, the ladder, every timed
configuration and the rows' status. analysis/layernorm.py calls them; each returns its table for
the notebook to show."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.layernorm_data import EAGER, GRAPH, HIDDEN, NOT_TIMED, V1
from studylib import formatting, notes
from studylib.claims import claim


def summary(data, ctx):
    """Every version at the target sizes: time, bandwidth, share of copy, speedups."""
    at, copy, rows_ = data.ladder_at, data.judged_copy, []
    for r in data.key_rows:
        for v in data.order:
            m = at(v, r)
            if not np.isfinite(m):
                continue
            rows_.append({
                "rows": r, "version": v, "median us": m,
                **({formatting.SPREAD_COLUMN: formatting.fmt_spread(at(v, r, "lo_us"), at(v, r, "hi_us"))}
                   if data.ladder_rounds else {}),
                "GB/s": at(v, r, "gbps"),
                "% of copy": 100 * at(v, r, "gbps") / copy if copy else np.nan,
                f"speedup vs {V1}": at(V1, r) / m,
                "time / PyTorch graph": m / at(GRAPH, r),
                "time / PyTorch eager": m / at(EAGER, r)})
    # A run without v1 or without the anchors would show a column of dashes: leave it out.
    table = pd.DataFrame(rows_).dropna(axis=1, how="all")
    if len(table):
        ctx.table("layernorm_summary", formatting.markdown_table(table, {
            "rows": formatting.fmt_int, "median us": formatting.fmt_us, "GB/s": formatting.fmt_gbps,
            "% of copy": formatting.fmt_pct, f"speedup vs {V1}": formatting.fmt_ratio,
            "time / PyTorch graph": formatting.fmt_ratio, "time / PyTorch eager": formatting.fmt_ratio}),
            claim("summary_caption", sizes=data.key_rows, hidden=HIDDEN, rounds=data.ladder_rounds_caption,
                  copy=copy, v1=V1, prov=data.ladder_prov))
    else:
        ctx.missing("table", "layernorm_summary", NOT_TIMED)
    return table


def ladder(data, ctx):
    """The ladder at the target sizes: time, speedup over the previous step, ratio to cuDNN."""
    ceilings, at = data.ladder_run.ceilings(), data.ladder_at
    table, formats = formatting.ladder_table(
        data.order, data.steps, data.key_rows, at, data.library, size_label=lambda r: f"{r} rows",
        spread=data.ladder_rounds, idea=lambda v: notes.idea("layernorm", v),
        floor_share=lambda v, r: ceilings.floor_share(at(v, r, "tflops"), at(v, r, "gbps")))
    if len(table):
        ctx.table("layernorm_ladder", formatting.markdown_table(table, formats),
                  claim("ladder_caption", sizes=data.key_rows, hidden=HIDDEN, rounds=data.ladder_rounds_caption,
                        library=data.library, floor=claim("floor_columns"), flush=data.flush_said,
                        prov=data.ladder_prov))
    else:
        ctx.missing("table", "layernorm_ladder", NOT_TIMED)
    return table


def sweep(data, ctx):
    """Every timed configuration (median us)."""
    if not len(data.timed):
        ctx.missing("table", "layernorm_sweep", NOT_TIMED)
        return
    ctx.table("layernorm_sweep", formatting.sweep_table(data.timed, ["rows"], "version", data.order, formatting.fmt_us,
                                                        {"rows": formatting.fmt_int}),
              claim("sweep_caption", hidden=HIDDEN, cells=data.rounds_cells, prov=data.prov))


def status(data, ctx):
    """What was timed, skipped or failed, in ladder order."""
    everything, order = data.everything, data.order
    st = formatting.status_in_order(everything, order)
    left_out = ([claim("other_hidden", count=data.other_hidden, hidden=HIDDEN)] if data.other_hidden else []) + (
        [claim("other_flush", count=data.flush_dropped)] if data.flush_dropped else [])
    ctx.table("layernorm_status", formatting.markdown_table(st),
              claim("status_caption", family="LayerNorm", left_out=left_out, prov=data.prov))
    return st
