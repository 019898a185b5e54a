"""The MLP's last sections: every timed configuration, status, and the findings with the two MLP
targets and README's headline line."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from analysis.mlp_data import (
    DEFAULT_SETTING, EAGER, FUSED, GEMM, GRAPH, GRAPHED, HIDDEN, KEY_BATCH, KEY_ROWS, NOT_FUSED, PANELED,
    TARGET_GEMM_RATIO, UNFUSED, is_fp8, label)
from analysis.mlp_side import PING, PING_GEMM, side_experiment
from studylib import catalog, formatting, notebook, rundata, specs
from studylib.claims import claim
from studylib import steps as step_table


def every_configuration(data, ctx):
    """Every timed configuration at hidden 768 (median us)."""
    S, order_s, sweep_prov = data.sweep_rows, data.order_s, data.sweep_prov
    if len(S.vb):
        ctx.table("mlp_sweep", formatting.sweep_table(
            S.vb, ["image_size", "batch", "rows"], "version", order_s, formatting.fmt_us,
            {c: formatting.fmt_int for c in ("image_size", "batch", "rows")}),
            claim("sweep_caption", hidden=HIDDEN, cells=data.sweep_rounds_cells, flush=S.flush_text, prov=sweep_prov))
    else:
        ctx.missing("table", "mlp_sweep", claim("none_at_hidden", hidden=HIDDEN))


def status(data, ctx, lt):
    """What was timed, skipped or failed (lt: the cuBLASLt table, None without one)."""
    everything, order = data.everything, data.order
    st = formatting.status_in_order(everything, order)
    n_lt = int(data.is_lt.sum())
    left_out = ([claim("lt_rows", n=n_lt)] if n_lt else []) + (
        [claim("other_extra", n=data.other_extra)] if data.other_extra else []) + (
        [claim("flush_dropped_sweep", n=data.flush_dropped, lt=lt is not None)] if data.flush_dropped else [])
    ctx.table("mlp_status", formatting.markdown_table(st),
              claim("status_caption_mlp", left_out=left_out, prov=ctx.provenance()))


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
    at, gemm_ceiling, findings = data.at, data.gemm_ceiling, []
    for r in data.key_rows:
        f = at(FUSED, r)
        if not np.isfinite(f):
            findings.append(claim("no_fused", fused=FUSED, rows=r, hidden=HIDDEN))
            continue
        tf = at(FUSED, r, "tflops")
        comps = [claim(kind, ratio=at(anchor, r) / f, us=at(anchor, r))
                 for anchor, kind in ((GRAPH, "vs_graph_mlp"), (EAGER, "vs_eager_mlp")) if np.isfinite(at(anchor, r))]
        if np.isfinite(at(GEMM, r)):
            comps.append(claim("vs_gemm_only", ratio=f / at(GEMM, r), gemm=GEMM, us=at(GEMM, r)))
        findings.append(claim("fused_at", rows=r, hidden=HIDDEN, where=data.where(r), fused=FUSED, us=f, tflops=tf,
                              ceiling=bool(gemm_ceiling), share=tf / gemm_ceiling if gemm_ceiling else None,
                              comps=comps))
    return findings


def gemm_target(data, versions, who, kind="gemm_target"):
    """The 1.05x target for one version per key row ({rows: version}): its claim (the verdict, the
    rounds' band of each ratio, its fastest round over gemm_only's slowest and the other way,
    deciding "within noise"); None where a timing is missing."""
    at = data.at
    ratios = {r: at(v, r) / at(GEMM, r) for r, v in versions.items()}
    if not all(np.isfinite(list(ratios.values()))):
        return None
    parts = []
    for r, x in ratios.items():
        band = notebook.ratio_band(at(versions[r], r, "lo_us"), at(versions[r], r, "hi_us"),
                                   at(GEMM, r, "lo_us"), at(GEMM, r, "hi_us"))
        parts.append(claim("gemm_part", rows=r, ratio=x, version=versions[r], band=band,
                           verdict=notebook.verdict(x, TARGET_GEMM_RATIO, band, at_most=True)))
    return claim(kind, who=who, target=TARGET_GEMM_RATIO, gemm=GEMM, sizes=list(KEY_ROWS), parts=parts,
                 verdict=notebook.combined_verdict([p.verdict for p in parts]))


def fused_targets(data, ctx):
    """The two MLP targets (docs/method.md), judged on the fastest fused version at 6304 and 50432
    rows, and the 1.05x one on the MLP the fp16 answer runs, into ctx; their findings."""
    at, findings = data.at, []
    best = {r: fastest_fused(data, r) for r in KEY_ROWS}
    who = claim("fastest_fused_who", names=sorted({v for _, v in best.values() if v}))
    graph_met = [best[r][0] < at(GRAPH, r) for r in KEY_ROWS
                 if np.isfinite(best[r][0]) and np.isfinite(at(GRAPH, r))]
    if len(graph_met) == len(KEY_ROWS):
        target = claim("graph_target", who=who, sizes=list(KEY_ROWS), all_met=all(graph_met),
                       verdict="met" if all(graph_met) else "missed",
                       parts=[claim("graph_part", rows=r, ratio=at(GRAPH, r) / best[r][0], version=best[r][1])
                              for r in KEY_ROWS])
        findings.append(target)
        ctx.judge(target)
    else:
        findings.append(claim("graph_target_unjudged", who=who, sizes=list(KEY_ROWS), graph=GRAPH))
    judged = gemm_target(data, {r: best[r][1] for r in KEY_ROWS}, who) if all(best[r][1] for r in KEY_ROWS) else None
    if judged is None:
        findings.append(claim("gemm_target_unjudged", who=who, target=TARGET_GEMM_RATIO, gemm=GEMM,
                              small=KEY_ROWS[0], large=KEY_ROWS[1]))
        return findings
    findings.append(judged)
    ctx.judge(judged)
    # The same target on the MLP the fp16 answer runs (its exact GELU, timm's), fastest or not.
    mlp = step_table.alias_field("fastest_fp16", "mlp")
    step = step_table.aliases()["fastest_fp16"]["step"]
    answer = gemm_target(data, {r: mlp for r in KEY_ROWS}, claim("answer_mlp_who", step=step, mlp=mlp),
                         kind="gemm_target_answer")
    if answer is not None:
        findings.append(replace(answer, kind="gemm_target"))
        ctx.judge(replace(answer, fields={**answer.fields, "step": step, "mlp": mlp}))
    else:
        findings.append(claim("answer_not_timed", mlp=mlp, step=step, sizes=list(KEY_ROWS), target=TARGET_GEMM_RATIO))
    return findings


def cutlass_side(cu, ctx):
    """The 1.05x target in the CUTLASS side sitting (cu: its rows, None where not run)."""
    if cu is None or not len(cu):
        return []
    keyed = cu.groupby(["rows", "version"])["median_us"].median()
    fused = specs.load_spec(specs.find_spec("mlp_cutlass"))["comparison"]["against"]  # the sitting's MLPs
    ratios = {}
    for r in KEY_ROWS:
        times = {v: keyed[(r, v)] for v in fused if (r, v) in keyed.index}
        if times and (r, GEMM) in keyed.index:
            v = min(times, key=times.get)
            ratios[r] = (v, times[v] / keyed[(r, GEMM)])
    if len(ratios) != len(KEY_ROWS):
        return []
    met = all(x <= TARGET_GEMM_RATIO for _, x in ratios.values())
    target = claim("cutlass_target", folder=rundata.show_path(cu.attrs['folder']), target=TARGET_GEMM_RATIO,
                   gemm=GEMM, sizes=list(KEY_ROWS), all_met=met, verdict="met" if met else "missed",
                   parts=[claim("cutlass_part", ratio=x, gemm=GEMM, rows=r, version=v) for r, (v, x) in ratios.items()],
                   details=[claim("cutlass_detail", rows=r, ratio=x, version=v) for r, (v, x) in ratios.items()])
    ctx.judge(target)
    return [target]


def algorithm_search(algos):
    """What the search over every cuBLASLt algorithm gives (algos: its table, None where not run)."""
    if algos is None:
        return []
    searched = algos[algos["extra"] == "--search-all"].dropna(subset=["fused / gemm_only"])
    if not len(searched):
        return []
    return [claim("algorithm_search", timed=int(searched["timed"].max()), fused=FUSED, target=TARGET_GEMM_RATIO,
                  parts=[claim("search_part", ratio=x, gemm=GEMM, rows=int(r))
                         for r, x in zip(searched["rows"], searched["fused / gemm_only"])])]


def pingpong(pp):
    """Our own ping-pong GEMM's epilogue cost and main loop (pp: its rows, None where not run)."""
    if pp is None or not len(pp):
        return []
    keyed = pp.pivot_table(index="rows", columns="version", values="median_us", aggfunc="median")
    at_key = [r for r in KEY_ROWS if r in keyed.index]
    if not at_key or not {PING, PING_GEMM, GEMM} <= set(keyed.columns):
        return []
    cost = {r: keyed.loc[r, PING] / keyed.loc[r, PING_GEMM] for r in at_key}
    speed = {r: keyed.loc[r, PING_GEMM] / keyed.loc[r, GEMM] for r in at_key}
    hidden = [r for r in at_key if cost[r] <= TARGET_GEMM_RATIO]
    exposed = [r for r in at_key if r not in hidden]
    hiding = (claim("pp_hidden") if not exposed else claim("pp_exposed") if not hidden
              else claim("pp_partly", hidden=hidden, exposed=exposed))
    return [claim("pingpong", ping=PING, gemm=GEMM, hiding=hiding, slower=min(speed.values()) > 1,
                  costs=[claim("pp_cost", ratio=cost[r], rows=r) for r in at_key],
                  speeds=[claim("pp_speed", ratio=speed[r]) for r in at_key])]


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
            also = b16 is not None and b16["version"] != b["version"]
            findings.append(claim("fastest_not_fused", rows=r, hidden=HIDDEN, version=b["version"], us=b["median_us"],
                                  also=also, v16=b16["version"] if also else None,
                                  us16=b16["median_us"] if also else None, fused=FUSED))
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
            findings.append(claim("vs_unfused", rows=big, hidden=HIDDEN, unfused=UNFUSED, us=u,
                                  parts=[claim("vs_unfused_part", version=v, ratio=u / at(v, big)) for v in others]))
        g, gt = at(GEMM, big), at(GEMM, big, "tflops")
        if np.isfinite(g) and gemm_ceiling:
            findings.append(claim("gemm_share", gemm=GEMM, tflops=gt, rows=big, hidden=HIDDEN, share=gt / gemm_ceiling,
                                  ceiling=gemm_ceiling))
    return findings


def graph_gain(data):
    """The graph's gain where launches dominate: the smallest timed size of the sweep."""
    S, at, run, sweep = data.sweep_rows, data.at, data.run, data.sweep
    if not len(S.vb):
        return []
    small = S.vb.loc[S.vb["rows"].idxmin()]
    u, ug = (at(v, int(small["rows"]), table=S.t) for v in (UNFUSED, GRAPHED))
    if not (np.isfinite(u) and np.isfinite(ug)):
        return []
    return [claim("graph_gain", rows=int(small["rows"]), batch=int(small["batch"]), image=int(small["image_size"]),
                  other=sweep is not run, folder=sweep.name, graphed=GRAPHED, graphed_us=ug, unfused=UNFUSED, us=u,
                  ratio=u / ug)]


def launch_counts(vb, v):
    """(the kernels per call of most sizes, [(rows, kernels)] where another count ran) of version v."""
    d = vb[(vb["version"] == v) & np.isfinite(vb["launches"])]
    if not len(d):
        return None, []
    mode = int(d["launches"].round().mode().iloc[0])
    odd = d[d["launches"].round() != mode].sort_values("rows")
    return mode, [(int(r), int(n)) for r, n in zip(odd["rows"], odd["launches"].round())]


def extra_kernels(kind, versions, counts, floor, floor_said, **fields):
    """One claim per count of kernels beyond the floor among `versions`."""
    out = []
    for k in sorted({counts[v][0] - floor for v in versions}):
        who = [v for v in versions if counts[v][0] - floor == k]
        out.append(claim(kind, versions=who, one=len(who) == 1, k=k, plural=k != 1, floor=floor_said, **fields))
    return out


def kernel_counts(data):
    """Kernels per call and where the epilogue runs."""
    at, vb = data.at, data.vb
    counts = {v: c for v in data.order for c in [launch_counts(vb, v)] if c[0] is not None}
    if not counts:
        return []
    findings = [claim("kernels_per_call", profiled=any(catalog.is_anchor(v) for v in counts),
                      counts=[claim("count_part", label=label(v), mode=mode, odd=[claim("odd_count", n=n, rows=r)
                                                                                   for r, n in odd])
                              for v, (mode, odd) in counts.items()])]
    floor = counts[GEMM][0] if GEMM in counts else 2
    floor_said = claim("floor_gemm", gemm=GEMM, n=floor) if GEMM in counts else claim("floor_two")
    own = [v for v in counts if catalog.is_own(v) and v != GEMM]
    inside = [v for v in own if counts[v][0] <= floor]
    outside = [v for v in own if counts[v][0] > floor]
    if inside:
        findings.append(claim("inside_epilogues", versions=inside, one=len(inside) == 1, floor=floor_said))
    if FUSED in outside:
        k = counts[FUSED][0] - floor
        findings.append(claim("fused_extra", fused=FUSED, k=k, plural=k != 1, floor=floor_said))
    # FP8 versions quantize x in a pass of their own; l2_panels runs its two GEMMs once per
    # panel of rows. Both keep bias, GELU and the residual in the GEMMs' epilogues.
    fp8 = [v for v in outside if is_fp8(v)]
    findings += extra_kernels("fp8_extra", fp8, counts, floor, floor_said)
    for v in [v for v in outside if v in PANELED]:
        findings.append(claim("paneled", version=v, at_rows=[
            claim("panel_count", n=int(n), rows=int(r)) for r in sorted(set(vb["rows"]))
            for n in [at(v, r, "launches")] if np.isfinite(n)]))
    passes = [v for v in outside if v != FUSED and v not in fp8 and v not in PANELED]
    findings += [replace(c, fields={**c.fields, "graphed_in": GRAPHED in c.fields["versions"]})
                 for c in extra_kernels("passes_extra", passes, counts, floor, floor_said, graphed=GRAPHED)]
    # Where the fused path ran more kernels than the GEMMs alone at the same size.
    if FUSED in inside and GEMM in counts:
        more = [claim("more_at", nf=int(nf), ng=int(ng), rows=int(r)) for r in sorted(set(vb["rows"]))
                for nf, ng in [(at(FUSED, r, "launches"), at(GEMM, r, "launches"))]
                if np.isfinite(nf) and np.isfinite(ng) and nf > ng]
        if more:
            findings.append(claim("fused_more_at", fused=FUSED, gemm=GEMM, parts=more))
    return findings


def across_widths(data, widths):
    """fused_epilogue across the ViT widths at the key batch."""
    if len(widths) < 2:
        return []
    parts = []
    for h in widths:
        f, g, a = (data.at(v, None, hidden=h, image=224, batch=KEY_BATCH, table=data.widths_rows.t)
                   for v in (FUSED, GEMM, GRAPH))
        has_gemm, has_graph = np.isfinite(f) and np.isfinite(g), np.isfinite(f) and np.isfinite(a)
        kind = {(True, True): "width_both", (True, False): "width_gemm", (False, True): "width_graph"}.get(
            (bool(has_gemm), bool(has_graph)))
        if kind:
            parts.append(claim(kind, hidden=h, gemm_ratio=f / g, gemm=GEMM, graph_ratio=a / f))
    if not parts:
        return []
    return [claim("across_widths", batch=KEY_BATCH, other=data.widths_run is not data.run, folder=data.widths_run.name,
                  fused=FUSED, parts=parts)]


def cublaslt_settings(data, lt, lt_flush_text):
    """Each cuBLASLt setting's time and kernel count against the default (lt: its table, None
    where not run)."""
    if lt is None:
        return []
    findings = []
    settings = lt[["heuristic", "workspace_mib"]].drop_duplicates().sort_values(["heuristic", "workspace_mib"])
    for heur, ws in settings.itertuples(index=False):
        if (heur, ws) == DEFAULT_SETTING:
            continue
        name = claim("setting_both" if heur != DEFAULT_SETTING[0] and ws != DEFAULT_SETTING[1] else
                     "setting_heuristic" if heur != DEFAULT_SETTING[0] else "setting_workspace", ws=int(ws))
        d = lt[(lt["heuristic"] == heur) & (lt["workspace_mib"] == ws)]
        per = []
        for v in [v for v in data.order_s if v in set(d["version"])]:
            dv = d[(d["version"] == v) & np.isfinite(d["time / default"])].sort_values("batch")
            if len(dv):
                per.append(claim("setting_version", version=v, times=[
                    claim("setting_time", ratio=x, batch=int(b)) for b, x in zip(dv["batch"], dv["time / default"])]))
        findings.append(claim("setting_times", name=name, default_ws=DEFAULT_SETTING[1], flush=lt_flush_text, per=per)
                        if per else claim("setting_no_default", name=name))
    changed = []
    for (v, h, i, b), g in lt.groupby(["version", "hidden", "image_size", "batch"]):
        n = g.set_index(["heuristic", "workspace_mib"])["launches"].dropna()
        base = n.get(DEFAULT_SETTING)
        if base is None:
            continue
        changed += [claim("kernel_change", version=v, batch=int(b), k=int(k), heur=heur, ws=int(ws), base=int(base))
                    for (heur, ws), k in n.items() if k != base]
    if changed:
        findings.append(claim("setting_kernels", changed=changed))
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
                family="MLP", shape=ctx.said(claim("headline_shape", rows=big, hidden=HIDDEN, mlp=4 * HIDDEN)),
                fastest=top, fastest_us=float(own[top]),
                library=ctx.said(claim("headline_library", gemm=GEMM)), library_us=float(med[GEMM]),
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
    """The findings (their text returned), the two MLP targets and README's headline line, from the sections'
    numbers: the widths measured, and the side experiments' tables (None where not run)."""
    findings = [s for s in [formatting.rounds_sentence(data.timed)] if s]
    findings += fused_against_anchors(data)
    findings += fused_targets(data, ctx)
    findings += cutlass_side(cu, ctx) + algorithm_search(algos) + pingpong(pp)
    findings += fastest_versions(data) + against_unfused(data) + graph_gain(data) + kernel_counts(data)
    findings += across_widths(data, widths) + cublaslt_settings(data, lt, lt_flush_text)
    findings.append(formatting.status_finding(data.everything, "failed the correctness check"))
    text = ctx.claims("mlp_findings", findings).read_text()
    headline(data, ctx)
    return text
