"""The MLP's last sections: every timed configuration, status, and the findings with the two MLP
targets and README's headline line."""
from __future__ import annotations

import numpy as np

from analysis.mlp_data import (
    DEFAULT_SETTING, EAGER, FUSED, GEMM, GRAPH, GRAPHED, HIDDEN, KEY_BATCH, KEY_ROWS, NOT_FUSED, PANELED,
    TARGET_GEMM_RATIO, UNFUSED, is_fp8, join_and, label)
from analysis.mlp_side import CUTLASS_VERSIONS, PING, PING_GEMM, side_experiment
from studylib import catalog, formatting, notebook, rundata
from studylib import steps as step_table


def every_configuration(data, ctx):
    """Every timed configuration at hidden 768 (median us)."""
    S, order_s, sweep_prov = data.sweep_rows, data.order_s, data.sweep_prov
    sweep_rounds_cells = data.sweep_rounds_cells
    if len(S.vb):
        ctx.table("mlp_sweep", formatting.sweep_table(
            S.vb, ["image_size", "batch", "rows"], "version", order_s, formatting.fmt_us,
            {c: formatting.fmt_int for c in ("image_size", "batch", "rows")}),
            f"MLP median time per call (us) for every timed image size x batch x version at hidden "
            f"{HIDDEN}{sweep_rounds_cells}; '-' = not timed (see the status table); {S.flush_text}. {sweep_prov}.")
    else:
        ctx.missing("table", "mlp_sweep", f"no timed MLP rows at hidden {HIDDEN}")


def status(data, ctx, lt):
    """What was timed, skipped or failed (lt: the cuBLASLt table, None without one)."""
    everything, flush_dropped, is_lt, order = data.everything, data.flush_dropped, data.is_lt, data.order
    other_extra, prov = data.other_extra, ctx.provenance()
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


def fused_versions(data):
    """The fused fp16 MLP versions the two targets are judged on (an FP8 version runs GEMMs of
    another precision and a ceiling twice as high: it is compared with gemm_only in its own table)."""
    return [v for v in data.order if catalog.is_own(v) and v not in NOT_FUSED and not is_fp8(v)]


def fastest_fused(data, r):
    """(time, version) of the fastest fused MLP version at r rows; (NaN, None) without one."""
    times = [(data.at(v, r), v) for v in fused_versions(data) if np.isfinite(data.at(v, r))]
    return min(times) if times else (np.nan, None)


def fused_against_anchors(data):
    """fused_epilogue at each key size against the PyTorch MLP and gemm_only (the step the original
    study took)."""
    at, gemm_ceiling, where, findings = data.at, data.gemm_ceiling, data.where, []
    for r in data.key_rows:
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

    return findings


def fused_targets(data, ctx):
    """The two MLP targets (docs/method.md), judged on the fastest fused version at 6304 and 50432
    rows, and the 1.05x one on the MLP the fp16 answer runs, into ctx; their findings."""
    at, findings = data.at, []
    best = {r: fastest_fused(data, r) for r in KEY_ROWS}
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
    def gemm_target(versions, what):
        """The 1.05x target for one version per key row ({rows: version}): (verdict, detail), the
        rounds' band of each ratio (its fastest round over gemm_only's slowest, and the other
        way) deciding "within noise"; None where a timing is missing."""
        ratios = {r: at(v, r) / at(GEMM, r) for r, v in versions.items()}
        if not all(np.isfinite(list(ratios.values()))):
            return None
        bands = {r: notebook.ratio_band(at(v, r, "lo_us"), at(v, r, "hi_us"),
                                        at(GEMM, r, "lo_us"), at(GEMM, r, "hi_us"))
                 for r, v in versions.items()}
        verdict = notebook.combined_verdict([notebook.verdict(x, TARGET_GEMM_RATIO, bands[r], at_most=True)
                                             for r, x in ratios.items()])
        detail = "; ".join(f"{r} rows: {formatting.fmt_ratio(x)} ({versions[r]}{formatting.band_text(bands[r])})"
                           for r, x in ratios.items())
        findings.append(f"The target of {what} costing at most {TARGET_GEMM_RATIO:.2f}x {GEMM} (the "
                        f"two plain GEMMs) at {KEY_ROWS[0]} and {KEY_ROWS[1]} rows is {verdict} ({detail}).")
        return verdict, detail

    judged_gemm = gemm_target({r: best[r][1] for r in KEY_ROWS}, who) if all(best[r][1] for r in KEY_ROWS) else None
    if judged_gemm is not None:
        ctx.target(f"at most {TARGET_GEMM_RATIO:.2f}x {GEMM} at {KEY_ROWS[0]} and {KEY_ROWS[1]} rows", *judged_gemm)
        # The same target on the MLP the fp16 answer runs (its exact GELU, timm's), fastest or not.
        answer_mlp = step_table.alias_field("fastest_fp16", "mlp")
        answer_step = step_table.aliases()["fastest_fp16"]["step"]
        answer = gemm_target({r: answer_mlp for r in KEY_ROWS}, f"{answer_step}'s MLP, {answer_mlp}")
        if answer is not None:
            ctx.target(f"at most {TARGET_GEMM_RATIO:.2f}x {GEMM} at {KEY_ROWS[0]} and {KEY_ROWS[1]} rows, "
                       f"with the MLP of the fp16 answer ({answer_step}: {answer_mlp}, the exact GELU)", *answer)
        else:
            findings.append(f"This run has no timing of {answer_mlp}, the MLP of the fp16 answer "
                            f"({answer_step}), at {KEY_ROWS[0]} or {KEY_ROWS[1]} rows: the "
                            f"{TARGET_GEMM_RATIO:.2f}x target is not judged on it.")
    else:
        findings.append(f"The target of {who} costing at most {TARGET_GEMM_RATIO:.2f}x {GEMM} "
                        f"cannot be judged from this run: it lacks a timing of a fused version or "
                        f"{GEMM} at {KEY_ROWS[0]} or {KEY_ROWS[1]} rows.")
    return findings


def cutlass_side(cu, ctx):
    """The 1.05x target in the CUTLASS side sitting (cu: its rows, None where not run)."""
    findings = []
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
    return findings


def algorithm_search(algos):
    """What the search over every cuBLASLt algorithm gives (algos: its table, None where not run)."""
    findings = []
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
    return findings


def pingpong(pp):
    """Our own ping-pong GEMM's epilogue cost and main loop (pp: its rows, None where not run)."""
    findings = []
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


    return findings


def fastest_versions(data):
    """Where the fastest MLP version at a key size is not fused_epilogue."""
    at, vb, findings = data.at, data.vb, []
    def fastest_mlp(rows, fp16=False):
        """Fastest own version that computes the MLP (gemm_only does not); fp16: of the fp16 ones."""
        d = vb[(vb["rows"] == rows) & vb["version"].map(catalog.is_own) & (vb["version"] != GEMM)]
        if fp16:
            d = d[~d["version"].map(is_fp8)]
        return d.loc[d["median_us"].idxmin()] if len(d) else None


    for r in data.key_rows:
        b, b16 = fastest_mlp(r), fastest_mlp(r, fp16=True)
        if b is not None and b["version"] != FUSED and np.isfinite(at(FUSED, r)):
            also = (f", the fastest fp16 one {b16['version']} ({formatting.fmt_us(b16['median_us'])} us)"
                    if b16 is not None and b16["version"] != b["version"] else "")
            findings.append(f"At {r} x {HIDDEN} the fastest MLP version is {b['version']} "
                            f"({formatting.fmt_us(b['median_us'])} us){also}, not {FUSED}.")

    return findings


def against_unfused(data):
    """Each version against unfused at the largest key size, and gemm_only against the GEMM ceiling."""
    at, gemm_ceiling, key_rows, order, findings = data.at, data.gemm_ceiling, data.key_rows, data.order, []
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

    return findings


def graph_gain(data):
    """The graph's gain where launches dominate: the smallest timed size of the sweep."""
    S, at, run, sweep, findings = data.sweep_rows, data.at, data.run, data.sweep, []
    if len(S.vb):
        small = S.vb.loc[S.vb["rows"].idxmin()]
        u, ug = (at(v, int(small["rows"]), table=S.t) for v in (UNFUSED, GRAPHED))
        if np.isfinite(u) and np.isfinite(ug):
            findings.append(f"At {int(small['rows'])} rows (batch {int(small['batch'])}, "
                            f"{int(small['image_size'])} px{'' if sweep is run else ', run folder ' + sweep.name}), "
                            f"{GRAPHED} takes {formatting.fmt_us(ug)} us against {UNFUSED}'s {formatting.fmt_us(u)} us: "
                            f"replaying the same kernels from one graph launch is {formatting.faster_or_slower(u / ug)}.")


    return findings


def kernel_counts(data):
    """Kernels per call and where the epilogue runs."""
    at, order, vb, findings = data.at, data.order, data.vb, []
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

    return findings


def across_widths(data, widths):
    """fused_epilogue across the ViT widths at the key batch."""
    at, run, findings = data.at, data.run, []
    if len(widths) >= 2:
        parts = []
        for h in widths:
            f, g, a = (at(v, None, hidden=h, image=224, batch=KEY_BATCH, table=data.widths_rows.t)
                       for v in (FUSED, GEMM, GRAPH))
            bits = []
            if np.isfinite(f) and np.isfinite(g):
                bits.append(f"takes {formatting.fmt_ratio(f / g)} the time of {GEMM}")
            if np.isfinite(f) and np.isfinite(a):
                bits.append(f"is {formatting.faster_or_slower(a / f)} than the PyTorch MLP graph")
            if bits:
                parts.append(f"at hidden {h} it {' and '.join(bits)}")
        if parts:
            findings.append(f"Across the ViT widths at batch {KEY_BATCH}, 224 px"
                            f"{'' if data.widths_run is run else ' (run folder ' + data.widths_run.name + ')'}, for {FUSED}: "
                            + "; ".join(parts) + ".")

    return findings


def cublaslt_settings(data, lt, lt_flush_text):
    """Each cuBLASLt setting's time and kernel count against the default (lt: its table, None
    where not run)."""
    order_s, findings = data.order_s, []
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

    return findings


def headline(data, ctx):
    """README's headline line for the MLP."""
    key_rows, run, vb = data.key_rows, data.run, data.vb
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
            shown = d[d["version"].isin([top, GEMM, GRAPH, EAGER])]
            return own[top] / med[GEMM], dict(
                family="MLP", shape=f"{big} x {HIDDEN} (rows x hidden), mlp {4 * HIDDEN}, fp16",
                fastest=top, fastest_us=float(own[top]),
                library=f"{GEMM} (the two plain GEMMs)", library_us=float(med[GEMM]),
                anchors=[(label(a), float(med[a])) for a in (GRAPH, EAGER) if a in med.index],
                measured_in=folder, run_ids=rundata.run_ids_of(shown))

        candidates = [c for c in [headline_candidate(vb)] if c]
        here_timed = set(vb.loc[vb["rows"] == big, "version"])
        for name in ("mlp_cutlass", "mlp_power", "mlp_exact_gelu"):
            d = side_experiment(run, name, elsewhere=True)
            if d is not None and len(d) and "hidden" in d:
                c = headline_candidate(d, str(d.attrs["folder"].relative_to(d.attrs["folder"].parent.parent)))
                # A side sitting speaks for a version this run did not time; one this run timed
                # is quoted from this run, the family's newest sitting, not from the luckier one.
                if c and c[1]["fastest"] not in here_timed:
                    candidates.append(c)
        if candidates:
            ctx.headline(**min(candidates, key=lambda c: c[0])[1])

def findings(data, ctx, widths, algos, pp, cu, lt, lt_flush_text):
    """The findings (returned), the two MLP targets and README's headline line, from the sections'
    numbers: the widths measured, and the side experiments' tables (None where not run)."""
    findings = [s for s in [formatting.rounds_sentence(data.timed)] if s]
    findings += fused_against_anchors(data)
    findings += fused_targets(data, ctx)
    findings += cutlass_side(cu, ctx) + algorithm_search(algos) + pingpong(pp)
    findings += fastest_versions(data) + against_unfused(data) + graph_gain(data) + kernel_counts(data)
    findings += across_widths(data, widths) + cublaslt_settings(data, lt, lt_flush_text)
    findings.append(formatting.status_finding(data.everything, "failed the correctness check"))
    ctx.text("mlp_findings", findings)
    headline(data, ctx)
    return findings
