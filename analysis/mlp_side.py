"""The MLP's side experiments, each from its spec's sub-folder of the run (or of the run folder
beside it that measured it): cuBLASLt's algorithm choice, the ping-pong GEMM, the CUTLASS layer's
MLPs, FP8, every version sitting by sitting, and cuBLASLt's settings. analysis/mlp.py calls them
in this order; the findings read what some return."""
from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import plots
from analysis.mlp_data import (
    DEFAULT_SETTING, FUSED, GEMM, HIDDEN, KEY_ROWS, LADDER, TARGET_GEMM_RATIO, is_fp8)
from studylib import catalog, formatting, rundata, specs
from studylib.claims import claim, flush_setting, say

ALGO_CHOICE = {"": "heuristic's first", "--autotune 16": "fastest of the heuristic's top 16",
               "--search-all": "fastest of every algorithm"}
PING, PING_GEMM = "pingpong_epilogue", "pingpong_gemm_only"
VERSIONS_ROWS = KEY_ROWS[1]


def side_experiment(run, name, elsewhere=False):
    """Timed rows of a side experiment kept in the `name`/ sub-folder (`name`.csv) of `run`,
    with `extra` and `rows` parsed from the note; None when there is none.
    elsewhere: when it has none, the run folder beside the run (same results root), on its GPU,
    whose rows of it are the newest (an MLP experiment measured beside a later run of another
    family); d.attrs["folder"] says where the rows came from."""
    path = run.path / name / f"{name}.csv"
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


def cublaslt_algorithms(data, ctx):
    """Which cuBLASLt algorithm: the heuristic's first, the best of its top 16, the best of all;
    returns its table (None without the side experiment)."""
    run = data.run
    algos = None
    a = side_experiment(run, "mlp_autotune", elsewhere=True)
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
            claim("algorithms_caption", hidden=HIDDEN, folder=rundata.show_path(a.attrs['folder']),
                  prov=rundata.Run(a.attrs['folder'], a).provenance()))
    else:
        ctx.missing("table", "mlp_algorithms", claim("no_algorithms"))
    return algos


def side_comparison(data, ctx, name, c):
    """Side experiment `name`'s declared comparison `c` (its spec's [comparison]): a table, one row
    per (rows, version) for `against`, the step and the anchors the rows have: the median across
    rounds, the rounds' range and the time over the step's; the SM clock for the versions in
    `clocks`; with `tflops`, each version's precision, throughput and share of its precision's
    ceiling. Reported missing when neither this run nor one beside it on this GPU has the rows.
    Returns the rows (None without them)."""
    run, step = data.run, c["step"]
    table = name if name.startswith("mlp_") else f"mlp_{name}"
    d = side_experiment(run, name, elsewhere=True)
    if d is None or not len(d):
        ctx.missing("table", table, claim("no_side_rows", name=name))
        return None
    anchors = [v for v in dict.fromkeys(d["version"]) if catalog.is_anchor(v) and v not in c["against"]]
    shown = [v for v in c["against"] if v != step] + [step] + anchors
    if c["ratios"]:
        ratios_table(ctx, name, table, c, d, shown)
        return d
    med = d.groupby(["rows", "version"])["median_us"].agg(["median", "min", "max"])
    clock = d.groupby(["rows", "version"])["sm_clock_mhz"].median()
    tfl = d.groupby(["rows", "version"])["tflops"].median()
    ceiling = {"fp8_e4m3": rundata.fp8_ceiling_tflops(run), "fp16": run.ceilings().gemm_tflops}
    rows = []
    for r in sorted(set(d["rows"])):
        base = med.loc[(r, step), "median"] if (r, step) in med.index else np.nan
        for v in [v for v in shown if (r, v) in med.index]:
            m, precision = med.loc[(r, v)], "fp8_e4m3" if is_fp8(v) else "fp16"
            row = {"rows": r, "version": v, **({"precision": precision} if c["tflops"] else {}), "us": m["median"],
                   "rounds range us": f"{formatting.fmt_us(m['min'])}-{formatting.fmt_us(m['max'])}",
                   f"x {step}": m["median"] / base}
            if c["clocks"]:
                row["SM MHz"] = clock.loc[(r, v)] if v in c["clocks"] else np.nan
            if c["tflops"]:
                row["TFLOP/s"] = tfl.loc[(r, v)]
                row["% of its ceiling"] = 100 * tfl.loc[(r, v)] / ceiling[precision] if ceiling[precision] else np.nan
            rows.append(row)
    whole = lambda x: "-" if not np.isfinite(x) else f"{x:,.0f}"
    skipped = rundata.read_csv(d.attrs["folder"] / f"{name}.csv")
    skipped = skipped[skipped["status"] == "skipped"]
    ctx.table(table, formatting.markdown_table(pd.DataFrame(rows), {
        "rows": formatting.fmt_int, "us": formatting.fmt_us, f"x {step}": formatting.fmt_ratio, "SM MHz": whole,
        "TFLOP/s": whole, "% of its ceiling": lambda x: "-" if not np.isfinite(x) else f"{x:.0f}%"}),
        claim("side_caption", caption=c["caption"].format(hidden=HIDDEN, target=TARGET_GEMM_RATIO), name=name,
              folder=rundata.show_path(d.attrs["folder"]), step=step, clocks=bool(c["clocks"]), tflops=c["tflops"],
              fp8_ceiling=ceiling["fp8_e4m3"] or float("nan"), fp16_ceiling=ceiling["fp16"] or float("nan"),
              skipped=sorted(set(skipped["version"])),
              why=skipped["note"].iloc[0].split(" [")[0] if len(skipped) else None,
              prov=rundata.Run(d.attrs["folder"], d).provenance()), section=c["title"])
    return d


def ratios_table(ctx, name, table, c, d, shown):
    """A comparison that declares `ratios`: one row per size, each shown version's median time
    across the rounds, then each named ratio of two versions' times (a kernel against its sibling,
    as the ping-pong GEMM's epilogue cost is its MLP over its own two plain GEMMs)."""
    w = d.pivot_table(index="rows", columns="version", values="median_us", aggfunc="median")
    show = pd.DataFrame({"rows": w.index})
    for v in [v for v in shown if v in w]:
        show[f"{v} us"] = w[v].to_numpy()
    for column, v, over in c["ratios"]:
        if v in w and over in w:
            show[column] = (w[v] / w[over]).to_numpy()
    fmts = {col: formatting.fmt_us for col in show.columns if col.endswith(" us")}
    fmts.update({"rows": formatting.fmt_int, **{r[0]: formatting.fmt_ratio for r in c["ratios"]}})
    ctx.table(table, formatting.markdown_table(show, fmts),
              claim("side_ratios_caption", caption=c["caption"].format(hidden=HIDDEN), name=name,
                    folder=rundata.show_path(d.attrs["folder"]),
                    ratios=[claim("ratio_column", column=col, version=v, over=over) for col, v, over in c["ratios"]],
                    prov=rundata.Run(d.attrs["folder"], d).provenance()), section=c["title"])


def comparisons(data, ctx):
    """Every side comparison a spec declares (experiments/specs/*.toml, [comparison]): its table.
    Returns {spec name: its rows}."""
    return {name: side_comparison(data, ctx, name, c) for name, c in specs.comparisons("mlp")}


# The bars of every_version, coloured by kind.
VERSION_KIND_COLORS = {"fp16 version": "#1f77b4", "FP8 version": "#ff7f0e", "PyTorch": "#333333"}


def version_kind(version: str) -> str:
    if catalog.is_anchor(version):
        return "PyTorch"
    return "FP8 version" if version.startswith("fp8_") else "fp16 version"


def every_version(data, ctx):
    """Every MLP version against the two plain GEMMs, sitting by sitting."""
    main, run = data.main, data.run
    sittings = [(f"main run ({run.name})", run.name, main.assign(rows=rundata.rows_of(main)))]
    for name in ("mlp_cutlass", "mlp_fp8", "mlp_power", "mlp_exact_gelu"):
        d = side_experiment(run, name, elsewhere=True)
        if d is not None and len(d):
            folder = d.attrs["folder"].parent.name
            sittings.append((f"{name} ({folder})", folder, d))
    panels, sources = [], {}
    for title, folder, d in sittings:
        d = d[(d["rows"] == VERSIONS_ROWS) & (d["hidden"] == HIDDEN)] if "hidden" in d else d[d["rows"] == VERSIONS_ROWS]
        by = d.groupby("version")["median_us"]
        med = by.median()
        if GEMM in med.index and len(med) > 1:
            # Each version's rounds over gemm_only's median: the whiskers.
            panels.append((title, pd.DataFrame({"r": med, "lo": by.min(), "hi": by.max()}).drop(GEMM) / med[GEMM]))
            sources[folder] = pd.concat([sources[folder], d]) if folder in sources else d
    if panels:
        every = catalog.version_order(sorted({v for _, r in panels for v in r.index}), LADDER)
        n_bars = sum(len(r) for _, r in panels)
        fig, axes = plt.subplots(len(panels), 1, figsize=(8.0, 0.24 * n_bars + 1.0 * len(panels) + 0.8),
                                 squeeze=False, gridspec_kw={"height_ratios": [len(r) + 1 for _, r in panels]})
        top = max(float(r["hi"].max()) for _, r in panels)
        for ax, (title, r) in zip(axes[:, 0], panels):
            r = r.reindex([v for v in every if v in r.index])
            # One colour per kind, not per version: each bar is named by its tick label, and a
            # colour per version would repeat within a panel of 16 bars.
            ax.barh(range(len(r)), r["r"], color=[VERSION_KIND_COLORS[version_kind(v)] for v in r.index],
                    xerr=[r["r"] - r["lo"], r["hi"] - r["r"]], error_kw={"elinewidth": 0.8, "capsize": 2})
            for i, (x, hi) in enumerate(zip(r["r"], r["hi"])):
                ax.text(hi, i, f" {x:.2f}x", va="center", fontsize=8)
            ax.axvline(1.0, color="#444444", linewidth=0.8)
            ax.axvline(TARGET_GEMM_RATIO, color="#444444", linewidth=0.8, linestyle=":")
            if ax is axes[0, 0]:
                ax.text(1.0, -0.9, GEMM + " ", ha="right", va="bottom", fontsize=8)
                target = " " + ctx.said(claim("versions_target", ratio=TARGET_GEMM_RATIO))
                ax.text(TARGET_GEMM_RATIO, -0.9, target, ha="left", va="bottom", fontsize=8)
            ax.set_yticks(range(len(r)), list(r.index), fontsize=8)
            ax.invert_yaxis()
            ax.set_xlim(0, top * 1.15)
            ax.set_title(title, fontsize=8, loc="left")
        from matplotlib.patches import Patch
        kinds = [k for k in VERSION_KIND_COLORS if any(version_kind(v) == k for _, r in panels for v in r.index)]
        plots.legend_outside(axes[0, 0], handles=[Patch(color=VERSION_KIND_COLORS[k], label=k) for k in kinds])
        axes[-1, 0].set_xlabel(ctx.said(claim("versions_axis", gemm=GEMM, rows=VERSIONS_ROWS, hidden=HIDDEN)))
        plots.titled(fig, ctx.said(claim("versions_title")),
                     ctx.said(claim("versions_title_provenance", gpu=rundata.gpu_of(run))))
        fig.tight_layout()
        ctx.figure("mlp_versions", fig,
                   claim("versions_caption", rows=VERSIONS_ROWS, hidden=HIDDEN, mlp=4 * HIDDEN, gemm=GEMM,
                         target=TARGET_GEMM_RATIO, gpu=rundata.gpu_of(run),
                         sources=[claim("versions_source", folder=f, commits=rundata.folder_commits(d))
                                  for f, d in sources.items()]))
    else:
        ctx.missing("figure", "mlp_versions", claim("no_versions", gemm=GEMM, rows=VERSIONS_ROWS))


def cublaslt_choices(data, ctx):
    """cuBLASLt choices: heuristic cached vs queried every call, workspace size."""
    S, order_s = data.lt_rows, data.order_s
    sweep_prov = data.beside_prov(data.lt_run, "the cuBLASLt settings")
    lt_rows = S.ok[S.is_lt]
    lt, lt_flush, lt_flush_text = None, np.nan, ""
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
        lt_flush_text = say(flush_setting(lt_flush), "mlp")
        show = lt.rename(columns={"workspace_mib": "workspace MiB", "median_us": "median us"})
        show = show[["version", "hidden", "batch", "rows", "heuristic", "workspace MiB",
                     "median us", "launches", "time / default"]].dropna(axis=1, how="all")
        ctx.table("mlp_cublaslt", formatting.markdown_table(show, {
            "hidden": formatting.fmt_int, "batch": formatting.fmt_int, "rows": formatting.fmt_int,
            "workspace MiB": formatting.fmt_int, "median us": formatting.fmt_us, "launches": formatting.fmt_int,
            "time / default": formatting.fmt_ratio}),
            claim("cublaslt_caption", flush=lt_flush_text, prov=sweep_prov))
    else:
        ctx.missing("table", "mlp_cublaslt", claim("no_cublaslt"))
    return lt, lt_flush_text
