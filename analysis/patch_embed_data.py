"""Patch embedding's rows of one run folder, read once for every section of its report
(analysis/patch_embed.py takes one PatchEmbedData), and the helpers its figures share: timed rows,
one L2 setting, duplicates merged, v3's best stream count per shape."""
from __future__ import annotations

from typing import NamedTuple

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from analysis import plots
from studylib import catalog, formatting, notebook, rundata
from studylib.claims import claim, flush_setting, say

FAMILY = "patch_embed"

CPU, V1, V2 = "cpu_baseline", "v1_single_channel", "v2_unified_channel"
V3, V3G, V4 = "v3_streams", "v3_streams_graph", "v4_one_copy"
CUDNN = "cudnn"
CONV, LINEAR = "pytorch_conv2d", "pytorch_patchify_linear"
LADDER = catalog.family_versions("patch_embed") + [CONV, LINEAR]
STREAM_VERSIONS = [V3, V3G]
ROUTINE_VERSIONS = [V1, V2, V3, V3G, V4]     # the versions that copy from and to the host
GEMM_FROM = V4                               # time vs batch on ViT-B: v4 onward + anchors
MAIN_MODEL = "vit_b"
KEY_IMAGE, KEY_BATCHES = 224, (1, 32, 256)   # the targets' sizes
CONV_BATCH, CONV_TARGET = 256, 10.0          # fastest version >= 10x F.conv2d at batch 256
LINEAR_BATCHES = (32, 256)                   # ... and faster than patchify + F.linear there
KNEE = 0.10                                  # "more streams stop helping": within 10% of best
TIMELINE_FILE = f"{FAMILY}_timeline.csv"
TIMELINE_COLUMNS = ["version", "batch", "image_size", "hidden", "streams", "stream", "launch",
                    "start_us", "end_us"]
LABEL = {CONV: "PyTorch F.conv2d", LINEAR: "PyTorch patchify + F.linear"}
SHORT = {CONV: "F.conv2d", LINEAR: "patchify + F.linear"}

KEYS = ["version", "model", "hidden", "image_size", "batch", "streams"]
TIMES = ["median_us", "routine_us", "h2d_us", "preprocess_us", "d2h_us"]


def label(v):
    return LABEL.get(v, v)


def fmt_x(x):
    """A ratio over orders of magnitude: 0.0024x, 0.64x, 61.5x, 7,176x."""
    if x is None or not np.isfinite(x):
        return "-"
    if x >= 100:
        return f"{x:,.0f}x"
    return f"{x:.1f}x" if x >= 10 else f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"


def shape_text(model, image, batch):
    return f"{model}, {image} px, batch {batch}"


def pow2_ticks(ax, values, axis="x"):
    """Log-2 axis with ticks at exactly the measured values, printed as plain numbers."""
    values = sorted({int(v) for v in values})
    getattr(ax, f"set_{axis}scale")("log", base=2)
    getattr(ax, f"set_{axis}ticks")(values)
    getattr(ax, f"set_{axis}ticklabels")([str(v) for v in values])
    getattr(ax, f"{axis}axis").set_minor_locator(matplotlib.ticker.NullLocator())


def shared_legend(fig, handles, bottom=0.16, ncol=4):
    fig.legend(handles=handles, loc="lower center", ncol=min(ncol, len(handles)),
               bbox_to_anchor=(0.5, -0.02), fontsize=8)
    fig.tight_layout(rect=(0, bottom, 1, 1))


class PatchEmbedData:
    """The patch-embedding rows of `run` (a rundata.Run), each version's style, and lookups."""

    def __init__(self, run):
        self.run = run
        self.everything = run.rows(FAMILY)
        ok = run.ok(FAMILY)
        # The launch-bound stream versions (tenths of a second per call) are compared among
        # themselves only, and their stream sweep leaves L2 alone: one L2 setting is kept over
        # the other versions.
        streams_ok = ok[ok["version"].isin(STREAM_VERSIONS)]
        ok, flush, self.flush_dropped = rundata.one_setting(ok[~ok["version"].isin(STREAM_VERSIONS)], "flush_l2")
        ok = pd.concat([ok, streams_ok], ignore_index=True)
        ok["streams"] = ok["streams"].fillna(1)
        # Which way an anchor row was timed (the faster of eager and CUDA-graph replay, see
        # experiments/anchors/torch_patch_embed.py): "eager" or "cuda-graph replay".
        ok["how"] = ok["note"].astype(str).str.extract(r"timed: (eager|cuda-graph replay)")[0]
        self.ok = ok
        # Interleaved rounds (and re-runs appended to the folder) count once: the median across
        # them, with the range of the rounds' medians as its spread (lo_us, hi_us).
        t = rundata.collapse_rounds(ok, KEYS, **{c: (c, "median") for c in TIMES[1:]},
                                    device_bytes=("device_bytes", "max"), host_bytes=("host_bytes", "max"),
                                    flush_l2=("flush_l2", "max"),
                                    launches=("launches", "first"), host_syncs=("host_syncs", "first"),
                                    how=("how", "first"), gbps=("gbps", "median"),
                                    tflops=("tflops", "median"))
        self.timed = t
        self.rounds, self.rounds_caption, self.rounds_cells = formatting.rounds_wording(t)
        # One row per version and shape: the stream versions at their fastest stream count.
        self.best = (t.sort_values("median_us", kind="stable")
                     .drop_duplicates(["version", "model", "hidden", "image_size", "batch"])
                     .reset_index(drop=True))
        self.order = catalog.version_order(t["version"], LADDER)
        self.style = plots.styles(self.order, fastest=plots.fastest_at(self.best, model=MAIN_MODEL, image_size=224,
                                                                       batch=None))
        # Each anchor its own colour and marker (filled where the CUDA graph was the faster,
        # hollow where eager was), apart from every version's (slate blue, not a grey beside
        # v7_implicit_wgmma's).
        self.style.update({CONV: dict(color="#000000", marker="h", linestyle="--", markersize=6),
                           LINEAR: dict(color="#3a3a8c", marker="p", linestyle="--", markersize=6)})
        self.flush_said = flush_setting(flush)
        self.flush_text = say(self.flush_said, FAMILY)  # in figure titles
        self.sm_counts = sorted({int(x) for x in run.rows(FAMILY)["sm_count"].dropna() if x > 0})
        self.hidden_of = {m: int(h) for m, h in t.groupby("model")["hidden"].first().items()}
        self.models = sorted(self.hidden_of, key=lambda m: self.hidden_of[m])

    def at(self, version, model, image, batch, col="median_us", table=None):
        """One value of `best` (or `table`), NaN when that version has no timing there."""
        d = self.best if table is None else table
        s = d[(d["version"] == version) & (d["model"] == model) & (d["image_size"] == image)
              & (d["batch"] == batch)][col]
        return float(s.iloc[0]) if len(s) and pd.notna(s.iloc[0]) else np.nan

    def speedup_band(self, row, anchor, model, image, batch):
        """The range of version `row`'s speedup over `anchor` at a shape that the rounds allow:
        the anchor's fastest round over the version's slowest, and the other way."""
        return notebook.ratio_band(self.at(anchor, model, image, batch, col="lo_us"),
                                   self.at(anchor, model, image, batch, col="hi_us"), row["lo_us"], row["hi_us"])

    def how(self, version, model, image, batch):
        """'eager' / 'CUDA graph' for an anchor at a shape, '' when unknown."""
        best = self.best
        s = best[(best["version"] == version) & (best["model"] == model)
                 & (best["image_size"] == image) & (best["batch"] == batch)]["how"]
        h = s.iloc[0] if len(s) else None
        return {"eager": "eager", "cuda-graph replay": "CUDA graph"}.get(h, "")

    def stream_label(self, n):
        n = int(n)
        return say(claim("stream_count", streams=n, per_sm=n in self.sm_counts and n > 32, plural=n != 1), FAMILY)

    def plot_version(self, ax, d, v, x, y="median_us", **extra):
        """A version's line; an anchor's markers filled where its CUDA graph was the faster."""
        d = d.sort_values(x)
        st = dict(self.style[v], **extra)
        if not catalog.is_anchor(v):
            ax.plot(d[x], d[y], **st)
            return
        ax.plot(d[x], d[y], **dict(st, marker=None))
        for mode, face in (("cuda-graph replay", st["color"]), ("eager", "none")):
            e = d[d["how"] == mode] if mode == "cuda-graph replay" else d[d["how"] != "cuda-graph replay"]
            if len(e):
                ax.plot(e[x], e[y], linestyle="none", marker=st["marker"], color=st["color"],
                        markerfacecolor=face, markersize=st.get("markersize", 6))

    def legend_handles(self, versions, anchors_note=True):
        h = [plt.Line2D([], [], label=label(v), **self.style[v]) for v in versions]
        if anchors_note and any(catalog.is_anchor(v) for v in versions):
            h.append(plt.Line2D([], [], linestyle="none", marker="h", color="#000000",
                                markerfacecolor="none",
                                label="anchors: hollow = eager faster, filled = CUDA graph faster"))
        return h


# v8 is left to the figures over batch and the share of the ceiling: its points lie on v9's (v8
# with the position embedding read first; 0.99-1.12x of it over the full sweep).
ON_V9S_LINE = ("v8_balanced_tiles",)


def small_shape(data):
    """The shape (off the main model) timed by the most ladder versions: v1-v3 only run at
    small sizes, so this is where the early steps meet; ties go to the larger problem."""
    best = data.best
    d = best[(best["model"] != MAIN_MODEL) & ~best["version"].map(catalog.is_anchor)]
    if d.empty:
        return None
    c = (d.groupby(["model", "image_size", "batch"]).agg(n=("version", "nunique"))
          .reset_index().sort_values(["n", "image_size", "batch"], ascending=False))
    r = c.iloc[0]
    return (r["model"], int(r["image_size"]), int(r["batch"]))


def main_shapes(data):
    """The main model's target shapes the run timed (else its smallest image's smallest and
    largest batch)."""
    d = data.best[data.best["model"] == MAIN_MODEL]
    if d.empty:
        return []
    shapes = [(MAIN_MODEL, KEY_IMAGE, b) for b in KEY_BATCHES
              if len(d[(d["image_size"] == KEY_IMAGE) & (d["batch"] == b)])]
    if not shapes:  # a sweep without the target sizes: its smallest and largest batch
        image = int(d["image_size"].min())
        bs = sorted({int(b) for b in d.loc[d["image_size"] == image, "batch"]})
        shapes = [(MAIN_MODEL, image, b) for b in dict.fromkeys([bs[0], bs[-1]])]
    return shapes


def holds_shapes(data, shapes) -> bool:
    """Whether `data` timed some version at every one of `shapes` ((model, image, batch))."""
    timed = set(zip(data.timed["model"], data.timed["image_size"].astype(int), data.timed["batch"].astype(int)))
    return bool(shapes) and all((m, int(i), int(b)) in timed for m, i, b in shapes)


def key_shapes(data):
    """Where the ladder is compared: the small shape the early steps reach, then the main ones."""
    small = small_shape(data)
    return ([small] if small else []) + main_shapes(data)


class StreamRows(NamedTuple):
    """v3's stream sweep at the shape with the most of its rows: (model, image) or None, the
    stream versions there, their rows and stream counts."""
    shape: tuple | None
    versions: list
    rows: pd.DataFrame
    counts: list


def stream_rows(data):
    timed = data.timed
    s3 = timed[timed["version"].isin(STREAM_VERSIONS)]
    if not len(s3):
        return StreamRows(None, [], s3, [])
    c = (s3.groupby(["model", "image_size"]).size().reset_index(name="n")
           .sort_values(["n", "image_size"], ascending=False))
    sm, simage = c.iloc[0]["model"], int(c.iloc[0]["image_size"])
    rows = s3[(s3["model"] == sm) & (s3["image_size"] == simage)]
    return StreamRows((sm, simage), [v for v in STREAM_VERSIONS if v in set(s3["version"])], rows,
                      sorted({int(n) for n in rows["streams"]}))


def knee(d):
    """(knee streams, its time, best streams, best time) of one version and shape's rows:
    the smallest stream count within KNEE of the fastest."""
    d = d.sort_values("streams")
    m = d["median_us"].min()
    k = d[d["median_us"] <= (1 + KNEE) * m].iloc[0]
    b = d.loc[d["median_us"].idxmin()]
    return int(k["streams"]), float(k["median_us"]), int(b["streams"]), float(m)
