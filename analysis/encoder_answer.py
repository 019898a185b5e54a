"""The study's answer and its targets for the whole ViT, from one run folder's encoder rows
(EncoderData) and the accuracy results beside it: the fp16 and FP8 targets judged, README's answer
from a final sitting, and README's headline line. analysis/encoder.py calls these in this order."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

import studylib
from analysis.encoder_data import (
    ANCHORS, BEST_STEPS, COMPILE, E6, EAGER, GRAPH, KEY_BATCHES, KEY_IMAGE, KEY_MODEL, LABEL, TARGET_B1_FLOOR_MS, TARGET_B1_MS,
    TARGET_COMPILE, TARGET_FP8_COMPILE, TORCHAO, fastest_across, fmt_ms, fmt_rate)
from analysis.encoder_side import accuracy_result, measured_on
from analysis.encoder_answer_figure import NAME as ANSWER_FIGURE, answer_figure
from studylib import steps as step_table
from studylib import catalog, formatting, notebook, run_folder, rundata
from studylib.claims import claim


def other_sitting_times(run, batch=256):
    """{run id: {version: median us}} of every other final sitting on this run's GPU model at the
    key shape and `batch` (the sibling run folders of the results root). Only final sittings: their
    anchors answer every row in one kept process, while the graphed timm anchors of the other runs,
    one process a row, were timed on freed weights until the anchors kept the model alive (b9e6fe0;
    stages/encoder/NOTES.md), ~12% fast at batch 256."""
    try:
        others = rundata.load_runs(run.path.parent)
    except studylib.DataError:
        return {}  # a run folder outside a results root: no sibling sittings to read
    gpu, out = rundata.gpu_of(run), {}
    for other in others:
        if other.name == run.name or rundata.gpu_of(other) != gpu or not rundata.holds_final_sitting(other):
            continue
        d = other.ok("encoder")
        d = d[(d["model"] == KEY_MODEL) & (d["image_size"] == KEY_IMAGE) & (d["batch"] == batch)]
        for rid, g in d.groupby("run_id"):
            n = rundata.round_of(g).nunique()
            out[rid] = {"folder": other.name, "rounds": n, "us": g.groupby("version")["median_us"].median()}
    return out


def ratio_band(data, v, batch=256):
    """The range of step v's speedup over torch.compile at `batch` that the measurements allow: the
    rounds of this sitting (torch.compile's fastest round over v's slowest, and the other way) and
    every other final sitting on this GPU model that timed both (other_sitting_times)."""
    at = data.at
    lo = at(COMPILE, batch, "lo_us") / at(v, batch, "hi_us")
    hi = at(COMPILE, batch, "hi_us") / at(v, batch, "lo_us")
    band = [r for r in (lo, hi, at(COMPILE, batch) / at(v, batch)) if np.isfinite(r)]
    for sitting in other_sitting_times(data.run, batch).values():
        m = sitting["us"]
        if COMPILE in m.index and v in m.index:
            band.append(m[COMPILE] / m[v])
    return (min(band), max(band)) if band else (np.nan, np.nan)


def ratio_verdict(ratio, target, band):
    """'met' or 'missed' for a speedup against its target, 'met within noise' / 'missed within
    noise' where the band of the measurements (ratio_band) holds the target: the margin is smaller
    than the spread between rounds and sittings."""
    return notebook.verdict(ratio, target, band)


def rounds_finding(data):
    """The finding on how many rounds the run's medians come from (empty for a run without rounds)."""
    rounds = data.rounds
    if not rounds:
        return []
    if max(rounds) == 1:
        return [claim("rounds_once")]
    counts = rounds[0] if len(rounds) == 1 else claim("rounds_range", low=rounds[0], high=rounds[-1])
    out = [claim("rounds_counted", where=data.where, counts=counts)]
    if data.retired_rows:
        out.append(claim("retired_rows", n=data.retired_rows))
    return out


def target_steps(data):
    """(the run's fp16 steps that compute timm's model, the steps the fp16 targets are judged on):
    those where the parity files vouch for any of this run's fp16 steps (the answer's rule), else
    every fp16 step from e6_best."""
    timm_timed = [v for v in BEST_STEPS if v in data.steps and step_table.models_timm(v, data.parity_newest)]
    return timm_timed, timm_timed or BEST_STEPS


def fastest_target_step(data, steps, b):
    """The fastest of the target steps timed at batch b (e6_best when none is)."""
    return data.fastest_of(steps, b) or E6


def clocks(data, v, a, b):
    """The SM clocks of two rows at batch b (a claim), or '' where either row lacks one."""
    x, y = data.at(v, b, "sm_mhz"), data.at(a, b, "sm_mhz")
    return claim("clocks", mhz=x, other_mhz=y) if np.isfinite(x) and np.isfinite(y) else ""


def anchor_target(data, ctx, steps):
    """The target "faster than the fastest PyTorch anchor at batch 1, 32 and 256", judged into ctx;
    its finding."""
    at = data.at

    def vs_anchor(b):
        """(claim, met or None) for the fastest step against the fastest anchor at batch b."""
        v = fastest_target_step(data, steps, b)
        m = at(v, b)
        a, a_us = data.best_anchor(b)
        if not np.isfinite(m):
            return claim("anchor_no_step", batch=b, e6=E6), None
        if not a:
            return claim("anchor_unmeasured", batch=b, step=v, us=m), None
        return claim("anchor_vs", batch=b, step=v, us=m, anchor=data.label(a), anchor_us=a_us, ratio=a_us / m,
                     clocks=clocks(data, v, a, b)), m < a_us

    judged_at = [vs_anchor(b) for b in KEY_BATCHES]
    parts = [c for c, _ in judged_at]
    wins = [w for _, w in judged_at]
    slower = [str(b) for b, w in zip(KEY_BATCHES, wins) if w is False]
    judged = all(w is not None for w in wins)
    verdict = ("missed" if slower else "met") if judged else "not judged"
    ctx.judge(claim("anchor_target", verdict=verdict, where=data.where, parts=parts))
    said = (claim("verdict_slower_at", batches=slower) if slower else claim("verdict_met")) if judged else \
        claim("verdict_cannot")
    return claim("anchor_finding", verdict=verdict, verdict_said=said, parts=parts)


def compile_target(data, ctx, steps):
    """The target "TARGET_COMPILE x torch.compile's throughput at batch 256", judged into ctx; its finding."""
    at = data.at
    v = fastest_target_step(data, steps, 256)
    m, c = at(v, 256), at(COMPILE, 256)
    if not (np.isfinite(m) and np.isfinite(c)):
        missing = E6 if not np.isfinite(m) else COMPILE
        ctx.judge(claim("compile_target", target=TARGET_COMPILE, value=np.nan, band=(np.nan, np.nan),
                        verdict="not judged", where=data.where, judged=False, missing=missing, step=v, us=m,
                        compile_us=c, sustained=""))
        return claim("compile_unjudged", target=TARGET_COMPILE, missing=missing)
    band = ratio_band(data, v)
    verdict = ratio_verdict(c / m, TARGET_COMPILE, band)
    ctx.judge(claim("compile_target", target=TARGET_COMPILE, value=c / m, band=band, verdict=verdict,
                    where=data.where, judged=True, missing="", step=v, us=m, compile_us=c,
                    sustained=sustained(at, v, TARGET_COMPILE)))
    return claim("compile_finding", target=TARGET_COMPILE, value=c / m, band=band, verdict=verdict, step=v, us=m,
                 rate=256 / m * 1e6, compile=LABEL[COMPILE], compile_us=c, compile_rate=256 / c * 1e6,
                 clocks=clocks(data, v, COMPILE, 256), limit_us=c / TARGET_COMPILE)


def batch1_target(data, ctx, steps):
    """The target "at most TARGET_B1_MS ms at batch 1" (and the floor's, near_floor_target), judged
    into ctx; its finding."""
    v = fastest_target_step(data, steps, 1)
    m = data.at(v, 1)
    if not np.isfinite(m):
        return claim("b1_unjudged", target=TARGET_B1_MS, e6=E6)
    verdict = "met" if m / 1e3 <= TARGET_B1_MS else "missed"
    ctx.judge(claim("b1_target", target=TARGET_B1_MS, value=m, verdict=verdict, where=data.where, step=v))
    near_floor_target(data, ctx, "fp16", v)
    return claim("b1_finding", target=TARGET_B1_MS, value=m, verdict=verdict, step=v)


def against_e6(data):
    """The steps after e6_best against it: each must be faster at every key batch to count."""
    at, out = data.at, []
    for v in BEST_STEPS[1:]:
        ratios = [(b, at(E6, b) / at(v, b)) for b in KEY_BATCHES if np.isfinite(at(v, b) / at(E6, b))]
        if ratios:
            out.append(claim("against_e6", step=v, e6=E6, every=all(r > 1 for _, r in ratios),
                             parts=[claim("batch_ratio", batch=b, ratio=r) for b, r in ratios]))
    return out


def fp16_targets(data, ctx):
    """The findings on the rounds and the fp16 targets (returned, the first of the notebook's findings),
    and the fp16 targets judged into ctx."""
    findings = rounds_finding(data)
    if data.targets_apply and len(data.at_key):
        timm_timed, steps = target_steps(data)
        judged = [v for v in steps if v in data.steps]
        findings.append(claim("targets_judged_on", where=data.where, several=len(judged) > 1, steps=judged,
                              timm=bool(timm_timed), e6=E6, eager=LABEL[EAGER], graph=LABEL[GRAPH],
                              compile=LABEL[COMPILE], target=TARGET_COMPILE, b1_ms=TARGET_B1_MS))
        findings += [anchor_target(data, ctx, steps), compile_target(data, ctx, steps),
                     batch1_target(data, ctx, steps)]
        findings += against_e6(data)
    elif not len(data.timed):
        findings.append(claim("no_timed_encoder_rows"))
    elif len(data.at_key):
        findings.append(claim("targets_elsewhere", model=KEY_MODEL, image=KEY_IMAGE, where=data.where))
    return findings


def fp8_cost(run, v, weights="timm_init"):
    """FP8 step v's accuracy cost (a claim) from the newest fp8_accuracy result that holds it on
    this GPU (or its architecture), on timm's init; '' without one."""
    found = accuracy_result(run, "*/fp8_accuracy*/accuracy.json",
                            lambda j: any(r["forward"] == f"encoder {v}" for r in j["rows"]))
    if not found:
        return ""
    path, j = found
    rows = {r["forward"]: r for r in j["rows"] if r["weights"] == weights}
    ours, fp16, torchao = rows.get(f"encoder {v}"), rows.get("timm fp16"), rows.get("torchao per tensor")
    if ours is None:
        return ""
    beside = ([claim("beside_timm_fp16", rel_l2=fp16["logits_rel_l2"])] if fp16 else []) + \
             ([claim("beside_torchao", rel_l2=torchao["logits_rel_l2"])] if torchao else [])
    # timm's init is untrained: its logits' class margins are small, so agreement is low for any
    # FP8 recipe; torchao's on the same weights says what the recipe costs beside the library's.
    return claim("fp8_cost", images=j["images"], rel_l2=ours["logits_rel_l2"], beside=beside,
                 top1=ours["top1_agreement"], has_torchao=bool(torchao),
                 torchao_top1=torchao["top1_agreement"] if torchao else np.nan,
                 decisive=ours["top1_agreement_decisive"], decisive_images=ours["decisive_images"],
                 path=rundata.show_path(path.parent), measured_on=measured_on(run, j["gpu"]))


def sustained(at, v, target=None):
    """Step v's speedup over torch.compile at batch 256 over the energy loop (a claim; its verdict
    under `target` when given), or '' without energy rows."""
    s, sc = at(v, 256, "sustained_us"), at(COMPILE, 256, "sustained_us")
    if not (np.isfinite(s) and np.isfinite(sc)):
        return ""
    return claim("sustained", value=sc / s, us=s, compile_us=sc, judged=target is not None,
                 verdict=None if target is None else "met" if sc / s >= target else "missed")


def near_floor_target(data, ctx, precision, v):
    """The batch-1 target near the hardware's floor (TARGET_B1_FLOOR_MS) for step v of `precision`,
    with how far above the weight-read floor it runs."""
    limit, m = TARGET_B1_FLOOR_MS[precision], data.at(v, 1)
    ctx.judge(claim("b1_floor_target", target=limit, value=m, verdict="met" if m / 1e3 <= limit else "missed",
                    precision=precision, where=data.where, step=v, has_floor=bool(np.isfinite(data.floor_us)),
                    floor_x=m / data.floor_us, floor_us=data.floor_us, fp8=precision == "FP8"))


def fp8_targets(data, ctx):
    """The FP8 targets against torch.compile and torchao."""
    at, fastest_of, where = data.at, data.fastest_of, data.where
    if not (data.targets_apply and len(data.at_key)):
        return
    v8, c = fastest_of(data.fp8_steps, 256), at(COMPILE, 256)
    judged = v8 is not None and np.isfinite(c)
    m = at(v8, 256) if v8 is not None else np.nan
    r, band = (c / m, ratio_band(data, v8)) if judged else (np.nan, (np.nan, np.nan))
    ctx.judge(claim("fp8_compile_target", target=TARGET_FP8_COMPILE, value=r, band=band,
                    verdict=ratio_verdict(r, TARGET_FP8_COMPILE, band) if judged else "not judged",
                    where=where, judged=judged, missing="FP8 step" if v8 is None else COMPILE, step=v8, us=m,
                    compile_us=c, sustained=sustained(at, v8, TARGET_FP8_COMPILE) if judged else "",
                    short=claim("asks_at_most", limit_us=c / TARGET_FP8_COMPILE)
                    if judged and r < TARGET_FP8_COMPILE else ""))
    if (v1 := fastest_of(data.fp8_steps, 1)) is not None:
        near_floor_target(data, ctx, "FP8", v1)
    parts, wins = [], []
    for b in KEY_BATCHES:
        v, a = fastest_of(data.fp8_steps, b), fastest_of(TORCHAO, b)
        if v is not None and a is not None:
            wins.append(at(v, b) < at(a, b))
            parts.append(claim("anchor_vs", batch=b, step=v, us=at(v, b), anchor=data.label(a), anchor_us=at(a, b),
                               ratio=at(a, b) / at(v, b), clocks=""))
    ctx.judge(claim("fp8_torchao_target", where=where, parts=parts,
                    verdict=("met" if all(wins) else "missed") if len(wins) == len(KEY_BATCHES) else "not judged"))


def compiled_in_sitting(data):
    """{batch: seconds to the first call} for the key shape's torch.compile rows that compiled in
    this sitting's anchor process instead of loading a compile made ahead in a fresh process."""
    ok = data.ok
    d = ok[(ok["version"] == COMPILE) & (ok["model"] == data.key_model) & (ok["image_size"] == data.key_image)]
    secs = rundata.compiled_here_s(d["note"]).dropna()
    return {int(b): int(n) for b, n in secs.groupby(d.loc[secs.index, "batch"]).max().items()}


def compile_made_ahead_elsewhere(data, batch):
    """For a batch where torch.compile compiled in this sitting: the newest other sitting on this
    GPU model whose torch.compile at the key shape loaded a compile made ahead by
    experiments/anchors/precompile.py (its run folder's compile_kernels.txt lists the shape, and
    every first call took under COMPILED_HERE_S), with timm in a graph in the same run id. Returns
    (run folder, torch.compile's time over timm in a graph's there), or None. Only that ratio
    crosses sittings, never a time."""
    run, key_image, key_model = data.run, data.key_image, data.key_model
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


def compiled_in_sitting_line(data, small):
    """README's note on the batches where torch.compile compiled in this sitting (a claim), with
    the check from a sitting that loaded a compile made ahead where there is one."""
    at, ok = data.at, data.ok
    checks, unchecked = [], []
    for b in small:
        check = compile_made_ahead_elsewhere(data, b)
        here = at(COMPILE, b) / at(GRAPH, b) if GRAPH in set(ok["version"]) else np.nan
        if check is None or not np.isfinite(here):
            unchecked.append(claim("at_batch", batch=b))
            continue
        folder, there = check
        checks.append(claim("compiled_ahead_check", batch=b, folder=folder, there=there, here=here,
                            level=there >= here * 0.98, gain=here / there - 1))
    return claim("compiled_here", batches=[claim("at_batch", batch=b) for b in small], checks=checks,
                 firsts=[claim("first_call_s", s=n) for n in small.values()],
                 unchecked=claim("compile_unchecked", batches=unchecked) if unchecked else "")


def other_sittings(data, named, c256):
    """One claim per other final sitting (run id) on this GPU model that timed an answer step and
    torch.compile at batch 256 side by side (other_sitting_times): how far its ratios and times
    are from this sitting's, so that the answer's ratio is read with the spread between sittings."""
    at, out = data.at, []
    for sitting in other_sitting_times(data.run).values():
        m, n = sitting["us"], sitting["rounds"]
        steps_ = [v for v in named if v in m.index]
        if COMPILE not in m.index or not steps_:
            continue
        out.append(claim("other_sitting", folder=sitting["folder"], rounds=n, plural=n > 1,
                         compile_us=m[COMPILE], here_compile_us=c256,
                         parts=[claim("other_sitting_step", step=v, ratio=m[COMPILE] / m[v], us=m[v],
                                      here_us=at(v, 256)) for v in steps_]))
    return out


FINAL_ROWS = [("fastest fp16 step", None), ("fastest FP8 step", None), (LABEL[EAGER], EAGER),
              (LABEL[GRAPH], GRAPH), (LABEL[COMPILE], COMPILE), (LABEL[TORCHAO[0]], TORCHAO[0]),
              (LABEL[TORCHAO[1]], TORCHAO[1])]


def final_rows(data, s16, s8):
    """The final table's rows: the fastest fp16 and FP8 steps and every anchor at each key batch."""
    at, rows = data.at, []
    for what, v in FINAL_ROWS:
        v = v or (s16 if "fp16" in what else s8)
        for b in KEY_BATCHES:
            m = at(v, b) if v else np.nan
            if not np.isfinite(m):
                continue
            e = at(v, b, "energy_j")
            rows.append({"forward": f"{what}: {v}" if what.startswith("fastest") else what, "batch": b,
                         "ms": fmt_ms(m), "img/s": fmt_rate(b / m * 1e6),
                         "img/J": (f"{b / e:,.0f}" if b / e >= 100 else f"{b / e:.1f}") if np.isfinite(e) else "-",
                         "SM MHz": f"{at(v, b, 'sm_mhz'):,.0f}" if np.isfinite(at(v, b, "sm_mhz")) else "-",
                         "x torch.compile": f"{at(COMPILE, b) / m:.2f}x" if np.isfinite(at(COMPILE, b)) else "-",
                         "sustained ms": fmt_ms(sus) if np.isfinite(sus := at(v, b, "sustained_us")) else "-",
                         "x torch.compile sustained": f"{at(COMPILE, b, 'sustained_us') / sus:.2f}x"
                         if np.isfinite(sus) and np.isfinite(at(COMPILE, b, "sustained_us")) else "-"})
    return rows


def fastest_lines(data, named):
    """The answer's first claims: each precision's fastest forward at batch 256 against
    torch.compile, the steps faster at batch 256 alone, and a faster fp16 step that does not stand."""
    at, c256 = data.at, data.at(COMPILE, 256)
    s16, s8, s16_any = named.s16, named.s8, named.s16_any
    if not np.isfinite(c256):
        return [] if s16 is not None else [claim("answer_no_timm_fp16")]
    lines = []
    for v, what in ((s16, "fp16"), (s8, "FP8")):
        if v is None:
            continue
        e, ec = at(v, 256, "energy_j"), at(COMPILE, 256, "energy_j")
        lines.append(claim("answer_fastest", precision=what, step=v, us=at(v, 256), value=c256 / at(v, 256),
                           compile_us=c256, sustained=sustained(at, v), has_energy=bool(np.isfinite(e) and np.isfinite(ec)),
                           energy_ratio=ec / e, cost=fp8_cost(data.run, v) if what == "FP8" else ""))
    for v, top in ((named.s16_256, s16), (named.s8_256, s8)):
        if v is not None and v != top:
            lines.append(claim("answer_faster_at_256", step=v, top=top, us=at(v, 256), value=c256 / at(v, 256),
                               batches=[str(b) for b in data.key_batches]))
    if s16_any is not None and s16_any not in (s16, named.s16_256):
        lines.append(claim("answer_any_parity", step=s16_any, us=at(s16_any, 256), value=c256 / at(s16_any, 256),
                           fails=step_table.fails_parity(s16_any, data.parity_newest)))
    if s16 is None:
        lines.append(claim("answer_no_timm_fp16"))
    return lines


def answer_lines(data, named, is_final):
    """README's answer as claims, naming the steps of `named` (answer_steps)."""
    at, ok, run = data.at, data.ok, data.run
    lines = fastest_lines(data, named)
    for b in (1, 32):
        v = data.fastest_of(named.timm_fp16 + data.fp8_steps, b)
        a, a_us = data.best_anchor(b)
        if v is not None and a is not None:
            lines.append(claim("answer_at_batch", batch=b, step=v, us=at(v, b), ratio=a_us / at(v, b),
                               anchor=data.label(a), anchor_us=a_us))
    # At batch 256 cuBLAS wins autotuning's race by a wide margin wherever it compiled.
    small = {b: n for b, n in compiled_in_sitting(data).items() if b <= 32}
    if small:
        lines.append(compiled_in_sitting_line(data, small))
    n_rounds = max(data.rounds) if data.rounds else 1
    lines.append(claim("answer_sitting", run=run.name, gpu=rundata.gpu_of(run), rounds=n_rounds, plural=n_rounds > 1,
                       commits=list(dict.fromkeys(rundata.short_commit(x, 7) for x in ok["commit"].astype(str))),
                       final=is_final, weights=rundata.weights_phrase(ok)))
    c256 = at(COMPILE, 256)
    if is_final and np.isfinite(c256):
        lines += other_sittings(data, [v for v in (named.s8, named.s16) if v is not None], c256)
    return lines


class AnswerSteps(NamedTuple):
    """The steps the answer names: the fastest fp16 step that computes timm's model (s16) and the
    fastest FP8 step (s8) across the key batches (the aliases' rule), the fastest fp16 step at
    batch 256 of any parity (s16_any), and the fastest of each precision at batch 256 alone
    (s16_256, s8_256: named beside, as the targets judge them); timm_fp16 the fp16 steps that
    compute timm's model."""
    timm_fp16: list
    s16: str | None
    s8: str | None
    s16_any: str | None
    s16_256: str | None
    s8_256: str | None


def answer_steps(data) -> AnswerSteps:
    timm_fp16 = [v for v in BEST_STEPS if step_table.models_timm(v, data.parity_newest)]
    return AnswerSteps(timm_fp16, data.fastest_across(timm_fp16), data.fastest_across(data.fp8_steps),
                       data.fastest_of(BEST_STEPS, 256), data.fastest_of(timm_fp16, 256),
                       data.fastest_of(data.fp8_steps, 256))


def final_answer(data, ctx):
    """README's answer and the final table, from a final sitting."""
    at, at_key, run, where = data.at, data.at_key, data.run, data.where
    # Any run with the rows gets the table (the quick preset's run reproduces README's); only a
    # final sitting gives README its answer.
    is_final = rundata.holds_final_sitting(run)
    if data.targets_apply and len(at_key) and any(np.isfinite(at(COMPILE, b)) for b in KEY_BATCHES):
        # The answer's fp16 forward must compute timm's model; a faster one that fails parity is
        # named beside it.
        named = answer_steps(data)
        lines = answer_lines(data, named, is_final)
        final_table = formatting.markdown_table(pd.DataFrame(final_rows(data, named.s16, named.s8)))
        answer_figure(data, ctx, named)
        if is_final:
            ctx.answer = ("\n".join(f"- {ctx.said(x)}" for x in lines) + "\n\n" + final_table + "\n\n"
                          + f"![{ctx.said(claim('answer_figure_alt'))}](report/figures/{ANSWER_FIGURE}.png)")
        # The report opens its encoder section with the same answer README gives.
        ctx.claims("encoder_answer", lines)
        ctx.table("encoder_final", final_table,
                  claim("final_caption", final=is_final, run=run.name, where=where, prov=ctx.provenance()))
    else:
        why = (claim("no_final_compile_rows", run=run.name, compile=LABEL[COMPILE], where=where)
               if data.targets_apply and len(at_key) else
               claim("no_final_key_rows", run=run.name, model=KEY_MODEL, image=KEY_IMAGE))
        ctx.missing("text", "encoder_answer", why)
        ctx.missing("table", "encoder_final", why)
        ctx.missing("figure", ANSWER_FIGURE, why)


def headline(data, ctx):
    """README's headline line for the whole ViT."""
    at_key, key_image, key_model, label, ok = data.at_key, data.key_image, data.key_model, data.label, data.ok
    parity_newest, run, where = data.parity_newest, data.run, data.where
    # README's headline line: the fastest fp16 whole-ViT step at batch 256 (else the largest batch)
    # against timm eager, in a CUDA graph and under torch.compile. The sitting is this run's or a side
    # experiment's on this GPU that timed torch.compile in the same sitting (its rows share a run id
    # with the step's), whichever has the fastest fp16 step relative to its torch.compile; every
    # number of the line comes from that sitting. Once the run is a final sitting the headline is
    # its own, as the answer is: the best ratio over several sittings would be a selection, not a
    # measurement. The FP8 steps and the final sitting's answer are README's answer block.
    head_batch = 256 if 256 in set(at_key["batch"]) else (int(at_key["batch"].max()) if len(at_key) else None)


    def headline_candidate(rows, folder=None):
        """((whether no step of the sitting computes timm's model, -(torch.compile's time / the step's)),
        headline kwargs) of one sitting at head_batch, or None: the lowest key makes the headline."""
        # The whole model (no layers= row), one stream, at the key model and image size.
        key_rows = rows[(rows["status"] == "ok") & (rows["model"] == key_model) & (rows["image_size"] == key_image)
                        & (rows["streams"].fillna(1) == 1)
                        & ~rows["note"].astype(str).str.contains(r"\blayers=\d+", regex=True)]
        d = key_rows[key_rows["batch"] == head_batch]
        med = d.groupby("version")["median_us"].median()
        fp16 = [v for v in med.index if not catalog.is_anchor(v) and not step_table.is_fp8_step(v)
                and not str(v).startswith("custom:")]
        if not fp16:
            return None
        # As the answer and the aliases: the fastest step across the key batches that computes timm's
        # model where one was measured; otherwise the fastest, marked.
        timm = [v for v in fp16 if step_table.models_timm(v, parity_newest)]
        by_batch = key_rows[key_rows["batch"].isin(data.key_batches)].groupby(["version", "batch"])["median_us"].median()
        top = (fastest_across(lambda v, b: by_batch.get((v, b), np.nan), timm or fp16, data.key_batches)
               or min(timm or fp16, key=lambda v: med[v]))
        anchors = [(label(a), float(med[a])) for a in ANCHORS if a in med.index]
        if folder is not None:   # a side sitting counts only with torch.compile measured beside the step
            runs = lambda v: set(d.loc[d["version"] == v, "run_id"].astype(str))
            if COMPILE not in med.index or not runs(top) & runs(COMPILE):
                return None
        ratio = med[COMPILE] / med[top] if COMPILE in med.index else 0.0
        fastest = ctx.said(claim("headline_fails_parity", step=label(top))) \
            if step_table.fails_parity(top, parity_newest) else label(top)
        shown = d[d["version"].isin([top, *[a for a in ANCHORS if a in med.index]])]
        return (not timm, -ratio), dict(family="Whole ViT", shape=ctx.said(claim("headline_shape", where=where, batch=head_batch)), fastest=fastest,
                            fastest_us=float(med[top]), unit="ms", anchors=anchors, measured_in=folder,
                            run_ids=rundata.run_ids_of(shown))


    if head_batch:
        candidates = [c for c in [headline_candidate(ok)] if c]
        gpu_here = rundata.gpu_of(run)
        # Side experiments as the sweep runner writes them (RUN/<spec>/<spec>.csv), not probes.
        sides = [] if rundata.holds_final_sitting(run) else sorted(
            p for p in run.path.parent.glob("*/*/*.csv") if p.parent.name == p.stem)
        for path in sides:
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


def torchao_in_fp32(run, step, mine):
    """Where experiments/accuracy/fp8_torchao_probe.py ran (newest folder): torchao's per-tensor FP8
    on an fp32 copy of the model, the same arithmetic without the half-precision forward around it,
    beside the judged step's error (a claim); '' where no probe result exists."""
    probes = sorted(run.path.parent.glob("*/probe/probe.csv"), key=lambda f: f.parent.parent.name)
    if not probes:
        return ""
    rows = pd.read_csv(probes[-1])
    fp32 = rows[rows["forward"] == "torchao, fp32 model"].set_index("weights")["logits_rel_l2"]
    common = [w for w in mine.index if w in fp32.index]
    if not common:
        return ""
    return claim("torchao_fp32_probe", parts=[claim("weights_rel_l2", weights=w, rel_l2=fp32[w]) for w in common],
                 step=step, most=max(mine[w] / fp32[w] - 1 for w in common),
                 path=rundata.show_path(probes[-1].parent.parent), gpu=rows["gpu"].iloc[0])


def logits_target(data, ctx, step):
    """The FP8 step's logits error against each torchao FP8 anchor's on every weight set, judged."""
    run = data.run

    def beside_torchao(j):
        forwards = {r["forward"] for r in j["rows"]}
        return f"encoder {step}" in forwards and any(x.startswith("torchao") for x in forwards)

    judged = accuracy_result(run, "*/fp8_accuracy*/accuracy.json", beside_torchao)
    ours = theirs = pd.DataFrame()
    if judged:
        judged_json, judged_acc = judged
        judged_rows = pd.DataFrame(judged_acc["rows"])
        ours = judged_rows[judged_rows["forward"] == f"encoder {step}"]
        theirs = judged_rows[judged_rows["forward"].str.startswith("torchao")]
    if not (len(ours) and len(theirs)):
        ctx.judge(claim("fp8_logits_target", verdict="not judged", step=step, judged=False, measured=""))
        return
    mine = ours.set_index("weights")["logits_rel_l2"]
    excess = [(r["weights"], r["forward"], mine[r["weights"]] / r["logits_rel_l2"] - 1)
              for _, r in theirs.iterrows() if r["weights"] in mine.index]
    worst = max(excess, key=lambda e: e[2])
    worse = worst[2] > 0
    per_weights = [claim("rel_l2_against", weights=w, mine=mine[w], theirs=[
        claim("weights_rel_l2", weights=f.removeprefix("torchao "), rel_l2=x) for f, x in
        theirs[theirs["weights"] == w][["forward", "logits_rel_l2"]].itertuples(index=False)]) for w in mine.index]
    measured = claim("fp8_logits_measured", per_weights=per_weights, path=rundata.show_path(judged_json.parent),
                     measured_on=measured_on(run, judged_acc["gpu"]),
                     worse=claim("worse_at_most", excess=worst[2], weights=worst[0], forward=worst[1]) if worse else "",
                     probe=torchao_in_fp32(run, step, mine) if worse else "")
    ctx.judge(claim("fp8_logits_target", verdict="missed" if worse else "met", step=step, judged=True,
                    measured=measured))


def digits_target(data, ctx, step):
    """The digits model: fp32 at least 97% top-1 and the FP8 step within 2 held-out images of it, judged."""
    run = data.run
    found = accuracy_result(run, "*/digits*/digits.json", lambda j: f"encoder {step}" in j.get("forwards", {}))
    if not found:
        ctx.judge(claim("fp8_digits_target", verdict="not judged", step=step, judged=False, fp32=np.nan,
                        top1=np.nan, away=0, held_out=0, path="", measured_on=""))
        return
    f, j = found
    fp32, q = j["forwards"]["timm fp32"], j["forwards"][f"encoder {step}"]
    crit = j["criteria"]
    met = fp32["top1"] >= crit["fp32_min"] and q["disagree_with_fp32"] <= crit["fp8_disagree_max"]
    ctx.judge(claim("fp8_digits_target", verdict="met" if met else "missed", step=step, judged=True,
                    fp32=fp32["top1"], top1=q["top1"], away=q["disagree_with_fp32"], held_out=j["images_held_out"],
                    path=rundata.show_path(f.parent), measured_on=measured_on(run, j["gpu"])))


def accuracy_targets(data, ctx):
    """The FP8 accuracy targets (docs/method.md, Targets), judged on the fastest FP8 step at batch
    256: its logits error no larger than each torchao FP8 anchor's on every weight set, and on the
    digits model fp32 at least 97% top-1 with the FP8 step within 2 held-out images of fp32."""
    step = data.fastest_of(data.fp8_steps, 256) if data.targets_apply else None
    if step is not None:
        logits_target(data, ctx, step)
        digits_target(data, ctx, step)
