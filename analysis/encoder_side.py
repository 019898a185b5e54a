"""The encoder's side experiments, each from the newest run folder on this run's GPU that has it:
the comparisons their specs declare, e12_fp8 against the fp16 steps, and the FP8 accuracy."""
from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import plots
from analysis.encoder_data import ANCHORS, fmt_rate, parse_breakdown
from studylib import formatting, rundata, specs
from studylib.claims import claim, say
from studylib.schema import MODELS


def newest_side(run, pattern, same_architecture=False):
    """The newest file matching `pattern` under this results root whose rows (the CSV itself,
    or the JSON's `gpu`) were measured on `run`'s GPU (with same_architecture, on any GPU that
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


def measured_on(run, gpu):
    """What an accuracy result measured on another GPU of this one's architecture adds to its text."""
    return ("" if gpu == rundata.gpu_of(run) else
            say(claim("measured_on", gpu=gpu, arch=rundata.architecture_of(gpu), here=rundata.gpu_of(run)), "encoder"))


def accuracy_result(run, pattern, holds):
    """(path, parsed JSON) of the accuracy result matching `pattern` under this results root that
    `holds` accepts, measured on `run`'s GPU (else on another of its architecture: the same
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


def side_csv(run, name):
    """The newest rows of side experiment `name` on this run's GPU (experiments/specs/<name>.toml
    writes `<run folder>/<name>/<name>.csv`); None when there are none."""
    return newest_side(run, f"*/{name}/{name}.csv")


def side_comparison(data, ctx, name, c):
    """Side experiment `name`'s declared comparison `c` (its spec's [comparison]): a table, one
    row per batch, of the medians across rounds (ms) of `against`, `step` and the anchors the rows
    have; "x v" = v's time over the step's for v in `against` and the anchors (above 1: the step
    is faster); "v MHz" = the median SM clock of v's rows for v in `clocks`; with `figure`, those
    ratios drawn per batch. Reported missing when no run folder on this GPU has its rows."""
    label = data.label
    step, compared, clocks = c["step"], c["against"], c["clocks"]
    # The report's artifacts carry the family's prefix; a spec's name need not.
    table = name if name.startswith("encoder_") else f"encoder_{name}"
    caption = c["caption"].format(where=data.where)
    csv = side_csv(data.run, name)
    if csv is None:
        why = claim("no_side_rows", name=name)
        ctx.missing("table", table, why)
        if c["figure"]:
            ctx.missing("figure", f"{table}_ratios", why)
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
    ctx.table(table, formatting.markdown_table(show, fmt),
              claim("side_caption", caption=caption, weights=rundata.weights_phrase(d), name=name,
                    folder=rundata.show_path(csv.parent), step=step, prov=side_run.provenance()), section=c["title"])
    if c["figure"]:
        ratios_figure(ctx, label, f"{table}_ratios", show, step, [v for v in compared + anchors if f"x {label(v)}" in show],
                      c["title"], side_run, section=c["title"])


def ratios_figure(ctx, label, name, show, step, versions, title, side_run, section):
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
        ax.bar_label(bars, labels=[formatting.fmt_ratio(x) for x in vals], fontsize=8, padding=1)
    plots.reference_line(ax, 1.0, ctx.said(claim("side_parity_line", step=step)))
    ax.set_xticks(xs, [ctx.said(claim("at_batch", batch=int(b))) for b in show["batch"]])
    ax.set_ylabel(ctx.said(claim("side_ratio_axis", step=step)))
    ax.set_ylim(0, max(1.1, float(np.nanmax(show[[f"x {label(v)}" for v in versions]].to_numpy())) * 1.15))
    plots.legend_outside(ax)
    plots.titled(fig, ctx.said(claim("side_ratios_title", title=title, step=step)), side_run.title_provenance())
    ctx.figure(name, fig, claim("side_ratios_caption", step=step, prov=side_run.provenance()), section=section)


def comparisons(data, ctx):
    """Every side comparison a spec declares (experiments/specs/*.toml, [comparison]): its table,
    and its figure where it asks for one."""
    for side_name, comparison in specs.comparisons("encoder"):
        side_comparison(data, ctx, side_name, comparison)


def fp8_tables(data, ctx):
    """e12_fp8 against the fastest fp16 steps (experiments/specs/encoder_fp8.toml, a side experiment), and
    per GEMM against the FP8 and fp16 ceilings."""
    key_image, key_model, label, run, where = data.key_image, data.key_model, data.label, data.run, data.where
    FP8_STEP = "e12_fp8"
    FP8_FUSED_STEP = "e15_fp8_attention_e4m3"
    fp8_csv = side_csv(run, "encoder_fp8")
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
            row["x faster fp16 step"] = best16 / f8_med[(FP8_STEP, b)]
            row["SM MHz (FP8)"] = f8_clock.get((FP8_STEP, b), np.nan)
            f8_rows.append(row)
        f8_show = pd.DataFrame(f8_rows)
        f8_fmt = {c: fmt_ms_3dp for c in f8_show.columns if c.endswith(" ms")}
        f8_fmt.update({"batch": formatting.fmt_int, "x faster fp16 step": formatting.fmt_ratio,
                       "SM MHz (FP8)": lambda x: "-" if not np.isfinite(x) else f"{x:,.0f}"})
        ctx.table("encoder_fp8", formatting.markdown_table(f8_show, f8_fmt),
                  claim("fp8_caption", where=where, folder=rundata.show_path(fp8_csv.parent),
                        weights=rundata.weights_phrase(f8), prov=rundata.Run(fp8_csv.parent, f8).provenance()))
        # Per GEMM at the largest batch: component time of the median round's eager breakdown, e15's
        # beside (its projection has no quantizing pass).
        ceil8, ceil16 = rundata.fp8_ceiling_tflops(run), run.ceilings().gemm_tflops
        f8_big = int(f8["batch"].max())
        hidden, _, depth = MODELS[key_model]
        rows_big = f8_big * ((key_image // 16) ** 2 + 1)
        gemm_flops = {"qkv": 2.0 * rows_big * 3 * hidden * hidden * depth,
                      "projection": 2.0 * rows_big * hidden * hidden * depth,
                      "mlp": 2.0 * 2 * rows_big * 4 * hidden * hidden * depth}
        # e15's breakdown from the ladder sitting (clean, timm's init), else its own side sitting.
        per_gemm = [(f8, FP8_STEP, ceil8, "FP8"), (f8, "e6_best", ceil16, "fp16")]
        ff_csv = None
        for side in ("encoder_ladder", "encoder_fp8_fused"):
            csv = side_csv(run, side)
            ff = side_ok(csv)[0] if csv is not None else None
            if ff is not None and ((ff["version"] == FP8_FUSED_STEP) & (ff["batch"] == f8_big)).any():
                per_gemm.append((ff, FP8_FUSED_STEP, ceil8, "FP8"))
                ff_csv = csv
                break
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
                claim("fp8_gemms_caption", batch=f8_big, where=where, fused=FP8_FUSED_STEP, ceil8=fmt_rate(ceil8),
                      ceil16=fmt_rate(ceil16), other=ff_csv is not None,
                      folder=rundata.show_path(ff_csv.parent) if ff_csv is not None else None))
    else:
        ctx.missing("table", "encoder_fp8", claim("no_fp8_side"))
        ctx.missing("table", "encoder_fp8_gemms", claim("no_fp8_rows"))


def fp8_accuracy(data, ctx):
    """The FP8 steps' accuracy against timm fp32 (experiments/accuracy/fp8_accuracy.py)."""
    # The answer's FP8 step's result where one holds it (the step fastest across the key batches,
    # as the answer names it); else the newest. Accuracy depends on the kernels' arithmetic, not
    # on the card: another GPU of this one's architecture serves where this one has no result,
    # and the text names it.
    step = data.fastest_across(data.fp8_steps)
    found = step and accuracy_result(data.run, "*/fp8_accuracy*/accuracy.json", lambda j: any(
        r.get("forward") == f"encoder {step}" for r in j.get("rows", [])))
    acc_json = (found[0] if found else None) or (
        newest_side(data.run, "*/fp8_accuracy/accuracy.json")
        or newest_side(data.run, "*/fp8_accuracy/accuracy.json", same_architecture=True))
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
            claim("fp8_accuracy_caption", timm=acc['timm'], model=acc['model'], image=acc['image_size'], images=acc['images'],
                  calibration=acc['calibration_images'], folder=rundata.show_path(acc_json.parent),
                  measured=measured_on(data.run, acc['gpu'])))
    else:
        ctx.missing("table", "encoder_fp8_accuracy", claim("no_fp8_accuracy"))
