# %% [markdown]
# # MLP: time, GEMM throughput, epilogue cost and speedup per version
#
# The ViT MLP, y = x + fc2(GELU(fc1(x))) with mlp_hidden = 4 x hidden, is two GEMMs
# (4 x rows x hidden x mlp_hidden flops) plus bias, GELU and the residual. The GEMMs set the
# floor, so the figures of merit are TFLOP/s against the fp16 GEMM ceiling measured in the same
# run and the time as a ratio to `gemm_only` (the same two GEMMs with no epilogue): what bias,
# GELU and the residual cost on top of them. Runs on its own (`MPLBACKEND=Agg /usr/bin/python3
# analysis/mlp.py [--run DIR] [--out DIR]`) or from `report/build.py`, which hands it
# `STUDY_CONTEXT`.

# %%
import re

import matplotlib
import matplotlib.ticker

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from types import SimpleNamespace

from analysis import plots
from studylib import catalog, formatting, rundata

ctx, run, prov, tprov = plots.open_notebook("mlp", globals())

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


def is_fp8(v):
    """An E4M3 version (fp8_*): its GEMMs multiply in another precision against another ceiling."""
    return str(v).startswith("fp8_")
LABEL = {GRAPH: "PyTorch MLP (CUDA graph)", EAGER: "PyTorch MLP (eager)",
         GEMM: "gemm_only (the two plain GEMMs)"}
DEFAULT_SETTING = ("cached", 4)   # bench defaults: heuristic once per shape, 4 MiB workspace


def label(v):
    return LABEL.get(v, v)


def join_and(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# %% [markdown]
# ## Data: timed rows, cuBLASLt-setting rows apart, one L2 setting, duplicates merged
#
# Rows of mlp_cublaslt.toml carry their extra bench arguments at the end of the note
# (`[extra: --workspace-mib 0]`); every bench row also names its workspace and heuristic in the
# note. Rows with extra arguments are a separate experiment (shown only in the cuBLASLt table);
# the rest is the sweep, where one L2 flush setting is kept.
#
# The section's run may be a sitting at the target rows only (every version, interleaved
# rounds). Its figures over batch and image size, the widths and the cuBLASLt and ping-pong
# experiments then come from the newest run on the same GPU with a sweep (rundata.sweep_run), named
# in their captions; every ratio stays within one run.

# %%
def timed(r):
    """The MLP rows of run r, prepared as described above."""
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
        flush_text={0.0: "L2 not flushed between repeats", 1.0: "L2 flushed between repeats"}.get(
            flush, "L2 flush setting not recorded"))


LT_FLAGS = r"^(?:(?:--workspace-mib[ =]\d+|--heuristic-every-call)\s*)+$"
KEYS = ["version", "hidden", "image_size", "batch", "rows"]
here = timed(run)
everything, ok, main, is_lt, other_extra = here.everything, here.ok, here.main, here.is_lt, here.other_extra
flush, flush_dropped, flush_text, t = here.flush, here.flush_dropped, here.flush_text, here.t
rounds, rounds_caption, rounds_cells = formatting.rounds_wording(t)
vb = here.vb


def drawing(table):
    """Ladder order of a merged table's versions and a unique style per version, the fastest (at
    hidden HIDDEN) drawn heavier and gemm_only, a timing reference and not an MLP, grey and dotted
    so that it reads as a floor."""
    versions = catalog.version_order(table["version"], LADDER)
    styles = plots.styles(versions, fastest=plots.fastest_at(table[table["hidden"] == HIDDEN], exclude=(GEMM,), rows=None))
    if GEMM in styles:
        styles[GEMM] = dict(color="#7f7f7f", marker=".", linestyle=":")
    return versions, styles


order, style = drawing(t)
ceil = run.ceilings()
gemm_ceiling = ceil.gemm_tflops

# The sweep over batch, image size and width (see above): this run's own, or the newest one
# beside it when this run timed the target rows only.
sweep = rundata.sweep_run(run, "mlp")
S = here if sweep is run else timed(sweep)
order_s, style_s = drawing(S.t)
sweep_ceiling = sweep.ceilings().gemm_tflops
sweep_prov = ("" if sweep is run else
              f"From the sweep of run folder {sweep.name} ({run.name} times only the target rows). ") \
    + sweep.provenance("mlp")
sweep_tprov = sweep.title_provenance("mlp")
sweep_rounds_cells = formatting.rounds_wording(S.t)[2]


def at(version, rows, col="median_us", hidden=HIDDEN, image=None, batch=None, table=None):
    """One value of the merged rows (this run's, or `table`), NaN when that version has no
    timing there."""
    table = t if table is None else table
    d = table[(table["version"] == version) & (table["hidden"] == hidden)]
    if rows is not None:
        d = d[d["rows"] == rows]
    if image is not None:
        d = d[d["image_size"] == image]
    if batch is not None:
        d = d[d["batch"] == batch]
    return float(d[col].iloc[0]) if len(d) else np.nan


def where(rows):
    d = vb[vb["rows"] == rows]
    if not len(d):
        return f"{rows} rows"
    return f"batch {int(d['batch'].iloc[0])}, {int(d['image_size'].iloc[0])} px"


t

# %% [markdown]
# ## Time per call vs batch, ViT-B at 224 and 384 px (log-log)

# %%
images = sorted(int(i) for i in set(S.vb["image_size"]))
if images:
    fig, axes = plt.subplots(1, len(images), figsize=(plots.panels_width(len(images), 4.4), 4.3), squeeze=False)
    for ax, image in zip(axes[0], images):
        d0 = S.vb[S.vb["image_size"] == image]
        for v in order_s:
            d = d0[d0["version"] == v].sort_values("batch")
            if len(d):
                ax.plot(d["batch"], d["median_us"], **style_s[v])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted(int(b) for b in set(d0["batch"]))
        ax.set_xticks(ticks, [str(b) for b in ticks])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        tokens = d0["rows"].iloc[0] / d0["batch"].iloc[0]
        ax.set_xlabel(f"batch ({tokens:.0f} tokens per image)")
        ax.set_title(f"{image} x {image} px, hidden {HIDDEN}")
    axes[0][0].set_ylabel("median time per call (us)")
    fig.legend(handles=[plt.Line2D([], [], label=label(v), **style_s[v]) for v in order_s],
               loc="lower center", ncol=min(len(order_s), 4), bbox_to_anchor=(0.5, -0.02))
    plots.titled(fig, f"MLP: median time per call vs batch ({S.flush_text})", sweep_tprov)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    ctx.figure("mlp_time", fig,
               f"MLP (hidden {HIDDEN}, mlp {4 * HIDDEN}) median time per call vs batch, one "
               f"panel per image size, log-log; PyTorch anchors dashed, gemm_only (the two GEMMs "
               f"without epilogue) dotted; {S.flush_text}. {sweep_prov}.")
else:
    ctx.missing("figure", "mlp_time", f"no timed MLP rows at hidden {HIDDEN}")

# %% [markdown]
# ## GEMM throughput vs rows, against the measured GEMM ceiling

# %%
if len(S.vb):
    fig, ax = plt.subplots()
    for v in order_s:
        d = S.vb[S.vb["version"] == v].sort_values("rows")
        if len(d):
            ax.plot(d["rows"], d["tflops"], label=label(v), **style_s[v])
    if sweep_ceiling:
        ax.axhline(sweep_ceiling, color="#444444", linewidth=1.0)
        ax.text(S.vb["rows"].min(), sweep_ceiling,
                f" measured fp16 GEMM ceiling {sweep_ceiling:,.0f} TFLOP/s", va="bottom",
                fontsize=8)
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"rows (batch x tokens, 224 and 384 px), hidden {HIDDEN}")
    ax.set_ylabel("TFLOP/s (4 x rows x hidden x 4 hidden / median time)")
    ax.legend(ncol=2, loc="lower right")  # curves rise from the lower left: keep it clear
    plots.titled(fig, "MLP: throughput of the two GEMMs' flops vs rows", sweep_tprov)
    ceiling_text = (f"line at the fp16 GEMM ceiling measured in the same run "
                    f"({sweep_ceiling:,.0f} TFLOP/s, 8192^3)" if sweep_ceiling else
                    "this run has no GEMM ceiling row, so no ceiling line")
    ctx.figure("mlp_tflops", fig,
               f"MLP throughput (the two GEMMs' flops over the whole call's median time) vs "
               f"rows at hidden {HIDDEN}; {ceiling_text}; {S.flush_text}. {sweep_prov}.")
else:
    ctx.missing("figure", "mlp_tflops", f"no timed MLP rows at hidden {HIDDEN}")

# %% [markdown]
# ## Speedup vs unfused and vs PyTorch's MLP replayed as a CUDA graph

# %%
baselines = [b for b in (UNFUSED, GRAPH) if b in set(S.vb["version"])]
if baselines:
    fig = plots.speedup_panels(S.vb, order_s, baselines, label, style_s,
                            f"rows (batch x tokens), hidden {HIDDEN}")
    plots.titled(fig, "MLP: speedup per rows (above 1 = faster than the baseline)", sweep_tprov)
    ctx.figure("mlp_speedup", fig,
               f"MLP speedup per rows at hidden {HIDDEN} against "
               f"{' and '.join(label(b) for b in baselines)} (baseline median time / version "
               f"median time, same run; gemm_only is the two plain GEMMs, not an MLP). {sweep_prov}.")
else:
    ctx.missing("figure", "mlp_speedup",
                f"no rows of {UNFUSED} or {GRAPH} at hidden {HIDDEN} to compare against")

# %% [markdown]
# ## Summary table at the target sizes

# %%
key_rows = [r for r in KEY_ROWS if r in set(vb["rows"])]
if not key_rows and len(vb):  # a sweep without batch 32/256 at 224: smallest and largest
    key_rows = sorted({int(vb["rows"].min()), int(vb["rows"].max())})


def summary_rows(rows_list, hidden=HIDDEN, ceiling=None, versions=None, **where_):
    ceiling = gemm_ceiling if ceiling is None else ceiling
    versions = order if versions is None else versions
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
                            at(v, r, "hi_us", hidden=hidden, **where_))} if rounds else {}),
                        "TFLOP/s": tf,
                        "% of GEMM ceiling": 100 * tf / ceiling if ceiling else np.nan,
                        "launches": at(v, r, "launches", hidden=hidden, **where_),
                        "time / gemm_only": m / at(GEMM, r, hidden=hidden, **where_),
                        "time / PyTorch graph": m / at(GRAPH, r, hidden=hidden, **where_),
                        "time / PyTorch eager": m / at(EAGER, r, hidden=hidden, **where_)})
    return pd.DataFrame(out)


SUMMARY_FORMATS = {"rows": formatting.fmt_int, "hidden": formatting.fmt_int, "median us": formatting.fmt_us,
                   "TFLOP/s": formatting.fmt_gbps, "% of GEMM ceiling": formatting.fmt_pct,
                   "launches": formatting.fmt_int, "time / gemm_only": formatting.fmt_ratio,
                   "time / PyTorch graph": formatting.fmt_ratio, "time / PyTorch eager": formatting.fmt_ratio}
ceiling_note = (f"the fp16 GEMM ceiling measured in the same run ({gemm_ceiling:,.0f} TFLOP/s)"
                if gemm_ceiling else "the GEMM ceiling (not measured in this run)")
sweep_ceiling_note = (f"the fp16 GEMM ceiling measured in the same run ({sweep_ceiling:,.0f} TFLOP/s)"
                      if sweep_ceiling else "the GEMM ceiling (not measured in that run)")
summary = summary_rows(key_rows).dropna(axis=1, how="all")
if len(summary):
    ctx.table("mlp_summary", formatting.markdown_table(summary, SUMMARY_FORMATS),
              f"MLP at {' and '.join(f'{r} x {HIDDEN}' for r in key_rows)}: median time per "
              f"call{rounds_caption}, TFLOP/s of the two GEMMs' flops, share of {ceiling_note}, kernels per call "
              f"(counted by capturing one call into a CUDA graph; PyTorch: by its profiler), and "
              f"time as a ratio to gemm_only (the two plain GEMMs) and to PyTorch's "
              f"F.linear -> gelu -> F.linear as a CUDA-graph replay and eagerly (below 1 = "
              f"faster); {flush_text}. {prov}.")
else:
    ctx.missing("table", "mlp_summary", f"no timed MLP rows at hidden {HIDDEN}")
summary

# %% [markdown]
# ## The ladder at the target sizes: time, speedup over the previous step, ratio to gemm_only
#
# The MLP has no library version of its own; its reference is gemm_only, cuBLASLt's two GEMMs
# without bias, GELU or residual: what any MLP built on the library's GEMMs cannot beat.

# %%
steps = [v for v in order if catalog.is_own(v) and v != GEMM]
ladder, ladder_formats = formatting.ladder_table(
    order, steps, key_rows, lambda v, r, col: at(v, r, col), GEMM if GEMM in order else None,
    size_label=lambda r: f"{r} rows", spread=rounds)
if len(ladder):
    ctx.table("mlp_ladder", formatting.markdown_table(ladder, ladder_formats),
              f"The MLP ladder at {' and '.join(f'{r} x {HIDDEN}' for r in key_rows)}: median "
              f"time per call (us){rounds_caption}, speedup over the previous step of the "
              f"ladder ({' -> '.join(steps)}; x prev: its time / this time), and time as a "
              f"ratio to {GEMM}, the two plain cuBLASLt GEMMs (no bias, GELU or residual) "
              f"(the MLP has no library version; below 1 = faster); '-' = not timed. "
              f"{flush_text}. {prov}.")
else:
    ctx.missing("table", "mlp_ladder", f"no timed MLP rows at hidden {HIDDEN}")

# %% [markdown]
# ## Roofline: every version at its arithmetic intensity against the run's measured ceilings

# %%
rl = plots.roofline_points(vb[vb["rows"].isin(key_rows)], lambda r: f"{int(r['rows'])} rows")
rl_gap = plots.roofline_gap(rl, ceil)
if rl_gap is None:
    fig, caption = plots.roofline_figure(rl, order, style, label, ceil,
                                      f"MLP: roofline at hidden {HIDDEN}", tprov,
                                      headline=f"{max(key_rows)} rows")
    ctx.figure("mlp_roofline", fig,
               f"MLP roofline at {' and '.join(map(str, key_rows))} rows x {HIDDEN} (filled: "
               f"{max(key_rows)}): every version at its arithmetic intensity (the two GEMMs' "
               f"flops over the bytes the MLP must move: x, both weight matrices and y) and its "
               f"achieved TFLOP/s, under {caption}. {flush_text}. {prov}.")
else:
    ctx.missing("figure", "mlp_roofline", rl_gap)

# %% [markdown]
# ## The ViT widths at batch 32, 224 px (hidden 384, 768, 1024)

# %%
wide = S.t[(S.t["image_size"] == 224) & (S.t["batch"] == KEY_BATCH)]
widths = sorted(int(h) for h in set(wide["hidden"]))
if len(widths) >= 2:
    parts = []
    for h in widths:
        r = int(wide.loc[wide["hidden"] == h, "rows"].iloc[0])
        d = summary_rows([r], hidden=h, image=224, batch=KEY_BATCH, table=S.t, ceiling=sweep_ceiling,
                         versions=order_s)
        model = wide.loc[wide["hidden"] == h, "model"].iloc[0]
        d.insert(0, "hidden", h)
        d.insert(0, "model", model if isinstance(model, str) and model else "-")
        parts.append(d.drop(columns=["rows"]))
    by_width = pd.concat(parts, ignore_index=True).dropna(axis=1, how="all")
    ctx.table("mlp_widths", formatting.markdown_table(by_width, SUMMARY_FORMATS),
              f"MLP at batch {KEY_BATCH}, 224 px ({int(wide['rows'].iloc[0])} rows) for each "
              f"timed width (mlp = 4 x hidden): median time, TFLOP/s, share of {sweep_ceiling_note}, "
              f"kernels per call, and time as a ratio to gemm_only and to PyTorch; "
              f"{S.flush_text}. {sweep_prov}.")
else:
    ctx.missing("table", "mlp_widths",
                (f"this run times only hidden {widths[0]}" if widths else "this run has no "
                 "timed rows") + f" at batch {KEY_BATCH}, 224 px "
                "(experiments/specs/mlp_models.toml adds hidden 384 and 1024)")

# %% [markdown]
# ## Which cuBLASLt algorithm: the heuristic's first, the best of its top 16, the best of all
#
# experiments/specs/mlp_autotune.toml times fused_epilogue and gemm_only with the GEMM
# algorithm chosen three ways. It is a side experiment of the run, kept in the run's
# mlp_autotune/ sub-folder so that its rows do not merge into the sweep above.

# %%
ALGO_CHOICE = {"": "heuristic's first", "--autotune 16": "fastest of the heuristic's top 16",
               "--search-all": "fastest of every algorithm"}


def side_experiment(name, elsewhere=False, base=None):
    """Timed rows of a side experiment kept in the `name`/ sub-folder (`name`.csv) of the run
    (or of `base`), with `extra` and `rows` parsed from the note; None when there is none.
    elsewhere: when it has none, the run folder beside the run (same results root), on its GPU,
    whose rows of it are the newest (an MLP experiment measured beside a later run of another
    family); d.attrs["folder"] says where the rows came from."""
    path = (base or run).path / name / f"{name}.csv"
    if not path.is_file() and elsewhere:
        gpu = rundata.gpu_of(run)
        # The newest by its rows' time: folders of one day do not sort by name.
        found = sorted((pd.to_datetime(d["utc"]).max(), p) for p in run.path.parent.glob(f"*/{name}/{name}.csv")
                       for d in [rundata.read_csv(p)] if gpu in set(d["gpu"].astype(str)))
        path = found[-1][1] if found else path
    if not path.is_file():
        return None
    d = rundata.read_csv(path)
    d.attrs["folder"] = path.parent
    d = d[d["status"] == "ok"].copy()
    n = d["note"].astype(str)
    d["extra"] = n.str.extract(r"\[extra: (.*)\]\s*$")[0].fillna("").str.strip()
    d["rows"] = rundata.rows_of(d)
    return d


algos = None
a = side_experiment("mlp_autotune", base=sweep)
if a is not None:
    a = a[a["version"].isin([FUSED, GEMM])].copy()
    a_note = a["note"].astype(str)
    # Candidates timed per GEMM plan ("fastest of N timed"); the larger of the two plans.
    a["timed"] = a_note.apply(lambda n: max((int(x) for x in re.findall(r"fastest of (\d+) timed", n)),
                                            default=1))
    a = a[a["extra"].isin(list(ALGO_CHOICE))]
if a is not None and len(a):
    w = a.pivot_table(index=["rows", "extra"], columns="version", values="median_us", aggfunc="median")
    n = a.pivot_table(index=["rows", "extra"], values="timed", aggfunc="max")
    algos = w.join(n).reset_index()
    algos["choice"] = algos["extra"].map(ALGO_CHOICE)
    algos["_o"] = algos["extra"].map({e: i for i, e in enumerate(ALGO_CHOICE)})
    algos = algos.sort_values(["rows", "_o"])
    algos["fused / gemm_only"] = algos.get(FUSED) / algos.get(GEMM)
    show = algos.rename(columns={"timed": "candidates timed", FUSED: f"{FUSED} us",
                                 GEMM: f"{GEMM} us"})
    show = show[["rows", "choice", "candidates timed", f"{FUSED} us", f"{GEMM} us",
                 "fused / gemm_only"]]
    ctx.table("mlp_algorithms", formatting.markdown_table(show, {
        "rows": formatting.fmt_int, "candidates timed": formatting.fmt_int, f"{FUSED} us": formatting.fmt_us,
        f"{GEMM} us": formatting.fmt_us, "fused / gemm_only": formatting.fmt_ratio}),
        f"cuBLASLt algorithm choice at hidden {HIDDEN} (experiments/specs/mlp_autotune.toml, "
        f"in {rundata.show_path(a.attrs['folder'])}): each version with the heuristic's first "
        f"algorithm, the fastest of its top 16, and the fastest of every algorithm cuBLASLt "
        f"will run (every algorithm id, its heuristic configurations and its tile x stages "
        f"grid; the candidates timed are those of the larger GEMM plan), each chosen per GEMM "
        f"and version; the row notes name the kernels kept. "
        f"{rundata.Run(sweep.path, a).provenance()}.")
else:
    ctx.missing("table", "mlp_algorithms",
                "this run has no mlp_autotune/mlp_autotune.csv "
                "(experiments/specs/mlp_autotune.toml writes it)")

# %% [markdown]
# ## Our own ping-pong GEMM against cuBLASLt's epilogues
#
# experiments/specs/mlp_pingpong.toml, a side experiment kept in the run's mlp_pingpong/
# sub-folder: pingpong_epilogue and pingpong_gemm_only (our warp-specialized ping-pong kernel,
# with and without its fused epilogues) beside fused_epilogue, gemm_only and PyTorch's graph.

# %%
PING, PING_GEMM = "pingpong_epilogue", "pingpong_gemm_only"
pp = side_experiment("mlp_pingpong", base=sweep)
if pp is not None and len(pp):
    w = pp.pivot_table(index="rows", columns="version", values="median_us", aggfunc="median")
    w = w.reset_index()
    cols = {"rows": "rows"}
    for v in (PING, PING_GEMM, FUSED, GEMM, GRAPH):
        if v in w:
            cols[v] = f"{v} us"
    show = w[list(cols)].rename(columns=cols)
    if PING in w and PING_GEMM in w:
        show["own epilogue cost"] = w[PING] / w[PING_GEMM]
    if FUSED in w and GEMM in w:
        show["cuBLASLt epilogue cost"] = w[FUSED] / w[GEMM]
    if PING_GEMM in w and GEMM in w:
        show["own GEMM / cuBLASLt"] = w[PING_GEMM] / w[GEMM]
    fmts = {c: formatting.fmt_us for c in show.columns if c.endswith(" us")}
    fmts.update({"rows": formatting.fmt_int, "own epilogue cost": formatting.fmt_ratio,
                 "cuBLASLt epilogue cost": formatting.fmt_ratio, "own GEMM / cuBLASLt": formatting.fmt_ratio})
    ctx.table("mlp_pingpong", formatting.markdown_table(show, fmts),
              f"Our own ping-pong GEMM (stages/mlp/pingpong_gemm.cu) at hidden {HIDDEN}, 224 px "
              f"(experiments/specs/mlp_pingpong.toml, in {rundata.show_path(pp.attrs['folder'])}): median "
              f"time per call; epilogue cost = each kernel's MLP over its own two plain GEMMs "
              f"({PING} / {PING_GEMM}, {FUSED} / {GEMM}); own GEMM / cuBLASLt = {PING_GEMM} / "
              f"{GEMM}. {rundata.Run(sweep.path, pp).provenance()}.")
else:
    ctx.missing("table", "mlp_pingpong",
                "this run has no mlp_pingpong/mlp_pingpong.csv "
                "(experiments/specs/mlp_pingpong.toml writes it)")

# %% [markdown]
# ## The CUTLASS GEMM layer's MLPs against cuBLASLt's epilogues and the plain GEMMs
#
# experiments/specs/mlp_cutlass.toml, a side experiment (3 interleaved rounds): cutlass_epilogue
# (tanh GELU) and cutlass_epilogue_erf on the CUTLASS layer (common/gemm/cutlass_gemm.hpp),
# fastest_epilogue (each GEMM on the faster of CUTLASS and cuBLASLt), fused_epilogue, gemm_only
# and PyTorch's MLP in a CUDA graph. Kept in this run's mlp_cutlass/ folder, or else beside the
# newest run on this GPU that measured it.

# %%
CUTLASS_VERSIONS = ["cutlass_epilogue", "cutlass_epilogue_erf", "fastest_epilogue", "split_epilogue",
                    "half_gelu_epilogue", FUSED]
cu = side_experiment("mlp_cutlass", elsewhere=True)
if cu is not None and len(cu):
    med = cu.groupby(["rows", "version"])["median_us"].agg(["median", "min", "max"])
    clock = cu.groupby(["rows", "version"])["sm_clock_mhz"].median()
    rows_ = []
    for r in sorted(set(cu["rows"])):
        g = med.loc[(r, GEMM), "median"] if (r, GEMM) in med.index else np.nan
        for v in [x for x in CUTLASS_VERSIONS + [GEMM, GRAPH] if (r, x) in med.index]:
            m = med.loc[(r, v)]
            rows_.append({"rows": r, "version": v, "us": m["median"],
                          "rounds range us": f"{formatting.fmt_us(m['min'])}-{formatting.fmt_us(m['max'])}",
                          f"x {GEMM}": m["median"] / g, "SM MHz": clock.loc[(r, v)]})
    show = pd.DataFrame(rows_)
    where_cu = rundata.show_path(cu.attrs["folder"])
    ctx.table("mlp_cutlass", formatting.markdown_table(show, {
        "rows": formatting.fmt_int, "us": formatting.fmt_us, f"x {GEMM}": formatting.fmt_ratio,
        "SM MHz": lambda x: "-" if not np.isfinite(x) else f"{x:,.0f}"}),
        f"The MLP on the CUTLASS GEMM layer at hidden {HIDDEN} (experiments/specs/mlp_cutlass.toml, "
        f"in {where_cu}): median time per call across 3 interleaved rounds and the rounds' range, "
        f"the time over {GEMM}'s (the two plain cuBLASLt GEMMs, the target's yardstick: at most "
        f"{TARGET_GEMM_RATIO:.2f}x), and the SM clock of the rows. "
        f"{rundata.Run(cu.attrs['folder'], cu).provenance()}.")
else:
    ctx.missing("table", "mlp_cutlass", "no run folder on this GPU has mlp_cutlass/mlp_cutlass.csv "
                "(experiments/specs/mlp_cutlass.toml writes it)")

# %% [markdown]
# ## FP8 (E4M3) MLPs against the fp16 ones and the two plain fp16 GEMMs
#
# experiments/specs/mlp_fp8.toml, a side experiment (3 interleaved rounds, L2 flushed): fp8_tensor
# (both GEMMs in E4M3 on cuBLASLt, per-tensor weight scales, static activation scales) and
# fp8_channel (per-channel weight scales; its skipped rows, until it left the build for
# stages/mlp/TRIED.md) beside gemm_only,
# fused_epilogue and half_gelu_epilogue. Kept in this run's mlp_fp8/ folder, or else beside the
# newest run on this GPU that measured it.

# %%
FP8_VERSIONS = ["fp8_tensor", "fp8_channel", "half_gelu_epilogue", FUSED]
f8 = side_experiment("mlp_fp8", elsewhere=True)
if f8 is not None and len(f8):
    ceiling = {"fp8_e4m3": rundata.fp8_ceiling_tflops(run), "fp16": run.ceilings().gemm_tflops}
    med = f8.groupby(["rows", "version"])["median_us"].agg(["median", "min", "max"])
    tfl = f8.groupby(["rows", "version"])["tflops"].median()
    rows_ = []
    for r in sorted(set(f8["rows"])):
        g = med.loc[(r, GEMM), "median"] if (r, GEMM) in med.index else np.nan
        for v in [x for x in FP8_VERSIONS + [GEMM] if (r, x) in med.index]:
            m = med.loc[(r, v)]
            precision = "fp8_e4m3" if is_fp8(v) else "fp16"
            rows_.append({"rows": r, "version": v, "precision": precision, "us": m["median"],
                          "rounds range us": f"{formatting.fmt_us(m['min'])}-{formatting.fmt_us(m['max'])}",
                          f"x {GEMM}": m["median"] / g, "TFLOP/s": tfl.loc[(r, v)],
                          "% of its ceiling": 100 * tfl.loc[(r, v)] / ceiling[precision]
                          if ceiling[precision] else np.nan})
    show = pd.DataFrame(rows_)
    skipped = rundata.read_csv(f8.attrs["folder"] / "mlp_fp8.csv")
    skipped = skipped[skipped["status"] == "skipped"]
    why = (f" {', '.join(sorted(set(skipped['version'])))} skipped: "
           f"{skipped['note'].iloc[0].split(' [')[0]}." if len(skipped) else "")
    ctx.table("mlp_fp8", formatting.markdown_table(show, {
        "rows": formatting.fmt_int, "us": formatting.fmt_us, f"x {GEMM}": formatting.fmt_ratio, "TFLOP/s": lambda x: f"{x:,.0f}",
        "% of its ceiling": lambda x: "-" if not np.isfinite(x) else f"{x:.0f}%"}),
        f"FP8 (E4M3) MLPs at hidden {HIDDEN} (experiments/specs/mlp_fp8.toml, in "
        f"{rundata.show_path(f8.attrs['folder'])}): median time per call across 3 interleaved rounds, "
        f"the time over {GEMM}'s (the two plain fp16 GEMMs), and throughput against the ceiling of the "
        f"version's precision (FP8 {ceiling['fp8_e4m3'] or float('nan'):,.0f} TFLOP/s, fp16 "
        f"{ceiling['fp16'] or float('nan'):,.0f}, `ceilings` on this GPU).{why} "
        f"{rundata.Run(f8.attrs['folder'], f8).provenance()}.")
else:
    ctx.missing("table", "mlp_fp8", "no run folder on this GPU has mlp_fp8/mlp_fp8.csv "
                "(experiments/specs/mlp_fp8.toml writes it)")

# %% [markdown]
# ## Every MLP version against the two plain GEMMs, sitting by sitting
#
# The CUTLASS, FP8, L2-dataflow and exact-GELU versions were measured in side experiments, each
# beside `gemm_only`: one panel per sitting, each version's time over that sitting's gemm_only at
# 50432 rows, so no ratio pairs two sittings.

# %%
VERSIONS_ROWS = KEY_ROWS[1]
sittings = [(f"main run ({run.name})", main.assign(rows=rundata.rows_of(main)))]
for name in ("mlp_cutlass", "mlp_fp8", "mlp_power", "mlp_exact_gelu"):
    d = side_experiment(name, elsewhere=True)
    if d is not None and len(d):
        sittings.append((f"{name} ({d.attrs['folder'].parent.name})", d))
panels = []
for title, d in sittings:
    d = d[(d["rows"] == VERSIONS_ROWS) & (d["hidden"] == HIDDEN)] if "hidden" in d else d[d["rows"] == VERSIONS_ROWS]
    med = d.groupby("version")["median_us"].median()
    if GEMM in med.index and len(med) > 1:
        panels.append((title, (med / med[GEMM]).drop(GEMM)))
if panels:
    every = catalog.version_order(sorted({v for _, r in panels for v in r.index}), LADDER)
    vstyle = plots.styles(every)
    n_bars = sum(len(r) for _, r in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8.0, 0.24 * n_bars + 1.0 * len(panels) + 0.8),
                             squeeze=False, gridspec_kw={"height_ratios": [len(r) + 1 for _, r in panels]})
    top = max(float(r.max()) for _, r in panels)
    for ax, (title, r) in zip(axes[:, 0], panels):
        r = r.reindex([v for v in every if v in r.index])
        ax.barh(range(len(r)), r.values, color=[vstyle[v]["color"] for v in r.index], alpha=0.85)
        for i, x in enumerate(r.values):
            ax.text(x, i, f" {x:.2f}x", va="center", fontsize=7)
        ax.axvline(1.0, color="#444444", linewidth=0.8)
        ax.axvline(TARGET_GEMM_RATIO, color="#444444", linewidth=0.8, linestyle=":")
        ax.set_yticks(range(len(r)), list(r.index), fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.15)
        ax.set_title(title, fontsize=8, loc="left")
    axes[-1, 0].set_xlabel(f"time per call / {GEMM}'s in the same sitting, {VERSIONS_ROWS} x {HIDDEN} rows")
    plots.titled(fig, f"MLP: every version against the two plain GEMMs, sitting by sitting", tprov)
    fig.tight_layout()
    ctx.figure("mlp_versions", fig,
               f"Every MLP version at {VERSIONS_ROWS} x {HIDDEN} (mlp {4 * HIDDEN}), one panel per sitting "
               f"(this run's sweep and the side experiments mlp_cutlass, mlp_fp8, mlp_power, mlp_exact_gelu "
               f"where a run folder on this GPU has them): median time per call over {GEMM}'s in the same "
               f"sitting (below 1: faster than the two plain GEMMs, as the FP8 versions are); the solid "
               f"line is {GEMM}, the dotted one the {TARGET_GEMM_RATIO:.2f}x target of the fused fp16 "
               f"versions. Each panel's run folder is in its title. {prov}.")
else:
    ctx.missing("figure", "mlp_versions", f"no sitting has {GEMM} and another version at {VERSIONS_ROWS} rows")

# %% [markdown]
# ## cuBLASLt choices: heuristic cached vs queried every call, workspace size

# %%
lt_rows = S.ok[S.is_lt]
lt, lt_flush = None, np.nan
if len(lt_rows):
    lt_rows, lt_flush, _ = rundata.one_setting(lt_rows, "flush_l2")
    # The default setting (no extra arguments) of the same versions and shapes, with the same
    # L2 flush setting, is the reference of every ratio.
    same = S.ok[(S.ok["extra"] == "") & S.ok["version"].isin(set(lt_rows["version"]))
              & (S.ok["flush_l2"] == lt_flush)]
    shapes = set(map(tuple, lt_rows[["hidden", "image_size", "batch"]].to_numpy()))
    same = same[[tuple(x) in shapes for x in same[["hidden", "image_size", "batch"]].to_numpy()]]
    lt = (pd.concat([lt_rows, same])
            .groupby(["version", "hidden", "image_size", "batch", "rows", "heuristic",
                      "workspace_mib"], as_index=False)
            .agg(median_us=("median_us", "median"), launches=("launches", "median")))
    default = lt[(lt["heuristic"] == DEFAULT_SETTING[0])
                 & (lt["workspace_mib"] == DEFAULT_SETTING[1])]
    ref = default.set_index(["version", "hidden", "image_size", "batch"])["median_us"]
    lt["time / default"] = [m / ref.get((v, h, i, b), np.nan) for v, h, i, b, m in
                            lt[["version", "hidden", "image_size", "batch", "median_us"]]
                            .itertuples(index=False)]
    lt["_o"] = lt["version"].map({v: i for i, v in enumerate(order_s)}).fillna(len(order_s))
    lt["_d"] = ~((lt["heuristic"] == DEFAULT_SETTING[0])
                 & (lt["workspace_mib"] == DEFAULT_SETTING[1]))
    lt = lt.sort_values(["_o", "version", "hidden", "image_size", "batch", "_d", "heuristic",
                         "workspace_mib"]).drop(columns=["_o", "_d"])
    lt_flush_text = {0.0: "L2 not flushed between repeats",
                     1.0: "L2 flushed between repeats"}.get(lt_flush, "L2 flush not recorded")
    show = lt.rename(columns={"workspace_mib": "workspace MiB", "median_us": "median us"})
    show = show[["version", "hidden", "batch", "rows", "heuristic", "workspace MiB",
                 "median us", "launches", "time / default"]].dropna(axis=1, how="all")
    ctx.table("mlp_cublaslt", formatting.markdown_table(show, {
        "hidden": formatting.fmt_int, "batch": formatting.fmt_int, "rows": formatting.fmt_int,
        "workspace MiB": formatting.fmt_int, "median us": formatting.fmt_us, "launches": formatting.fmt_int,
        "time / default": formatting.fmt_ratio}),
        f"cuBLASLt choices (experiments/specs/mlp_cublaslt.toml): the GEMM algorithm from the "
        f"heuristic once per shape (cached, the default) or queried on every call, and the "
        f"workspace size (4 MiB default); time as a ratio to the default setting of the same "
        f"version and batch; {lt_flush_text} (these rows only). {sweep_prov}.")
else:
    ctx.missing("table", "mlp_cublaslt",
                "this run has no rows with cuBLASLt extra arguments "
                "(experiments/specs/mlp_cublaslt.toml writes them)")

# %% [markdown]
# ## Every timed configuration at hidden 768 (median us)

# %%
if len(S.vb):
    ctx.table("mlp_sweep", formatting.sweep_table(
        S.vb, ["image_size", "batch", "rows"], "version", order_s, formatting.fmt_us,
        {c: formatting.fmt_int for c in ("image_size", "batch", "rows")}),
        f"MLP median time per call (us) for every timed image size x batch x version at hidden "
        f"{HIDDEN}{sweep_rounds_cells}; '-' = not timed (see the status table); {S.flush_text}. {sweep_prov}.")
else:
    ctx.missing("table", "mlp_sweep", f"no timed MLP rows at hidden {HIDDEN}")

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
st = formatting.status_table(everything.assign(
    _o=everything["version"].map({v: i for i, v in enumerate(order)}).fillna(len(order)))
    .sort_values(["_o", "version"], kind="stable"))
left_out = []
n_lt = int(is_lt.sum())
if n_lt:
    left_out.append(f"{n_lt} timed rows with cuBLASLt extra arguments appear only in the "
                    f"cuBLASLt table")
if other_extra:
    left_out.append(f"{other_extra} timed rows with other extra arguments are not shown")
if flush_dropped:
    as_ref = "" if lt is None else (", except as the cuBLASLt table's default-setting rows "
                                    "where they match its L2 setting")
    left_out.append(f"{flush_dropped} timed rows with the other L2 flush setting are not in "
                    f"the sweep's figures and tables{as_ref}")
ctx.table("mlp_status", formatting.markdown_table(st),
          "MLP rows per version and status (every width and setting), with the reason of every "
          "row that was not timed" + (f" ({'; '.join(left_out)})" if left_out else "") +
          f". {prov}.")
st

# %% [markdown]
# ## Findings, as sentences generated from the numbers above

# %%
findings = [s for s in [formatting.rounds_sentence(t)] if s]

# The two MLP targets (docs/method.md), judged on the fastest fused version at 6304 and 50432
# rows; fused_epilogue's sentences stay beside it (the step the original study took).
# The targets are fp16 ones: an FP8 version (fp8_*) runs GEMMs of another precision and a
# ceiling twice as high, so it is compared with gemm_only in its own table instead.
fused_versions = [v for v in order if catalog.is_own(v) and v not in NOT_FUSED and not is_fp8(v)]


def fastest_fused(r):
    """(time, version) of the fastest fused MLP version at r rows; (NaN, None) without one."""
    times = [(at(v, r), v) for v in fused_versions if np.isfinite(at(v, r))]
    return min(times) if times else (np.nan, None)


for r in key_rows:
    f = at(FUSED, r)
    if not np.isfinite(f):
        findings.append(f"This run has no timing of {FUSED} at {r} x {HIDDEN}.")
        continue
    tf = at(FUSED, r, "tflops")
    share = (f", {100 * tf / gemm_ceiling:.0f}% of the measured GEMM ceiling" if gemm_ceiling
             else "")
    comps = []
    for anchor, how in ((GRAPH, "the PyTorch MLP replayed as a CUDA graph"),
                        (EAGER, "the PyTorch MLP called eagerly")):
        a = at(anchor, r)
        if np.isfinite(a):
            comps.append(f"{formatting.faster_or_slower(a / f)} than {how} ({formatting.fmt_us(a)} us)")
    g = at(GEMM, r)
    if np.isfinite(g):
        comps.append(f"{formatting.fmt_ratio(f / g)} the time of {GEMM} ({formatting.fmt_us(g)} us, the two "
                     f"plain GEMMs)")
    findings.append(f"At {r} x {HIDDEN} ({where(r)}), {FUSED} takes {formatting.fmt_us(f)} us "
                    f"({formatting.fmt_gbps(tf)} TFLOP/s{share})" +
                    (": " + join_and(comps) if comps else "") + ".")

best = {r: fastest_fused(r) for r in KEY_ROWS}
names = sorted({v for _, v in best.values() if v})
who = (f"the fastest fused version ({join_and(names)})" if names else "the fastest fused version")
graph_met = [best[r][0] < at(GRAPH, r) for r in KEY_ROWS
             if np.isfinite(best[r][0]) and np.isfinite(at(GRAPH, r))]
if len(graph_met) == len(KEY_ROWS):
    findings.append(f"The target of {who} being faster than PyTorch's F.linear -> gelu -> "
                    f"F.linear replayed as a CUDA graph (the stricter anchor) at {KEY_ROWS[0]} "
                    f"and {KEY_ROWS[1]} rows is {'met' if all(graph_met) else 'not met'}.")
    ctx.target(f"faster than PyTorch's MLP (CUDA graph) at {KEY_ROWS[0]} and {KEY_ROWS[1]} rows",
               "met" if all(graph_met) else "missed",
               "; ".join(f"{r} rows: {at(GRAPH, r) / best[r][0]:.2f}x ({best[r][1]})" for r in KEY_ROWS))
else:
    findings.append(f"The target of {who} being faster than the PyTorch MLP at "
                    f"{KEY_ROWS[0]} and {KEY_ROWS[1]} rows cannot be judged from this run: it "
                    f"lacks a timing of a fused version or {GRAPH} at one of them.")
gemm_ratios = [best[r][0] / at(GEMM, r) for r in KEY_ROWS]
if all(np.isfinite(gemm_ratios)):
    met = all(x <= TARGET_GEMM_RATIO for x in gemm_ratios)
    findings.append(f"The target of {who} costing at most {TARGET_GEMM_RATIO:.2f}x {GEMM} (the "
                    f"two plain GEMMs) at {KEY_ROWS[0]} and {KEY_ROWS[1]} rows is "
                    f"{'met' if met else 'not met'} "
                    f"({' and '.join(formatting.fmt_ratio(x) for x in gemm_ratios)}).")
    ctx.target(f"at most {TARGET_GEMM_RATIO:.2f}x {GEMM} at {KEY_ROWS[0]} and {KEY_ROWS[1]} rows",
               "met" if met else "missed",
               "; ".join(f"{r} rows: {formatting.fmt_ratio(x)} ({best[r][1]})" for r, x in zip(KEY_ROWS, gemm_ratios)))
else:
    findings.append(f"The target of {who} costing at most {TARGET_GEMM_RATIO:.2f}x {GEMM} "
                    f"cannot be judged from this run: it lacks a timing of a fused version or "
                    f"{GEMM} at {KEY_ROWS[0]} or {KEY_ROWS[1]} rows.")
if cu is not None and len(cu):
    keyed = cu.groupby(["rows", "version"])["median_us"].median()
    ratios = {}
    for r in KEY_ROWS:
        times = {v: keyed[(r, v)] for v in CUTLASS_VERSIONS if (r, v) in keyed.index}
        if times and (r, GEMM) in keyed.index:
            v = min(times, key=times.get)
            ratios[r] = (v, times[v] / keyed[(r, GEMM)])
    if len(ratios) == len(KEY_ROWS):
        met = all(x <= TARGET_GEMM_RATIO for _, x in ratios.values())
        findings.append(
            f"On the CUTLASS layer ({rundata.show_path(cu.attrs['folder'])}, 3 rounds), the fastest "
            f"fused MLP costs " + join_and(f"{formatting.fmt_ratio(x)} {GEMM} at {r} rows ({v})"
                                           for r, (v, x) in ratios.items())
            + f": the {TARGET_GEMM_RATIO:.2f}x target is {'met' if met else 'not met'} there.")
        ctx.target(f"at most {TARGET_GEMM_RATIO:.2f}x {GEMM} at {KEY_ROWS[0]} and {KEY_ROWS[1]} rows, "
                   f"in the CUTLASS side sitting ({rundata.show_path(cu.attrs['folder'])})",
                   "met" if met else "missed",
                   "; ".join(f"{r} rows: {formatting.fmt_ratio(x)} ({v})" for r, (v, x) in ratios.items()))
if algos is not None:
    searched = algos[algos["extra"] == "--search-all"].dropna(subset=["fused / gemm_only"])
    if len(searched):
        findings.append(
            "With each GEMM's algorithm the fastest of every one cuBLASLt will run (up to "
            f"{int(searched['timed'].max())} candidates timed per GEMM), {FUSED} costs "
            + join_and(f"{formatting.fmt_ratio(x)} {GEMM} at {int(r)} rows"
                       for r, x in zip(searched["rows"], searched["fused / gemm_only"]))
            + f": no algorithm cuBLASLt offers for these shapes brings the epilogues within "
              f"{TARGET_GEMM_RATIO:.2f}x.")
if pp is not None and len(pp):
    keyed = pp.pivot_table(index="rows", columns="version", values="median_us", aggfunc="median")
    at_key = [r for r in KEY_ROWS if r in keyed.index]
    if at_key and {PING, PING_GEMM, GEMM} <= set(keyed.columns):
        own_cost = [keyed.loc[r, PING] / keyed.loc[r, PING_GEMM] for r in at_key]
        own_speed = [keyed.loc[r, PING_GEMM] / keyed.loc[r, GEMM] for r in at_key]
        hidden = [r for r, x in zip(at_key, own_cost) if x <= TARGET_GEMM_RATIO]
        exposed = [r for r in at_key if r not in hidden]
        verdict = ("the epilogue is hidden behind the main loop" if not exposed else
                   "the epilogue is not yet hidden behind the main loop" if not hidden else
                   f"the epilogue is hidden behind the main loop at {join_and(map(str, hidden))} "
                   f"rows but not at {join_and(map(str, exposed))}")
        verdict += (", and the main loop is slower than cuBLASLt's" if min(own_speed) > 1
                    else ", and the main loop keeps up with cuBLASLt's")
        findings.append(
            f"Our own ping-pong GEMM ({PING}) pays " +
            join_and(f"{formatting.fmt_ratio(keyed.loc[r, PING] / keyed.loc[r, PING_GEMM])} of its own "
                     f"plain GEMMs at {r} rows" for r in at_key) +
            " for its epilogues, while its plain GEMMs take " +
            join_and(f"{formatting.fmt_ratio(keyed.loc[r, PING_GEMM] / keyed.loc[r, GEMM])}" for r in at_key) +
            f" the time of cuBLASLt's ({GEMM}): {verdict} (stages/mlp/pingpong_epilogue/NOTES.md).")


def fastest_mlp(rows, fp16=False):
    """Fastest own version that computes the MLP (gemm_only does not); fp16: of the fp16 ones."""
    d = vb[(vb["rows"] == rows) & vb["version"].map(catalog.is_own) & (vb["version"] != GEMM)]
    if fp16:
        d = d[~d["version"].map(is_fp8)]
    return d.loc[d["median_us"].idxmin()] if len(d) else None


for r in key_rows:
    b, b16 = fastest_mlp(r), fastest_mlp(r, fp16=True)
    if b is not None and b["version"] != FUSED and np.isfinite(at(FUSED, r)):
        also = (f", the fastest fp16 one {b16['version']} ({formatting.fmt_us(b16['median_us'])} us)"
                if b16 is not None and b16["version"] != b["version"] else "")
        findings.append(f"At {r} x {HIDDEN} the fastest MLP version is {b['version']} "
                        f"({formatting.fmt_us(b['median_us'])} us){also}, not {FUSED}.")

# Each version against unfused at the largest key size: what removing the pointwise traffic
# (or only vectorizing it, or only hiding the launches) is worth.
if key_rows:
    big = max(key_rows)
    u = at(UNFUSED, big)
    others = [v for v in order if catalog.is_own(v) and v not in (UNFUSED, GEMM)
              and np.isfinite(at(v, big))]
    if np.isfinite(u) and others:
        findings.append(f"At {big} x {HIDDEN}, against {UNFUSED} ({formatting.fmt_us(u)} us): " +
                        join_and(f"{v} {formatting.faster_or_slower(u / at(v, big))}"
                                 for v in others) + ".")
    g, gt = at(GEMM, big), at(GEMM, big, "tflops")
    if np.isfinite(g) and gemm_ceiling:
        findings.append(f"{GEMM} reaches {formatting.fmt_gbps(gt)} TFLOP/s at {big} x {HIDDEN}, "
                        f"{100 * gt / gemm_ceiling:.0f}% of the fp16 GEMM ceiling measured in "
                        f"the same run ({gemm_ceiling:,.0f} TFLOP/s at 8192^3).")

# The graph's gain where launches dominate: the smallest timed size of the sweep.
if len(S.vb):
    small = S.vb.loc[S.vb["rows"].idxmin()]
    u, ug = (at(v, int(small["rows"]), table=S.t) for v in (UNFUSED, GRAPHED))
    if np.isfinite(u) and np.isfinite(ug):
        findings.append(f"At {int(small['rows'])} rows (batch {int(small['batch'])}, "
                        f"{int(small['image_size'])} px{'' if sweep is run else ', run folder ' + sweep.name}), "
                        f"{GRAPHED} takes {formatting.fmt_us(ug)} us against {UNFUSED}'s {formatting.fmt_us(u)} us: "
                        f"replaying the same kernels from one graph launch is {formatting.faster_or_slower(u / ug)}.")


# Kernels per call and where the epilogue runs.
def launch_counts(v):
    d = vb[(vb["version"] == v) & np.isfinite(vb["launches"])]
    if not len(d):
        return None, []
    mode = int(d["launches"].round().mode().iloc[0])
    odd = d[d["launches"].round() != mode].sort_values("rows")
    return mode, [(int(r), int(n)) for r, n in zip(odd["rows"], odd["launches"].round())]


counts = {v: launch_counts(v) for v in order}
counts = {v: c for v, c in counts.items() if c[0] is not None}
if counts:
    def count_text(v):
        mode, odd = counts[v]
        return (f"{label(v)} {mode}" +
                (f" ({', '.join(f'{n} at {r} rows' for r, n in odd)})" if odd else ""))
    how = ("one call captured into a CUDA graph and its kernel nodes counted" +
           ("; PyTorch: its profiler's kernels per eager call"
            if any(catalog.is_anchor(v) for v in counts) else ""))
    findings.append(f"Kernels per call ({how}): " +
                    join_and(count_text(v) for v in counts) + ".")
    floor, floor_who = ((counts[GEMM][0], f"{GEMM}'s {counts[GEMM][0]}") if GEMM in counts
                        else (2, "the 2 GEMMs"))
    inside, outside = [], []
    for v in counts:
        if not catalog.is_own(v) or v == GEMM:
            continue
        (inside if counts[v][0] <= floor else outside).append(v)
    if inside:
        findings.append(f"{join_and(inside)} run{'s' if len(inside) == 1 else ''} as many "
                        f"kernels as {floor_who}: bias, GELU and the residual run inside the "
                        f"GEMMs' epilogues, with no pass of their own.")
    if FUSED in outside:
        extra_k = counts[FUSED][0] - floor
        findings.append(f"{FUSED} runs {extra_k} kernel{'s' if extra_k != 1 else ''} beyond "
                        f"{floor_who}: cuBLASLt ran at least one extra kernel (a separate "
                        f"epilogue pass or a split-K reduction), so its epilogue is not "
                        f"entirely inside the GEMMs.")
    # FP8 versions quantize x in a pass of their own; l2_panels runs its two GEMMs once per
    # panel of rows. Both keep bias, GELU and the residual in the GEMMs' epilogues.
    fp8 = [v for v in outside if is_fp8(v)]
    for extra_k in sorted({counts[v][0] - floor for v in fp8}):
        who = [v for v in fp8 if counts[v][0] - floor == extra_k]
        findings.append(f"{join_and(who)} run{'s' if len(who) == 1 else ''} {extra_k} "
                        f"kernel{'s' if extra_k != 1 else ''} beyond {floor_who}: the pass that "
                        f"quantizes x to E4M3; bias, GELU and the residual stay in the GEMMs' "
                        f"epilogues.")
    for v in [v for v in outside if v in PANELED]:
        at_rows = ", ".join(f"{int(n)} kernels at {int(r)} rows" for r in sorted(set(vb["rows"]))
                            for n in [at(v, r, "launches")] if np.isfinite(n))
        findings.append(f"{v} runs its two GEMMs once per panel of rows ({at_rows}), each "
                        f"with the fused epilogues: no pass of its own.")
    passes = [v for v in outside if v != FUSED and v not in fp8 and v not in PANELED]
    for extra_k in sorted({counts[v][0] - floor for v in passes}):
        who = [v for v in passes if counts[v][0] - floor == extra_k]
        findings.append(f"{join_and(who)} run{'s' if len(who) == 1 else ''} {extra_k} "
                        f"kernel{'s' if extra_k != 1 else ''} beyond {floor_who}: bias, GELU "
                        f"and the residual run outside the GEMMs, as separate passes over h and "
                        f"y" + (f" ({GRAPHED} replays them from one graph launch)"
                                if GRAPHED in who else "") + ".")
    # Where the fused path ran more kernels than the GEMMs alone at the same size.
    if FUSED in inside and GEMM in counts:
        extra_at = []
        for r in sorted(set(vb["rows"])):
            nf, ng = at(FUSED, r, "launches"), at(GEMM, r, "launches")
            if np.isfinite(nf) and np.isfinite(ng) and nf > ng:
                extra_at.append(f"{int(nf)} against {int(ng)} at {int(r)} rows")
        if extra_at:
            findings.append(f"{FUSED} runs more kernels than {GEMM} at some sizes "
                            f"({'; '.join(extra_at)}): cuBLASLt ran an extra kernel there (a "
                            f"separate epilogue pass or a split-K reduction).")

# The widths.
if len(widths) >= 2:
    parts = []
    for h in widths:
        f, g, a = (at(v, None, hidden=h, image=224, batch=KEY_BATCH, table=S.t) for v in (FUSED, GEMM, GRAPH))
        bits = []
        if np.isfinite(f) and np.isfinite(g):
            bits.append(f"takes {formatting.fmt_ratio(f / g)} the time of {GEMM}")
        if np.isfinite(f) and np.isfinite(a):
            bits.append(f"is {formatting.faster_or_slower(a / f)} than the PyTorch MLP graph")
        if bits:
            parts.append(f"at hidden {h} it {' and '.join(bits)}")
    if parts:
        findings.append(f"Across the ViT widths at batch {KEY_BATCH}, 224 px"
                        f"{'' if sweep is run else ' (run folder ' + sweep.name + ')'}, for {FUSED}: "
                        + "; ".join(parts) + ".")

# cuBLASLt settings.
if lt is not None:
    settings = (lt[["heuristic", "workspace_mib"]].drop_duplicates()
                .sort_values(["heuristic", "workspace_mib"]))
    for heur, ws in settings.itertuples(index=False):
        if (heur, ws) == DEFAULT_SETTING:
            continue
        name = ("the GEMM heuristic queried on every call" if heur != DEFAULT_SETTING[0]
                else f"a {int(ws)} MiB workspace")
        if heur != DEFAULT_SETTING[0] and ws != DEFAULT_SETTING[1]:
            name += f" and a {int(ws)} MiB workspace"
        d = lt[(lt["heuristic"] == heur) & (lt["workspace_mib"] == ws)]
        per = []
        for v in [v for v in order_s if v in set(d["version"])]:
            dv = d[(d["version"] == v) & np.isfinite(d["time / default"])].sort_values("batch")
            if len(dv):
                per.append(f"{v} " + ", ".join(
                    f"{formatting.fmt_ratio(x)} at batch {int(b)}"
                    for b, x in zip(dv["batch"], dv["time / default"])))
        if per:
            findings.append(f"With {name}, the time per call relative to the default "
                            f"(heuristic cached, {DEFAULT_SETTING[1]} MiB workspace; "
                            f"{lt_flush_text}) is: {'; '.join(per)}.")
        else:
            findings.append(f"With {name} this run has no default-setting rows of the same "
                            f"shapes and L2 setting to compare with.")
    changed = []
    for (v, h, i, b), g in lt.groupby(["version", "hidden", "image_size", "batch"]):
        n = g.set_index(["heuristic", "workspace_mib"])["launches"].dropna()
        base = n.get(DEFAULT_SETTING)
        if base is None:
            continue
        for (heur, ws), k in n.items():
            if k != base:
                changed.append(f"{v} at batch {int(b)} runs {int(k)} kernels with heuristic "
                               f"{heur} and {int(ws)} MiB (default {int(base)})")
    if changed:
        findings.append("The cuBLASLt setting changes the kernel count: " + "; ".join(changed)
                        + ".")

findings.append(formatting.status_finding(everything, "failed the correctness check"))

ctx.text("mlp_findings", findings)

# README's headline line: the fastest fp16 MLP (gemm_only computes none) at the largest target
# size; the MLP has no library version, so its reference is cuBLASLt's two GEMMs alone. The
# sitting is this run's sweep or a side experiment's (mlp_cutlass, mlp_power, mlp_exact_gelu on
# this GPU) whose fastest version this run did not time, whichever has the fastest version
# relative to its own gemm_only; every number of the line comes from that one sitting. The FP8
# versions have their own table.
if key_rows:
    big = max(key_rows)

    def headline_candidate(d, folder=None):
        """(fastest/gemm_only, headline kwargs) of one sitting at `big` rows, or None."""
        d = d[(d["rows"] == big) & (d["hidden"] == HIDDEN)]
        med = d.groupby("version")["median_us"].median()
        own = med[[not catalog.is_anchor(v) and v != GEMM and not is_fp8(v) for v in med.index]]
        if not len(own) or GEMM not in med.index:
            return None
        top = own.idxmin()
        return own[top] / med[GEMM], dict(
            family="MLP", shape=f"{big} x {HIDDEN} (rows x hidden), mlp {4 * HIDDEN}, fp16",
            fastest=top, fastest_us=float(own[top]),
            library=f"{GEMM} (the two plain GEMMs)", library_us=float(med[GEMM]),
            anchors=[(label(a), float(med[a])) for a in (GRAPH, EAGER) if a in med.index],
            measured_in=folder)

    candidates = [c for c in [headline_candidate(vb)] if c]
    here_timed = set(vb.loc[vb["rows"] == big, "version"])
    for name in ("mlp_cutlass", "mlp_power", "mlp_exact_gelu"):
        d = side_experiment(name, elsewhere=True)
        if d is not None and len(d) and "hidden" in d:
            c = headline_candidate(d, str(d.attrs["folder"].relative_to(d.attrs["folder"].parent.parent)))
            # A side sitting speaks for a version this run did not time; one this run timed
            # is quoted from this run, the family's newest sitting, not from the luckier one.
            if c and c[1]["fastest"] not in here_timed:
                candidates.append(c)
    if candidates:
        ctx.headline(**min(candidates, key=lambda c: c[0])[1])
print("\n".join(findings))
