# %% [markdown]
# # LayerNorm: time, bandwidth and speedup per version
#
# LayerNorm moves 2 x rows x hidden fp16 values (read x, write y) and does little arithmetic,
# so the figure of merit is achieved bandwidth against the copy bandwidth measured in the
# same run. Runs on its own (`MPLBACKEND=Agg /usr/bin/python3 analysis/layernorm.py
# [--run DIR] [--out DIR]`) or from `report/build.py`, which hands it `STUDY_CONTEXT`.

# %%

import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import plots
from studylib import catalog, formatting, notebook, rundata
from studylib.claims import claim, flush_setting

ctx, run, prov, tprov = plots.open_notebook("layernorm", globals())

HIDDEN = 768                  # ViT-B; the sweep's rows are batch x tokens at this width
KEY_ROWS = (6304, 50432)      # batch 32 and 256 at 224 x 224 (197 tokens): the target sizes
TARGET_FRACTION = 0.80        # target: >= 80% of copy bandwidth at 50432 x 768 (docs/method.md)
V1 = "v1_shared"
GRAPH = "pytorch_layer_norm_graph"
EAGER = "pytorch_layer_norm"
LADDER = catalog.family_versions("layernorm") + [GRAPH, EAGER]
LABEL = {GRAPH: "PyTorch F.layer_norm (CUDA graph)", EAGER: "PyTorch F.layer_norm (eager)"}

# %% [markdown]
# ## Data: timed rows at hidden 768, one L2 setting, duplicates merged

# %%
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


everything = run.rows("layernorm")
timed, other_hidden, flush, flush_dropped = merged(run)
rounds, rounds_caption, rounds_cells = formatting.rounds_wording(timed)
order = catalog.version_order(timed["version"], LADDER)
# A run with no timings (every row skipped or failed) still gets its status table and findings.
NOT_TIMED = claim("not_timed", hidden=HIDDEN)
style = plots.styles(order, fastest=plots.fastest_at(timed, rows=None))
ceil = run.ceilings()
copy = ceil.copy_gbps
flush_said = flush_setting(flush)
flush_text = ctx.said(flush_said)  # also in figure titles


def label(v):
    return LABEL.get(v, v)


def at(version, rows, col="median_us", table=None):
    """One value of the merged table (`table`: another run's), NaN when that version has no
    timing there."""
    t = timed if table is None else table
    s = t[(t["version"] == version) & (t["rows"] == rows)][col]
    return float(s.iloc[0]) if len(s) else np.nan


timed

# %% [markdown]
# ## Time per call vs rows (log-log)

# %%
if len(timed):
    fig, ax = plt.subplots()
    for v in order:
        d = timed[timed["version"] == v].sort_values("rows")
        ax.plot(d["rows"], d["median_us"], label=label(v), **style[v])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"rows (batch x tokens), hidden {HIDDEN}")
    ax.set_ylabel("median time per call (us)")
    plots.legend_outside(ax)
    plots.titled(fig, f"LayerNorm: median time per call vs rows ({flush_text})", tprov)
    ctx.figure("layernorm_time", fig, claim("time_caption", hidden=HIDDEN, flush=flush_said, prov=prov))
else:
    ctx.missing("figure", "layernorm_time", NOT_TIMED)

# %% [markdown]
# ## Achieved bandwidth vs rows, as a share of the measured copy bandwidth

# %%
if len(timed):
    # LayerNorm moves each byte once, so the copy kernel's bandwidth, measured in the same run, is
    # its ceiling: the y axis is the share of it (GB/s where the run has no copy ceiling).
    fig, ax = plt.subplots()
    scale = 100.0 / copy if copy else 1.0
    for v in order:
        d = timed[timed["version"] == v].sort_values("rows")
        ax.plot(d["rows"], d["gbps"] * scale, label=label(v), **style[v])
    if copy:
        ax.axhline(100.0, color="#444444", linewidth=1.0)
        ax.axhline(100.0 * TARGET_FRACTION, color="#444444", linewidth=0.8, linestyle=":")
        ax.text(timed["rows"].min(), 100.0, f" measured copy: {copy:,.0f} GB/s", va="bottom", fontsize=8)
        ax.text(timed["rows"].min(), 100.0 * TARGET_FRACTION, f" target: {TARGET_FRACTION:.0%} of copy",
                va="bottom", fontsize=8)
        ax.set_ylim(0, 110)
        ax.set_ylabel("% of the measured copy bandwidth")
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("achieved GB/s (bytes read + written / median time)")
    ax.set_xscale("log")
    ax.set_xlabel(f"rows (batch x tokens), hidden {HIDDEN}")
    plots.legend_outside(ax)  # right of the axes: the curves fill the whole plot
    plots.titled(fig, "LayerNorm: achieved bandwidth vs rows" + (", % of copy" if copy else ""), tprov)
    ctx.figure("layernorm_gbps", fig, claim("gbps_caption" if copy else "gbps_caption_no_ceiling", hidden=HIDDEN,
                                            copy=copy, target=TARGET_FRACTION, flush=flush_said, prov=prov))
else:
    ctx.missing("figure", "layernorm_gbps", NOT_TIMED)

# %% [markdown]
# ## Speedup vs v1_shared and vs PyTorch F.layer_norm (graph and eager)

# %%
baselines = [b for b in (V1, GRAPH, EAGER) if b in order]
if baselines:
    fig = plots.speedup_panels(timed, order, baselines, label, style, "rows (batch x tokens)")
    plots.titled(fig, "LayerNorm: speedup per rows (above 1 = faster than the baseline)", tprov)
    ctx.figure("layernorm_speedup", fig, claim("speedup_caption", baselines=[label(b) for b in baselines], prov=prov))
else:
    ctx.missing("figure", "layernorm_speedup", claim("no_baselines", v1=V1, graph=GRAPH, eager=EAGER))

# %% [markdown]
# ## Summary table at the target sizes

# %%
key_rows = [r for r in KEY_ROWS if r in set(timed["rows"])]
if not key_rows and len(timed):  # a sweep without the batch 32/256 sizes: its smallest and largest
    key_rows = sorted({int(timed["rows"].min()), int(timed["rows"].max())})
summary = []
for r in key_rows:
    for v in order:
        m = at(v, r)
        if not np.isfinite(m):
            continue
        summary.append({
            "rows": r, "version": v, "median us": m,
            **({formatting.SPREAD_COLUMN: formatting.fmt_spread(at(v, r, "lo_us"), at(v, r, "hi_us"))}
               if rounds else {}),
            "GB/s": at(v, r, "gbps"),
            "% of copy": 100 * at(v, r, "gbps") / copy if copy else np.nan,
            f"speedup vs {V1}": at(V1, r) / m,
            "time / PyTorch graph": m / at(GRAPH, r),
            "time / PyTorch eager": m / at(EAGER, r)})
summary = pd.DataFrame(summary)
# A run without v1 or without the anchors would show a column of dashes: leave it out.
summary = summary.dropna(axis=1, how="all")
if len(summary):
    ctx.table("layernorm_summary", formatting.markdown_table(summary, {
        "rows": formatting.fmt_int, "median us": formatting.fmt_us, "GB/s": formatting.fmt_gbps,
        "% of copy": formatting.fmt_pct, f"speedup vs {V1}": formatting.fmt_ratio,
        "time / PyTorch graph": formatting.fmt_ratio, "time / PyTorch eager": formatting.fmt_ratio}),
        claim("summary_caption", sizes=key_rows, hidden=HIDDEN, rounds=rounds_caption, copy=copy, v1=V1, prov=prov))
else:
    ctx.missing("table", "layernorm_summary", NOT_TIMED)
summary

# %% [markdown]
# ## The ladder at the target sizes: time, speedup over the previous step, ratio to cuDNN

# %%
LIBRARY = next((v for v in order if catalog.is_library(v)), None)
steps = [v for v in order if catalog.is_own(v)]
ladder, ladder_formats = formatting.ladder_table(order, steps, key_rows, at, LIBRARY,
                                         size_label=lambda r: f"{r} rows", spread=rounds)
if len(ladder):
    ctx.table("layernorm_ladder", formatting.markdown_table(ladder, ladder_formats),
              claim("ladder_caption", sizes=key_rows, hidden=HIDDEN, rounds=rounds_caption, library=LIBRARY,
                    flush=flush_said, prov=prov))
else:
    ctx.missing("table", "layernorm_ladder", NOT_TIMED)
fig = plots.ladder_figure(steps, key_rows, at, LIBRARY, lambda r: f"{r} rows",
                          f"LayerNorm: the ladder at hidden {HIDDEN} ({flush_text})", tprov)
if fig is not None:
    ctx.figure("layernorm_ladder_steps", fig,
               claim("ladder_steps_caption", sizes=key_rows, hidden=HIDDEN, rounds=rounds_caption, library=LIBRARY,
                     scale=plots.LADDER_SCALE, flush=flush_said, prov=prov))
else:
    ctx.missing("figure", "layernorm_ladder_steps", NOT_TIMED)

# %% [markdown]
# No roofline figure: LayerNorm does 8 flops per element over 4 bytes at every shape, so every
# version would stand in one column of a roofline, far left of the ridge; the bandwidth figure
# (layernorm_gbps, the share of the measured copy) is the roof that counts.

# %% [markdown]
# ## Every timed configuration (median us)

# %%
if len(timed):
    ctx.table("layernorm_sweep", formatting.sweep_table(timed, ["rows"], "version", order, formatting.fmt_us,
                                                {"rows": formatting.fmt_int}),
        claim("sweep_caption", hidden=HIDDEN, cells=rounds_cells, prov=prov))
else:
    ctx.missing("table", "layernorm_sweep", NOT_TIMED)

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
st = formatting.status_table(everything.assign(
    _o=everything["version"].map({v: i for i, v in enumerate(order)}).fillna(len(order)))
    .sort_values(["_o", "version"], kind="stable"))
left_out = ([claim("other_hidden", count=other_hidden, hidden=HIDDEN)] if other_hidden else []) + (
    [claim("other_flush", count=flush_dropped)] if flush_dropped else [])
ctx.table("layernorm_status", formatting.markdown_table(st),
          claim("status_caption", family="LayerNorm", left_out=left_out, prov=prov))
st

# %% [markdown]
# ## Findings, as sentences generated from the numbers above

# %%
# The targets and the headline are judged on the family's targets sitting (its target sizes
# alone, rounds interleaved: the newest one measured after this run, or this run's own
# layernorm_targets.csv beside its sweep), else on this run.
judged, judged_copy = timed, copy
if ctx.targets_run is not None:
    judged = merged(ctx.take_targets_run())[0]
    judged_copy = ctx.targets_run.ceilings().copy_gbps or copy


def fastest(rows, table=None):
    """The fastest of every version shown at this size, library versions included (the
    PyTorch anchors are what it is compared with, so they are not candidates); from `table`
    (default this run's)."""
    t = timed if table is None else table
    d = t[(t["rows"] == rows) & ~t["version"].map(catalog.is_anchor)]
    return d.loc[d["median_us"].idxmin()] if len(d) else None


def fastest_own(rows, table=None):
    t = timed if table is None else table
    d = t[(t["rows"] == rows) & t["version"].map(catalog.is_own)]
    return d.loc[d["median_us"].idxmin()] if len(d) else None


findings = [s for s in [formatting.rounds_sentence(timed)] if s] if len(timed) else []
findings += [s for s in [ctx.judged_apart("The targets and the headline (the sentences up to the last "
                                           "target's verdict)")] if s]
big = max(key_rows) if key_rows else None  # None: nothing timed in this run
best = fastest(big, judged) if key_rows else None
if best is not None:
    v, m, g = best["version"], best["median_us"], best["gbps"]
    shape = dict(rows=big, hidden=HIDDEN)
    if judged_copy:
        findings.append(claim("fastest_share", version=v, library=catalog.is_library(v), share=g / judged_copy,
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
            findings.append(target)
            ctx.judge(target)
    else:
        findings.append(claim("fastest_no_ceiling", version=v, library=catalog.is_library(v), us=m, gbps=g, **shape))
    if v != V1 and np.isfinite(at(V1, big, table=judged)):
        v1 = at(V1, big, table=judged)
        findings.append(claim("over_v1", version=v, ratio=v1 / m, v1=V1, v1_us=v1, **shape))

beats = []
for r in key_rows:
    b, first = fastest_own(r, judged), fastest(r, judged)
    if b is None:
        continue
    own = dict(rows=r, hidden=HIDDEN, version=b["version"], us=b["median_us"], first=first["version"] == b["version"])
    if catalog.is_library(first["version"]):
        findings.append(claim("library_first", library=first["version"], library_us=first["median_us"], **own))
    g, e = at(GRAPH, r, table=judged), at(EAGER, r, table=judged)
    vs = dict(graph=g / b["median_us"], graph_us=g, eager=e / b["median_us"], eager_us=e, **own)
    kind = {(True, True): "vs_both_anchors", (True, False): "vs_graph", (False, True): "vs_eager"}.get(
        (bool(np.isfinite(g)), bool(np.isfinite(e))))
    if kind:
        findings.append(claim(kind, **vs))
    if np.isfinite(g):
        band = notebook.ratio_band(at(GRAPH, r, "lo_us", judged), at(GRAPH, r, "hi_us", judged),
                                   b["lo_us"], b["hi_us"])
        beats.append(claim("beat_target_part", rows=r, ratio=g / b["median_us"], version=b["version"], band=band,
                           verdict=notebook.verdict(g / b["median_us"], 1.0, band)))
if beats and key_rows == list(KEY_ROWS):
    target = claim("beat_target", sizes=list(KEY_ROWS), parts=beats,
                   verdict=notebook.combined_verdict([p.verdict for p in beats]))
    findings.append(target)
    ctx.judge(target)

for lib in [v for v in order if catalog.is_library(v)]:
    m = at(lib, big)
    if np.isfinite(m):
        findings.append(claim("library_time_share" if copy else "library_time", library=lib, us=m, rows=big,
                              hidden=HIDDEN, share=at(lib, big, "gbps") / copy if copy else None))

if copy and flush == 0.0:
    over = timed[timed["gbps"] > copy]
    if len(over):
        sizes = sorted(int(r) for r in set(over["rows"]))
        findings.append(claim("served_from_l2", sizes=sizes, versions=sorted(set(over["version"])),
                              mb=4.0 * max(sizes) * HIDDEN / 1e6))

findings.append(formatting.status_finding(everything, "failed the correctness check"))

findings_text = ctx.claims("layernorm_findings", findings)

# README's headline line: the fastest version of all at the largest target size.
top = fastest(big, judged)
if top is not None:
    anchors = [a for a in (GRAPH, EAGER) if np.isfinite(at(a, big, table=judged))]
    ctx.headline(family="LayerNorm", shape=f"{big} x {HIDDEN} (rows x hidden)",
                 fastest=top["version"], fastest_us=float(top["median_us"]),
                 library=LIBRARY, library_us=at(LIBRARY, big, table=judged) if LIBRARY else np.nan,
                 anchors=[(label(a), at(a, big, table=judged)) for a in anchors],
                 run_ids=rundata.run_ids_of(judged[(judged["rows"] == big)
                                                   & judged["version"].isin([top["version"], LIBRARY, *anchors])]))
print(findings_text.read_text())
