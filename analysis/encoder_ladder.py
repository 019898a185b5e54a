"""The whole-ViT ladder from one sitting (experiments/specs/encoder_ladder.toml): every step from
e1_library to the fastest fp16 step and the FP8 branch, at each batch its time and its gain over
its parent (the parent's time over its own, both from the sitting), as a figure
(encoder_ladder_steps) and a table (encoder_ladder_gains)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import plots
from analysis.encoder_side import side_csv
from studylib import formatting, notebook, rundata, specs, steps
from studylib.claims import claim

SPEC = "encoder_ladder"
# The bars' colour is the step's branch: the fp16 path to e19 and the FP8 branch from e6_best;
# each bar is named by its tick label.
BRANCH_COLORS = {"fp16 path": "#1f77b4", "FP8 branch": "#ff7f0e"}
FP8_BRANCH = ("e12_fp8", "e15_fp8_attention_e4m3", "e18_fp8_cutlass")


def branch(step: str) -> str:
    return "FP8 branch" if step in FP8_BRANCH else "fp16 path"


def bar_ms(ms: float) -> str:
    """A bar's time as its label shows it (and the report's line for the step says it)."""
    return f"{ms:.3g} ms"


def ladder_table(d: pd.DataFrame, order: list[str], parents: dict) -> pd.DataFrame:
    """One row per (step, batch) of the sitting's timed rows: the median across rounds (ms), the
    rounds' range, the parent and the gain over it (NaN where the parent is not in the sitting)."""
    t = rundata.collapse_rounds(d, ["version", "batch"])
    t["ms"] = t["median_us"] / 1000.0
    rows = []
    for b in sorted(int(x) for x in set(t["batch"])):
        at = t[t["batch"] == b].set_index("version")
        for v in [v for v in order if v in at.index]:
            p = parents.get(v, "")
            gain = at.loc[p, "ms"] / at.loc[v, "ms"] if p in at.index else np.nan
            rows.append({"batch": b, "step": v, "parent": p or "-", "ms": at.loc[v, "ms"],
                         "lo_ms": at.loc[v, "lo_us"] / 1000.0, "hi_ms": at.loc[v, "hi_us"] / 1000.0,
                         "n": int(at.loc[v, "n"]), "gain": gain})
    return pd.DataFrame(rows)


def ladder_figure(data, ctx, section: str = ""):
    """The ladder sitting's figure and table (encoder_ladder_steps), from the newest run folder on
    this run's GPU that holds it; a note at both markers where none does."""
    name, table_name = "encoder_ladder_steps", "encoder_ladder_gains"
    path = side_csv(data.run, SPEC)
    if path is None:
        why = claim("no_ladder_sitting", spec=SPEC)
        ctx.missing("figure", name, why)
        ctx.missing("table", table_name, why)
        return None
    d = rundata.read_csv(path)
    d = d[d["status"] == "ok"]
    order = [v for v in specs.load_spec(specs.find_spec(SPEC))["versions"] if v in set(d["version"])]
    t = ladder_table(d, order, steps.parents())
    # Named by its run folder (the side folder's parent) in the title and the captions.
    side_run = rundata.Run(path.parent.parent, d)
    prov = claim("ladder_sitting_prov", folder=side_run.name, spec=SPEC, prov=side_run.provenance())
    rounds = int(t["n"].max()) if len(t) else 0
    batches = sorted(set(t["batch"]))
    fig, axes = plt.subplots(len(batches), 1, figsize=(7.5, 0.26 * len(order) * len(batches) + 1.6),
                             squeeze=False)
    for ax, b in zip(axes[:, 0], batches):
        r = t[t["batch"] == b].reset_index(drop=True)
        for kind, color in BRANCH_COLORS.items():
            k = r[r["step"].map(branch) == kind]
            if len(k):
                ax.barh(k.index, k["ms"], color=color, alpha=0.85, label=kind,
                        xerr=[k["ms"] - k["lo_ms"], k["hi_ms"] - k["ms"]], error_kw={"linewidth": 0.8})
        fastest = r["ms"].idxmin()
        for i, x in r.iterrows():
            gain = f", {x['gain']:.2f}x" if np.isfinite(x["gain"]) else ""
            mark = ": the fastest" if i == fastest else ""
            ax.text(x["hi_ms"], i, f" {bar_ms(x['ms'])}{gain}{mark}", va="center", fontsize=8,
                    fontweight="bold" if i == fastest else "normal")
        ax.set_yticks(range(len(r)), list(r["step"]), fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, float(r["hi_ms"].max()) * 1.35)
        ax.set_title(f"batch {b}", fontsize=9, loc="left")
        ax.set_xlabel("time per forward (ms)", fontsize=8)
    plots.legend_outside(axes[0, 0], fontsize=8)
    plots.titled(fig, "Whole ViT: every step of the ladder in one sitting", side_run.title_provenance())
    fig.tight_layout()
    ctx.ladder_drawn(notebook.Rung(x["step"], ctx.said(claim("at_batch", batch=x["batch"])), bar_ms(x["ms"]),
                                   x["gain"], x["parent"] if x["parent"] != "-" else "")
                     for _, x in t.iterrows())
    ctx.figure(name, fig,
               claim("ladder_steps_caption", spec=SPEC, rounds=rounds, prov=prov), section=section)
    cells = t.assign(time=[f"{x:.3f}" for x in t["ms"]],
                     spread=[f"{lo:.3f}-{hi:.3f}" for lo, hi in zip(t["lo_ms"], t["hi_ms"])],
                     over_parent=[f"{g:.2f}x" if np.isfinite(g) else "-" for g in t["gain"]])
    cells = cells[["batch", "step", "parent", "time", "spread", "over_parent"]].rename(
        columns={"time": "ms", "spread": "rounds' range ms", "over_parent": "gain over parent"})
    ctx.table(table_name, formatting.markdown_table(cells),
              claim("ladder_gains_caption", spec=SPEC, rounds=rounds, prov=prov), section=section)
    return t
