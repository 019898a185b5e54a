"""The whole ViT's tables of one run (analysis/encoder.py writes them in this order): the batch-1
kernels, the block GEMMs against the ceiling, the ladder, every step, every configuration, timm
parity and status, and the findings that follow the targets."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

import studylib
from analysis.encoder_data import (
    COMPILE, E4, E6, KEY_BATCHES, KEY_IMAGE, KEY_MODEL, LABEL, LADDER, PREVIOUS, best_resolved, fmt_mb,
    fmt_ms, fmt_one, fmt_rate)
from studylib import steps as step_table
from studylib import catalog, formatting, paths, rundata
from studylib.claims import claim
from studylib.schema import MODELS


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


def b1_kernels(data, ctx):
    """Every kernel of one eager batch-1 forward from Nsight Compute (experiments/small_m_probe.sh)."""
    run = data.run
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
                  claim("b1_kernels_caption", folder=rundata.show_path(b1_probe.parent), total_us=b1_total_us))
    else:
        ctx.missing("table", "encoder_b1_kernels", claim("no_b1_kernels"))


def gemms(data, ctx):
    """The block GEMMs against the measured ceiling; returns the finding on them, or None."""
    at, key_image, key_model, label, parts = data.at, data.key_image, data.key_model, data.label, data.parts
    prov, run, steps, where = ctx.provenance(), data.run, data.steps, data.where
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
        # The answer's fp16 step where it has a breakdown at that batch, else the last step that has.
        answer = data.answer_fp16()
        shown = label(answer) if answer is not None and label(answer) in set(top["version"]) else top["version"].iloc[-1]
        top = top[top["version"] == shown]
        if gemm_ceiling and len(top):
            gemm_finding = claim("gemms_finding", batch=int(top['batch'].iloc[0]), version=top['version'].iloc[0],
                                 parts=[claim("gemm_share_part", gemm=r['GEMM'], pct=r['% of ceiling'])
                                        for _, r in top.iterrows()], ceiling=gemm_ceiling, mhz=top['SM MHz'].iloc[0])
        ctx.table("encoder_gemms", formatting.markdown_table(
            gt, {"batch": formatting.fmt_int, "us": formatting.fmt_us, "TFLOP/s": fmt_rate,
                 "% of ceiling": lambda x: "-" if not np.isfinite(x) else f"{x:.0f}%",
                 "SM MHz": fmt_rate}),
            claim("gemms_caption" if gemm_ceiling else "gemms_caption_no_ceiling", where=where, ceiling=gemm_ceiling,
                  prov=prov))
    else:
        ctx.missing("table", "encoder_gemms", claim("no_gemms", where=where))

    return gemm_finding


def ladder(data, ctx):
    """The ladder at batch 1, 32 and 256."""
    at, at_key, best_anchor, ceil = data.at, data.at_key, data.best_anchor, data.gemm_ceiling
    custom_key, flush_text, label, order = data.custom_key, data.flush_text, data.label, data.order
    prov, steps, where = ctx.provenance(), data.steps, data.where
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
                "% of its GEMM ceiling": at(v, b, "gemm_pct"),
                "routine ms": at(v, b, "routine_us"),
                "launches/layer": at(v, b, "lpl"),
                "activations MB": at(v, b, "act_mb"),
                "rounds": at(v, b, "n")})
    ladder = pd.DataFrame(rows)
    if len(ladder):
        anchors_at = [claim("anchor_at_batch", batch=b, anchor=label(best_anchor(b)[0])) for b in key_batches
                      if best_anchor(b)[0]]
        ctx.table("encoder_ladder", formatting.markdown_table(ladder, {
            "batch": formatting.fmt_int, "streams": formatting.fmt_int, "ms": fmt_ms, "img/s": fmt_rate,
            "x prev": formatting.fmt_ratio, "x best anchor": formatting.fmt_ratio, "SM MHz": fmt_rate,
            "% of its GEMM ceiling": formatting.fmt_pct,
            "routine ms": fmt_ms, "launches/layer": fmt_one, "activations MB": fmt_mb,
            "rounds": formatting.fmt_int}),
            claim("ladder_caption", where=where, batches=key_batches, anchors=anchors_at, ceiling=bool(ceil),
                  ceiling_text=fmt_rate(ceil) if ceil else "", fp8=bool(data.fp8_ceiling),
                  fp8_text=fmt_rate(data.fp8_ceiling) if data.fp8_ceiling else "", custom=custom_key, flush=flush_text,
                  prov=prov))
    else:
        ctx.missing("table", "encoder_ladder", claim("no_ladder", where=where))


def every_step(data, ctx):
    """Every step, those that left the build included, from the newest sitting that measured it."""
    run = data.run
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
            claim("every_step_caption", model=KEY_MODEL, image=KEY_IMAGE, gpu=gpu_here))


def every_configuration(data, ctx):
    """Every timed configuration (median ms)."""
    custom_key, label, order, prov, t = data.custom_key, data.label, data.order, ctx.provenance(), data.timed
    if len(t):
        sw = t.assign(col=[label(v) + (f" x{int(s)}" if v == E4 else "")
                           for v, s in zip(t["version"], t["streams"])])
        cols = list(dict.fromkeys(
            c for v in order for c in sw.loc[sw["version"] == v].sort_values("streams")["col"]))

        ctx.table("encoder_sweep", formatting.sweep_table(
            sw, ["model", "image_size", "batch"], "col", cols, fmt_ms,
            {"image_size": formatting.fmt_int, "batch": formatting.fmt_int}),
            claim("sweep_caption", spread=rundata.multi_round(t), custom=custom_key, prov=prov))
    else:
        ctx.missing("table", "encoder_sweep", claim("no_sweep"))


def parity(data, ctx):
    """Parity with timm: this run's parity files, and which steps a passing file vouches for."""
    run = data.run
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
            claim("parity_caption", rel_l2_max=crit['rel_l2_max'], margin=crit['margin_factor'],
                  agreement=crit['agreement_min']))
    else:
        ctx.missing("table", "encoder_parity", claim("no_parity"))

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
    ctx.table("encoder_parity_by_step", formatting.markdown_table(by_step, {}), claim("parity_by_step_caption"))


def status(data, ctx):
    """What was timed, skipped or failed."""
    custom_key, everything, flush_dropped = data.custom_key, data.everything, data.flush_dropped
    label, n_short, order, prov = data.label, data.n_short, data.order, ctx.provenance()
    st = formatting.status_in_order(everything, order)
    st["version"] = st["version"].map(label)
    left_out = ([claim("shortened_rows", n=n_short)] if n_short else []) + (
        [claim("other_flush_shown", n=flush_dropped)] if flush_dropped else [])
    ctx.table("encoder_status", formatting.markdown_table(st),
              claim("status_caption_encoder", left_out=left_out, custom=custom_key, prov=prov))


def anchor_findings(data):
    """Which anchor is the fastest at each batch."""
    at, at_key, best_anchor, fp16_anchors, label, where = (data.at, data.at_key, data.best_anchor, data.fp16_anchors,
                                                           data.label, data.where)
    findings = []
    anchor_batches = sorted(int(b) for b in set(at_key.loc[at_key["version"].map(catalog.is_anchor),
                                                           "batch"]))
    if anchor_batches:
        best = [(b, *best_anchor(b)) for b in anchor_batches]
        fastest_anchors = [claim("fastest_anchor_at", batch=b, anchor=label(a), ms=fmt_ms(us),
                                 several=len(fp16_anchors(b)) > 1, anchors=[label(x) for x in fp16_anchors(b)])
                           for b, a, us in best if a is not None]
        if fastest_anchors:
            findings.append(claim("fastest_anchors", where=where, parts=fastest_anchors))
        if not any(np.isfinite(at(COMPILE, b)) for b in anchor_batches):
            findings.append(claim("no_compile_rows", compile=LABEL[COMPILE], where=where))
    else:
        findings.append(claim("no_anchor_rows", where=where))
    return findings


def resolved_findings(data):
    """What e6_best's `best` family versions resolved to."""
    ok, mix_of, findings = data.ok, step_table.note_mix, []
    e6_notes = ok.loc[ok["version"] == E6, "note"].astype(str)
    resolved = list(dict.fromkeys(x for x in e6_notes.map(best_resolved) if x))
    mixes = list(dict.fromkeys(x for x in e6_notes.map(mix_of) if x))
    if resolved:
        findings.append(claim("best_resolved", step=E6, resolved=resolved, several=len(resolved) > 1))
    elif mixes:
        findings.append(claim("best_ran", step=E6, mixes=mixes))
    return findings


def ladder_findings(data):
    """The ladder end to end and its largest step."""
    at, key_batches, steps, findings = data.at, data.key_batches, data.steps, []
    for b in [b for b in (1, 256) if b in key_batches]:
        timed_steps = [v for v in steps if np.isfinite(at(v, b))]
        # Only a sitting of the ladder from its first step (a final sitting's few steps are no ladder).
        if len(timed_steps) >= 2 and timed_steps[0] == LADDER[0]:
            first, last = timed_steps[0], timed_steps[-1]
            # A step is one change against its parent: only steps timed beside their parent count
            # (a sitting of a few steps, the final one, has neighbours that are not parents).
            gains = [(at(PREVIOUS[v], b) / at(v, b), v, PREVIOUS[v])
                     for v in timed_steps[1:] if np.isfinite(at(PREVIOUS.get(v), b))]
            g, v, p = max(gains) if gains else (1.0, None, None)
            findings.append(claim("ladder_end_to_end", batch=b, last=last, last_ms=fmt_ms(at(last, b)), first=first,
                                  first_ms=fmt_ms(at(first, b)), ratio=at(first, b) / at(last, b), largest=bool(gains),
                                  step=v, gain=g, parent=p))
    return findings


def memory_findings(data):
    """Memory: one arena against a buffer per intermediate."""
    at, key_batches, findings = data.at, data.key_batches, []
    b_mem = max(key_batches) if key_batches else None
    if b_mem and all(np.isfinite(at(v, b_mem, "act_mb")) for v in ("e1_library", "e2_buffer_reuse")):
        a1, a2 = at("e1_library", b_mem, "act_mb"), at("e2_buffer_reuse", b_mem, "act_mb")
        findings.append(claim("arena", batch=b_mem, a2=fmt_mb(a2), a1=fmt_mb(a1), less=a1 / a2,
                              time_ratio=at('e2_buffer_reuse', b_mem) / at('e1_library', b_mem)))
    return findings


def stream_findings(e3, e4):
    """Splitting the batch over streams (e4_streams) against one stream (e3)."""
    findings = []
    if len(e4) and len(e3):
        ratio = []
        for b in sorted(set(e4["batch"]) & set(e3.index)):
            d = e4[e4["batch"] == b]
            r = d.loc[d["median_us"].idxmin()]
            ratio.append((int(b), int(r["streams"]), r["median_us"] / e3["median_us"][b]))
        helps = [claim("stream_help", batch=b, streams=s, plural=s != 1, ratio=x) for b, s, x in ratio if x < 1]
        findings.append(claim("streams_split", e3=e3.attrs['label'], helps=helps, last=bool(ratio),
                              last_batch=ratio[-1][0] if ratio else None, last_ratio=ratio[-1][2] if ratio else 1.0))
    return findings


def forward_shares(data, bd, bd_versions):
    """(step, batch, {component: its share of the step's eager forward}) of the answer's fp16 step
    (else e6_best) at the largest batch with a breakdown, largest share first; None without one."""
    if not len(bd_versions):
        return None
    answer = data.answer_fp16()
    v = answer if answer in bd_versions else E6 if E6 in bd_versions else bd_versions[-1]
    b = int(max(set(bd.loc[bd["version"] == v, "batch"])))
    d = bd[(bd["version"] == v) & (bd["batch"] == b)].sort_values("us", ascending=False)
    return v, b, {r["component"]: r["us"] / d["us"].sum() for _, r in d.iterrows()}, d["us"].sum()


def breakdown_findings(data, bd, bd_versions):
    """Where the time goes in the answer's fp16 step (else e6_best) at the largest batch with a breakdown."""
    at_key, parts, where, findings = data.at_key, data.parts, data.where, []
    shares = forward_shares(data, bd, bd_versions)
    if shares is not None:
        v, b, share, total = shares
        findings.append(claim("breakdown", version=v, batch=b, total=fmt_ms(total),
                              parts=[claim("breakdown_part", component=c, share=s) for c, s in list(share.items())[:2]]))
    elif len(at_key):
        findings.append(claim("no_breakdown_notes") if not len(parts) else claim("no_breakdown_at", where=where))
    return findings


def batch1_floor_findings(data):
    """The fastest step at batch 1 against the weight-read floor."""
    at, b1_depth, floor_us, steps, weights_mb = data.at, data.depth, data.floor_us, data.steps, data.weights_mb
    findings = []
    fast_b1 = [v for v in steps if np.isfinite(at(v, 1))]
    if fast_b1 and np.isfinite(floor_us):
        v = min(fast_b1, key=lambda x: at(x, 1))
        kernels = at(v, 1, "lpl") * b1_depth
        findings.append(claim("batch1_floor", version=v, ms=fmt_ms(at(v, 1)), ratio=at(v, 1) / floor_us, floor_us=floor_us,
                              weights_mb=weights_mb.median(), kernels=bool(np.isfinite(kernels)), kernel_count=kernels))
    return findings


def other_findings(data, findings, bd, bd_versions, e3, e4, gemm_finding):
    """The findings after the targets: anchors, what best resolved to, the ladder, memory, streams, breakdown, GEMMs, the batch-1 floor, status."""
    label = data.label
    findings += anchor_findings(data) + resolved_findings(data) + ladder_findings(data) + memory_findings(data)
    findings += stream_findings(e3, e4) + breakdown_findings(data, bd, bd_versions)
    if gemm_finding:
        findings.append(gemm_finding)
    findings += batch1_floor_findings(data)
    findings.append(formatting.status_finding(data.everything, label=label, what="row", shown="shown",
                                              all_ok="Every row passed its logits check and was timed."))
