# %% [markdown]
# # Across GPUs: which of the study's ratios hold on another GPU
#
# The family sections of the report are measured on one GPU (the one most run folders were
# measured on, `studylib.rundata.primary_gpu`). Runs on other GPUs (for example `./study run` on an
# H100) are set beside it here: for each of the study's key comparisons (a fastest version
# against a library or PyTorch anchor, at one shape) the speedup is computed inside each GPU's
# own run, then the speedups are compared. No ratio ever divides a time of one GPU by a time
# of another, and only clean rows are compared (a family's -dirty rows are left out, and said
# so). Runs on its own (`MPLBACKEND=Agg /usr/bin/python3 analysis/gpus.py [--results ROOT]
# [--out DIR]`) or from `report/build.py`, which hands it `STUDY_CONTEXT`.

# %%
import os
from dataclasses import dataclass

import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import plots
from studylib import catalog, formatting, notebook, rundata
from studylib import steps as step_table
from studylib.claims import claim, say

ctx = notebook.notebook_context("gpus", globals())
runs = ctx.runs
plots.apply_style()

HOLDS_WITHIN = 0.10   # a ratio "holds" on another GPU when it is within 10% and on the same side of 1
HIDDEN = 768
# Versions that do not compute the family's operation (timing references only).
NOT_THE_OPERATION = {"gemm_only", "pingpong_gemm_only", "cpu_baseline"}


@dataclass
class Comparison:
    family: str
    shape: str            # in words
    match: dict           # column -> value the rows must have (rows: rundata.rows_of)
    against: list         # the faster of these (present in both GPUs' runs) is the reference
    against_label: str
    ours: list | None = None   # None: the fastest own version that both runs timed there


def shape(kind, **fields):
    """A comparison's shape in the words of gpus.md (the table's shape column)."""
    return say(claim(kind, **fields), "gpus")


def rows_shape(rows):
    return shape("rows_shape", rows=rows, hidden=HIDDEN)


def vit_shape(image, batch):
    return shape("vit_shape", image=image, batch=batch)


def vit_b_224(batch):
    return dict(model="vit_b", image_size=224, batch=batch)


def vit_b_384(batch):
    return dict(model="vit_b", image_size=384, batch=batch)


COMPARISONS = (
    [Comparison("patch_embed", vit_shape(224, b), vit_b_224(b), ["pytorch_patchify_linear"],
                "PyTorch patchify + F.linear") for b in (1, 32)]
    + [Comparison("patch_embed", vit_shape(224, 32), vit_b_224(32), ["pytorch_conv2d"],
                  "PyTorch F.conv2d")]
    + [Comparison("layernorm", rows_shape(r), dict(rows=r, hidden=HIDDEN), ["pytorch_layer_norm_graph"],
                  "PyTorch F.layer_norm (graph)") for r in (6304, 50432)]
    + [Comparison("layernorm", rows_shape(50432), dict(rows=50432, hidden=HIDDEN), ["cudnn"], "cuDNN")]
    + [Comparison("attention", shape("attention_shape", batch=32, tokens=n, heads=12),
                  dict(batch=32, tokens=n, heads=12),
                  ["cudnn_sdpa", "pytorch_sdpa_cudnn_graph"], "the best cuDNN SDPA")
       for n in (197, 577, 1025)]
    + [Comparison("mlp", rows_shape(r), dict(rows=r, hidden=HIDDEN), ["gemm_only"],
                  "the two plain GEMMs (gemm_only)") for r in (6304, 50432)]
    + [Comparison("mlp", rows_shape(r), dict(rows=r, hidden=HIDDEN), ["pytorch_mlp_graph"],
                  "PyTorch MLP (graph)") for r in (6304, 50432)]
    + [Comparison("encoder", vit_shape(224, b), vit_b_224(b), ["pytorch_timm_compile_graph"],
                  "torch.compile + CUDA graph") for b in (1, 32, 256)]
    + [Comparison("encoder", vit_shape(224, b), vit_b_224(b), ["pytorch_timm_graph"],
                  "timm in a CUDA graph") for b in (1, 32, 256)]
    + [Comparison("encoder", vit_shape(224, b), vit_b_224(b), ["pytorch_timm"],
                  "timm eager") for b in (1, 256)]
    # The final sitting's 384 px half (final_384.toml).
    + [Comparison("encoder", vit_shape(384, 32), vit_b_384(32), [anchor], label)
       for anchor, label in (("pytorch_timm_compile_graph", "torch.compile + CUDA graph"),
                             ("pytorch_timm_graph", "timm in a CUDA graph"))]
)
# The encoder's steps and anchors are compared only inside one sitting (one run_id): its run
# folders hold sittings of different days (the compiled anchor, side steps).
ONE_SITTING = {"encoder"}


def at_shape(run, c):
    """The run's timed rows of the comparison's family at its shape (full models only)."""
    d = run.ok(c.family)
    if "rows" in c.match:
        d = d.assign(rows=rundata.rows_of(d))
    for k, v in c.match.items():
        d = d[d[k] == v]
    if c.family == "encoder":
        d = d[~d["note"].astype(str).str.contains(r"\blayers=\d+", regex=True)]
        d = d[d["streams"].fillna(1) == 1]
    return d


def one_sitting(d, c):
    """The rows of the newest sitting (run_id) that timed a reference of `c` and one of its
    candidate versions, so that the speedup never pairs two sittings; empty when none did."""
    def has_both(g):
        vs = set(g["version"])
        own = set(c.ours) if c.ours is not None else {v for v in vs if catalog.is_own(v) and v not in NOT_THE_OPERATION}
        return bool(vs & set(c.against)) and bool(vs & own)
    sittings = [(g["utc"].max(), rid) for rid, g in d.groupby("run_id") if has_both(g)]
    return d[d["run_id"] == max(sittings)[1]] if sittings else d.iloc[0:0]


def medians(d):
    """Median across rounds per version, and the median SM clock, power (the energy loop's) and
    power limit its rows recorded."""
    if d.empty:
        return pd.DataFrame(columns=["median_us", "sm_mhz", "power_w", "limit_w"])
    return d.groupby("version").agg(median_us=("median_us", "median"),
                                    sm_mhz=("sm_clock_mhz", "median"), power_w=("power_w", "median"),
                                    limit_w=("power_limit_w", "median"))


def power_clause(a, b, name_a, name_b):
    """'; and at the power limit both run it alike: ...' (a claim) for two GPUs' rows of one step that
    recorded their energy loop's power, their power limit and their clock (one SM design under one
    power limit runs the same work at about the same clock); '' where a row lacks one of them."""
    if not np.isfinite([a["power_w"], b["power_w"], a["limit_w"], b["limit_w"], a["clk"], b["clk"]]).all():
        return ""
    return claim("power_alike", pa=a["power_w"], la=a["limit_w"], ca=a["clk"], p=name_a, pb=b["power_w"],
                 lb=b["limit_w"], cb=b["clk"], o=name_b)


def compare(c, run_a, run_b):
    """[(fastest, its us, reference, its us, speedup, sm_mhz)] for runs a and b, each within its
    own run; None when either run lacks the versions at that shape. Both runs use one L2
    setting (the first both have, flushed preferred) and the same candidate versions."""
    da, db = at_shape(run_a, c), at_shape(run_b, c)
    if c.family in ONE_SITTING:
        da, db = one_sitting(da, c), one_sitting(db, c)
    flushes = [f for f in (1.0, 0.0) if (da["flush_l2"] == f).any() and (db["flush_l2"] == f).any()]
    if not flushes:
        return None
    ma = medians(da[da["flush_l2"] == flushes[0]])
    mb = medians(db[db["flush_l2"] == flushes[0]])
    both = set(ma.index) & set(mb.index)
    refs = [v for v in c.against if v in both]
    if c.ours is not None:
        ours = [v for v in c.ours if v in both]
    else:
        ours = [v for v in both if catalog.is_own(v) and v not in NOT_THE_OPERATION]
    if not refs or not ours:
        return None
    out = []
    for m, d in ((ma, da), (mb, db)):
        fastest = min(ours, key=lambda v: m.at[v, "median_us"])
        ref = min(refs, key=lambda v: m.at[v, "median_us"])
        # Whether the reference compiled in its sitting's anchor process (docs/method.md, Timing).
        compiled_here = bool(rundata.compiled_here_s(d.loc[d["version"] == ref, "note"]).notna().any())
        out.append((fastest, m.at[fastest, "median_us"], ref, m.at[ref, "median_us"],
                    m.at[ref, "median_us"] / m.at[fastest, "median_us"], m.at[fastest, "sm_mhz"],
                    m.at[ref, "sm_mhz"], compiled_here, m.at[fastest, "power_w"], m.at[fastest, "limit_w"]))
    return out


def holds(sa, sb):
    if (sa >= 1) != (sb >= 1):
        return "no: " + ("faster" if sa >= 1 else "slower") + " on one GPU only"
    return "yes" if abs(sb / sa - 1) <= HOLDS_WITHIN else "direction only"


def fmt_time(us):
    return "-" if not np.isfinite(us) else (f"{us / 1000:.2f} ms" if us >= 1000 else f"{formatting.fmt_us(us)} us")


def short_gpu(g):
    return g.removeprefix("NVIDIA ")


# %% [markdown]
# ## The comparisons on each GPU, side by side

# %%
primary = rundata.primary_gpu(runs)
gpus = sorted({rundata.gpu_of(r) for r in runs} - {primary})
KINDS = {"gpus_ratios": "table", "gpus_speedups": "figure", "gpus_findings": "text"}
# The speedup figure's linear axis ends near here; comparisons past it are the table's alone.
LINEAR_SPEEDUP_MAX = 4.0
# One colour per GPU, the primary's first.
GPU_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]


def mhz(a, b):
    if not np.isfinite(a):
        return "-"
    return f"{a:,.0f} / {b:,.0f}" if np.isfinite(b) else f"{a:,.0f}"


def pick_clean(runs, family):
    """The run the family's section would pick among those whose rows of it are all clean (no
    '-dirty' commit: a tree nobody can rebuild), so that no comparison rests on such rows."""
    return rundata.pick_run([r for r in runs if r.clean(family)], family)


rows, used_runs = [], {}
on_primary = [r for r in runs if rundata.gpu_of(r) == primary]
for g in gpus:
    on_g = [r for r in runs if rundata.gpu_of(r) == g]
    for i, c in enumerate(COMPARISONS):
        # Each GPU's run of the family as its own section would pick it (for the encoder: its
        # final sitting where it has one), also where the report's section is on another GPU.
        run_a, run_b = pick_clean(on_primary, c.family), pick_clean(on_g, c.family)
        if run_a is None or run_b is None:
            continue
        res = compare(c, run_a, run_b)
        if res is None:
            continue
        used_runs.setdefault(primary, {})[run_a.name] = run_a
        used_runs.setdefault(g, {})[run_b.name] = run_b
        for gpu, (fastest, t, ref, rt, speedup, clk, rclk, compiled_here, power, limit) in zip((primary, g), res):
            rows.append({"order": i, "pair": g, "gpu": gpu, "component": c.family, "shape": c.shape,
                         "against": c.against_label, "fastest": f"{fastest}: {fmt_time(t)}",
                         "reference": f"{ref}: {fmt_time(rt)}", "speedup": speedup,
                         "SM MHz": mhz(clk, rclk), "clk": clk, "rclk": rclk, "compiled_here": compiled_here,
                         "t_us": t, "ref_us": rt, "power_w": power, "limit_w": limit,
                         "copy_gbps": (run_a if gpu == primary else run_b).ceilings().copy_gbps or np.nan,
                         "gemm_tflops": (run_a if gpu == primary else run_b).ceilings().gemm_tflops or np.nan,
                         "fp8_tflops": rundata.fp8_ceiling_tflops(run_a if gpu == primary else run_b) or np.nan})
cmp_df = pd.DataFrame(rows)


def absent(g, done):
    """Sentences on the families with no comparison between the primary GPU and `g` (`done`: those
    with one): rows of a -dirty tree left out, or runs that time nothing in common."""
    p, o = short_gpu(primary), short_gpu(g)
    on_g = [r for r in runs if rundata.gpu_of(r) == g]
    out, dirty = [], {}   # dirty: run folder -> the families left out because its rows of them are -dirty
    for fam in dict.fromkeys(c.family for c in COMPARISONS):
        if fam in done:
            continue
        a, b = pick_clean(on_primary, fam), pick_clean(on_g, fam)
        if a is None or b is None:
            for r in (rundata.pick_run(on_primary, fam), rundata.pick_run(on_g, fam)):
                if r is not None and not r.clean(fam):
                    dirty.setdefault(r.name, []).append(fam)
            continue
        out.append(claim("no_family_comparison", family=fam, p=p, o=o, a=a.name, b=b.name,
                         one_sitting=fam in ONE_SITTING))
    for name, fams in dirty.items():
        out.append(claim("dirty_left_out", families=fams, p=p, o=o, folder=name))
    return out


if not gpus or cmp_df.empty:
    why = claim("one_gpu", primary=primary) if not gpus else claim("no_common_shape", primary=primary, others=gpus)
    said = [x for g in gpus for x in absent(g, set())]
    for name, kind in KINDS.items():
        if kind == "text" and said:
            ctx.claims(name, said)
        else:
            ctx.missing(kind, name, why)
else:
    # A comparison holds on another GPU when its speedup is on the same side of 1 there and
    # within HOLDS_WITHIN of the primary GPU's.
    base = cmp_df[cmp_df["gpu"] == primary].drop_duplicates("order").set_index("order")["speedup"]
    cmp_df["holds"] = [("-" if gpu == primary else holds(base[o], s))
                       for gpu, o, s in zip(cmp_df["gpu"], cmp_df["order"], cmp_df["speedup"])]
    shown = cmp_df.drop_duplicates(["order", "gpu"]).sort_values(["order", "gpu"], key=lambda col: (
        col if col.name != "gpu" else col.map(lambda x: (x != primary, x))))
    # Run folder and commit only: the report's run table holds each folder's run ids.
    provs = [claim("gpu_runs", gpu=short_gpu(g), runs=[claim("run_commit", folder=n, commits=rundata.folder_commits(r.df))
                                                       for n, r in used_runs[g].items()])
             for g in [primary] + [x for x in gpus if x in used_runs]]
    table = shown[["component", "shape", "against", "gpu", "fastest", "reference", "speedup",
                   "SM MHz", "holds"]].assign(gpu=shown["gpu"].map(short_gpu))
    ctx.table("gpus_ratios", formatting.markdown_table(table, {"speedup": formatting.fmt_ratio}),
              claim("ratios_caption", primary=short_gpu(primary), within=HOLDS_WITHIN, provs=provs))

    order = [primary] + gpus
    # A linear axis around the result: most speedups sit within 0.8-2.5x, which a log axis would
    # crush; the few comparisons far past that (F.conv2d, timm eager) stay in the table.
    firsts = shown.drop_duplicates("order")
    wide = set(shown.loc[shown["speedup"] > LINEAR_SPEEDUP_MAX, "order"])
    drawn = firsts[~firsts["order"].isin(wide)]
    labels = [shape("comparison_label", component=c, shape=s, against=a) for c, s, a in drawn[["component", "shape", "against"]].itertuples(index=False)]
    # What every drawn comparison shares ("encoder: vit_b, 224 px, ") goes to the title, once.
    common = os.path.commonprefix(labels) if len(labels) > 1 else ""
    common = common[:common.rfind(", ") + 2] if ", " in common else ""
    labels = [x[len(common):] for x in labels]
    keys = list(drawn["order"])
    y = np.arange(len(keys))
    h = 0.8 / len(order)
    fig, ax = plt.subplots(figsize=(8.5, 0.3 * len(keys) * max(1, len(order) / 2) + 1.4))
    for j, g in enumerate(order):
        s = shown[shown["gpu"] == g].set_index("order")["speedup"].reindex(keys)
        bars = ax.barh(y - 0.4 + h * (j + 0.5), s, height=h, label=short_gpu(g), color=GPU_COLORS[j % len(GPU_COLORS)])
        ax.bar_label(bars, labels=[f"{v:.2f}x" if np.isfinite(v) else "" for v in s], fontsize=7, padding=2,
                     bbox=dict(facecolor="white", edgecolor="none", pad=0.2))
    ax.axvline(1.0, color="black", linewidth=0.8, zorder=0.5)
    ax.text(1.0, -0.55, " 1x: parity", ha="left", va="bottom", fontsize=8)
    ax.set_xlim(0, shown.loc[shown["order"].isin(keys), "speedup"].max() * 1.15)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over the reference (x; reference time / fastest time, within one run)")
    plots.legend_outside(ax)
    plots.titled(fig, ctx.said(claim("speedups_title", common=common.rstrip(", "), shared=bool(common))),
                 " and ".join(short_gpu(g) for g in order if g in used_runs) + "; run folders in the caption")
    fig.tight_layout()
    left_out = [claim("wide_one", component=c, shape=sh, against=a) for c, sh, a in
                firsts[firsts["order"].isin(wide)][["component", "shape", "against"]].itertuples(index=False)]
    ctx.figure("gpus_speedups", fig, claim("speedups_caption", wide=bool(left_out), max=LINEAR_SPEEDUP_MAX,
                                           left_out=left_out, provs=provs))

    sentences = []
    p = short_gpu(primary)
    for g in gpus:
        d = cmp_df[cmp_df["gpu"] == g]
        if d.empty:
            continue
        o = short_gpu(g)
        n, n_yes = len(d), int((d["holds"] == "yes").sum())
        n_dir = int((d["holds"] == "direction only").sum())
        flips = d[d["holds"].str.startswith("no")]
        sentences.append(claim("holds_count", n=n, p=p, o=o, n_yes=n_yes, within=HOLDS_WITHIN, n_dir=n_dir,
                               one_dir=n_dir == 1, n_flips=len(flips)))
        for _, r in flips.iterrows():
            sentences.append(claim("flip", component=r['component'], shape=r['shape'], against=r['against'],
                                   base=base[r['order']], p=p, speedup=r['speedup'], o=o))
        apart = d[d["holds"] == "direction only"]
        if len(apart):
            sentences.append(claim("apart", o=o, within=HOLDS_WITHIN, parts=[
                claim("apart_one", component=r['component'], shape=r['shape'], against=r['against'],
                      base=base[r['order']], p=p, speedup=r['speedup'], o=o) for _, r in apart.iterrows()]))
        # What moved between the GPUs where a speedup moved more than HOLDS_WITHIN: the fastest
        # version's time, the reference's, and the measured copy bandwidth beside them (a
        # memory-bound kernel's time follows it, one bound elsewhere does not).
        pair = cmp_df[cmp_df["pair"] == g]
        for order, r in d[d["holds"] != "yes"].set_index("order").iterrows():
            a = pair[(pair["order"] == order) & (pair["gpu"] == primary)].iloc[0]
            sentences.append(claim(
                "what_moved", component=r['component'], shape=r['shape'], against=r['against'], p=p, o=o,
                t_a=fmt_time(a['t_us']), t_b=fmt_time(r['t_us']), t_ratio=r['t_us'] / a['t_us'],
                ref_a=fmt_time(a['ref_us']), ref_b=fmt_time(r['ref_us']), ref_ratio=r['ref_us'] / a['ref_us'],
                bw=bool(np.isfinite(a["copy_gbps"]) and np.isfinite(r["copy_gbps"])),
                bw_ratio=a['copy_gbps'] / r['copy_gbps'], copy_a=a['copy_gbps'], copy_b=r['copy_gbps']))
        # A reference compiled in one GPU's anchor process and ahead on the other: a reason the
        # two speedups differ.
        for order, r in d[d["holds"] != "yes"].set_index("order").iterrows():
            flags = pair[pair["order"] == order].set_index("gpu")["compiled_here"]
            if flags.get(primary) == flags.get(g):
                continue
            sentences.append(claim("compiled_where", component=r['component'], shape=r['shape'], against=r['against'],
                                   inside=p if flags.get(primary) else o, ahead=o if flags.get(primary) else p))
        big = cmp_df[(cmp_df["pair"] == g) & (cmp_df["component"] == "encoder")
                     & cmp_df["shape"].str.endswith("batch 256")
                     & (cmp_df["against"] == "timm in a CUDA graph")]
        clocks = {r["gpu"]: (r["clk"], r["rclk"], r["fastest"].split(":")[0]) for _, r in big.iterrows()}
        if len(clocks) == 2 and all(np.isfinite(v[:2]).all() for v in clocks.values()):
            (ca, cra, va), (cb, crb, vb) = clocks[primary], clocks[g]
            sentences.append(claim("clocks_256", ca=ca, va=va, cra=cra, p=p, cb=cb, vb=vb, crb=crb, o=o))
        # Why the whole ViT moves little between the GPUs: its time against the two ceilings' ratios.
        if len(big) == 2:
            a, b = big.set_index("gpu").loc[primary], big.set_index("gpu").loc[g]
            step = a["fastest"].split(":")[0]
            # The GEMM rate of the step's own precision: an FP8 step's GEMMs run at the FP8 one.
            rate, precision = ("fp8_tflops", "FP8") if step_table.is_fp8_step(step) else ("gemm_tflops", "fp16")
            t_ratio, copy_ratio, gemm_ratio = b["t_us"] / a["t_us"], a["copy_gbps"] / b["copy_gbps"], a[rate] / b[rate]
            if all(np.isfinite([t_ratio, copy_ratio, gemm_ratio])):
                bound = claim("bound_gemm" if abs(t_ratio - gemm_ratio) < abs(t_ratio - copy_ratio) else "bound_copy")
                sentences.append(claim(
                    "why_little", step=step, t_a=fmt_time(a['t_us']), p=p, t_b=fmt_time(b['t_us']), o=o, t_ratio=t_ratio,
                    copy_ratio=copy_ratio, precision=precision, gemm_ratio=gemm_ratio, rate_a=a[rate], rate_b=b[rate],
                    bound=bound, power=power_clause(a, b, p, o)))
    for g in gpus:
        sentences += absent(g, set(cmp_df.loc[cmp_df["pair"] == g, "component"]))
    ctx.claims("gpus_findings", sentences)
cmp_df
