"""README's figure: the answer's fastest fp16 and FP8 forwards against the PyTorch anchors at each
key batch, with each precision's floor (analysis/encoder_answer.py's final_answer draws it beside
the answer it gives)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from analysis import plots
from analysis.encoder_data import COMPILE, GRAPH, KEY_BATCHES, TORCHAO
from studylib import formatting
from studylib.claims import claim

NAME = "encoder_answer_floor"
# The steps' colours by precision, the anchors in greys (timm eager, 3-10x slower at batch 1 and
# 32, is left to the table beside the figure).
COLORS = {"fp16": "#1f77b4", "FP8": "#ff7f0e", GRAPH: "#555555", COMPILE: "#888888", TORCHAO[0]: "#bbbbbb"}


def floors_us(data, b, flops):
    """(fp16, FP8) floors of one forward at batch b (us): every weight read once at the run's copy
    rate (E4M3 weights half the bytes) or the forward's FLOPs at its precision's measured GEMM
    ceiling, whichever is longer; NaN where a rate or the weights' size is unknown."""
    copy = data.run.ceilings().copy_gbps
    weights = data.weights_mb.median() * 1e6 if len(data.weights_mb) else np.nan
    read = weights / (copy * 1e3) if copy else np.nan
    fp16 = max(read, flops / (data.gemm_ceiling * 1e6)) if data.gemm_ceiling else np.nan
    fp8 = max(read / 2, flops / (data.fp8_ceiling * 1e6)) if data.fp8_ceiling else np.nan
    return fp16, fp8


def answer_figure(data, ctx, named):
    """One panel a key batch: the answer's fastest fp16 and FP8 steps (named: answer_steps; where
    no fp16 step computes timm's model, the fastest of any, so marked) and the anchors timed in the
    sitting (median ms, linear from 0, the rounds' range), each precision's floor as a line."""
    at = data.at
    s16 = named.s16 or named.s16_any
    shown = [(v, p) for v, p in ((s16, "fp16" if named.s16 else "fp16, no timm parity"), (named.s8, "FP8"))
             if v is not None]
    steps = [v for v, _ in shown]
    shown += [(a, a) for a in (GRAPH, COMPILE, TORCHAO[0]) if a in data.order]
    batches = [b for b in KEY_BATCHES if steps and np.isfinite(at(steps[0], b))]
    if not batches:
        ctx.missing("figure", NAME, claim("no_answer_figure"))
        return
    fig, axes = plt.subplots(len(batches), 1, figsize=(7.5, 1.0 + 0.42 * len(shown) * len(batches)), squeeze=False)
    for ax, b in zip(axes[:, 0], batches):
        rows = [(v, p, at(v, b) / 1e3, at(v, b, "lo_us") / 1e3, at(v, b, "hi_us") / 1e3) for v, p in shown]
        rows = [r for r in rows if np.isfinite(r[2])]
        ys = np.arange(len(rows))
        for y, (v, p, ms, lo, hi) in zip(ys, rows):
            ax.barh(y, ms, color=COLORS[p.split(",")[0]], xerr=[[ms - lo], [hi - ms]], error_kw={"linewidth": 0.8})
            ax.text(hi, y, f" {formatting.fmt_ms(ms * 1e3)} ms", va="center", fontsize=8)
        flops = at(steps[0], b, "tflops") * at(steps[0], b) * 1e6  # the forward's, whatever its precision
        fp16, fp8 = floors_us(data, b, flops)
        for floor, style in ((fp16, "--"), (fp8, ":")):
            if np.isfinite(floor):
                ax.axvline(floor / 1e3, color="#d62728", linewidth=1.0, linestyle=style)
        ax.set_yticks(ys, [ctx.said(claim("answer_step_tick", step=v, precision=p)) if v in steps else data.label(v)
                           for v, p, *_ in rows],
                      fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(r[4] for r in rows) * 1.3)
        ax.set_title(ctx.said(claim("at_batch", batch=b)), fontsize=9)
    axes[-1][0].set_xlabel("median time of one forward (ms), the rounds' range as whiskers")
    handles = [plt.Line2D([], [], color="#d62728", linestyle="--", label="fp16 floor"),
               plt.Line2D([], [], color="#d62728", linestyle=":", label="FP8 floor")]
    fig.legend(handles=handles, loc="lower center", ncol=2, bbox_to_anchor=(0.5, -0.01), fontsize=8)
    plots.titled(fig, ctx.said(claim("answer_figure_title", where=data.where)), ctx.title_provenance())
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    ctx.figure(NAME, fig, claim("answer_figure_caption", where=data.where, batches=batches, s16=s16 or "-",
                                s8=named.s8 or "-", timm=named.s16 is not None, prov=ctx.provenance()))
