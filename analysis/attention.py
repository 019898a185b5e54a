# %% [markdown]
# # Attention: time per call, scaling with tokens, and the ratio to cuDNN SDPA
#
# Multi-head self-attention costs 4 x batch x heads x tokens^2 x head_dim flops (Q K^T and
# P V) while it moves only the packed QKV and the output, so at ViT's token counts it is
# compute-bound and grows as tokens^2. The figure of merit is the time per call as a ratio to
# cuDNN's fused SDPA measured in the same run. Runs on its own (`MPLBACKEND=Agg
# /usr/bin/python3 analysis/attention.py [--run DIR] [--out DIR]`) or from `report/build.py`,
# which hands it `STUDY_CONTEXT`.

# %%

import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import studylib
from analysis import plots
from studylib import catalog, formatting, notebook, paths, rundata
from studylib.claims import claim, flush_setting

ctx, run, prov, tprov = plots.open_notebook("attention", globals())

HEADS, HEAD_DIM = 12, 64          # ViT-B; the attention targets' shapes (docs/method.md)
KEY_BATCH = 32                    # the batch of the targets
KEY_TOKENS = (197, 577, 1025)     # 224 / 384 / 512 px
CUDNN = "cudnn_sdpa"
CUDNN_GRAPH = "pytorch_sdpa_cudnn_graph"  # PyTorch's cuDNN SDPA, possibly a newer cuDNN than ours
# "The best cuDNN result" at a token count: the lower median of our cuDNN build and PyTorch's
# cuDNN SDPA replayed from a CUDA graph, in the same run (docs/method.md).
BEST_CUDNN = "the best cuDNN result"
FASTEST_TARGET = 0.9              # target: fastest version <= 0.9x the best cuDNN result
V6 = "v6_coalesced_k"             # the last step before the flash kernels
LADDER = catalog.family_versions("attention") + [
          "pytorch_sdpa_cudnn_graph", "pytorch_sdpa_flash_graph", "pytorch_sdpa_efficient_graph",
          "pytorch_sdpa_math_graph", "pytorch_sdpa_cudnn", "pytorch_sdpa_flash",
          "pytorch_sdpa_efficient", "pytorch_sdpa_math"]


def fmt_tflops(x):
    return "-" if not np.isfinite(x) else f"{x:.2f}" if x < 10 else f"{x:,.0f}"


def label(v):
    if catalog.is_anchor(v):
        name = v.removeprefix("pytorch_sdpa_")
        graph = name.endswith("_graph")
        return f"PyTorch SDPA {name.removesuffix('_graph')} ({'CUDA graph' if graph else 'eager'})"
    return v


# %% [markdown]
# ## Data: timed rows of ViT-B's head shape, one L2 setting, duplicates merged

# %%
def merged(r):
    """(timed rows, how many of another head shape, the L2 setting kept, rows of the other one
    dropped) of run r: ViT-B's head shape, one L2 setting, interleaved rounds counted once (their
    median, with the rounds' range as spread)."""
    ok = r.ok("attention")
    other = int(((ok["heads"] != HEADS) | (ok["head_dim"] != HEAD_DIM)).sum())
    ok = ok[(ok["heads"] == HEADS) & (ok["head_dim"] == HEAD_DIM)]
    ok, kept, dropped = rundata.one_setting(ok, "flush_l2")
    # Work every version must do (attention::flops()); fills TFLOP/s for any row without it.
    ok["flops"] = 4.0 * ok["batch"] * HEADS * ok["tokens"] ** 2 * HEAD_DIM
    ok["tflops"] = ok["tflops"].where(np.isfinite(ok["tflops"]), ok["flops"] / ok["median_us"] / 1e6)
    # Bytes it must move (attention::bytes(): packed QKV read, output written, fp16).
    ok["bytes"] = 2.0 * ok["batch"] * ok["tokens"] * HEADS * HEAD_DIM * 4
    ok["gbps"] = ok["gbps"].where(np.isfinite(ok["gbps"]), ok["bytes"] / ok["median_us"] / 1e3)
    t = rundata.collapse_rounds(ok, ["version", "batch", "tokens"], tflops=("tflops", "median"),
                                gbps=("gbps", "median"))
    return t, other, kept, dropped


everything = run.rows("attention")
timed, other_shape, flush, flush_dropped = merged(run)
rounds, rounds_caption, rounds_cells = formatting.rounds_wording(timed)
order = catalog.version_order(timed["version"], LADDER)
# The figures over tokens draw the flash-class versions (v7_flash_mma on), cuDNN and the anchors
# replayed from a CUDA graph: v0-v6 take 4-2,500x cuDNN's time and would crush the result into a
# few pixels of a log axis (the ladder and summary tables give their times), the eager anchors add
# host dispatch, and v10_e4m3_qkv (TWIN_OF_V9) is v9's kernel.
FIGURE_FROM = "v7_flash_mma"
# v10_e4m3_qkv's fp16 launch, this family's contract, is v9's kernel under another name (its
# E4M3 input is the FP8 encoder's): timed and tabled, but neither drawn nor named the fastest.
TWIN_OF_V9 = "v10_e4m3_qkv"
_versions = catalog.family_versions("attention")
figure_order = [v for v in order if (catalog.is_anchor(v) and v.endswith("_graph"))
                or (v in _versions and _versions.index(v) >= _versions.index(FIGURE_FROM)
                    and v != TWIN_OF_V9)]
style = plots.styles(order, fastest=plots.fastest_at(
    timed, exclude=(TWIN_OF_V9,), batch=None, tokens=timed["tokens"].min() if len(timed) else None))
flush_said = flush_setting(flush)
flush_text = ctx.said(flush_said)  # also in figure titles
batches = sorted(int(b) for b in set(timed["batch"]))
key_batch = KEY_BATCH if KEY_BATCH in batches else (max(batches) if batches else KEY_BATCH)


def at(version, tokens, batch=None, col="median_us", table=None):
    """One value of the merged table (`table`: another run's), NaN when that version has no
    timing there."""
    batch = key_batch if batch is None else batch
    t = timed if table is None else table
    s = t[(t["version"] == version) & (t["tokens"] == tokens) & (t["batch"] == batch)][col]
    return float(s.iloc[0]) if len(s) else np.nan


timed

# %% [markdown]
# ## Scaling with tokens at the key batch (log-log), against tokens^2

# %%
kb = timed[timed["batch"] == key_batch]
# Around the result: PyTorch's math and memory-efficient backends (2-30x cuDNN's time) would
# stretch the log axis over which the flash versions sit within 20% of each other; the tables
# give them.
SLOW_BACKENDS = ("math", "efficient")
near_order = [v for v in figure_order if not any(b in v for b in SLOW_BACKENDS)]
# Versions within ON_LINE of v9's time at every token count would hide under its line on the log
# axis: left to the tables and named in the caption (the vs-cuDNN figure draws them apart).
V9, ON_LINE = "v9_softmax_overlap", 0.05
v9_us = kb[kb["version"] == V9].set_index("tokens")["median_us"]


def off_v9(version):
    """The largest relative distance of a version's times from v9's, NaN where v9 lacks one."""
    r = kb[kb["version"] == version].set_index("tokens")["median_us"] / v9_us
    return float((r - 1).abs().max()) if len(r) and r.notna().all() else np.nan


distance = {v: off_v9(v) for v in near_order if v != V9 and not catalog.is_anchor(v)}
on_v9_line = {v: x for v, x in distance.items() if x <= ON_LINE}
scaling_order = [v for v in near_order if v not in on_v9_line]
fig, ax = plt.subplots()
for v in scaling_order:
    d = kb[kb["version"] == v].sort_values("tokens")
    if len(d):
        ax.plot(d["tokens"], d["median_us"], label=label(v), **style[v])
if len(kb):
    # A tokens^2 slope through the geometric middle of the data: parallel lines scale as N^2.
    n = np.array(sorted(set(kb["tokens"])), dtype=float)
    shown = kb.loc[kb["version"].isin(scaling_order), "median_us"]
    mid = np.exp(np.log(shown).mean()) if len(shown) and (shown > 0).all() else 1.0
    ref = mid * (n / np.exp(np.log(n).mean())) ** 2
    ax.plot(n, ref, color="#444444", linewidth=0.8, linestyle=":", label="slope tokens^2")
plots.measured_ticks(ax, kb["tokens"])
ax.set_yscale("log")
ax.set_xlabel(f"tokens (batch {key_batch}, {HEADS} heads, head_dim {HEAD_DIM})")
ax.set_ylabel("median time per call (us)")
plots.legend_outside(ax, fontsize=8)
plots.titled(fig, f"Attention: median time per call vs tokens ({flush_text})", tprov)
ctx.figure("attention_scaling", fig,
           claim("scaling_caption", batch=key_batch, heads=HEADS, head_dim=HEAD_DIM, first=FIGURE_FROM, twin=TWIN_OF_V9,
                 on_line=bool(on_v9_line), on_line_names=list(on_v9_line), v9=V9,
                 on_line_max=max(on_v9_line.values(), default=0.0), cudnn=CUDNN, flush=flush_said, prov=prov))

# %% [markdown]
# ## Time per call vs batch, one panel per token count

# %%
token_counts = sorted(int(x) for x in set(timed["tokens"]))
if token_counts and len(batches) > 1:
    fig, axes = plt.subplots(1, len(token_counts), figsize=(plots.panels_width(len(token_counts), 4.0), 4.2),
                             squeeze=False)
    for ax, n in zip(axes[0], token_counts):
        d0 = timed[timed["tokens"] == n]
        for v in figure_order:
            d = d0[d0["version"] == v].sort_values("batch")
            if len(d):
                ax.plot(d["batch"], d["median_us"], **style[v])
        plots.measured_ticks(ax, d0["batch"], base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_title(f"{n} tokens")
    axes[0][0].set_ylabel("median time per call (us)")
    fig.legend(handles=[plt.Line2D([], [], label=label(v), **style[v]) for v in figure_order],
               loc="lower center", ncol=min(len(figure_order), 4), bbox_to_anchor=(0.5, -0.02),
               fontsize=8)
    plots.titled(fig, "Attention: median time per call vs batch", tprov)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    ctx.figure("attention_batch", fig,
               claim("batch_caption", first=FIGURE_FROM, cudnn=CUDNN, flush=flush_said, prov=prov))
else:
    ctx.missing("figure", "attention_batch", claim("few_batches"))

# %% [markdown]
# ## Time as a ratio to cuDNN SDPA at the key batch

# %%
def best_cudnn(tokens, table=None):
    """(time, version) of the best cuDNN result at this token count; (NaN, None) without one."""
    times = [(at(v, tokens, table=table), v) for v in (CUDNN, CUDNN_GRAPH)]
    times = [(m, v) for m, v in times if np.isfinite(m)]
    return min(times) if times else (np.nan, None)


def best_cudnn_row(n):
    """The best cuDNN result at n tokens as a row of its own, with its rounds' range."""
    m, v = best_cudnn(n)
    return {"version": BEST_CUDNN, "tokens": n, "median_us": m,
            "lo_us": at(v, n, col="lo_us") if v else np.nan, "hi_us": at(v, n, col="hi_us") if v else np.nan}


best_rows = pd.DataFrame([best_cudnn_row(n) for n in sorted(set(kb["tokens"]))])
best_rows = best_rows[np.isfinite(best_rows["median_us"])] if len(best_rows) else best_rows
if len(best_rows):
    fig, ax = plt.subplots()
    plots.plot_ratios(ax, pd.concat([kb, best_rows]), near_order,
                      BEST_CUDNN, "tokens", label, style, speedup=False, band=True)
    plots.reference_line(ax, 1.0, f"1x: {BEST_CUDNN}")
    plots.reference_line(ax, FASTEST_TARGET, f"{FASTEST_TARGET:g}x: target of the fastest version "
                                          f"(at most this)", linestyle="--")
    plots.measured_ticks(ax, kb["tokens"])
    # The fastest version at each token count, named under its point (the first and last token
    # counts' names run inward, so no name leaves the axes).
    points = list(zip(best_rows["tokens"], best_rows["median_us"]))
    for i, (n, best) in enumerate(points):
        mine = [(at(v, n) / best, v) for v in near_order if not catalog.is_anchor(v) and np.isfinite(at(v, n))]
        if mine:
            r, v = min(mine)
            ha = "left" if i == 0 and len(points) > 1 else "right" if i == len(points) - 1 and i > 0 else "center"
            ax.annotate(f"fastest: {v.split('_')[0]}, {r:.2f}x", xy=(n, r), xytext=(0, -12),
                        textcoords="offset points", ha=ha, va="top", fontsize=8, fontweight="bold")
    lo = ax.get_ylim()[0]
    ax.set_ylim(lo - 0.05, ax.get_ylim()[1])
    ax.text(0.99, 0.98, "ratio axis does not start at 0", transform=ax.transAxes, ha="right", va="top",
            fontsize=8, color="#555555")
    ax.set_xlabel(f"tokens (batch {key_batch})")
    ax.set_ylabel(f"time / {BEST_CUDNN} (below 1 = faster)")
    plots.legend_outside(ax, fontsize=8)
    plots.titled(fig, f"Attention: time relative to {BEST_CUDNN}", tprov)
    ctx.figure("attention_vs_cudnn", fig,
               claim("vs_cudnn_caption", batch=key_batch, cudnn=CUDNN, graph=label(CUDNN_GRAPH), target=FASTEST_TARGET,
                     first=FIGURE_FROM, twin=TWIN_OF_V9, prov=prov))
else:
    ctx.missing("figure", "attention_vs_cudnn", claim("no_cudnn", cudnn=CUDNN, graph=CUDNN_GRAPH))

# %% [markdown]
# ## The ladder at the key batch: each step's time and its gain over the step above it

# %%
# Every own version in ladder order but TWIN_OF_V9.
ladder_steps = [v for v in order if catalog.is_own(v) and v != TWIN_OF_V9]
fig = plots.ladder_figure(ladder_steps, sorted(int(n) for n in set(kb["tokens"])), lambda v, n, col: at(v, n, col=col),
                          CUDNN, lambda n: f"{n} tokens",
                          f"Attention: the ladder at batch {key_batch} ({flush_text})", tprov)
if fig is not None:
    ctx.figure("attention_ladder_steps", fig,
               claim("ladder_steps_caption", batch=key_batch, rounds=rounds_caption, twin=TWIN_OF_V9, cudnn=CUDNN,
                     scale=plots.LADDER_SCALE, flush=flush_said, prov=prov))
else:
    ctx.missing("figure", "attention_ladder_steps", claim("none_at_batch", batch=key_batch))

# %% [markdown]
# ## The ladder at the target shapes: time, speedup over the previous step, ratio to cuDNN

# %%
key_tokens = [n for n in KEY_TOKENS if n in set(kb["tokens"])] or token_counts
own = [v for v in order if catalog.is_own(v)]  # the ladder's steps, in order
summary = []
for v in order:
    row = {"version": v}
    prev = own[own.index(v) - 1] if v in own and own.index(v) > 0 else None
    for n in key_tokens:
        m = at(v, n)
        row[f"{n}: us"] = m
        if rounds:
            row[f"{n}: range"] = formatting.fmt_spread(at(v, n, col="lo_us"), at(v, n, col="hi_us"))
        row[f"{n}: x prev"] = at(prev, n) / m if prev else np.nan
        row[f"{n}: / best cuDNN"] = m / best_cudnn(n)[0]
    if any(np.isfinite(row[f"{n}: us"]) for n in key_tokens):
        summary.append(row)
summary = pd.DataFrame(summary)
if len(summary):
    formats = {}
    for n in key_tokens:
        formats.update({f"{n}: us": formatting.fmt_us, f"{n}: x prev": formatting.fmt_ratio,
                        f"{n}: / best cuDNN": formatting.fmt_ratio})
    ctx.table("attention_summary", formatting.markdown_table(summary, formats),
              claim("summary_caption", batch=key_batch, heads=HEADS, head_dim=HEAD_DIM, tokens=key_tokens,
                    rounds=rounds_caption, cudnn=CUDNN, graph=label(CUDNN_GRAPH), flush=flush_said, prov=prov))
else:
    ctx.missing("table", "attention_summary", claim("none_at_head_shape"))
summary

# %% [markdown]
# ## Share of the tensor-core ceiling: every version's achieved TFLOP/s over the run's GEMM rate
# (every version moves the same minimum bytes per shape, so a roofline would stack them in one
# column: the share of the measured ceiling says the same without pretending otherwise)

# %%
rl_tokens = [n for n in key_tokens if n in set(kb["tokens"])]
rl = plots.roofline_points(kb[kb["tokens"].isin(rl_tokens)],
                        lambda r: f"{int(r['tokens'])} tokens")
# Eight series a reader can tell apart: three steps of the tiled ladder (v0, v3's tensor cores,
# v6 its last), the flash kernels up to v9 (v8 within 2% of v9, v12 and TWIN_OF_V9 on v9's point
# at this batch), our cuDNN SDPA and PyTorch's flash backend replayed (its cuDNN backend sits on
# our cuDNN SDPA's point; efficient and math are in the tables).
ROOFLINE_SERIES = ("v0_naive", "v3_wmma", "v6_coalesced_k", "v7_flash_mma", "v7_flash", "v9_softmax_overlap",
                   CUDNN, "pytorch_sdpa_flash_graph")
rl_order = [v for v in order if v in ROOFLINE_SERIES]
gemm_ceiling = run.ceilings().gemm_tflops
if len(rl) and gemm_ceiling:
    fig = plots.peak_share_figure(rl, rl_order, style, label, gemm_ceiling, "measured fp16 GEMM ceiling",
                                  f"Attention: share of the tensor-core ceiling at batch {key_batch}", tprov)
    ctx.figure("attention_peak_share", fig,
               claim("peak_share_caption", batch=key_batch, heads=HEADS, head_dim=HEAD_DIM, ceiling=gemm_ceiling,
                     tokens=list(rl_tokens), versions=[label(v) for v in rl_order], twin=TWIN_OF_V9, flush=flush_said,
                     prov=prov))
else:
    ctx.missing("figure", "attention_peak_share", claim("no_gemm_ceiling" if len(rl) else "no_tflops"))

# %% [markdown]
# ## What each step taught: the `## Lesson` of every version's NOTES.md

# %%
def lesson(version):
    """First paragraph under '## Lesson' in stages/attention/<version>/NOTES.md, or None."""
    notes = paths.REPO / "stages" / "attention" / version / "NOTES.md"
    if not notes.is_file():
        return None
    text = notes.read_text()
    if "## Lesson" not in text:
        return None
    body = text.split("## Lesson", 1)[1].split("\n## ", 1)[0].strip()
    return " ".join(body.split("\n\n", 1)[0].split())


lessons = pd.DataFrame([{"version": v, "what it taught": lesson(v)}
                        for v in order if not catalog.is_anchor(v)])
lessons = lessons[lessons["what it taught"].notna()]
if len(lessons):
    ctx.table("attention_lessons", formatting.markdown_table(lessons), claim("lessons_caption"))
else:
    ctx.missing("table", "attention_lessons", claim("no_lessons"))
lessons

# %% [markdown]
# ## Every timed configuration (median us)

# %%
ctx.table("attention_sweep", formatting.sweep_table(timed, ["tokens", "batch"], "version", order, formatting.fmt_us,
                                            {"tokens": formatting.fmt_int, "batch": formatting.fmt_int}),
    claim("sweep_caption", cells=rounds_cells, prov=prov))

# %% [markdown]
# ## Nsight Compute metrics (experiments/probes/ncu_family.sh attention), when the run folder has them

# %%
NCU_COLUMNS = {  # ncu metric -> table column
    "launch__grid_size": "grid", "launch__block_size": "block",
    "launch__registers_per_thread": "registers",
    "launch__shared_mem_per_block_dynamic": "dyn smem (B)",
    "launch__shared_mem_per_block_static": "static smem (B)",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM %",
    "gpu__time_duration.sum": "time (ns)"}


def ncu_profile():
    """This run's ncu/attention.csv, else the newest run folder's beside it on the same GPU (a
    profile reads the kernels, which are frozen, not the sitting's times); None when none has one."""
    own = run.path / "ncu" / "attention.csv"
    if own.is_file():
        return own
    gpu = rundata.gpu_of(run)
    others = sorted(run.path.parent.glob("*/ncu/attention.csv"), key=lambda p: p.parent.parent.name)
    return next((p for p in reversed(others) if rundata.gpu_of(rundata.load_run(p.parent.parent)) == gpu), None)


ncu_path = ncu_profile()
if ncu_path is not None:
    raw = pd.read_csv(ncu_path, dtype=str)
    missing = [c for c in ["version", "Kernel Name", *NCU_COLUMNS] if c not in raw.columns]
    if missing:
        raise studylib.DataError(f"{rundata.show_path(ncu_path)}: missing column(s) {', '.join(missing)}")
    ncu = raw[["version", "Kernel Name", *NCU_COLUMNS]].rename(columns=NCU_COLUMNS)
    # "void attention::<unnamed>::kernel<4, 2, 1>(const __half *, ...)" -> "kernel<4, 2, 1>"
    ncu["Kernel Name"] = (ncu["Kernel Name"].str.replace(r"\(.*$", "", regex=True)
                          .str.replace(r"^.*::", "", regex=True).str.slice(0, 60))
    same_run = ncu_path.parent.parent == run.path
    ctx.table("attention_ncu", formatting.markdown_table(ncu),
              claim("ncu_caption" if same_run else "ncu_caption_other_run", path=rundata.show_path(ncu_path), prov=prov,
                    their_prov=None if same_run else rundata.load_run(ncu_path.parent.parent).provenance()))
else:
    ctx.missing("table", "attention_ncu", claim("no_ncu"))

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
st = formatting.status_table(everything.assign(
    _o=everything["version"].map({v: i for i, v in enumerate(order)}).fillna(len(order)))
    .sort_values(["_o", "version"], kind="stable"))
left_out = ([claim("other_shape", count=other_shape)] if other_shape else []) + (
    [claim("other_flush", count=flush_dropped)] if flush_dropped else [])
ctx.table("attention_status", formatting.markdown_table(st),
          claim("status_caption", family="Attention", left_out=left_out, prov=prov))
st

# %% [markdown]
# ## Findings, as sentences generated from the numbers above

# %%
findings = [s for s in [formatting.rounds_sentence(timed)] if s]
# The targets and the headline are judged on the family's targets sitting where one was measured
# after this run (its own clean sitting of the target shapes), else on this run.
judged = merged(ctx.take_targets_run())[0] if ctx.targets_run is not None else timed
judged_kb = judged[judged["batch"] == key_batch]
findings += [s for s in [ctx.judged_apart("The targets and the headline (the sentences up to the "
                                           "target's verdict)")] if s]


def fastest_own(n):
    d = judged_kb[(judged_kb["tokens"] == n) & judged_kb["version"].map(catalog.is_own)
                  & (judged_kb["version"] != TWIN_OF_V9)]
    return d.loc[d["median_us"].idxmin()] if len(d) else None


parts = []
for n in key_tokens:
    c, c_source = best_cudnn(n, judged)
    b = fastest_own(n)
    if b is None:
        continue
    if np.isfinite(c):
        ratio = b["median_us"] / c
        band = notebook.ratio_band(b["lo_us"], b["hi_us"], at(c_source, n, col="lo_us", table=judged),
                                   at(c_source, n, col="hi_us", table=judged))
        parts.append(claim("cudnn_target_part", tokens=n, ratio=ratio, version=b["version"], band=band,
                           verdict=notebook.verdict(ratio, FASTEST_TARGET, band, at_most=True)))
        findings.append(claim("fastest_vs_cudnn", tokens=n, batch=key_batch, version=b["version"], us=b["median_us"],
                              tflops=b["tflops"], ratio=ratio, cudnn_us=c, source=label(c_source)))
        v6 = at(V6, n, table=judged)
        if np.isfinite(v6) and b["version"] != V6:
            findings.append(claim("v6_vs_cudnn", tokens=n, v6=V6, us=v6, ratio=v6 / c))
    else:
        findings.append(claim("fastest_no_cudnn", tokens=n, version=b["version"], us=b["median_us"], cudnn=CUDNN,
                              graph=label(CUDNN_GRAPH)))
    for anchor in (CUDNN, CUDNN_GRAPH, "pytorch_sdpa_flash_graph"):
        a = at(anchor, n, table=judged)
        if np.isfinite(a):
            findings.append(claim("vs_anchor", tokens=n, version=b["version"], ratio=a / b["median_us"],
                                  anchor=label(anchor), anchor_us=a))
if parts and key_batch == KEY_BATCH and key_tokens == list(KEY_TOKENS):
    target = claim("cudnn_target", target=FASTEST_TARGET, cudnn=CUDNN, graph=label(CUDNN_GRAPH), batch=KEY_BATCH,
                   sizes=list(KEY_TOKENS), parts=parts, verdict=notebook.combined_verdict([p.verdict for p in parts]))
    findings.append(target)
    ctx.judge(target)

# Growth from the smallest to the largest token count against tokens^2.
if len(key_tokens) >= 2:
    lo, hi = min(key_tokens), max(key_tokens)
    for v in [v for v in order if catalog.is_own(v) or catalog.is_library(v)]:
        a, b = at(v, lo), at(v, hi)
        if np.isfinite(a) and np.isfinite(b):
            findings.append(claim("growth", version=v, growth=b / a, lo=lo, hi=hi, square=(hi / lo) ** 2))

findings.append(formatting.status_finding(everything))

findings_text = ctx.claims("attention_findings", findings)

# README's headline line: the fastest version of all at batch 32, 197 tokens (ViT-B, 224 px).
head_tokens = KEY_TOKENS[0] if KEY_TOKENS[0] in key_tokens else (key_tokens[0] if key_tokens else None)
jk = judged_kb
top = jk[(jk["tokens"] == head_tokens) & ~jk["version"].map(catalog.is_anchor)
         & (jk["version"] != TWIN_OF_V9)] if head_tokens else jk.iloc[:0]
if len(top):
    top = top.loc[top["median_us"].idxmin()]
    anchors = [a for a in ("pytorch_sdpa_cudnn_graph", "pytorch_sdpa_flash_graph")
               if np.isfinite(at(a, head_tokens, table=judged))]
    ctx.headline(family="Attention", shape=f"batch {key_batch}, {head_tokens} tokens, {HEADS} "
                                            f"heads x {HEAD_DIM}",
                 fastest=top["version"], fastest_us=float(top["median_us"]),
                 library=CUDNN if CUDNN in set(jk["version"]) else None,
                 library_us=at(CUDNN, head_tokens, table=judged),
                 anchors=[(label(a), at(a, head_tokens, table=judged)) for a in anchors],
                 run_ids=rundata.run_ids_of(jk[(jk["tokens"] == head_tokens)
                                               & jk["version"].isin([top["version"], CUDNN, *anchors])]))
print(findings_text.read_text())
