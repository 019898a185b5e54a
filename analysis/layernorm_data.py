"""The LayerNorm section's rows: a run's timed rows at hidden 768, one L2 setting, interleaved
rounds and re-runs counted once (`merged`), and the lookups every section of analysis/layernorm.py
uses (LayerNormData)."""
from __future__ import annotations

import numpy as np

from analysis import plots
from studylib import catalog, formatting, rundata
from studylib.claims import claim, flush_setting

HIDDEN = 768                  # ViT-B; the sweep's rows are batch x tokens at this width
KEY_ROWS = (6304, 50432)      # batch 32 and 256 at 224 x 224 (197 tokens): the target sizes
TARGET_FRACTION = 0.80        # target: >= 80% of copy bandwidth at 50432 x 768 (docs/method.md)
V1 = "v1_shared"
GRAPH = "pytorch_layer_norm_graph"
EAGER = "pytorch_layer_norm"
LADDER = catalog.family_versions("layernorm") + [GRAPH, EAGER]
LABEL = {GRAPH: "PyTorch F.layer_norm (CUDA graph)", EAGER: "PyTorch F.layer_norm (eager)"}
# A run with no timings (every row skipped or failed) still gets its status table and findings.
NOT_TIMED = claim("not_timed", hidden=HIDDEN)


def merged(r):
    """(timed rows, rows of another hidden size, the L2 setting kept, rows of the other one
    dropped) of run r at hidden 768, interleaved rounds (and re-runs appended to the folder)
    counted once: the median across them, with the range of the rounds' medians as its spread
    (lo_us, hi_us)."""
    ok = r.ok("layernorm")
    other = int((ok["hidden"] != HIDDEN).sum())
    ok = ok[ok["hidden"] == HIDDEN]
    ok, kept, dropped = rundata.one_setting(ok, "flush_l2")
    ok["rows"] = rundata.rows_of(ok)
    # Bytes the kernel must move (same count as stages/layernorm bytes()); fills GB/s for any
    # anchor row that did not record it, so every version is measured against the same bytes.
    ok["bytes"] = 2.0 * ok["rows"] * HIDDEN * 2 + 2.0 * HIDDEN * 2
    ok["gbps"] = ok["gbps"].where(np.isfinite(ok["gbps"]), ok["bytes"] / ok["median_us"] / 1e3)
    # FLOPs (stages/layernorm flops(): 8 per element), for the roofline.
    ok["tflops"] = ok["tflops"].where(np.isfinite(ok["tflops"]),
                                      8.0 * ok["rows"] * HIDDEN / ok["median_us"] / 1e6)
    t = rundata.collapse_rounds(ok, ["version", "rows"], gbps=("gbps", "median"), tflops=("tflops", "median"),
                                batch=("batch", "first"), tokens=("tokens", "first"))
    return t, other, kept, dropped


def label(v):
    return LABEL.get(v, v)


class LayerNormData:
    """The LayerNorm rows of the context's run, the rows its targets are judged on (the family's
    targets sitting where the context took one, else the run's), and their lookups."""

    def __init__(self, ctx):
        run = ctx.run
        self.run, self.prov, self.tprov = run, ctx.provenance(), ctx.title_provenance()
        self.everything = run.rows("layernorm")
        self.timed, self.other_hidden, self.flush, self.flush_dropped = merged(run)
        self.rounds, self.rounds_caption, self.rounds_cells = formatting.rounds_wording(self.timed)
        self.order = catalog.version_order(self.timed["version"], LADDER)
        self.style = plots.styles(self.order, fastest=plots.fastest_at(self.timed, rows=None))
        self.copy = run.ceilings().copy_gbps
        self.flush_said = flush_setting(self.flush)
        self.flush_text = ctx.said(self.flush_said)  # also in figure titles
        timed_rows = set(self.timed["rows"])
        self.key_rows = [r for r in KEY_ROWS if r in timed_rows]
        if not self.key_rows and len(self.timed):  # a sweep without the batch 32/256 sizes: its extremes
            self.key_rows = sorted({int(self.timed["rows"].min()), int(self.timed["rows"].max())})
        self.library = next((v for v in self.order if catalog.is_library(v)), None)
        self.steps = [v for v in self.order if catalog.is_own(v)]
        # The targets and the headline are judged on the family's targets sitting (its target
        # sizes alone, rounds interleaved: the newest one measured after this run, or this run's
        # own layernorm_targets.csv beside its sweep), else on this run.
        self.judged, self.judged_copy = self.timed, self.copy
        self.ladder_run = run
        if ctx.targets_run is not None:
            self.judged = merged(ctx.take_targets_run())[0]
            self.judged_copy = ctx.targets_run.ceilings().copy_gbps or self.copy
            self.ladder_run = ctx.targets_run
        # The target sizes' tables, the ladder figure and each step's measured line read the same
        # rows as the targets: one sitting, its rounds interleaved where the family has one, so a
        # step has one time at a target size (the figures over rows read this run's sweep).
        self.ladder_prov = self.ladder_run.provenance("layernorm")
        self.ladder_tprov = self.ladder_run.title_provenance("layernorm")
        self.ladder_rounds, self.ladder_rounds_caption, _ = formatting.rounds_wording(self.judged)

    def at(self, version, rows, col="median_us", table=None):
        """One value of the merged table (`table`: another run's), NaN when that version has no
        timing there."""
        t = self.timed if table is None else table
        s = t[(t["version"] == version) & (t["rows"] == rows)][col]
        return float(s.iloc[0]) if len(s) else np.nan

    def ladder_at(self, version, rows, col="median_us"):
        """One value of the rows the target sizes are told from (the targets' sitting, `judged`)."""
        return self.at(version, rows, col, table=self.judged)

    def fastest(self, rows, table=None):
        """The fastest of every version shown at this size, library versions included (the
        PyTorch anchors are what it is compared with, so they are not candidates); from `table`
        (default this run's)."""
        t = self.timed if table is None else table
        d = t[(t["rows"] == rows) & ~t["version"].map(catalog.is_anchor)]
        return d.loc[d["median_us"].idxmin()] if len(d) else None

    def fastest_own(self, rows, table=None):
        t = self.timed if table is None else table
        d = t[(t["rows"] == rows) & t["version"].map(catalog.is_own)]
        return d.loc[d["median_us"].idxmin()] if len(d) else None
