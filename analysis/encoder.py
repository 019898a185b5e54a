# %% [markdown]
# # The whole ViT: throughput, batch-1 latency, time per component, and the ladder's steps
#
# One forward of the ViT (patch embedding + cls + position, the encoder blocks, the final
# LayerNorm and the classifier head on the cls rows) for a batch of images, as composed in
# stages/encoder from the families' versions: e1_library (the library composition) through
# buffer reuse, a CUDA graph of the whole forward, streams and more fusion to e6_best, against
# timm's model in PyTorch (eager, replayed from a CUDA graph, and torch.compile replayed from a
# CUDA graph). Figures of merit: images per second (batch / median time of one forward) and the
# median time itself, the share of the fp16 GEMM ceiling measured in the same run, and kernels
# per layer. Runs on its own (`MPLBACKEND=Agg /usr/bin/python3 analysis/encoder.py [--run DIR]
# [--out DIR]`) or from `report/build.py`, which hands it `STUDY_CONTEXT`.
#
# What a row must hold: family `encoder`; version a ladder step, `custom:...` or `pytorch_*`;
# model, batch, image_size, streams, median_us (one forward of the batch), and where measured
# routine_us, tflops, launches. The note of an ok bench row carries
# `pe=.. ln=.. attn=.. mlp=..` (with `(best: ...)` on e6_best), `activations X MB`,
# `X launches per layer`, `cuda-graph replay` or not, and `eager breakdown us: name=us ...`;
# anything missing there only leaves its cell or figure empty.

# %%
import io
import json
import re
from pathlib import Path

import matplotlib
import matplotlib.ticker

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import studylib
from analysis import plots
from studylib import catalog, formatting, paths, run_folder, rundata, specs
from studylib import steps as step_table  # the encoder's step table (stages/encoder/steps.tsv)
from studylib.schema import MODELS  # name -> (hidden, heads, depth)

ctx, run, prov, tprov = plots.open_notebook("encoder", globals())

KEY_MODEL, KEY_IMAGE = "vit_b", 224   # the study's targets are set at ViT-B/16, 224 px
KEY_BATCHES = (1, 32, 256)
# The steps in table order (stages/encoder/steps.tsv, with steps that left the build after their
# parent), and the step each one changes: its parent in the table.
LADDER = step_table.analysis_ladder()
PREVIOUS = {v: p for v, p in step_table.analysis_parents().items() if p}
E3, E4, E6 = "e3_graph", "e4_streams", "e6_best"
EAGER, GRAPH, COMPILE = "pytorch_timm", "pytorch_timm_graph", "pytorch_timm_compile_graph"
ANCHORS = [EAGER, GRAPH, COMPILE]
TARGET_COMPILE = 1.3      # 1.3x torch.compile's throughput at batch 256
TARGET_B1_MS = 0.4        # at most 0.4 ms at batch 1
# The fp16 targets are judged on the fastest of e6_best and the fp16 steps after it, at each batch.
BEST_STEPS = step_table.fp16_steps_from(E6)
COMPONENTS = ["patch_embed", "layernorm", "qkv", "attention", "projection", "residual_add",
              "mlp", "head"]
TORCHAO = ["pytorch_torchao_fp8_tensor_graph", "pytorch_torchao_fp8_row_graph"]
LABEL = {EAGER: "timm eager", GRAPH: "timm in a CUDA graph",
         COMPILE: "timm torch.compile + CUDA graph", TORCHAO[0]: "torchao FP8, per tensor (CUDA graph)",
         TORCHAO[1]: "torchao FP8, per row, bf16 (CUDA graph)"}
# Eager vs graph replay is the line style everywhere (the anchors keep the colours and markers
# they have in every family's figures).
EAGER_LINE, GRAPH_LINE = "--", "-"


def join_and(items):
    items = list(items)
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def fmt_ms(us):
    """Milliseconds from microseconds: 3 significant digits below 10 ms."""
    if us is None or not np.isfinite(us):
        return "-"
    ms = us / 1000
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 10 else f"{ms:.1f}"


def fmt_rate(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:,.0f}"


def fmt_mb(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def fmt_one(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:.1f}"


# %% [markdown]
# ## Reading the notes: family versions, what `best` resolved to, memory, launches, breakdown

# %%
def parse_breakdown(note):
    """{component: us} from the text after 'eager breakdown us: ' (a repeated name adds up);
    {} when the row has none."""
    m = re.search(r"eager breakdown us:\s*([^;]*)", note)
    if not m:
        return {}
    out = {}
    for name, value in re.findall(r"([A-Za-z_]\w*)=([-+]?[0-9.]+(?:[eE][-+]?\d+)?|nan)",
                                  m.group(1)):
        v = float(value)
        if np.isfinite(v):
            out[name] = out.get(name, 0.0) + v
    return out


def best_resolved(note):
    """The text inside '(best: ...)', parentheses balanced (passed-over reasons have their
    own); None without one."""
    start = note.find("(best: ")
    if start < 0:
        return None
    depth, i = 0, start
    for i, ch in enumerate(note[start:], start):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            break
    return note[start + len("(best: "):i].strip()


def mix_of(note):
    return step_table.note_mix(note)


def number(note, pattern):
    m = re.search(pattern, note)
    return float(m.group(1)) if m else np.nan


everything = run.rows("encoder")
ok = run.ok("encoder")
note = ok["note"].astype(str)
# Quick checks with fewer blocks (`--layers N`) are not the model the row names.
short = note.str.contains(r"\blayers=\d+", regex=True)
n_short = int(short.sum())
ok = ok[~short]
ok, flush, flush_dropped = rundata.one_setting(ok, "flush_l2")
flush_text = {0.0: "L2 not flushed between repeats", 1.0: "L2 flushed between repeats"}.get(
    flush, "L2 flush setting not recorded")
note = ok["note"].astype(str)
ok["streams"] = ok["streams"].fillna(1)
ok["act_mb"] = note.map(lambda s: number(s, r"activations ([0-9.]+) MB"))
depth = ok["model"].map(lambda m: MODELS.get(m, (0, 0, np.nan))[2]).astype(float)
ok["lpl"] = note.map(lambda s: number(s, r"([0-9.]+) launches per layer"))
ok["lpl"] = ok["lpl"].fillna(ok["launches"] / depth)
# A compiled anchor's count is its forward's only where the row says it compiled before counting
# ("compiled in this row" / "kept"): older rows counted the compile's autotuning kernels too.
COMPILED_ANCHOR = ok["version"].astype(str).isin([COMPILE]) | ok["version"].astype(str).str.startswith("pytorch_torchao")
ok.loc[COMPILED_ANCHOR & ~note.str.contains(r"compiled in this row|compiled model kept", regex=True), "lpl"] = np.nan
ok["graph"] = note.str.contains("cuda-graph replay", regex=False)
ceil = run.ceilings().gemm_tflops
ok["gemm_pct"] = 100 * ok["tflops"] / ceil if ceil else np.nan

KEYS = ["version", "model", "image_size", "batch", "streams"]
# Interleaved rounds give one row per round: the median across them is the value, the range of
# the rounds' medians its spread.
t = rundata.collapse_rounds(ok, KEYS, routine_us=("routine_us", "median"),
                       tflops=("tflops", "median"), gemm_pct=("gemm_pct", "median"),
                       lpl=("lpl", "median"), act_mb=("act_mb", "median"),
                       sm_mhz=("sm_clock_mhz", "median"), energy_j=("energy_j", "median"),
                       power_w=("power_w", "median"), energy_mhz=("energy_sm_clock_mhz", "median"))
t["img_s"] = t["batch"] / t["median_us"] * 1e6
t["spread_pct"] = 100 * (t["hi_us"] - t["lo_us"]) / t["median_us"]

# Per-component times, median across rounds.
parts = []
for (_, r), text in zip(ok.iterrows(), note):
    for comp, us in parse_breakdown(text).items():
        parts.append({**{k: r[k] for k in KEYS}, "component": comp, "us": us})
parts = pd.DataFrame(parts, columns=KEYS + ["component", "us"])
if len(parts):
    parts = parts.groupby(KEYS + ["component"], as_index=False, sort=False)["us"].median()
components = [c for c in COMPONENTS if c in set(parts["component"])] + \
    [c for c in dict.fromkeys(parts["component"]) if c not in COMPONENTS]

# One row per (version, model, image, batch) for the ladder views: e4 at its fastest stream
# count there (the streams table shows every count), every other version on its one stream.
lad = t.loc[t.groupby(["version", "model", "image_size", "batch"])["median_us"].idxmin()]
order = catalog.version_order(t["version"], LADDER + ANCHORS)
customs = [v for v in order if v.startswith("custom:")]
CUSTOM_LABEL = {v: f"custom {chr(ord('A') + i)}" if i < 26 else f"custom {i + 1}"
                for i, v in enumerate(customs)}
steps = [v for v in LADDER if v in order]   # the ladder steps this run has


def label(v):
    return LABEL.get(v, CUSTOM_LABEL.get(v, v))


custom_key = "; ".join(f"{CUSTOM_LABEL[v]} = `{v.removeprefix('custom:')}`" for v in customs)
graphed = ok.groupby("version")["graph"].any().to_dict()
style = plots.styles(order, fastest=plots.fastest_at(lad, model="vit_b", image_size=224, batch=None))
for v in order:
    is_graph = graphed.get(v, v in (GRAPH, COMPILE) or bool(step_table.is_graph_version(v)))
    style[v]["linestyle"] = GRAPH_LINE if is_graph else EAGER_LINE

models = list(dict.fromkeys(lad["model"]))
key_model = KEY_MODEL if KEY_MODEL in models else (
    lad["model"].value_counts().index[0] if len(lad) else KEY_MODEL)
km = lad[lad["model"] == key_model]
images = sorted(int(i) for i in set(km["image_size"]))
key_image = KEY_IMAGE if KEY_IMAGE in images else (images[0] if images else KEY_IMAGE)
at_key = km[km["image_size"] == key_image]
targets_apply = key_model == KEY_MODEL and key_image == KEY_IMAGE
where = f"{key_model}, {key_image} px"


def at(version, batch, col="median_us", image=None, model=None):
    """One value of the ladder view, NaN where that version has no timing there."""
    d = lad[(lad["version"] == version) & (lad["batch"] == batch)
            & (lad["model"] == (model or key_model))
            & (lad["image_size"] == (image or key_image))]
    return float(d[col].iloc[0]) if len(d) else np.nan


def fp16_anchors(batch, image=None):
    """The fp16 PyTorch anchors timed at this batch: torchao's FP8 anchors are the FP8 steps'
    measure, judged apart."""
    return [a for a in order if catalog.is_anchor(a) and a not in TORCHAO and np.isfinite(at(a, batch, image=image))]


def best_anchor(batch, image=None):
    """(anchor, median us) of the fastest fp16 PyTorch anchor at this batch, or (None, nan)."""
    times = {a: at(a, batch, image=image) for a in fp16_anchors(batch, image)}
    if not times:
        return None, np.nan
    a = min(times, key=times.get)
    return a, times[a]


def batch_axis(ax, batches):
    """Log-2 batch axis with a tick at every measured batch, labelled as plain numbers."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(batches))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def plain_log_y(ax):
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:,.0f}"))
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def legend_below(fig, handles, bottom):
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 3),
               bbox_to_anchor=(0.5, 0.0), frameon=False)
    fig.tight_layout(rect=(0, bottom, 1, 0.93))


line_styles = ("eager runs dashed, graph replays solid; each PyTorch anchor its own colour and "
               "marker")
lad

# %% [markdown]
# ## Throughput vs batch (images per second), one panel per image size

# %%
if len(km):
    fig, axes = plt.subplots(1, len(images), figsize=(plots.panels_width(len(images), 5.2), 4.6), squeeze=False)
    handles = {}
    for ax, image in zip(axes[0], images):
        d0 = km[km["image_size"] == image]
        for v in order:
            d = d0[d0["version"] == v].sort_values("batch")
            if not len(d):
                continue
            y = d["img_s"].to_numpy()
            lo, hi = d["batch"] / d["hi_us"] * 1e6, d["batch"] / d["lo_us"] * 1e6
            ax.errorbar(d["batch"], y, yerr=[y - lo.to_numpy(), hi.to_numpy() - y], capsize=2,
                        elinewidth=0.7, **style[v])
            handles[v] = plt.Line2D([], [], label=label(v), **style[v])
        c = at(COMPILE, 256, image=image)
        if image == KEY_IMAGE and key_model == KEY_MODEL and np.isfinite(c):
            goal = TARGET_COMPILE * 256 / c * 1e6
            ax.plot([256], [goal], linestyle="none", marker="_", markersize=22,
                    markeredgewidth=2, color="#444444")
            handles["_goal"] = plt.Line2D([], [], linestyle="none", marker="_", markersize=14,
                                          markeredgewidth=2, color="#444444",
                                          label=f"target at batch 256: {TARGET_COMPILE}x "
                                                f"torch.compile's img/s")
        batch_axis(ax, sorted(int(b) for b in set(d0["batch"])))
        plain_log_y(ax)
        ax.set_xlabel("batch (images per forward)")
        ax.set_title(f"{key_model}, {image} px")
    axes[0][0].set_ylabel("images per second (median of rounds)")
    plots.titled(fig, f"Whole ViT forward: throughput vs batch ({flush_text})", tprov)
    legend_below(fig, list(handles.values()), 0.06 + 0.035 * ((len(handles) + 2) // 3))
    ctx.figure("encoder_throughput", fig,
               f"Images per second (batch / median time of one forward) against batch, "
               f"{key_model}, one panel per image size, log axes; error bars span the rounds' "
               f"medians; e4_streams at its fastest stream count per batch; {line_styles}"
               + (f"; {custom_key}" if custom_key else "") + f". {flush_text}. {prov}.")
else:
    ctx.missing("figure", "encoder_throughput", "this run has no timed encoder rows")

# %% [markdown]
# ## Speedup over torch.compile, one panel per batch
#
# A log axis of images per second hides a 10-40% difference; this figure shows the ratio itself.

# %%
vc_batches = [b for b in sorted(int(x) for x in set(at_key["batch"])) if np.isfinite(at(COMPILE, b))]
vc_order = [v for v in order if v != COMPILE and any(np.isfinite(at(v, b)) for b in vc_batches)]
if vc_batches and vc_order:
    fig, axes = plt.subplots(1, len(vc_batches), figsize=(plots.panels_width(len(vc_batches), 3.3, 2.2),
                                                          0.28 * len(vc_order) + 1.9),
                             sharey=True, squeeze=False)
    for ax, b in zip(axes[0], vc_batches):
        c = at(COMPILE, b)
        ratio = [c / at(v, b) for v in vc_order]
        steps_here = [(r, v) for v, r in zip(vc_order, ratio) if np.isfinite(r) and not catalog.is_anchor(v)]
        top = max(steps_here)[1] if steps_here else None
        for i, (v, r) in enumerate(zip(vc_order, ratio)):
            if not np.isfinite(r):
                continue
            ax.barh(i, r, color=style[v]["color"], alpha=0.85,
                    hatch="//" if style[v]["linestyle"] == EAGER_LINE else None,
                    edgecolor="white" if style[v]["linestyle"] == EAGER_LINE else style[v]["color"],
                    linewidth=2.0 if v == top else 0.5)
            ax.text(r, i, f" {r:.2f}x", va="center", fontsize=6.5)
        ax.axvline(1.0, color="#444444", linewidth=0.8)
        if b == 256 and targets_apply:
            ax.axvline(TARGET_COMPILE, color="#444444", linewidth=0.9, linestyle=":")
            ax.text(TARGET_COMPILE, -0.9, f" target {TARGET_COMPILE}x", fontsize=6.5, color="#444444")
        ax.set_xlim(0, max(np.nanmax(ratio), TARGET_COMPILE if b == 256 else 1.0) * 1.3)
        ax.set_title(f"batch {b} (torch.compile {fmt_ms(c)} ms)")
        ax.set_xlabel("torch.compile time / step time")
    axes[0][0].set_yticks(range(len(vc_order)), [label(v) for v in vc_order], fontsize=7)
    axes[0][0].invert_yaxis()
    plots.titled(fig, f"Whole ViT forward: speedup over torch.compile + CUDA graph, {where}", tprov)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    ctx.figure("encoder_vs_compile", fig,
               f"Speedup of every ladder step and PyTorch anchor over timm under torch.compile "
               f"(max-autotune) replayed in a CUDA graph, {where}, one panel per batch: torch.compile's "
               f"median time / the step's (above 1 = faster; medians of the rounds, both from this run); "
               f"the fastest step of each batch outlined heavier; hatched bars run eagerly"
               + (f"; the dotted line at batch 256 is the {TARGET_COMPILE}x target" if targets_apply else "")
               + (f"; {custom_key}" if custom_key else "") + f". {flush_text}. {prov}.")
else:
    ctx.missing("figure", "encoder_vs_compile", f"this run has no torch.compile rows at {where}")

# %% [markdown]
# ## Batch-1 latency, ladder and anchors

# %%
b1 = at_key[at_key["batch"] == 1]
b1_order = [v for v in order if v in set(b1["version"])]
# The floor of a batch-1 forward: reading every weight once at the run's measured copy bandwidth
# (the weights' size from the rows' notes; the copy rate counts bytes read plus written, so a
# read alone at that rate is a lower bound only in the same sense).
weights_mb = note[ok["model"] == key_model].map(lambda x: number(x, r"weights ([0-9.]+) MB")).dropna()
copy_gbps = run.ceilings().copy_gbps
floor_us = (weights_mb.median() * 1e6 / (copy_gbps * 1e9) * 1e6
            if len(weights_mb) and copy_gbps else np.nan)
b1_depth = MODELS.get(key_model, (0, 0, np.nan))[2]
if b1_order:
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(b1_order) + 1.8))
    # One slow forward (timm eager at batch 1 is ~10x the rest) must not squeeze every other bar
    # into a sliver: the axis ends a little past the slowest forward within 3x of the median,
    # and a bar beyond that is cut there with its value written at the cut.
    his = b1.set_index("version").loc[b1_order, "hi_us"] / 1e3
    typical = float(np.median(b1.set_index("version").loc[b1_order, "median_us"])) / 1e3
    in_range = his[his <= 3 * typical]
    x_end = 1.3 * float(in_range.max() if len(in_range) else his.max())
    cut = []
    for i, v in enumerate(b1_order):
        r = b1[b1["version"] == v].iloc[0]
        ms, lo, hi = r["median_us"] / 1e3, r["lo_us"] / 1e3, r["hi_us"] / 1e3
        eager = style[v]["linestyle"] == EAGER_LINE
        kernels = (r["lpl"] * b1_depth if v not in ANCHORS and np.isfinite(r.get("lpl", np.nan))
                   else np.nan)  # the anchors' counts include work outside the forward
        text = f"  {fmt_ms(r['median_us'])} ms" + (f", ~{kernels:.0f} kernels" if np.isfinite(kernels) else "")
        if hi > x_end:
            cut.append(label(v))
            ax.barh(i, x_end, color=style[v]["color"], alpha=0.85, hatch="//" if eager else None,
                    edgecolor="white" if eager else style[v]["color"])
            ax.text(x_end, i, f"{text} (axis cut)", va="center", fontsize=7)
            continue
        ax.barh(i, ms, color=style[v]["color"], alpha=0.85, hatch="//" if eager else None,
                edgecolor="white" if eager else style[v]["color"],
                xerr=[[ms - lo], [hi - ms]], capsize=2, error_kw=dict(elinewidth=0.7))
        ax.text(hi, i, text, va="center", fontsize=7)
    ax.set_yticks(range(len(b1_order)), [label(v) for v in b1_order])
    ax.invert_yaxis()
    ax.set_xlabel("median time of one forward at batch 1 (ms)")
    refs = []
    if targets_apply:
        refs.append(ax.axvline(TARGET_B1_MS, color="#444444", linewidth=0.9, linestyle=":",
                               label=f"target: {TARGET_B1_MS} ms"))
    a, a_us = best_anchor(1)
    if a:
        refs.append(ax.axvline(a_us / 1e3, color=style[a]["color"], linewidth=0.8,
                               linestyle="-.", label=f"fastest anchor: {label(a)}"))
    if np.isfinite(floor_us):
        refs.append(ax.axvline(floor_us / 1e3, color="#2ca02c", linewidth=1.0, linestyle="--",
                               label=f"weight-read floor: {floor_us:.0f} us"))
    ax.set_xlim(0, max(x_end, ax.get_xlim()[1] if not cut else 0) * 1.3)  # room for the value labels
    refs.append(plt.Rectangle((0, 0), 1, 1, facecolor="#999999", hatch="//", edgecolor="white",
                              label="eager (hatched); solid bars: graph replay"))
    plots.titled(fig, f"Whole ViT forward at batch 1, {where}", tprov)
    fig.legend(handles=refs, loc="lower center", ncol=min(len(refs), 3), frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.08 + 0.04 * (len(refs) > 3), 1, 0.92))
    ctx.figure("encoder_latency", fig,
               f"Median time of one forward at batch 1, {where}: every ladder step and PyTorch "
               f"anchor, error bars spanning the rounds' medians; hatched bars run eagerly, "
               f"solid bars replay a CUDA graph; beside each of our steps the kernels of one "
               f"forward (launches per layer from its row x the model's layers); the green line "
               f"is the weight-read floor (the weights once at the run's measured copy bandwidth)"
               + (f"; the axis is cut short of {', '.join(cut)} (more than 3x the median forward; "
                  f"its time is written at the cut)" if cut else "")
               + (f"; {custom_key}" if custom_key else "") + f". {flush_text}. {prov}.")
else:
    ctx.missing("figure", "encoder_latency", f"this run has no timed batch-1 rows at {where}")

# %% [markdown]
# ## Time and energy per image at batch 256
#
# The energy loop after each row's timing (`--energy`, docs/method.md "Energy"): at batch 256 the
# fast steps run at the power limit, so a joule saved per image is clock gained.

# %%
EB = 256
e = at_key[(at_key["batch"] == EB) & at_key["energy_j"].notna()] if "energy_j" in at_key else at_key.iloc[0:0]
if len(e):
    fig, ax = plt.subplots(figsize=(9.0, 4.8))
    for _, r in e.iterrows():
        v = r["version"]
        x, y = r["median_us"] / EB / 1e3, r["energy_j"] / EB * 1e3
        clock = f", {r['energy_mhz']:.0f} MHz" if np.isfinite(r["energy_mhz"]) else ""
        ax.scatter(x, y, color=style[v]["color"], marker=style[v]["marker"], s=36, zorder=3,
                   label=f"{label(v)}: {r['power_w']:.0f} W{clock}")
    ax.set_xlabel(f"time per image at batch {EB} (ms)")
    ax.set_ylabel(f"energy per image at batch {EB} (mJ)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    plots.titled(fig, f"Time against energy per image, batch {EB}, {where}", tprov)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    ctx.figure("encoder_energy", fig,
               f"Each ladder step and PyTorch anchor at batch {EB}, {where}: the median time per image "
               f"(x) against the energy per image (y) from NVML's board energy counter over a loop of "
               f"back-to-back forwards of at least 5 s after the timed ones (docs/method.md, Energy); the legend "
               f"gives each loop's mean power and SM clock; each step and anchor in its colour and marker of the other figures. Points on a "
               f"line through the origin share one power: below the power limit, faster costs more "
               f"watts; at it, only fewer joules per image make a step faster. {prov}.")
else:
    ctx.missing("figure", "encoder_energy", f"this run has no encoder rows with energy at batch {EB}, {where} "
                "(a spec's energy_s, or --energy on the bench)")

# Images per joule of every step and anchor with energy, against torch.compile's at the same batch.
energy_rows = at_key[at_key["energy_j"].notna()] if "energy_j" in at_key else at_key.iloc[0:0]
if len(energy_rows):
    comp = {int(r["batch"]): r["batch"] / r["energy_j"]
            for _, r in energy_rows[energy_rows["version"] == COMPILE].iterrows()}
    et = pd.DataFrame([{
        "version": label(r["version"]), "batch": int(r["batch"]), "ms": r["median_us"] / 1e3,
        "images/J": r["batch"] / r["energy_j"], "W": r["power_w"], "MHz": r["energy_mhz"],
        "x torch.compile images/J": (r["batch"] / r["energy_j"] / comp[int(r["batch"])]
                                     if int(r["batch"]) in comp else np.nan)}
        for _, r in energy_rows.sort_values(["batch", "median_us"]).iterrows()])
    ctx.table("encoder_images_per_joule", formatting.markdown_table(et, {
        "batch": formatting.fmt_int, "ms": lambda x: f"{x:.3f}", "images/J": lambda x: f"{x:.1f}",
        "W": lambda x: f"{x:.0f}", "MHz": lambda x: "-" if not np.isfinite(x) else f"{x:.0f}",
        "x torch.compile images/J": lambda x: "-" if not np.isfinite(x) else f"{x:.2f}x"}),
        f"Energy per image of every step and anchor measured with it, {where}: images per joule (the batch "
        f"over the joules of one forward, from NVML's board energy counter over a loop of at least 5 s of "
        f"back-to-back forwards), the loop's mean power and SM clock, and images per joule against "
        f"torch.compile's at the same batch (medians across rounds; docs/method.md, Energy). {prov}.")
else:
    ctx.missing("table", "encoder_images_per_joule", f"this run has no encoder rows with energy at {where}")

# %% [markdown]
# ## A batch-1 forward kernel by kernel (Nsight Compute)
#
# experiments/small_m_probe.sh profiles every kernel of e6_best's eager batch-1 forward
# (caches flushed before each kernel, as a forward finds each layer's weights) into
# `<run>/small_m_probe/ncu_forward_b1.csv`, beside the rows it times (`rows.csv`, whose GPU
# column says where it ran). The newest such folder on this run's GPU, among the run folders
# beside this one, is used.

# %%
def ncu_kernels(path: Path) -> pd.DataFrame:
    """Nsight Compute's raw CSV page: one row per kernel, the metrics as numbers."""
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise studylib.DataError(f"{rundata.show_path(path)}: no Nsight Compute table (no \"ID\" header)")
    d = pd.read_csv(io.StringIO("\n".join(lines[start:])), low_memory=False)
    d = d[pd.to_numeric(d["ID"], errors="coerce").notna()].copy()  # drops the units row
    for c in d.columns:
        if "__" in c:
            d[c] = pd.to_numeric(d[c].astype(str).str.replace(",", ""), errors="coerce")
    return d


def kernel_kind(name: str) -> str:
    name = str(name)
    if "splitKreduce" in name:
        return "GEMM split-K reduction (cuBLASLt)"
    if "nvjet" in name or "GemmUniversal" in name or "gemm" in name.lower():
        return "GEMM"
    for key, kind in (("attention", "attention"), ("layernorm", "LayerNorm"), ("patch_embed", "patch embedding")):
        if key in name:
            return kind
    return "other"


b1_probes = []
for b1_f in sorted(run.path.parent.glob("*/small_m_probe/ncu_forward_b1.csv")):  # this results root
    b1_rows_csv = b1_f.parent / "rows.csv"
    if b1_rows_csv.is_file():
        b1_rows = rundata.read_csv(b1_rows_csv)
        if rundata.gpu_of(run) in set(b1_rows["gpu"].astype(str)):
            b1_probes.append((pd.to_datetime(b1_rows["utc"]).max(), b1_f))
if b1_probes:
    b1_probe = sorted(b1_probes)[-1][1]
    b1_k = ncu_kernels(b1_probe)
    b1_k["kind"] = b1_k["Kernel Name"].map(kernel_kind)
    # The profile holds several identical eager forwards: the first, from its patch embedding up
    # to the next one.
    b1_starts = [i for i, kind in enumerate(b1_k["kind"]) if kind == "patch embedding"] + [len(b1_k)]
    b1_one = b1_k.iloc[b1_starts[0]:b1_starts[1]] if len(b1_starts) > 1 else b1_k
    b1_g = b1_one.groupby("kind").agg(
        kernels=("kind", "size"), us=("gpu__time_duration.sum", "sum"), mb=("dram__bytes_read.sum", "sum"),
        dram=("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "mean"))
    b1_g["us"] /= 1e3
    b1_g["mb"] /= 1e6
    b1_g = b1_g.sort_values("us", ascending=False)
    b1_total_us = b1_g["us"].sum()
    b1_table = pd.DataFrame({"kernels": b1_g.index, "count": b1_g["kernels"].astype(int),
                             "us": b1_g["us"].map(lambda v: f"{v:.1f}"),
                             "share": (100 * b1_g["us"] / b1_total_us).map(lambda v: f"{v:.0f}%"),
                             "MB read": b1_g["mb"].map(lambda v: f"{v:.1f}"),
                             "DRAM % of peak (mean)": b1_g["dram"].map(lambda v: f"{v:.1f}")})
    b1_table.loc[len(b1_table)] = ["**total**", int(b1_g["kernels"].sum()), f"{b1_total_us:.1f}", "100%",
                                   f"{b1_g['mb'].sum():.1f}", ""]
    ctx.table("encoder_b1_kernels", formatting.markdown_table(b1_table.reset_index(drop=True)),
              f"Every kernel of one eager batch-1 forward of e6_best (vit_b, 224 px), from Nsight "
              f"Compute (experiments/small_m_probe.sh, in {rundata.show_path(b1_probe.parent)}): caches "
              f"flushed before each kernel, clocks not locked; the durations add up to "
              f"{b1_total_us:.0f} us, against the forward's graph replay in the ladder, where the "
              f"activations stay in L2 and launches overlap. Every kernel runs at a small share of "
              f"the DRAM bandwidth: a 197-row forward is a chain of latency-bound kernels "
              f"(stages/encoder/NOTES.md, batch 1).")
else:
    ctx.missing("table", "encoder_b1_kernels", "no small_m_probe/ncu_forward_b1.csv on this run's GPU "
                "(experiments/small_m_probe.sh RUN/small_m_probe)")

# %% [markdown]
# ## Where the time goes: per-component device time of one eager forward

# %%
bd_batches = [b for b in (256, 1) if b in set(at_key["batch"])]
bd = parts.merge(lad[KEYS], on=KEYS) if len(parts) else parts
bd = bd[(bd["model"] == key_model) & (bd["image_size"] == key_image)
        & bd["batch"].isin(bd_batches)] if len(bd) else bd
bd_versions = [v for v in order if v in set(bd["version"])] if len(bd) else []
comp_colors = dict(zip(components, plt.get_cmap("tab10").colors))
if len(bd_versions):
    panels = [b for b in bd_batches if b in set(bd["batch"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(plots.panels_width(len(panels), 5.0), 4.6), squeeze=False)
    for ax, b in zip(axes[0], panels):
        vs = [v for v in bd_versions if len(bd[(bd["version"] == v) & (bd["batch"] == b)])]
        bottom = np.zeros(len(vs))
        for comp in components:
            h = np.array([bd.loc[(bd["version"] == v) & (bd["batch"] == b)
                                 & (bd["component"] == comp), "us"].sum() / 1e3 for v in vs])
            ax.bar(range(len(vs)), h, bottom=bottom, color=comp_colors[comp], width=0.7)
            bottom += h
        measured = [at(v, b) / 1e3 for v in vs]
        ax.plot(range(len(vs)), measured, linestyle="none", marker="_", markersize=20,
                markeredgewidth=2, color="#000000")
        ax.set_xticks(range(len(vs)), [label(v) for v in vs], rotation=30, ha="right")
        ax.set_ylabel("ms")
        ax.set_title(f"batch {b}")
        ax.set_ylim(0, max(max(bottom), np.nanmax(measured + [0])) * 1.08)
    handles = [plt.Rectangle((0, 0), 1, 1, color=comp_colors[c], label=c) for c in components]
    handles.append(plt.Line2D([], [], linestyle="none", marker="_", markersize=14,
                              markeredgewidth=2, color="#000000",
                              label="measured forward (median)"))
    plots.titled(fig, f"Whole ViT forward: device time per component, {where}", tprov)
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    ctx.figure("encoder_breakdown", fig,
               f"Device time of each component in one eager forward (CUDA events around every "
               f"component, summed over the layers; medians of the rounds), stacked per version "
               f"at {where}, batch {' and '.join(map(str, panels))}; the black mark is the "
               f"version's measured forward (a graph replay where the version replays one), so "
               f"the gap is launch overhead the graph removes or event overhead. {prov}.")
    rows = []
    for b in panels:
        for v in bd_versions:
            d = bd[(bd["version"] == v) & (bd["batch"] == b)]
            if not len(d):
                continue
            row = {"batch": b, "version": label(v)}
            row.update({c: d.loc[d["component"] == c, "us"].sum() if c in set(d["component"])
                        else np.nan for c in components})
            row["sum"] = d["us"].sum()
            row["measured"] = at(v, b)
            rows.append(row)
    bt = pd.DataFrame(rows)
    ctx.table("encoder_components", formatting.markdown_table(
        bt, {c: formatting.fmt_us for c in components + ["sum", "measured"]} | {"batch": formatting.fmt_int}),
        f"Device time per component of one eager forward (us, summed over the layers; median "
        f"of the rounds), its sum, and the measured forward (median us) at {where}; '-' = the "
        f"version has no such component. {prov}.")
else:
    why = ("no row's note carries an eager breakdown" if not len(parts) else
           f"no breakdown at {where}, batch 256 or 1")
    ctx.missing("figure", "encoder_breakdown", why)
    ctx.missing("table", "encoder_components", why)

# %% [markdown]
# ## The GEMMs against the GPU's measured ceiling
#
# Each block's GEMMs from the same eager breakdown: the QKV and projection GEMMs and the MLP's
# two GEMMs (with their fused epilogues), as achieved TFLOP/s and as a share of the run's
# measured fp16 GEMM rate, beside the SM clock the row recorded (the forward is power-bound at
# large batches, and the clock is part of the story).

# %%
# (component, N, K) per block for hidden D: the MLP counts its two GEMMs, 2 x D x 4D each.
GEMM_COMPONENTS = {"qkv": lambda d: (3 * d, d), "projection": lambda d: (d, d),
                   "mlp": lambda d: (4 * d, d)}
gemm_ceiling = run.ceilings().gemm_tflops
fused_steps = [v for v in steps if v not in ("e1_library", "e2_buffer_reuse", "e3_graph", E4)]
gm = parts[parts["version"].isin(fused_steps) & (parts["model"] == key_model)
           & (parts["image_size"] == key_image) & (parts["streams"] == 1)] if len(parts) else parts
rows = []
if len(gm):
    hidden, _, depth = MODELS.get(key_model, (np.nan, 0, np.nan))
    tokens = (key_image // 16) ** 2 + 1
    for b in [b for b in KEY_BATCHES if b in set(gm["batch"])]:
        for v in fused_steps:
            d = gm[(gm["version"] == v) & (gm["batch"] == b)]
            if not len(d):
                continue
            for comp, nk in GEMM_COMPONENTS.items():
                us = d.loc[d["component"] == comp, "us"].sum()
                if not us > 0:
                    continue
                n, k = nk(hidden)
                m = b * tokens
                flops = depth * 2.0 * m * n * k * (2 if comp == "mlp" else 1)
                tf = flops / us / 1e6
                rows.append({"batch": b, "version": label(v), "GEMM": comp,
                             "m x n x k": f"{m:,} x {n:,} x {k:,}" + (f" and {m:,} x {k:,} x {n:,}"
                                                                     if comp == "mlp" else ""),
                             "us": us, "TFLOP/s": tf,
                             "% of ceiling": 100 * tf / gemm_ceiling if gemm_ceiling else np.nan,
                             "SM MHz": at(v, b, "sm_mhz")})
gemm_finding = None
if rows:
    gt = pd.DataFrame(rows)
    top = gt[gt["batch"] == gt["batch"].max()]
    top = top[top["version"] == top["version"].iloc[-1]]
    if gemm_ceiling and len(top):
        gemm_finding = (f"At batch {int(top['batch'].iloc[0])}, {top['version'].iloc[0]}'s block GEMMs "
                        "run at " + join_and(f"{r['GEMM']} {r['% of ceiling']:.0f}%" for _, r in top.iterrows())
                        + f" of the measured GEMM rate ({gemm_ceiling:,.0f} TFLOP/s), with the SM clock at "
                        f"{top['SM MHz'].iloc[0]:,.0f} MHz (eager breakdown; launch gaps included).")
    ctx.table("encoder_gemms", formatting.markdown_table(
        gt, {"batch": formatting.fmt_int, "us": formatting.fmt_us, "TFLOP/s": fmt_rate,
             "% of ceiling": lambda x: "-" if not np.isfinite(x) else f"{x:.0f}%",
             "SM MHz": fmt_rate}),
        f"The block GEMMs of one eager forward at {where}: device time summed over the layers "
        f"(CUDA events around each component, so launch gaps count against it; the MLP's two "
        f"GEMMs and epilogues are one component), achieved TFLOP/s and its share of the run's "
        f"measured fp16 GEMM rate ({gemm_ceiling:,.0f} TFLOP/s), and the SM clock of the row "
        f"(median of its rounds). {prov}." if gemm_ceiling else
        f"The block GEMMs of one eager forward at {where} (this run has no GEMM ceiling "
        f"measured). {prov}.")
else:
    ctx.missing("table", "encoder_gemms", "no fused ladder step's row carries an eager breakdown "
                f"at {where}")

# %% [markdown]
# ## The ladder at batch 1, 32 and 256: time, throughput, speedups, ceiling share, launches, memory

# %%
def prev_step(v, b):
    """The step v is measured against at batch b: the one it changes (PREVIOUS), else the
    previous ladder step timed there; None for anchors, custom mixes and the first step."""
    if np.isfinite(at(PREVIOUS.get(v), b)):
        return PREVIOUS[v]
    if v in steps and steps.index(v) > 0:
        return next((p for p in reversed(steps[:steps.index(v)]) if np.isfinite(at(p, b))), None)
    return None


key_batches = [b for b in KEY_BATCHES if b in set(at_key["batch"])] or \
    sorted(int(b) for b in set(at_key["batch"]))[:3]
rows = []
for b in key_batches:
    anchor, anchor_us = best_anchor(b)
    for v in order:
        m = at(v, b)
        if not np.isfinite(m):
            continue
        prev = prev_step(v, b)
        rows.append({
            "batch": b, "version": label(v),
            "streams": at(v, b, "streams") if v == E4 else np.nan,
            "ms": m, "rounds range ms": f"{fmt_ms(at(v, b, 'lo_us'))}-{fmt_ms(at(v, b, 'hi_us'))}",
            "img/s": at(v, b, "img_s"),
            "x prev": at(prev, b) / m if prev else np.nan,
            "x best anchor": anchor_us / m if anchor else np.nan,
            "SM MHz": at(v, b, "sm_mhz"),
            "% GEMM ceiling": at(v, b, "gemm_pct"),
            "routine ms": at(v, b, "routine_us"),
            "launches/layer": at(v, b, "lpl"),
            "activations MB": at(v, b, "act_mb"),
            "rounds": at(v, b, "n")})
ladder = pd.DataFrame(rows)
if len(ladder):
    anchors_at = "; ".join(f"batch {b}: {label(best_anchor(b)[0])}" for b in key_batches
                           if best_anchor(b)[0])
    ctx.table("encoder_ladder", formatting.markdown_table(ladder, {
        "batch": formatting.fmt_int, "streams": formatting.fmt_int, "ms": fmt_ms, "img/s": fmt_rate,
        "x prev": formatting.fmt_ratio, "x best anchor": formatting.fmt_ratio, "SM MHz": fmt_rate,
        "% GEMM ceiling": formatting.fmt_pct,
        "routine ms": fmt_ms, "launches/layer": fmt_one, "activations MB": fmt_mb,
        "rounds": formatting.fmt_int}),
        f"The encoder ladder and the PyTorch anchors at {where}, batch "
        f"{', '.join(map(str, key_batches))}: median time of one forward (ms) and the range of "
        f"the rounds' medians, images per second, speedup over the previous ladder step (its "
        f"time / this time; e5_fused against e3_graph, the step it changes), speedup over the fastest PyTorch anchor at that batch ("
        f"{anchors_at or 'none measured'}; above 1 = faster), the SM clock the rows recorded "
        f"(median; below the top clock the GPU was throttled), share of the fp16 GEMM ceiling "
        f"of the same run ({fmt_rate(ceil) + ' TFLOP/s' if ceil else 'not measured'}), routine "
        f"time (images up, forward, logits down), kernel launches per layer (none for a compiled anchor "
        f"row that counted its compile's autotuning kernels), activation memory "
        f"(from the bench's note), and the number of rounds; e4_streams at its fastest stream "
        f"count" + (f"; {custom_key}" if custom_key else "") + f". {flush_text}. {prov}.")
else:
    ctx.missing("table", "encoder_ladder", f"this run has no timed rows at {where}")
ladder

# %% [markdown]
# ## Every step, those that left the build included, from the newest sitting that measured it
#
# The steps were measured in different sittings (side experiments, the main run); each row is
# the newest sitting with the most of the three target batches for that step, on this run's GPU.
# Absolute times only: a ratio between two rows of this table would pair two sittings.

# %%
TRIED = paths.REPO / "stages" / "encoder" / "TRIED.md"
pruned = re.findall(r"^## (e\d+_\w+):", TRIED.read_text(), re.M) if TRIED.is_file() else []
every_step = [v for v in LADDER if re.match(r"e\d+_", v)] + [v for v in pruned if v not in LADDER]
every_step.sort(key=lambda v: int(re.match(r"e(\d+)_", v).group(1)))
gpu_here, newest, in_build = rundata.gpu_of(run), {}, set(step_table.ladder())
for path in sorted(run.path.parent.rglob("*.csv")):
    if "report" in path.relative_to(run.path.parent).parts:
        continue
    try:
        d = rundata.read_csv(path)
    except studylib.DataError:   # an Nsight Compute page or a probe, not study rows
        continue
    d = d[(d["family"] == "encoder") & (d["status"] == "ok") & (d["model"] == KEY_MODEL)
          & (d["image_size"] == KEY_IMAGE) & (d["gpu"].astype(str) == gpu_here)
          & (d["streams"].fillna(1) == 1)
          & ~d["note"].astype(str).str.contains(r"\blayers=\d+", regex=True)]
    for v, g in d[d["version"].isin(every_step)].groupby("version"):
        med = g.groupby("batch")["median_us"].median()
        key = (len(set(med.index) & set(KEY_BATCHES)), str(g["utc"].max()))
        if v not in newest or key > newest[v][0]:
            newest[v] = (key, path.relative_to(run.path.parent).parent, med, g["run_id"].nunique())
rows_ = []
for v in every_step:
    entry = newest.get(v)
    row = {"step": v, "in the build": "yes" if v in in_build else "left it (TRIED.md)"}
    for b in KEY_BATCHES:
        row[f"batch {b} ms"] = entry[2].get(b, np.nan) if entry else np.nan
    row["sitting"] = f"`{entry[1]}`" if entry else "not measured on this GPU"
    rows_.append(row)
if rows_:
    ctx.table("encoder_every_step", formatting.markdown_table(pd.DataFrame(rows_), {
        **{f"batch {b} ms": fmt_ms for b in KEY_BATCHES}}),
        f"Every encoder step of the table and every step that left the build (stages/encoder/TRIED.md), "
        f"at {KEY_MODEL}, {KEY_IMAGE} px on {gpu_here}: median time of one forward (median over the "
        f"rows of its sitting) in the newest sitting with the most of batch 1, 32 and 256, whose folder "
        f"is named. Rows come from different sittings: compare them only with the rows of their own "
        f"sitting (its folder), never with each other.")

# %% [markdown]
# ## Streams (e4): the batch split over 2, 4, 8 streams against e3_graph on one stream

# %%
# The streams experiment is not repeated in every run: without e4 rows here, the newest run on
# this GPU that timed e4 (its e3 rows beside it) is shown, and the caption names it.
streams_t, streams_prov, streams_tprov, streams_from = t, prov, tprov, ""
if not (t["version"] == E4).any():
    for other in sorted(rundata.load_runs(), key=lambda r: r.name, reverse=True):
        o = other.ok("encoder")
        if rundata.gpu_of(other) != rundata.gpu_of(run) or not (o["version"] == E4).any():
            continue
        o = o.assign(streams=o["streams"].fillna(1))
        o = o[~o["note"].astype(str).str.contains(r"\blayers=\d+", regex=True)]
        streams_t = rundata.collapse_rounds(o, KEYS)
        streams_prov, streams_tprov = other.provenance("encoder"), other.title_provenance("encoder")
        streams_from = f" (from run folder {other.name}: this run did not time {E4})"
        break
e4 = streams_t[(streams_t["version"] == E4) & (streams_t["model"] == key_model)
               & (streams_t["image_size"] == key_image)]
e3 = streams_t[(streams_t["version"] == E3) & (streams_t["model"] == key_model)
               & (streams_t["image_size"] == key_image) & (streams_t["streams"] == 1)].set_index("batch")
stream_counts = sorted(int(s) for s in set(e4["streams"]))
if len(e4) and len(e3):
    fig, ax = plt.subplots()
    palette = plt.get_cmap("viridis")(np.linspace(0.1, 0.85, max(len(stream_counts), 1)))
    handles = []
    for s, color in zip(stream_counts, palette):
        d = e4[e4["streams"] == s].set_index("batch")
        r = (d["median_us"] / e3["median_us"]).dropna().sort_index()
        if len(r):
            ax.plot(r.index, r.values, color=color, marker="o", linestyle=GRAPH_LINE)
            handles.append(plt.Line2D([], [], color=color, marker="o",
                                      label=f"e4_streams, {s} stream{'s' if s > 1 else ''}"))
    ref = ax.axhline(1.0, color="#444444", linewidth=0.9, linestyle=":",
                     label="1x: e3_graph on one stream")
    handles.append(ref)
    batch_axis(ax, sorted(int(b) for b in set(e4["batch"]) & set(e3.index)))
    ax.set_xlabel("batch (images per forward)")
    ax.set_ylabel("e4 time / e3_graph time (below 1 = faster)")
    plots.titled(fig, f"Streams: the batch split over streams, {where}", streams_tprov)
    legend_below(fig, handles, 0.06 + 0.035 * ((len(handles) + 2) // 3))
    ctx.figure("encoder_streams", fig,
               f"Median time of e4_streams (the batch cut into one lane per stream, each a whole "
               f"forward, all in one graph) divided by e3_graph's on one stream, against batch, "
               f"{where}; a line at 1 marks no change. Stream counts with more lanes than "
               f"images are not run (see the status table){streams_from}. {streams_prov}.")
    srows = []
    for b in sorted(set(e4["batch"]) | set(e3.index)):
        row = {"batch": b, "e3_graph ms": e3["median_us"].get(b, np.nan)}
        best_s, best = None, np.inf
        for s in stream_counts:
            x = e4.loc[(e4["streams"] == s) & (e4["batch"] == b), "median_us"]
            x = float(x.iloc[0]) if len(x) else np.nan
            row[f"{s} streams ms"] = x
            if np.isfinite(x) and x < best:
                best_s, best = s, x
        row["fastest streams"] = best_s if best_s else np.nan
        row["fastest / e3"] = best / row["e3_graph ms"] if best_s else np.nan
        srows.append(row)
    st_tab = pd.DataFrame(srows)
    ctx.table("encoder_stream_counts", formatting.markdown_table(st_tab, {
        c: (formatting.fmt_int if c in ("batch", "fastest streams") else
            formatting.fmt_ratio if c == "fastest / e3" else fmt_ms) for c in st_tab.columns}),
        f"e4_streams at every stream count against e3_graph on one stream, {where}: median "
        f"time of one forward (ms), the fastest stream count, and its time / e3's (below 1 = "
        f"faster); '-' = not run or not timed{streams_from}. {streams_prov}.")
else:
    why = (f"this run has no timed {E4} rows at {where}" if not len(e4) else
           f"this run has no timed {E3} rows on one stream at {where} to compare with")
    ctx.missing("figure", "encoder_streams", why)
    ctx.missing("table", "encoder_stream_counts", why)

# %% [markdown]
# ## Every timed configuration (median ms)

# %%
if len(t):
    sw = t.assign(col=[label(v) + (f" x{int(s)}" if v == E4 else "")
                       for v, s in zip(t["version"], t["streams"])])
    cols = list(dict.fromkeys(
        c for v in order for c in sw.loc[sw["version"] == v].sort_values("streams")["col"]))
    spread_cells = ("; in parentheses the range of the rounds' medians" if rundata.multi_round(t)
                    else "")
    ctx.table("encoder_sweep", formatting.sweep_table(
        sw, ["model", "image_size", "batch"], "col", cols, fmt_ms,
        {"image_size": formatting.fmt_int, "batch": formatting.fmt_int}),
        f"Median time of one forward (ms, median of the rounds"
        f"{spread_cells}) "
        f"for every timed model x "
        f"image size x batch x version (e4_streams per stream count: x2, x4, ...); '-' = not "
        f"timed (see the status table)" + (f"; {custom_key}" if custom_key else "")
        + f". {prov}.")
else:
    ctx.missing("table", "encoder_sweep", "this run has no timed encoder rows")

# %% [markdown]
# ## Parity with timm: the same weights and images through timm and through the encoder
#
# experiments/accuracy/timm_parity.py writes `<run>/timm_parity_<size>/parity.json`: logits against
# timm's fp16 forward (rel L2, max abs difference, top-1 agreement) and timm's own fp16 against
# its fp32, the scale of rounding the comparison is judged against.

# %%
parity = []
for f in sorted(run.path.glob("timm_parity*/parity.json")):
    try:
        j = json.loads(f.read_text())
        parity.append({
            "image px": int(j["image_size"]), "images": int(j["images"]),
            "version": j["version"] + (f" + {j['compose']}" if j.get("compose") else ""),
            "rel L2 vs timm fp16": j["logits_rel_l2_vs_timm_fp16"],
            "timm fp16 vs fp32": j["timm_fp16_vs_fp32_rel_l2"],
            "max abs diff": j["max_abs_logit_difference"],
            "top-1 (decisive images)": f"{100 * j['top1_agreement_decisive']:.1f}% of "
                                       f"{int(j['decisive_images'])}",
            "top-1 (all)": f"{100 * j['top1_agreement_all']:.1f}%",
            "verdict": "passed" if j["passed"] else "failed",
            "GPU": j["gpu"], "timm": j["timm"]})
    except (ValueError, KeyError, TypeError) as e:
        raise studylib.DataError(f"{rundata.show_path(f)}: not a parity result ({e})") from None
if parity:
    crit = json.loads(sorted(run.path.glob("timm_parity*/parity.json"))[0].read_text())["criteria"]
    ctx.table("encoder_parity", formatting.markdown_table(
        pd.DataFrame(parity).sort_values("image px"),
        {"image px": formatting.fmt_int, "images": formatting.fmt_int, "rel L2 vs timm fp16": lambda x: f"{x:.2e}",
         "timm fp16 vs fp32": lambda x: f"{x:.2e}", "max abs diff": lambda x: f"{x:.4f}"}),
        f"Logits of the encoder against timm's fp16 forward on the same weights (timm's seeded "
        f"init exported to safetensors) and the same N(0, 1) images "
        f"(experiments/accuracy/timm_parity.py, in this run folder): relative L2 of the logits (passes at "
        f"<= {crit['rel_l2_max']:g}), timm's own fp16 against its fp32 for scale, the largest "
        f"absolute difference, and top-1 agreement over the images whose top-1/top-2 margin is "
        f"more than {crit['margin_factor']:g}x that difference (passes at >= "
        f"{100 * crit['agreement_min']:.0f}%) and over all images.")
else:
    ctx.missing("table", "encoder_parity", "this run folder has no timm_parity_*/parity.json "
                "(experiments/accuracy/timm_parity.py --out RUN/timm_parity_SIZE)")

# %% [markdown]
# Which steps a passing parity file vouches for, over every run folder beside this one: a step
# with none has only the C++ tests' word for its logits.

# %%
vouched = {}
try:
    step_parity = step_table.parity_files(run.path.parent)
except step_table.ParityFileError as e:
    raise studylib.DataError(f"{rundata.show_path(e.path)}: not a parity result ({e.why})") from None
for f, j in step_parity:
    parity_where = (f"{int(j['image_size'])} px, {j.get('weight_set', 'timm')} weights "
             f"({f.parent.relative_to(run.path.parent).parent})")
    vouched.setdefault(j["version"], {"passed": [], "failed": []})["passed" if j.get("passed") is True else "failed"].append(parity_where)
# The rule the aliases and the final answer use (steps.models_timm): an fp16 step stands for timm's
# model when its newest parity file with every parameter drawn passes at 224 and 384 px.
parity_newest = step_table.parity_verdicts(run.path.parent)
by_step = pd.DataFrame({
    "step": LADDER,
    "stands for timm's model": [
        "yes" if step_table.models_timm(v, parity_newest) else "- (FP8)" if step_table.is_fp8_step(v) else "no"
        for v in LADDER],
    "passing timm parity": ["; ".join(vouched[v]["passed"]) or "**none**" if v in vouched else "**none**" for v in LADDER],
    "failing timm parity": ["; ".join(vouched[v]["failed"]) if v in vouched else "" for v in LADDER]})
ctx.table("encoder_parity_by_step", formatting.markdown_table(by_step, {}),
          "The timm parity files (experiments/accuracy/timm_parity.py) of each encoder step, over every committed "
          "run folder, passing and failing: image size, weight set (random: every parameter drawn; timm: "
          "timm's own init, whose zero biases and unit gains hide some bugs) and run; **none** marks a "
          "step whose logits no parity file has passed. Parity files of a custom mix (`--compose`) "
          "vouch for no step. An fp16 step stands for timm's model when its newest parity file with every "
          "parameter drawn passes at 224 and 384 px: the aliases and the final answer choose among those.")

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
st = formatting.status_table(everything.assign(
    _o=everything["version"].map({v: i for i, v in enumerate(order)}).fillna(len(order)))
    .sort_values(["_o", "version"], kind="stable"))
st["version"] = st["version"].map(label)
left_out = []
if n_short:
    left_out.append(f"{n_short} timed rows of a shortened model (--layers) are not shown")
if flush_dropped:
    left_out.append(f"{flush_dropped} timed rows with the other L2 flush setting are not shown")
ctx.table("encoder_status", formatting.markdown_table(st),
          "Encoder rows (ladder, custom mixes and PyTorch anchors, every round) per version and "
          "status, with the reason of every row that was not timed"
          + (f" ({'; '.join(left_out)})" if left_out else "")
          + (f"; {custom_key}" if custom_key else "") + f". {prov}.")
st

# %% [markdown]
# ## Findings, as sentences generated from the numbers above

# %%
findings = []
rounds = sorted(int(n) for n in set(at_key["n"])) if len(at_key) else []
if rounds:
    if max(rounds) == 1:
        findings.append("Every configuration was measured once (one round): the verdicts below "
                        "rest on single rows, not on the median of three or more interleaved "
                        "rounds.")
    else:
        counts = (f"{rounds[0]}" if len(rounds) == 1 else f"{rounds[0]} to {rounds[-1]}")
        findings.append(f"Each configuration at {where} was measured in {counts} rounds; every "
                        f"time below is the median across them (the ladder table gives the "
                        f"range).")


def fastest_of(candidates, b):
    """The fastest of `candidates` timed at batch b, or None."""
    timed = [v for v in candidates if np.isfinite(at(v, b))]
    return min(timed, key=lambda v: at(v, b)) if timed else None


# The fp16 targets are judged on the steps that compute timm's model (the answer's rule), where
# the parity files vouch for any of this run's fp16 steps; else on every fp16 step from e6_best.
TIMM_TIMED = [v for v in BEST_STEPS if v in steps and step_table.models_timm(v, parity_newest)]
TARGET_STEPS = TIMM_TIMED or BEST_STEPS


def fastest_step(b):
    """The fastest of the target steps timed at batch b (e6_best when none is)."""
    return fastest_of(TARGET_STEPS, b) or E6


def vs_anchor(b):
    """(sentence, met or None) for the fastest step against the fastest anchor at batch b."""
    v = fastest_step(b)
    m = at(v, b)
    a, a_us = best_anchor(b)
    if not np.isfinite(m):
        return f"batch {b}: no timed {E6} row", None
    if not a:
        return f"batch {b}: {v} {fmt_ms(m)} ms, no PyTorch anchor measured", None
    return (f"batch {b}: {v} {fmt_ms(m)} ms against {label(a)} {fmt_ms(a_us)} ms "
            f"({formatting.faster_or_slower(a_us / m)}{clocks(v, a, b)})"), m < a_us


def clocks(v, a, b):
    """', SM clock X / Y MHz' of two rows at batch b, where both recorded one."""
    x, y = at(v, b, "sm_mhz"), at(a, b, "sm_mhz")
    return f"; SM clock {x:,.0f} / {y:,.0f} MHz" if np.isfinite(x) and np.isfinite(y) else ""


if targets_apply and len(at_key):
    which = (f"(the fp16 steps of this run that compute timm's model: their newest timm parity with "
             f"every parameter drawn passes at 224 and 384 px)" if TIMM_TIMED else
             f"(the fp16 steps from {E6} on that this run has; none of them has a passing timm parity "
             f"with every parameter drawn)")
    findings.append(f"The study's targets for the whole ViT, judged at {where} on the median "
                    f"time of one forward of the fastest of "
                    f"{join_and(v for v in TARGET_STEPS if v in steps)} at each batch "
                    f"{which}: faster than the fastest PyTorch anchor (of "
                    f"{LABEL[EAGER]}, {LABEL[GRAPH]} and {LABEL[COMPILE]}) at batch 1, 32 and "
                    f"256; {TARGET_COMPILE}x torch.compile's throughput at batch 256; at most "
                    f"{TARGET_B1_MS} ms at batch 1.")
    parts_ = [vs_anchor(b) for b in KEY_BATCHES]
    verdicts = [m for _, m in parts_]
    if all(v is not None for v in verdicts):
        verdict = "met" if all(verdicts) else "missed (slower at batch " + join_and(
            [str(b) for b, v in zip(KEY_BATCHES, verdicts) if not v]) + ")"
    else:
        verdict = "cannot be judged from this run"
    findings.append(f"Target faster than the fastest PyTorch anchor at batch 1, 32 and 256: "
                    f"{verdict}; " + "; ".join(s for s, _ in parts_) + ".")
    ctx.target(f"fp16: faster than the fastest PyTorch anchor at batch 1, 32 and 256 ({where})",
               "not judged" if verdict.startswith("cannot") else verdict.split(" ")[0],
               "; ".join(s for s, _ in parts_))
    v256 = fastest_step(256)
    m, c = at(v256, 256), at(COMPILE, 256)
    if np.isfinite(m) and np.isfinite(c):
        findings.append(f"Target {TARGET_COMPILE}x torch.compile's throughput at batch 256: "
                        f"{'met' if c / m >= TARGET_COMPILE else 'missed'}; {v256} takes "
                        f"{fmt_ms(m)} ms ({fmt_rate(256 / m * 1e6)} img/s), {c / m:.2f}x the "
                        f"throughput of {LABEL[COMPILE]} ({fmt_ms(c)} ms, "
                        f"{fmt_rate(256 / c * 1e6)} img/s{clocks(v256, COMPILE, 256)}); the "
                        f"target asks for at most {fmt_ms(c / TARGET_COMPILE)} ms.")
        ctx.target(f"fp16: {TARGET_COMPILE}x torch.compile's throughput at batch 256 ({where})",
                   "met" if c / m >= TARGET_COMPILE else "missed",
                   f"{v256} {fmt_ms(m)} ms, {c / m:.2f}x torch.compile's {fmt_ms(c)} ms")
    else:
        ctx.target(f"fp16: {TARGET_COMPILE}x torch.compile's throughput at batch 256 ({where})",
                   "not judged", f"no timed {E6 if not np.isfinite(m) else COMPILE} row at batch 256")
        findings.append(f"Target {TARGET_COMPILE}x torch.compile's throughput at batch 256: "
                        f"cannot be judged, this run has no timed "
                        f"{E6 if not np.isfinite(m) else COMPILE} row at batch 256.")
    v1 = fastest_step(1)
    m = at(v1, 1)
    if np.isfinite(m):
        findings.append(f"Target at most {TARGET_B1_MS} ms at batch 1: "
                        f"{'met' if m / 1e3 <= TARGET_B1_MS else 'missed'}; {v1} takes "
                        f"{fmt_ms(m)} ms.")
        ctx.target(f"fp16: at most {TARGET_B1_MS} ms at batch 1 ({where})",
                   "met" if m / 1e3 <= TARGET_B1_MS else "missed", f"{v1} {fmt_ms(m)} ms")
    else:
        findings.append(f"Target at most {TARGET_B1_MS} ms at batch 1: cannot be judged, this "
                        f"run has no timed {E6} row at batch 1.")
    # The steps after e6_best against it: each must be faster at every key batch to count.
    for v in BEST_STEPS[1:]:
        ratios = [(b, at(E6, b) / at(v, b)) for b in KEY_BATCHES if np.isfinite(at(v, b) / at(E6, b))]
        if ratios:
            findings.append(f"{v} against {E6}: " + "; ".join(
                f"batch {b} {formatting.faster_or_slower(r)}" for b, r in ratios)
                + (" (faster at every batch)." if all(r > 1 for _, r in ratios) else "."))
elif not len(t):
    findings.append("This run has no timed encoder rows, so no target can be judged.")
elif len(at_key):
    findings.append(f"This run has no timed rows at {KEY_MODEL}, {KEY_IMAGE} px, where the "
                    f"study's targets are set; the numbers below are at {where}.")


# %% [markdown]
# ## The FP8 targets and the study's one answer
#
# The FP8 targets (docs/method.md): the fastest FP8 step at least 2.0x torch.compile's fp16
# throughput at batch 256, and faster than torchao's FP8 anchors at every batch. A run folder
# holding a final sitting (final.csv, `./study run final`) also gives README its one answer: the
# fastest fp16 and FP8 steps against every anchor at batch 1, 32 and 256.

# %%
TARGET_FP8_COMPILE = 2.0
FP8_STEPS = [v for v in steps if step_table.is_fp8_step(v)]



if targets_apply and len(at_key):
    v8 = fastest_of(FP8_STEPS, 256)
    c = at(COMPILE, 256)
    if v8 is None or not np.isfinite(c):
        ctx.target(f"FP8: {TARGET_FP8_COMPILE}x torch.compile's fp16 throughput at batch 256 ({where})",
                   "not judged", f"this run has no timed {'FP8 step' if v8 is None else COMPILE} row at batch 256")
    else:
        r = c / at(v8, 256)
        ctx.target(f"FP8: {TARGET_FP8_COMPILE}x torch.compile's fp16 throughput at batch 256 ({where})",
                   "met" if r >= TARGET_FP8_COMPILE else "missed",
                   f"{v8} {fmt_ms(at(v8, 256))} ms, {r:.2f}x torch.compile's {fmt_ms(c)} ms"
                   + ("" if r >= TARGET_FP8_COMPILE else f"; the target asks for at most {fmt_ms(c / TARGET_FP8_COMPILE)} ms"))
    parts, wins = [], []
    for b in KEY_BATCHES:
        v, a = fastest_of(FP8_STEPS, b), fastest_of(TORCHAO, b)
        if v is not None and a is not None:
            wins.append(at(v, b) < at(a, b))
            parts.append(f"batch {b}: {v} {fmt_ms(at(v, b))} ms against {label(a)} {fmt_ms(at(a, b))} ms "
                         f"({formatting.faster_or_slower(at(a, b) / at(v, b))})")
    ctx.target(f"FP8: faster than torchao's FP8 at batch 1, 32 and 256 ({where})",
               ("met" if all(wins) else "missed") if len(wins) == len(KEY_BATCHES) else "not judged",
               "; ".join(parts) if parts else "this run has no FP8 step and torchao rows at every batch")

def compiled_in_sitting():
    """{batch: seconds to the first call} for the key shape's torch.compile rows that compiled in
    this sitting's anchor process instead of loading a compile made ahead in a fresh process."""
    d = ok[(ok["version"] == COMPILE) & (ok["model"] == key_model) & (ok["image_size"] == key_image)]
    secs = rundata.compiled_here_s(d["note"]).dropna()
    return {int(b): int(n) for b, n in secs.groupby(d.loc[secs.index, "batch"]).max().items()}


def compile_made_ahead_elsewhere(batch):
    """For a batch where torch.compile compiled in this sitting: the newest other sitting on this
    GPU model whose torch.compile at the key shape loaded a compile made ahead by
    experiments/anchors/precompile.py (its run folder's compile_kernels.txt lists the shape, and
    every first call took under COMPILED_HERE_S), with timm in a graph in the same run id. Returns
    (run folder, torch.compile's time over timm in a graph's there), or None. Only that ratio
    crosses sittings, never a time."""
    gpu, root, found = rundata.gpu_of(run), run.path.parent, []
    for kernels in sorted(root.glob("*/compile_kernels.txt")):
        folder = kernels.parent
        if folder.name == run.name or (key_image, batch) not in run_folder.compiled_shapes(kernels.read_text()):
            continue
        for f in sorted(folder.glob("*.csv")) + sorted(folder.glob("*/*.csv")):
            d = rundata.read_csv(f)
            if not {"version", "gpu", "model", "image_size", "batch", "run_id"} <= set(d.columns):
                continue
            d = d[(d["status"] == "ok") & (d["gpu"].astype(str) == gpu) & (d["model"] == key_model)
                  & (d["image_size"] == key_image) & (d["batch"] == batch)]
            for rid, g in d.groupby("run_id"):
                c, t = g[g["version"] == COMPILE], g[g["version"] == GRAPH]
                first = rundata.first_call_s(c["note"]).dropna()
                if len(c) and len(t) and len(first) and (first < rundata.COMPILED_HERE_S).all():
                    found.append((pd.to_datetime(g["utc"]).max(), folder.name,
                                  c["median_us"].median() / t["median_us"].median()))
    return max(found)[1:] if found else None


def compiled_in_sitting_line(small):
    """README's note on the batches where torch.compile compiled in this sitting, with the check
    from a sitting that loaded a compile made ahead where there is one."""
    at_b = " and ".join(f"batch {b}" for b in small)
    line = (f"torch.compile compiled inside this sitting's anchor process at {at_b} ("
            + ", ".join(f"{n} s to its first call" for n in small.values())
            + ") instead of loading a compile made ahead, alone, in a fresh process; compiled so, "
            "max-autotune can pick a slower forward at small batches (docs/method.md, Timing).")
    unchecked = []
    for b in small:
        check = compile_made_ahead_elsewhere(b)
        here = at(COMPILE, b) / at(GRAPH, b) if GRAPH in set(ok["version"]) else np.nan
        if check is None or not np.isfinite(here):
            unchecked.append(b)
            continue
        folder, there = check
        verdict = ("no faster than this sitting's" if there >= here * 0.98 else
                   f"{here / there - 1:.0%} faster than this sitting's, so the steps' lead over it is "
                   f"smaller by about as much")
        line += (f" At batch {b}, compiled ahead and loaded in another sitting on this GPU model "
                 f"(run folder `{folder}`), torch.compile took {there:.2f}x timm in a graph's time, "
                 f"against {here:.2f}x here: {verdict}.")
    if unchecked:
        at_u = " and ".join(f"batch {b}" for b in unchecked)
        line += (f" At {at_u} torch.compile may be faster than this sitting shows, and the steps' lead "
                 "over it and over the fastest PyTorch anchor smaller.")
    return line


def other_sittings(gpu, answer_steps, c256):
    """One line per other final sitting (run id) on this GPU model that timed an answer step and
    torch.compile at batch 256 side by side: how far its ratios and times are from this
    sitting's, so that the answer's ratio is read with the spread between sittings. Only final
    sittings: their anchors answer every row in one kept process, while the graphed timm anchors
    of the other runs, one process a row, were timed on freed weights until the anchors kept the
    model alive (b9e6fe0; stages/encoder/NOTES.md), ~12% fast at batch 256."""
    try:
        others = rundata.load_runs(run.path.parent)
    except studylib.DataError:
        return []  # a run folder outside a results root: no sibling sittings to read
    out = []
    for other in others:
        if other.name == run.name or rundata.gpu_of(other) != gpu or not rundata.holds_final_sitting(other):
            continue
        d = other.ok("encoder")
        d = d[(d["model"] == KEY_MODEL) & (d["image_size"] == KEY_IMAGE) & (d["batch"] == 256)]
        for rid, g in d.groupby("run_id"):
            m = g.groupby("version")["median_us"].median()
            steps_ = [v for v in answer_steps if v in m.index]
            if COMPILE not in m.index or not steps_:
                continue
            n = g["note"].astype(str).str.extract(r"\[round: (\d+)\]")[0].dropna().nunique() or 1
            out.append(
                f"Another final sitting on this GPU model (run folder `{other.name}`, {n} round{'s' if n > 1 else ''}) "
                f"gave at batch 256 " + " and ".join(
                    f"`{v}` {m[COMPILE] / m[v]:.2f}x torch.compile ({fmt_ms(m[v])} ms; {fmt_ms(at(v, 256))} here)"
                    for v in steps_)
                + f", with torch.compile at {fmt_ms(m[COMPILE])} ms ({fmt_ms(c256)} here; ratios are only "
                  f"taken inside a sitting).")
    return out


FINAL_ROWS = [("fastest fp16 step", None), ("fastest FP8 step", None), (LABEL[EAGER], EAGER),
              (LABEL[GRAPH], GRAPH), (LABEL[COMPILE], COMPILE), (LABEL[TORCHAO[0]], TORCHAO[0]),
              (LABEL[TORCHAO[1]], TORCHAO[1])]
# Any run with the rows gets the table (the quick preset's run reproduces README's); only a
# final sitting gives README its answer.
IS_FINAL = rundata.holds_final_sitting(run)
if targets_apply and len(at_key) and any(np.isfinite(at(COMPILE, b)) for b in KEY_BATCHES):
    # The answer's fp16 forward must compute timm's model; a faster one that fails parity is named beside it.
    TIMM_FP16 = [v for v in BEST_STEPS if step_table.models_timm(v, parity_newest)]
    s16, s8 = fastest_of(TIMM_FP16, 256), fastest_of(FP8_STEPS, 256)
    s16_any = fastest_of(BEST_STEPS, 256)
    rows_ = []
    for what, v in FINAL_ROWS:
        v = v or (s16 if "fp16" in what else s8)
        for b in KEY_BATCHES:
            m = at(v, b) if v else np.nan
            if not np.isfinite(m):
                continue
            e = at(v, b, "energy_j")
            rows_.append({"forward": f"{what}: {v}" if what.startswith("fastest") else what, "batch": b,
                          "ms": fmt_ms(m), "img/s": fmt_rate(b / m * 1e6),
                          "img/J": (f"{b / e:,.0f}" if b / e >= 100 else f"{b / e:.1f}") if np.isfinite(e) else "-",
                          "SM MHz": f"{at(v, b, 'sm_mhz'):,.0f}" if np.isfinite(at(v, b, "sm_mhz")) else "-",
                          "x torch.compile": f"{at(COMPILE, b) / m:.2f}x" if np.isfinite(at(COMPILE, b)) else "-"})
    lines = []
    c256 = at(COMPILE, 256)
    for v, what in ((s16, "fp16"), (s8, "FP8")):
        if v is None or not np.isfinite(c256):
            continue
        e, ec = at(v, 256, "energy_j"), at(COMPILE, 256, "energy_j")
        lines.append(f"The fastest {what} forward, `{v}`, takes {fmt_ms(at(v, 256))} ms at batch 256: "
                     f"{c256 / at(v, 256):.2f}x torch.compile's throughput ({fmt_ms(c256)} ms)"
                     + (f" and {ec / e:.2f}x its images per joule" if np.isfinite(e) and np.isfinite(ec) else "")
                     + ".")
    if s16_any is not None and s16_any != s16 and np.isfinite(c256):
        lines.append(f"`{s16_any}` is faster ({fmt_ms(at(s16_any, 256))} ms at batch 256, "
                     f"{c256 / at(s16_any, 256):.2f}x torch.compile) but "
                     + ("fails timm parity with every parameter drawn" if step_table.fails_parity(s16_any, parity_newest)
                        else "has no passing timm parity with every parameter drawn at 224 and 384 px")
                     + ": it does not compute timm's model within the study's bound.")
    if s16 is None:
        lines.append("No fp16 step of this sitting passes timm parity with every parameter drawn at 224 "
                     "and 384 px (experiments/accuracy/timm_parity.py), so none stands as the fastest fp16 forward.")
    for b in (1, 32):
        v = fastest_of(TIMM_FP16 + FP8_STEPS, b)
        a, a_us = best_anchor(b)
        if v is not None and a is not None:
            lines.append(f"At batch {b} the fastest forward is `{v}`, {fmt_ms(at(v, b))} ms, "
                         f"{formatting.faster_or_slower(a_us / at(v, b))} than the fastest PyTorch anchor, "
                         f"{label(a)} ({fmt_ms(a_us)} ms).")
    # At batch 256 cuBLAS wins autotuning's race by a wide margin wherever it compiled.
    small = {b: n for b, n in compiled_in_sitting().items() if b <= 32}
    if small:
        lines.append(compiled_in_sitting_line(small))
    gpu = rundata.gpu_of(run)
    n_rounds = max(rounds) if rounds else 1
    lines.append(f"All from one sitting: run folder `{run.name}` on {gpu}, "
                 f"{n_rounds} interleaved round{'s' if n_rounds > 1 else ''} (medians), commit "
                 f"{', '.join(dict.fromkeys(rundata.short_commit(x, 7) for x in ok['commit'].astype(str)))}"
                 + ("." if IS_FINAL else "; not a final sitting (`./study run final`), so README's "
                    "answer does not come from it."))
    if IS_FINAL and np.isfinite(c256):
        lines += other_sittings(gpu, [v for v in (s8, s16) if v is not None], c256)
    final_table = formatting.markdown_table(pd.DataFrame(rows_))
    if IS_FINAL:
        ctx.answer = "\n".join(f"- {x}" for x in lines) + "\n\n" + final_table
    # The report opens its encoder section with the same answer README gives.
    ctx.text("encoder_answer", lines)
    ctx.table("encoder_final", final_table,
              f"{'The final sitting' if IS_FINAL else 'This run'} ({run.name}): the fastest fp16 and FP8 steps (at batch 256) and every "
              f"PyTorch anchor at {where}: median time of one forward, images per second and per joule "
              f"(the energy loop, docs/method.md), the SM clock of the timed loop, and torch.compile's "
              f"time over each forward's. {prov}.")
else:
    why = (f"run folder {run.name} has no timed {LABEL[COMPILE]} rows at {where}"
           if targets_apply and len(at_key) else f"run folder {run.name} has no timed rows at {KEY_MODEL}, {KEY_IMAGE} px")
    ctx.missing("text", "encoder_answer", why)
    ctx.missing("table", "encoder_final", why)

# Which anchor is the fastest at each batch.
anchor_batches = sorted(int(b) for b in set(at_key.loc[at_key["version"].map(catalog.is_anchor),
                                                       "batch"]))
if anchor_batches:
    best = [(b, *best_anchor(b)) for b in anchor_batches]
    fastest_anchors = [f"batch {b}: {label(a)} ({fmt_ms(us)} ms"
                       + (f", of {join_and([label(x) for x in fp16_anchors(b)])})"
                          if len(fp16_anchors(b)) > 1 else ", the only one measured)")
                       for b, a, us in best if a is not None]
    if fastest_anchors:
        findings.append(f"The fastest fp16 PyTorch anchor at {where}: " + "; ".join(fastest_anchors) + ".")
    if not any(np.isfinite(at(COMPILE, b)) for b in anchor_batches):
        findings.append(f"This run has no {LABEL[COMPILE]} rows at {where}.")
else:
    findings.append(f"This run has no PyTorch anchor rows at {where}, so no ratio to PyTorch "
                    f"is given.")

# What `best` resolved to.
e6_notes = ok.loc[ok["version"] == E6, "note"].astype(str)
resolved = list(dict.fromkeys(x for x in e6_notes.map(best_resolved) if x))
mixes = list(dict.fromkeys(x for x in e6_notes.map(mix_of) if x))
if resolved:
    findings.append(f"{E6} resolved its family versions to " + " | ".join(resolved)
                    + (" (different rows resolved differently)" if len(resolved) > 1 else "")
                    + ".")
elif mixes:
    findings.append(f"{E6} ran {' | '.join(mixes)} (its rows do not say what `best` passed "
                    f"over).")

# The ladder end to end and its largest step.
for b in [b for b in (1, 256) if b in key_batches]:
    timed_steps = [v for v in steps if np.isfinite(at(v, b))]
    if len(timed_steps) >= 2:
        first, last = timed_steps[0], timed_steps[-1]
        # A step is one change against its parent: only steps timed beside their parent count
        # (a sitting of a few steps, the final one, has neighbours that are not parents).
        gains = [(at(PREVIOUS[v], b) / at(v, b), v, PREVIOUS[v])
                 for v in timed_steps[1:] if np.isfinite(at(PREVIOUS.get(v), b))]
        largest = ""
        if gains:
            g, v, p = max(gains)
            largest = f"; the largest single step is {v} ({formatting.faster_or_slower(g)} than {p})"
        findings.append(f"At batch {b}, {last} takes {fmt_ms(at(last, b))} ms against "
                        f"{first}'s {fmt_ms(at(first, b))} ms ({formatting.faster_or_slower(at(first, b) / at(last, b))})"
                        f"{largest}.")

# Memory: one arena against a buffer per intermediate.
b_mem = max(key_batches) if key_batches else None
if b_mem and all(np.isfinite(at(v, b_mem, "act_mb")) for v in ("e1_library", "e2_buffer_reuse")):
    a1, a2 = at("e1_library", b_mem, "act_mb"), at("e2_buffer_reuse", b_mem, "act_mb")
    findings.append(f"At batch {b_mem}, one reused activation arena (e2_buffer_reuse) holds "
                    f"{fmt_mb(a2)} MB of activations against {fmt_mb(a1)} MB with a buffer for "
                    f"every intermediate of every layer (e1_library), {a1 / a2:.1f}x less; its "
                    f"time is {at('e2_buffer_reuse', b_mem) / at('e1_library', b_mem):.2f}x "
                    f"e1's.")

# Streams.
if len(e4) and len(e3):
    ratio = []
    for b in sorted(set(e4["batch"]) & set(e3.index)):
        d = e4[e4["batch"] == b]
        r = d.loc[d["median_us"].idxmin()]
        ratio.append((int(b), int(r["streams"]), r["median_us"] / e3["median_us"][b]))
    helps = [f"{b} ({s} stream{'s' if s != 1 else ''}, {x:.2f}x)" for b, s, x in ratio if x < 1]
    findings.append(f"Splitting the batch over streams (e4_streams at its fastest stream count, "
                    f"against e3_graph on one stream): "
                    + (f"faster at batch {join_and(helps)}" if helps else "faster at no batch")
                    + (f"; at batch {ratio[-1][0]} {ratio[-1][2]:.2f}x e3's time" if ratio else "")
                    + ".")

# Where the time goes in e6 at the largest batch with a breakdown.
if len(bd_versions):
    v = E6 if E6 in bd_versions else bd_versions[-1]
    b = int(max(set(bd.loc[bd["version"] == v, "batch"])))
    d = bd[(bd["version"] == v) & (bd["batch"] == b)].sort_values("us", ascending=False)
    total = d["us"].sum()
    top = d.head(2)
    findings.append(f"In one eager forward of {v} at batch {b}, " + join_and(
        [f"{r['component']} takes {100 * r['us'] / total:.0f}%" for _, r in top.iterrows()])
        + f" of the {fmt_ms(total)} ms of component time.")
elif len(at_key):
    findings.append("No row's note carries a per-component breakdown, so none is shown." if
                    not len(parts) else f"No row at {where}, batch 256 or 1 carries a "
                    f"per-component breakdown, so none is shown.")

if gemm_finding:
    findings.append(gemm_finding)
fast_b1 = [v for v in steps if np.isfinite(at(v, 1))]
if fast_b1 and np.isfinite(floor_us):
    v = min(fast_b1, key=lambda x: at(x, 1))
    kernels = at(v, 1, "lpl") * b1_depth
    findings.append(f"At batch 1 the fastest step, {v}, takes {fmt_ms(at(v, 1))} ms: "
                    f"{at(v, 1) / floor_us:.1f}x the weight-read floor ({floor_us:.0f} us: "
                    f"{weights_mb.median():.1f} MB of weights at the measured copy bandwidth)"
                    + (f", in ~{kernels:.0f} kernels." if np.isfinite(kernels) else "."))

findings.append(formatting.status_finding(everything, label=label, what="row", shown="shown",
                                 all_ok="Every row passed its logits check and was timed."))

ctx.text("encoder_findings", findings)

# README's headline line: the fastest fp16 whole-ViT step at batch 256 (else the largest batch)
# against timm eager, in a CUDA graph and under torch.compile. The sitting is this run's or a side
# experiment's on this GPU that timed torch.compile in the same sitting (its rows share a run id
# with the step's), whichever has the fastest fp16 step relative to its torch.compile; every
# number of the line comes from that sitting. The FP8 steps and the final sitting's answer are
# README's answer block.
head_batch = 256 if 256 in set(at_key["batch"]) else (int(at_key["batch"].max()) if len(at_key) else None)


def headline_candidate(rows, folder=None):
    """((whether no step of the sitting computes timm's model, -(torch.compile's time / the step's)),
    headline kwargs) of one sitting at head_batch, or None: the lowest key makes the headline."""
    d = rows[(rows["status"] == "ok") & (rows["model"] == key_model) & (rows["image_size"] == key_image)
             & (rows["batch"] == head_batch) & (rows["streams"].fillna(1) == 1)
             & ~rows["note"].astype(str).str.contains(r"\blayers=\d+", regex=True)]
    med = d.groupby("version")["median_us"].median()
    fp16 = [v for v in med.index if not catalog.is_anchor(v) and not step_table.is_fp8_step(v)
            and not str(v).startswith("custom:")]
    if not fp16:
        return None
    # As the answer and the aliases: the fastest step that computes timm's model where one was
    # measured; otherwise the fastest, marked.
    timm = [v for v in fp16 if step_table.models_timm(v, parity_newest)]
    top = min(timm or fp16, key=lambda v: med[v])
    anchors = [(label(a), float(med[a])) for a in ANCHORS if a in med.index]
    if folder is not None:   # a side sitting counts only with torch.compile measured beside the step
        runs = lambda v: set(d.loc[d["version"] == v, "run_id"].astype(str))
        if COMPILE not in med.index or not runs(top) & runs(COMPILE):
            return None
    ratio = med[COMPILE] / med[top] if COMPILE in med.index else 0.0
    mark = " (fails timm parity with every parameter drawn)" if step_table.fails_parity(top, parity_newest) else ""
    return (not timm, -ratio), dict(family="Whole ViT", shape=f"{where}, batch {head_batch}, fp16", fastest=label(top) + mark,
                        fastest_us=float(med[top]), unit="ms", anchors=anchors, measured_in=folder)


if head_batch:
    candidates = [c for c in [headline_candidate(ok)] if c]
    gpu_here = rundata.gpu_of(run)
    # Side experiments as the sweep runner writes them (RUN/<spec>/<spec>.csv), not probes.
    for path in sorted(p for p in run.path.parent.glob("*/*/*.csv") if p.parent.name == p.stem):
        rel = path.relative_to(run.path.parent)
        try:
            side = rundata.read_csv(path)
        except studylib.DataError:
            continue
        side = side[(side["family"] == "encoder") & (side["gpu"].astype(str) == gpu_here)]
        if len(side):
            c = headline_candidate(side, str(rel.parent))
            if c:
                candidates.append(c)
    if candidates:
        ctx.headline(**min(candidates, key=lambda c: c[0])[1])
print("\n".join(findings))

# %%
def newest_side(pattern, same_architecture=False):
    """The newest file matching `pattern` under this results root whose rows (the CSV itself,
    or the JSON's `gpu`) were measured on this run's GPU (with same_architecture, on any GPU that
    runs the same binaries: for accuracy, never for times); None when there is none. A JSON is
    as new as the bench rows written beside it (a checkout's file times say nothing)."""
    gpu, found = rundata.gpu_of(run), []

    def fits(g):
        return rundata.same_architecture(g, gpu) if same_architecture else g == gpu
    for f in run.path.parent.glob(pattern):
        if f.suffix == ".csv":
            d = rundata.read_csv(f)
            if any(fits(g) for g in set(d["gpu"].astype(str))):
                found.append((pd.to_datetime(d["utc"]).max(), f))
        else:
            j = json.loads(f.read_text())
            beside = [pd.to_datetime(rundata.read_csv(c)["utc"]).max() for c in f.parent.glob("*.csv")
                      if c.name != "accuracy.csv"]
            if fits(j.get("gpu", "")):
                found.append((max(beside) if beside else pd.Timestamp(0, tz="UTC"), f))
    return sorted(found)[-1][1] if found else None


def measured_on(gpu):
    """What an accuracy result measured on another GPU of this one's architecture adds to its text."""
    return ("" if gpu == rundata.gpu_of(run) else
            f", measured on {gpu}: {rundata.architecture_of(gpu)}, the same binaries and arithmetic as on "
            f"{rundata.gpu_of(run)}")


def accuracy_result(pattern, holds):
    """(path, parsed JSON) of the accuracy result matching `pattern` under this results root that
    `holds` accepts, measured on this GPU (else on another of its architecture: the same
    arithmetic), the newest run folder first; None when there is none."""
    found = []
    for f in run.path.parent.glob(pattern):
        j = json.loads(f.read_text())
        if rundata.same_architecture(j.get("gpu", ""), rundata.gpu_of(run)) and holds(j):
            found.append(((j.get("gpu") == rundata.gpu_of(run), f.parent.parent.name, f.parent.name), f, j))
    return max(found, key=lambda e: e[0])[1:] if found else None


def side_ok(path):
    """A side experiment's timed rows and the median across rounds per (version, batch), us."""
    d = rundata.read_csv(path)
    d = d[d["status"] == "ok"].copy()
    return d, d.groupby(["version", "batch"])["median_us"].median()


def fmt_ms_3dp(ms):
    """Milliseconds (already) with 3 decimals, as the side tables show them."""
    return "-" if not np.isfinite(ms) else f"{ms:.3f}"


# %% [markdown]
# ## Side experiments, as their specs declare them
#
# A side experiment's spec (experiments/specs/*.toml, side_experiment = true) may declare a
# comparison: which step its table is about, against which steps, which SM clocks to show, its
# caption, and whether to draw the ratios. Each is read from the newest run folder on this run's
# GPU that has its rows (e14's L2 prefetch, the GEMM-ceiling judgment, e15 and e20/e21 today).

# %%
def side_csv(name):
    """The newest rows of side experiment `name` on this run's GPU (experiments/specs/<name>.toml
    writes `<run folder>/<name>/<name>.csv`); None when there are none."""
    return newest_side(f"*/{name}/{name}.csv")


def side_comparison(name, c):
    """Side experiment `name`'s declared comparison `c` (its spec's [comparison]): a table, one
    row per batch, of the medians across rounds (ms) of `against`, `step` and the anchors the rows
    have; "x v" = v's time over the step's for v in `against` and the anchors (above 1: the step
    is faster); "v MHz" = the median SM clock of v's rows for v in `clocks`; with `figure`, those
    ratios drawn per batch. Reported missing when no run folder on this GPU has its rows."""
    step, compared, clocks = c["step"], c["against"], c["clocks"]
    caption = c["caption"].format(where=where)
    csv = side_csv(name)
    if csv is None:
        why = f"no run folder on this GPU has {name}/{name}.csv (experiments/specs/{name}.toml writes it)"
        ctx.missing("table", name, why)
        if c["figure"]:
            ctx.missing("figure", f"{name}_ratios", why)
        return
    d, med = side_ok(csv)
    anchors = [a for a in ANCHORS if a in set(d["version"])]
    clock = d.groupby(["version", "batch"])["sm_clock_mhz"].median()
    rows = []
    for b in sorted(set(d["batch"])):
        if (step, b) not in med.index:
            continue
        row = {"batch": b}
        for v in compared + [step] + anchors:
            row[f"{label(v)} ms"] = med.get((v, b), np.nan) / 1e3
        for v in compared + anchors:
            row[f"x {label(v)}"] = med.get((v, b), np.nan) / med[(step, b)]
        for v in clocks:
            row[f"{label(v)} MHz"] = clock.get((v, b), np.nan)
        rows.append(row)
    show = pd.DataFrame(rows)
    fmt = {c: fmt_ms_3dp for c in show.columns if c.endswith(" ms")}
    fmt.update({c: formatting.fmt_ratio for c in show.columns if c.startswith("x ")})
    fmt.update({c: fmt_rate for c in show.columns if c.endswith(" MHz")})
    fmt["batch"] = formatting.fmt_int
    side_run = rundata.Run(csv.parent, d)
    ctx.table(name, formatting.markdown_table(show, fmt),
              f"{caption} Medians of 3 interleaved rounds (experiments/specs/{name}.toml, in "
              f"{rundata.show_path(csv.parent)}); x v = v's time over {step}'s (above 1: {step} is faster). "
              f"{side_run.provenance()}.", section=c["title"])
    if c["figure"]:
        ratios_figure(f"{name}_ratios", show, step, [v for v in compared + anchors if f"x {label(v)}" in show],
                      c["title"], side_run, section=c["title"])


def ratios_figure(name, show, step, versions, title, side_run, section):
    """Per batch, one bar per compared version: its time over `step`'s (above 1: the step is
    faster), each bar with its value, a line at 1."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    width = 0.8 / max(len(versions), 1)
    xs = np.arange(len(show))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, v in enumerate(versions):
        vals = show[f"x {label(v)}"].to_numpy(dtype=float)
        bars = ax.bar(xs + (i - (len(versions) - 1) / 2) * width, vals, width, label=label(v),
                      color=colors[i % len(colors)])
        ax.bar_label(bars, labels=[formatting.fmt_ratio(x) for x in vals], fontsize=7, padding=1)
    plots.reference_line(ax, 1.0, f"1x: as fast as {step}")
    ax.set_xticks(xs, [f"batch {int(b)}" for b in show["batch"]])
    ax.set_ylabel(f"time over {step}'s (x)")
    ax.set_ylim(0, max(1.1, float(np.nanmax(show[[f"x {label(v)}" for v in versions]].to_numpy())) * 1.15))
    plots.legend_outside(ax)
    plots.titled(fig, f"{title}: above 1, {step} is faster", side_run.title_provenance())
    ctx.figure(name, fig, f"Each compared forward's median time over {step}'s, per batch (medians of "
               f"the interleaved rounds; above 1: {step} is faster). {side_run.provenance()}.", section=section)


# The side experiments that declare a comparison in their spec (experiments/specs/*.toml,
# [comparison]): each one's table, and figure where it asks for one.
for side_name, comparison in specs.comparisons("encoder"):
    side_comparison(side_name, comparison)



# %% [markdown]
# ## FP8 (E4M3): e12_fp8 against the fastest fp16 steps, per GEMM, and its accuracy
#
# experiments/specs/encoder_fp8.toml (a side experiment: e6_best, e10_fastest_gemms, e12_fp8 and
# timm in a CUDA graph, 3 interleaved rounds) and experiments/accuracy/fp8_accuracy.py, each taken from
# the newest run folder on this run's GPU that has them (this results root).

# %%
FP8_STEP = "e12_fp8"
FP8_FUSED_STEP = "e15_fp8_attention_e4m3"
fp8_csv = side_csv("encoder_fp8")
if fp8_csv is not None:
    f8, f8_med = side_ok(fp8_csv)
    f8_clock = f8.groupby(["version", "batch"])["sm_clock_mhz"].median()
    f8_fp16 = [v for v in ("e6_best", "e10_fastest_gemms") if v in set(f8["version"])]
    f8_rows = []
    for b in sorted(set(f8["batch"])):
        if (FP8_STEP, b) not in f8_med.index:
            continue
        best16 = min((f8_med[(v, b)] for v in f8_fp16 if (v, b) in f8_med.index), default=np.nan)
        row = {"batch": b, f"{FP8_STEP} ms": f8_med[(FP8_STEP, b)] / 1e3}
        for v in f8_fp16 + [a for a in ANCHORS if a in set(f8["version"])]:
            if (v, b) in f8_med.index:
                row[f"{label(v)} ms"] = f8_med[(v, b)] / 1e3
        row["x fastest fp16 step"] = best16 / f8_med[(FP8_STEP, b)]
        row["SM MHz (FP8)"] = f8_clock.get((FP8_STEP, b), np.nan)
        f8_rows.append(row)
    f8_show = pd.DataFrame(f8_rows)
    f8_fmt = {c: fmt_ms_3dp for c in f8_show.columns if c.endswith(" ms")}
    f8_fmt.update({"batch": formatting.fmt_int, "x fastest fp16 step": formatting.fmt_ratio,
                   "SM MHz (FP8)": lambda x: "-" if not np.isfinite(x) else f"{x:,.0f}"})
    ctx.table("encoder_fp8", formatting.markdown_table(f8_show, f8_fmt),
              f"The FP8 step (QKV, projection, fc1 and fc2 in E4M3 with per-tensor weight scales and "
              f"static activation scales; stages/encoder/e12_fp8/NOTES.md) against the fastest fp16 "
              f"steps and timm in a CUDA graph, {where}: medians of 3 interleaved rounds "
              f"(experiments/specs/encoder_fp8.toml, in {rundata.show_path(fp8_csv.parent)}); "
              f"x fastest fp16 step = the faster fp16 step's time over e12_fp8's. "
              f"{rundata.Run(fp8_csv.parent, f8).provenance()}.")
    # Per GEMM at the largest batch: component time of the median round's eager breakdown; e15's
    # from the encoder_fp8_fused rows when a run has them (its projection has no quantizing pass).
    ceil8, ceil16 = rundata.fp8_ceiling_tflops(run), run.ceilings().gemm_tflops
    f8_big = int(f8["batch"].max())
    hidden, _, depth = MODELS[key_model]
    rows_big = f8_big * ((key_image // 16) ** 2 + 1)
    gemm_flops = {"qkv": 2.0 * rows_big * 3 * hidden * hidden * depth,
                  "projection": 2.0 * rows_big * hidden * hidden * depth,
                  "mlp": 2.0 * 2 * rows_big * 4 * hidden * hidden * depth}
    ff_csv = side_csv("encoder_fp8_fused")
    per_gemm = [(f8, FP8_STEP, ceil8, "FP8"), (f8, "e6_best", ceil16, "fp16")]
    if ff_csv is not None:
        per_gemm.append((side_ok(ff_csv)[0], FP8_FUSED_STEP, ceil8, "FP8"))
    g_rows = []
    for d, v, ceiling, kind in per_gemm:
        sel = d[(d["version"] == v) & (d["batch"] == f8_big)].sort_values("median_us")
        if not len(sel):
            continue
        parts_v = parse_breakdown(str(sel.iloc[len(sel) // 2]["note"]))
        for comp, fl in gemm_flops.items():
            if comp in parts_v:
                t = fl / (parts_v[comp] * 1e-6) / 1e12
                g_rows.append({"step": v, "GEMM": comp, "ms": parts_v[comp] / 1e3, "TFLOP/s": t,
                               "% of ceiling": 100 * t / ceiling if ceiling else np.nan, "ceiling": kind})
    if g_rows:
        ctx.table("encoder_fp8_gemms", formatting.markdown_table(pd.DataFrame(g_rows), {
            "ms": lambda x: f"{x:.2f}", "TFLOP/s": lambda x: f"{x:,.0f}",
            "% of ceiling": lambda x: "-" if not np.isfinite(x) else f"{x:.0f}%"}),
            f"Per-GEMM throughput at batch {f8_big}, {where}, from the eager breakdown of the median "
            f"round (summed over the layers; e12_fp8's projection includes its quantizing pass over the "
            f"attention output, which {FP8_FUSED_STEP} does not have; MLP is fc1 + fc2): against the FP8 "
            f"ceiling ({fmt_rate(ceil8)} TFLOP/s, `ceilings`' gemm_fp8 row on this GPU) for the FP8 "
            f"steps and the fp16 ceiling ({fmt_rate(ceil16)} TFLOP/s) for e6_best. The {FP8_FUSED_STEP} "
            f"rows are from the encoder_fp8_fused run (another sitting).")
else:
    ctx.missing("table", "encoder_fp8", "no run folder on this GPU has encoder_fp8/encoder_fp8.csv "
                "(experiments/specs/encoder_fp8.toml writes it)")
    ctx.missing("table", "encoder_fp8_gemms", "no encoder_fp8 rows on this GPU")

# %% [markdown]
# ## FP8 accuracy against timm fp32, and the FP8 accuracy targets

# %%
# Accuracy depends on the kernels' arithmetic, not on the card: another GPU of this one's
# architecture serves where this one has no result, and the text names it.
acc_json = newest_side("*/fp8_accuracy/accuracy.json") or newest_side("*/fp8_accuracy/accuracy.json",
                                                                     same_architecture=True)
if acc_json is not None:
    acc = json.loads(acc_json.read_text())
    acc_rows = pd.DataFrame(acc["rows"])
    acc_rows["decisive"] = acc_rows.apply(
        lambda r: f"{r['top1_agreement_decisive']:.1%} of {int(r['decisive_images'])}"
        if r["decisive_images"] else "- (none)", axis=1)
    acc_show = acc_rows[["weights", "forward", "precision", "logits_rel_l2", "top1_agreement", "decisive"]]
    acc_show = acc_show.rename(columns={"logits_rel_l2": "logits rel L2", "top1_agreement": "top-1 agreement",
                                        "decisive": "agreement where the margin > 4x the error"})
    ctx.table("encoder_fp8_accuracy", formatting.markdown_table(acc_show, {
        "logits rel L2": lambda x: f"{x:.2e}", "top-1 agreement": lambda x: f"{x:.1%}"}),
        f"Accuracy against timm {acc['timm']} fp32 on the same weights ({acc['model']}, {acc['image_size']} px, "
        f"{acc['images']} N(0, 1) images per weight set; FP8 calibrated on {acc['calibration_images']} other "
        f"images), experiments/accuracy/fp8_accuracy.py in {rundata.show_path(acc_json.parent)}{measured_on(acc['gpu'])}: "
        f"timm's init, every "
        f"parameter randomized, and timm's init with outlier channels (LayerNorm gamma 20-50x on three "
        f"channels, two residual-stream channels offset by 25 and 40). The last column counts only the "
        f"images whose top-1/top-2 margin in timm fp32 exceeds 4x that forward's RMS logit error. "
        f"Untrained weights cannot judge an FP8 recipe by top-1: experiments/accuracy/digits_accuracy.py trains a "
        f"small ViT on scikit-learn's digits for that (its digits.txt beside this folder's, where run), "
        f"and experiments/accuracy/imagenet_accuracy.py measures ImageNet top-1 where ImageNet and pretrained "
        f"weights are.")
else:
    ctx.missing("table", "encoder_fp8_accuracy", "no run folder on this GPU or its architecture has "
                "fp8_accuracy/accuracy.json (experiments/accuracy/fp8_accuracy.py writes it)")

def torchao_in_fp32(step, mine):
    """Where experiments/accuracy/fp8_torchao_probe.py ran (newest folder): torchao's per-tensor FP8 on an
    fp32 copy of the model, the same arithmetic without the half-precision forward around it,
    beside the judged step's error; empty where no probe result exists."""
    probes = sorted(run.path.parent.glob("*/probe/probe.csv"), key=lambda f: f.parent.parent.name)
    if not probes:
        return ""
    rows = pd.read_csv(probes[-1])
    fp32 = rows[rows["forward"] == "torchao, fp32 model"].set_index("weights")["logits_rel_l2"]
    common = [w for w in mine.index if w in fp32.index]
    if not common:
        return ""
    most = max(mine[w] / fp32[w] - 1 for w in common)
    return ("; torchao per tensor on an fp32 copy of the model: "
            + ", ".join(f"{w} {fp32[w]:.4f}" for w in common)
            + f", {step} {most:+.1%} against it at most ({rundata.show_path(probes[-1].parent.parent)}, {rows['gpu'].iloc[0]}: "
            f"its folder README says what the half-precision model changes)")


# The FP8 accuracy targets (docs/method.md, Targets), judged on the fastest FP8 step at batch 256:
# its logits error no larger than each torchao FP8 anchor's on every weight set, and on the digits
# model fp32 at least 97% top-1 with the FP8 step within 2 held-out images of fp32.
V8_JUDGED = fastest_of(FP8_STEPS, 256) if targets_apply else None
if V8_JUDGED is not None:
    what = f"FP8: logits error no larger than torchao's FP8 (per tensor and per row), {V8_JUDGED}"
    def beside_torchao(j):
        forwards = {r["forward"] for r in j["rows"]}
        return f"encoder {V8_JUDGED}" in forwards and any(x.startswith("torchao") for x in forwards)

    judged = accuracy_result("*/fp8_accuracy*/accuracy.json", beside_torchao)
    ours = theirs = pd.DataFrame()
    if judged:
        judged_json, judged_acc = judged
        judged_rows = pd.DataFrame(judged_acc["rows"])
        ours = judged_rows[judged_rows["forward"] == f"encoder {V8_JUDGED}"]
        theirs = judged_rows[judged_rows["forward"].str.startswith("torchao")]
    if len(ours) and len(theirs):
        mine = ours.set_index("weights")["logits_rel_l2"]
        excess = [(r["weights"], r["forward"], mine[r["weights"]] / r["logits_rel_l2"] - 1)
                  for _, r in theirs.iterrows() if r["weights"] in mine.index]
        worst = max(excess, key=lambda e: e[2])
        ctx.target(what, "met" if worst[2] <= 0 else "missed",
                   ("" if worst[2] <= 0 else f"{worst[2]:.1%} larger at most, {worst[0]} against {worst[1]}; ")
                   + "; ".join(f"{w}: {mine[w]:.4f} against " + ", ".join(
                       f"{f.removeprefix('torchao ')} {x:.4f}" for f, x in
                       theirs[theirs["weights"] == w][["forward", "logits_rel_l2"]].itertuples(index=False))
                       for w in mine.index)
                   + f" (logits rel L2 against timm fp32; {rundata.show_path(judged_json.parent)}"
                     f"{measured_on(judged_acc['gpu'])})"
                   + ("" if worst[2] <= 0 else torchao_in_fp32(V8_JUDGED, mine)))
    else:
        ctx.target(what, "not judged",
                   f"no fp8_accuracy result on this GPU or its architecture holds {V8_JUDGED} beside torchao")
    what = f"FP8: digits model, fp32 at least 97% top-1 and {V8_JUDGED} within 2 held-out images of fp32"
    found = accuracy_result("*/digits*/digits.json", lambda j: f"encoder {V8_JUDGED}" in j.get("forwards", {}))
    if found:
        f, j = found
        fp32, q = j["forwards"]["timm fp32"], j["forwards"][f"encoder {V8_JUDGED}"]
        crit = j["criteria"]
        ok_ = fp32["top1"] >= crit["fp32_min"] and q["disagree_with_fp32"] <= crit["fp8_disagree_max"]
        ctx.target(what, "met" if ok_ else "missed",
                   f"fp32 {fp32['top1']:.2%}, {V8_JUDGED} {q['top1']:.2%} with {q['disagree_with_fp32']} of "
                   f"{j['images_held_out']} held-out images away from fp32 ({rundata.show_path(f.parent)}"
                   f"{measured_on(j['gpu'])})")
    else:
        ctx.target(what, "not judged", f"no digits result on this GPU or its architecture holds {V8_JUDGED}")
