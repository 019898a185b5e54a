"""The MLP's rows of one run folder, read once for every section of its report (analysis/mlp.py
and the modules it calls take one MlpData).

Rows of mlp_cublaslt.toml carry their extra bench arguments at the end of the note (`[extra:
--workspace-mib 0]`); every bench row also names its workspace and heuristic in the note. Rows
with extra arguments are a separate experiment (shown only in the cuBLASLt table); the rest is the
sweep, where one L2 flush setting is kept.

The section's run may be a sitting at the target rows only (every version, interleaved rounds).
Its figures over batch and image size then come from the newest run on the same GPU with a sweep
(rundata.sweep_run), and the widths, the cuBLASLt settings and the side experiments each from the
newest run there that timed them, named in their captions; every ratio stays within one run.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from analysis import plots
from studylib import catalog, formatting, rundata
from studylib import steps as step_table
from studylib.claims import claim, flush_setting, say

HIDDEN = 768                  # ViT-B; the main sweep (mlp.toml) is at this width
KEY_ROWS = (6304, 50432)      # batch 32 and 256 at 224 x 224 (197 tokens): the target sizes
KEY_BATCH = 32                # the batch of the width comparison (mlp_models.toml)
TARGET_GEMM_RATIO = 1.05      # target: fastest fused version <= 1.05x the two plain GEMMs (docs/method.md)
UNFUSED, GRAPHED, FUSED, HAND, GEMM = ("unfused", "unfused_graph", "fused_epilogue",
                                       "handwritten_epilogue", "gemm_only")
GRAPH, EAGER = "pytorch_mlp_graph", "pytorch_mlp"
LADDER = catalog.family_versions("mlp") + [GRAPH, EAGER]
# Versions that are not a fused MLP: the unfused steps, the epilogue as separate kernels, and the
# timing references. Every other own version of the sweep is a fused MLP (bias + GELU after fc1,
# bias + residual after fc2, in the GEMMs' epilogues); the targets are judged on the fastest.
NOT_FUSED = {UNFUSED, GRAPHED, HAND, GEMM, "pingpong_gemm_only"}
PANELED = {"l2_panels"}        # the two GEMMs once per panel of rows (its NOTES)
# The version each fp16 version changes, as its NOTES' Technique tells it: the MLP's list is a tree,
# not a chain (cuBLASLt's epilogue, a hand-written one, the family's own GEMM and CUTLASS each start
# from the unfused MLP or from fused_epilogue), so a step's gain is over this parent, never over the
# sibling listed above it. gemm_only is a reference (the two plain GEMMs), no step.
PARENTS = {"unfused_graph": UNFUSED, FUSED: UNFUSED, HAND: UNFUSED, "pingpong_epilogue": FUSED,
           "pingpong_gemm_only": GEMM, "cutlass_epilogue": FUSED, "cutlass_epilogue_erf": "cutlass_epilogue",
           "fastest_epilogue": "cutlass_epilogue", "half_gelu_epilogue": "fastest_epilogue",
           "l2_panels": "half_gelu_epilogue", "erf_fit_epilogue": "fastest_epilogue",
           "small_m_epilogue": "erf_fit_epilogue"}
LABEL = {GRAPH: "PyTorch MLP (CUDA graph)", EAGER: "PyTorch MLP (eager)",
         GEMM: "gemm_only (the two plain GEMMs)"}
DEFAULT_SETTING = ("cached", 4)   # bench defaults: heuristic once per shape, 4 MiB workspace
LT_FLAGS = r"^(?:(?:--workspace-mib[ =]\d+|--heuristic-every-call)\s*)+$"
KEYS = ["version", "hidden", "image_size", "batch", "rows"]
SUMMARY_FORMATS = {"rows": formatting.fmt_int, "hidden": formatting.fmt_int, "median us": formatting.fmt_us,
                   "TFLOP/s": formatting.fmt_gbps, "% of its GEMM ceiling": formatting.fmt_pct,
                   "launches": formatting.fmt_int, "time / gemm_only": formatting.fmt_ratio,
                   "time / PyTorch graph": formatting.fmt_ratio, "time / PyTorch eager": formatting.fmt_ratio}


def is_fp8(v):
    """An E4M3 version (fp8_*): its GEMMs multiply in another precision against another ceiling."""
    return str(v).startswith("fp8_")


def widths_of(t):
    """The hidden widths timed at batch KEY_BATCH, 224 px (the width comparison, mlp_models.toml)."""
    return sorted(int(h) for h in set(t.loc[(t["image_size"] == 224) & (t["batch"] == KEY_BATCH), "hidden"]))


def label(v):
    return LABEL.get(v, v)


def timed(r):
    """The MLP rows of run r, prepared as the module docstring says."""
    everything = r.rows("mlp")
    ok = r.ok("mlp")
    note = ok["note"].astype(str)
    ok["extra"] = note.str.extract(r"\[extra: (.*)\]\s*$")[0].fillna("").str.strip()
    # The problem's rows (--rows may override batch x tokens); older files give them in the note.
    ok["rows"] = rundata.rows_of(ok)
    ws_note = pd.to_numeric(note.str.extract(r"workspace (\d+) MiB")[0], errors="coerce")
    ws_extra = pd.to_numeric(ok["extra"].str.extract(r"--workspace-mib[ =](\d+)")[0],
                             errors="coerce")
    ok["workspace_mib"] = ws_note.fillna(ws_extra).fillna(DEFAULT_SETTING[1])
    heur_note = note.str.extract(r"heuristic (cached|every call)")[0]
    ok["heuristic"] = heur_note.fillna(ok["extra"].str.contains("--heuristic-every-call")
                                       .map({True: "every call", False: "cached"}))
    # Work every version does (stages/mlp flops(): the two GEMMs); fills TFLOP/s where missing.
    ok["flops"] = 4.0 * ok["rows"] * ok["hidden"] * 4 * ok["hidden"]
    ok["tflops"] = ok["tflops"].where(np.isfinite(ok["tflops"]), ok["flops"] / ok["median_us"] / 1e6)

    is_lt = ok["extra"].str.match(LT_FLAGS)
    main, flush, flush_dropped = rundata.one_setting(ok[ok["extra"] == ""], "flush_l2")
    # Interleaved rounds (and re-runs appended to the folder) count once: the median across
    # them, with the range of the rounds' medians as its spread (lo_us, hi_us).
    t = rundata.collapse_rounds(main, KEYS, model=("model", "first"), tflops=("tflops", "median"),
                                gbps=("gbps", "median"), launches=("launches", "median"))
    return SimpleNamespace(
        everything=everything, ok=ok, main=main, is_lt=is_lt, other_extra=int(((ok["extra"] != "") & ~is_lt).sum()),
        flush=flush, flush_dropped=flush_dropped, t=t, vb=t[t["hidden"] == HIDDEN],
        flush_text=say(flush_setting(flush), "mlp"))


# The figures over batch and rows tell the ladder's story in at most SWEEP_MAX series: the
# unfused steps, cuBLASLt's fused epilogue and the hand-written one, the plain GEMMs, PyTorch's MLP
# replayed, the fastest fused version and the MLP of the fp16 answer; a sweep of more versions
# leaves the rest to the tables (the ladder figure of the targets sitting draws every version).
SWEEP_SERIES = (UNFUSED, GRAPHED, FUSED, HAND, GEMM, GRAPH)
SWEEP_MAX = 8


def sweep_series(order, fastest, answer):
    """The versions of `order` the sweep's figures draw: all of them up to SWEEP_MAX, else
    SWEEP_SERIES with the fastest fused version and the answer's MLP."""
    if len(order) <= SWEEP_MAX:
        return list(order)
    return [v for v in order if v in SWEEP_SERIES or v in (fastest, answer)]


def drawing(table):
    """Ladder order of a merged table's versions and a unique style per version, the fastest (at
    hidden HIDDEN) drawn heavier and gemm_only, a timing reference and not an MLP, grey and dotted
    so that it reads as a floor."""
    versions = catalog.version_order(table["version"], LADDER)
    styles = plots.styles(versions, fastest=plots.fastest_at(table[table["hidden"] == HIDDEN], exclude=(GEMM,), rows=None))
    if GEMM in styles:
        styles[GEMM] = dict(color="#7f7f7f", marker=".", linestyle=":")
    return versions, styles


class MlpData:
    """The MLP rows of `run` (a rundata.Run), the sweep beside it, and the lookups every section
    uses."""

    def __init__(self, run):
        self.run = run
        here = timed(run)
        self.here = here
        self.everything, self.ok, self.main, self.is_lt = here.everything, here.ok, here.main, here.is_lt
        self.other_extra, self.flush_dropped, self.flush_text = here.other_extra, here.flush_dropped, here.flush_text
        self.timed, self.vb = here.t, here.vb
        self.rounds, self.rounds_caption, self.rounds_cells = formatting.rounds_wording(here.t)
        self.order, self.style = drawing(here.t)
        self.ceil = run.ceilings()
        self.gemm_ceiling = self.ceil.gemm_tflops
        self.fp8_ceiling = rundata.fp8_ceiling_tflops(run)
        # The sweep over batch, image size and width (see above): this run's own, or the newest
        # one beside it when this run timed the target rows only.
        self.sweep = rundata.sweep_run(run, "mlp")
        self.sweep_rows = here if self.sweep is run else timed(self.sweep)
        self.order_s, self.style_s = drawing(self.sweep_rows.t)
        fastest = plots.fastest_at(self.sweep_rows.vb, exclude=tuple(NOT_FUSED), rows=None)
        self.drawn_s = sweep_series(self.order_s, fastest, step_table.alias_field("fastest_fp16", "mlp"))
        left_out = [v for v in self.order_s if v not in self.drawn_s]
        self.sweep_left_out = claim("left_to_tables", versions=left_out, n=len(left_out), plural=len(left_out) != 1,
                                    one=len(left_out) == 1) if left_out else None
        self.sweep_ceiling = self.sweep.ceilings().gemm_tflops
        self.sweep_prov = (self.sweep.provenance("mlp") if self.sweep is run else
                           claim("prov_sweep_beside", sweep=self.sweep.name, run=run.name, prov=self.sweep.provenance("mlp")))
        self.sweep_tprov = self.sweep.title_provenance("mlp")
        self.sweep_rounds_cells = formatting.rounds_wording(self.sweep_rows.t)[2]
        vb = self.vb
        self.key_rows = [r for r in KEY_ROWS if r in set(vb["rows"])]
        if not self.key_rows and len(vb):  # a sweep without batch 32/256 at 224: smallest and largest
            self.key_rows = sorted({int(vb["rows"].min()), int(vb["rows"].max())})
        self.ceiling_note = self.own_ceiling_note(self.gemm_ceiling, "this run")
        self.sweep_ceiling_note = self.own_ceiling_note(self.sweep_ceiling, "that run")
        # The widths (mlp_models.toml) and the cuBLASLt settings (mlp_cublaslt.toml) were each
        # timed beside some sweep, not necessarily the newest: each from the newest run that has them.
        self.widths_run, self.widths_rows = self.beside(lambda rows: len(widths_of(rows.t)) >= 2)
        self.lt_run, self.lt_rows = self.beside(lambda rows: bool(rows.is_lt.any()))

    def beside(self, has):
        """(run, timed rows) of the newest run on this run's GPU whose MLP rows satisfy `has`,
        the sweep's first; the sweep's own where none does."""
        if has(self.sweep_rows):
            return self.sweep, self.sweep_rows
        for r, rows in self.others_newest_first():
            if has(rows):
                return r, rows
        return self.sweep, self.sweep_rows

    def others_newest_first(self):
        """(run, timed rows) of every other run with MLP timings on this run's GPU, newest first;
        the results root is read once, on the first call (a sweep holding everything never asks)."""
        if not hasattr(self, "_others"):
            gpu = rundata.gpu_of(self.run)
            runs = sorted((r for r in rundata.load_runs(self.run.path.parent)
                           if r.path != self.sweep.path and rundata.gpu_of(r) == gpu and len(r.ok("mlp"))),
                          key=lambda r: (r.newest_utc("mlp"), r.name), reverse=True)
            self._others = [(r, self.here if r.path == self.run.path else timed(r)) for r in runs]
        return self._others

    def beside_prov(self, other, what):
        """The provenance of rows taken from `other` (beside): the sweep's own wording where it is
        the sweep, else the folder named as the newest on this GPU that timed `what`."""
        if other is self.sweep:
            return self.sweep_prov
        return claim("prov_beside", folder=other.name, what=what, prov=other.provenance("mlp"))

    def own_ceiling_note(self, fp16, which):
        """What the "% of its GEMM ceiling" column divides by: each version's own precision's rate."""
        if not fp16:
            return claim("ceiling_not_measured", which=which)
        return claim("ceiling_own", fp16=fp16, which=which, fp8=bool(self.fp8_ceiling), fp8_tflops=self.fp8_ceiling or 0.0)

    def at(self, version, rows, col="median_us", hidden=HIDDEN, image=None, batch=None, table=None):
        """One value of the merged rows (this run's, or `table`), NaN when that version has no
        timing there."""
        table = self.timed if table is None else table
        d = table[(table["version"] == version) & (table["hidden"] == hidden)]
        if rows is not None:
            d = d[d["rows"] == rows]
        if image is not None:
            d = d[d["image_size"] == image]
        if batch is not None:
            d = d[d["batch"] == batch]
        return float(d[col].iloc[0]) if len(d) else np.nan

    def where(self, rows):
        d = self.vb[self.vb["rows"] == rows]
        if not len(d):
            return claim("where_rows", rows=rows)
        return claim("where_batch", batch=int(d['batch'].iloc[0]), image=int(d['image_size'].iloc[0]))

    def summary_rows(self, rows_list, hidden=HIDDEN, ceiling=None, versions=None, **where_):
        at = self.at
        ceiling = self.gemm_ceiling if ceiling is None else ceiling
        versions = self.order if versions is None else versions
        out = []
        for r in rows_list:
            for v in versions:
                m = at(v, r, hidden=hidden, **where_)
                if not np.isfinite(m):
                    continue
                tf = at(v, r, "tflops", hidden=hidden, **where_)
                out.append({"rows": r, "version": v, "median us": m,
                            **({formatting.SPREAD_COLUMN: formatting.fmt_spread(
                                at(v, r, "lo_us", hidden=hidden, **where_),
                                at(v, r, "hi_us", hidden=hidden, **where_))} if self.rounds else {}),
                            "TFLOP/s": tf,
                            # Each version against its own precision's ceiling (FP8's is ~2x fp16's).
                            "% of its GEMM ceiling": 100 * tf / own if (own := (self.fp8_ceiling if is_fp8(v)
                                                                                 else ceiling)) else np.nan,
                            "launches": at(v, r, "launches", hidden=hidden, **where_),
                            "time / gemm_only": m / at(GEMM, r, hidden=hidden, **where_),
                            "time / PyTorch graph": m / at(GRAPH, r, hidden=hidden, **where_),
                            "time / PyTorch eager": m / at(EAGER, r, hidden=hidden, **where_)})
        return pd.DataFrame(out)
