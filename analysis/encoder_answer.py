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
    TARGET_COMPILE, TARGET_FP8_COMPILE, TORCHAO, fastest_across, fmt_ms, fmt_rate, join_and)
from analysis.encoder_side import accuracy_result, measured_on
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


def band_text(band):
    return formatting.band_text(band, "rounds and sittings span")


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


def anchor_target(data, ctx, steps):
    """The target "faster than the fastest PyTorch anchor at batch 1, 32 and 256", judged into ctx;
    its finding."""
    at, where = data.at, data.where

    def vs_anchor(b):
        """(sentence, met or None) for the fastest step against the fastest anchor at batch b."""
        v = fastest_target_step(data, steps, b)
        m = at(v, b)
        a, a_us = data.best_anchor(b)
        if not np.isfinite(m):
            return f"batch {b}: no timed {E6} row", None
        if not a:
            return f"batch {b}: {v} {fmt_ms(m)} ms, no PyTorch anchor measured", None
        return (f"batch {b}: {v} {fmt_ms(m)} ms against {data.label(a)} {fmt_ms(a_us)} ms "
                f"({formatting.faster_or_slower(a_us / m)}{data.clocks(v, a, b)})"), m < a_us

    parts_ = [vs_anchor(b) for b in KEY_BATCHES]
    verdicts = [m for _, m in parts_]
    if all(v is not None for v in verdicts):
        verdict = "met" if all(verdicts) else "missed (slower at batch " + join_and(
            [str(b) for b, v in zip(KEY_BATCHES, verdicts) if not v]) + ")"
    else:
        verdict = "cannot be judged from this run"
    ctx.target(f"fp16: faster than the fastest PyTorch anchor at batch 1, 32 and 256 ({where})",
               "not judged" if verdict.startswith("cannot") else verdict.split(" ")[0],
               "; ".join(s for s, _ in parts_))
    return (f"Target faster than the fastest PyTorch anchor at batch 1, 32 and 256: "
            f"{verdict}; " + "; ".join(s for s, _ in parts_) + ".")


def compile_target(data, ctx, steps):
    """The target "TARGET_COMPILE x torch.compile's throughput at batch 256", judged into ctx; its finding."""
    at, where = data.at, data.where
    v256 = fastest_target_step(data, steps, 256)
    m, c = at(v256, 256), at(COMPILE, 256)
    name = f"fp16: {TARGET_COMPILE}x torch.compile's throughput at batch 256 ({where})"
    if not (np.isfinite(m) and np.isfinite(c)):
        ctx.target(name, "not judged", f"no timed {E6 if not np.isfinite(m) else COMPILE} row at batch 256")
        return (f"Target {TARGET_COMPILE}x torch.compile's throughput at batch 256: "
                f"cannot be judged, this run has no timed "
                f"{E6 if not np.isfinite(m) else COMPILE} row at batch 256.")
    band = ratio_band(data, v256)
    verdict = ratio_verdict(c / m, TARGET_COMPILE, band)
    ctx.target(name, verdict,
               f"{v256} {fmt_ms(m)} ms, {c / m:.2f}x torch.compile's {fmt_ms(c)} ms in the timed burst"
               + band_text(band) + sustained(at, v256, TARGET_COMPILE))
    return (f"Target {TARGET_COMPILE}x torch.compile's throughput at batch 256: "
            f"{verdict}; {v256} takes "
            f"{fmt_ms(m)} ms ({fmt_rate(256 / m * 1e6)} img/s), {c / m:.2f}x the "
            f"throughput of {LABEL[COMPILE]} ({fmt_ms(c)} ms, "
            f"{fmt_rate(256 / c * 1e6)} img/s{data.clocks(v256, COMPILE, 256)}); the "
            f"target asks for at most {fmt_ms(c / TARGET_COMPILE)} ms{band_text(band)}.")


def batch1_target(data, ctx, steps):
    """The target "at most TARGET_B1_MS ms at batch 1" (and the floor's, near_floor_target), judged
    into ctx; its finding."""
    v1 = fastest_target_step(data, steps, 1)
    m = data.at(v1, 1)
    if not np.isfinite(m):
        return (f"Target at most {TARGET_B1_MS} ms at batch 1: cannot be judged, this "
                f"run has no timed {E6} row at batch 1.")
    met = "met" if m / 1e3 <= TARGET_B1_MS else "missed"
    ctx.target(f"fp16: at most {TARGET_B1_MS} ms at batch 1 ({data.where})", met, f"{v1} {fmt_ms(m)} ms")
    near_floor_target(data, ctx, "fp16", v1)
    return f"Target at most {TARGET_B1_MS} ms at batch 1: {met}; {v1} takes {fmt_ms(m)} ms."


def against_e6(data):
    """The steps after e6_best against it: each must be faster at every key batch to count."""
    at, out = data.at, []
    for v in BEST_STEPS[1:]:
        ratios = [(b, at(E6, b) / at(v, b)) for b in KEY_BATCHES if np.isfinite(at(v, b) / at(E6, b))]
        if ratios:
            out.append(f"{v} against {E6}: " + "; ".join(
                f"batch {b} {formatting.faster_or_slower(r)}" for b, r in ratios)
                + (" (faster at every batch)." if all(r > 1 for _, r in ratios) else "."))
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
        findings.append("This run has no timed encoder rows, so no target can be judged.")
    elif len(data.at_key):
        findings.append(f"This run has no timed rows at {KEY_MODEL}, {KEY_IMAGE} px, where the "
                        f"study's targets are set; the numbers below are at {data.where}.")
    return findings


def fp8_cost(run, v, weights="timm_init"):
    """' Its accuracy cost: ...' for FP8 step v from the newest fp8_accuracy result that holds it on
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
    beside = ([f"timm fp16 {fp16['logits_rel_l2']:.4f}"] if fp16 else []) + \
             ([f"torchao FP8 per tensor {torchao['logits_rel_l2']:.3f}"] if torchao else [])
    # timm's init is untrained: its logits' class margins are small, so agreement is low for any
    # FP8 recipe; torchao's on the same weights says what the recipe costs beside the library's.
    torchao_top1 = f" (torchao FP8 per tensor {torchao['top1_agreement']:.0%})" if torchao else ""
    return (f" Its accuracy cost, on timm's init (untrained weights) against timm fp32 ({j['images']} images): "
            f"logits rel L2 {ours['logits_rel_l2']:.3f}" + (f" ({', '.join(beside)})" if beside else "")
            + f", top-1 agreement {ours['top1_agreement']:.0%}{torchao_top1}, "
            f"{ours['top1_agreement_decisive']:.0%} on the "
            f"{ours['decisive_images']} images whose class margin exceeds 4x its RMS logit error "
            f"({rundata.show_path(path.parent)}{measured_on(run, j['gpu'])}).")


def sustained(at, v, target=None):
    """'; sustained over the energy loop 1.31x (18.2 against 23.7 ms): met' for step v at batch 256
    against torch.compile (its verdict under `target` when given), or '' without energy rows."""
    s, sc = at(v, 256, "sustained_us"), at(COMPILE, 256, "sustained_us")
    if not (np.isfinite(s) and np.isfinite(sc)):
        return ""
    verdict = "" if target is None else f": {'met' if sc / s >= target else 'missed'}"
    return f"; sustained over the energy loop {sc / s:.2f}x ({fmt_ms(s)} against {fmt_ms(sc)} ms){verdict}"


def near_floor_target(data, ctx, precision, v):
    """The batch-1 target near the hardware's floor (TARGET_B1_FLOOR_MS) for step v of `precision`,
    with how far above the weight-read floor it runs."""
    limit, m = TARGET_B1_FLOOR_MS[precision], data.at(v, 1)
    floor = (f", {m / data.floor_us:.1f}x the fp16 weight-read floor ({data.floor_us:.0f} us"
             + ("; E4M3 weights about halve it" if precision == "FP8" else "") + ")") if np.isfinite(data.floor_us) else ""
    ctx.target(f"{precision}: at most {limit:.2f} ms at batch 1, near the hardware's floor ({data.where})",
               "met" if m / 1e3 <= limit else "missed",
               f"{v} {fmt_ms(m)} ms{floor}; stages/encoder/NOTES.md says where the time goes")


def fp8_targets(data, ctx):
    """The FP8 targets against torch.compile and torchao."""
    FP8_STEPS, at, at_key, fastest_of, label = data.fp8_steps, data.at, data.at_key, data.fastest_of, data.label
    targets_apply, where = data.targets_apply, data.where

    if targets_apply and len(at_key):
        v8 = fastest_of(FP8_STEPS, 256)
        c = at(COMPILE, 256)
        if v8 is None or not np.isfinite(c):
            ctx.target(f"FP8: {TARGET_FP8_COMPILE}x torch.compile's fp16 throughput at batch 256 ({where})",
                       "not judged", f"this run has no timed {'FP8 step' if v8 is None else COMPILE} row at batch 256")
        else:
            r = c / at(v8, 256)
            band = ratio_band(data, v8)
            ctx.target(f"FP8: {TARGET_FP8_COMPILE}x torch.compile's fp16 throughput at batch 256 ({where})",
                       ratio_verdict(r, TARGET_FP8_COMPILE, band),
                       f"{v8} {fmt_ms(at(v8, 256))} ms, {r:.2f}x torch.compile's {fmt_ms(c)} ms in the timed burst"
                       + ("" if r >= TARGET_FP8_COMPILE else f"; the target asks for at most {fmt_ms(c / TARGET_FP8_COMPILE)} ms")
                       + band_text(band) + sustained(at, v8, TARGET_FP8_COMPILE))
        if (v1 := fastest_of(FP8_STEPS, 1)) is not None:
            near_floor_target(data, ctx, "FP8", v1)
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
    """README's note on the batches where torch.compile compiled in this sitting, with the check
    from a sitting that loaded a compile made ahead where there is one."""
    at, ok = data.at, data.ok
    at_b = " and ".join(f"batch {b}" for b in small)
    line = (f"torch.compile compiled inside this sitting's anchor process at {at_b} ("
            + ", ".join(f"{n} s to its first call" for n in small.values())
            + ") instead of loading a compile made ahead, alone, in a fresh process; compiled so, "
            "max-autotune can pick a slower forward at small batches (docs/method.md, Timing).")
    unchecked = []
    for b in small:
        check = compile_made_ahead_elsewhere(data, b)
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


def other_sittings(data, named, c256):
    """One line per other final sitting (run id) on this GPU model that timed an answer step and
    torch.compile at batch 256 side by side (other_sitting_times): how far its ratios and times
    are from this sitting's, so that the answer's ratio is read with the spread between sittings."""
    at, out = data.at, []
    for sitting in other_sitting_times(data.run).values():
        m, n = sitting["us"], sitting["rounds"]
        steps_ = [v for v in named if v in m.index]
        if COMPILE not in m.index or not steps_:
            continue
        out.append(
            f"Another final sitting on this GPU model (run folder `{sitting['folder']}`, {n} round{'s' if n > 1 else ''}) "
            f"gave at batch 256 " + " and ".join(
                f"`{v}` {m[COMPILE] / m[v]:.2f}x torch.compile ({fmt_ms(m[v])} ms; {fmt_ms(at(v, 256))} here)"
                for v in steps_)
            + f", with torch.compile at {fmt_ms(m[COMPILE])} ms ({fmt_ms(c256)} here; ratios are only "
              f"taken inside a sitting).")
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


def answer_lines(data, named, is_final):
    """README's answer as lines, naming the steps of `named` (answer_steps)."""
    at, best_anchor, fastest_of, label, ok = data.at, data.best_anchor, data.fastest_of, data.label, data.ok
    parity_newest, rounds, run = data.parity_newest, data.rounds, data.run
    s16, s8, s16_any, s16_256, s8_256 = named.s16, named.s8, named.s16_any, named.s16_256, named.s8_256
    lines = []
    c256 = at(COMPILE, 256)
    for v, what in ((s16, "fp16"), (s8, "FP8")):
        if v is None or not np.isfinite(c256):
            continue
        e, ec = at(v, 256, "energy_j"), at(COMPILE, 256, "energy_j")
        lines.append(f"The fastest {what} forward, `{v}`, takes {fmt_ms(at(v, 256))} ms at batch 256: "
                     f"{c256 / at(v, 256):.2f}x torch.compile's throughput ({fmt_ms(c256)} ms) in the timed burst"
                     + sustained(at, v)
                     + (f", and {ec / e:.2f}x its images per joule" if np.isfinite(e) and np.isfinite(ec) else "")
                     + "." + (fp8_cost(run, v) if what == "FP8" else ""))
    for v, top in ((s16_256, s16), (s8_256, s8)):
        if v is not None and v != top and np.isfinite(c256):
            lines.append(f"At batch 256 `{v}` is faster than `{top}`: {fmt_ms(at(v, 256))} ms, "
                         f"{c256 / at(v, 256):.2f}x torch.compile; `{top}` is the faster at more of the "
                         f"batches {join_and(str(b) for b in data.key_batches)}.")
    if s16_any is not None and s16_any not in (s16, s16_256) and np.isfinite(c256):
        lines.append(f"`{s16_any}` is faster ({fmt_ms(at(s16_any, 256))} ms at batch 256, "
                     f"{c256 / at(s16_any, 256):.2f}x torch.compile) but "
                     + ("fails timm parity with every parameter drawn: it does not compute timm's model within "
                        "the study's bound." if step_table.fails_parity(s16_any, parity_newest)
                        else "has no timm-parity run with every parameter drawn at 224 and 384 px "
                        "(experiments/accuracy/timm_parity.py): it does not stand as the answer until one passes."))
    if s16 is None:
        lines.append("No fp16 step of this sitting passes timm parity with every parameter drawn at 224 "
                     "and 384 px (experiments/accuracy/timm_parity.py), so none stands as the fastest fp16 forward.")
    for b in (1, 32):
        v = fastest_of(named.timm_fp16 + data.fp8_steps, b)
        a, a_us = best_anchor(b)
        if v is not None and a is not None:
            lines.append(f"At batch {b} the fastest forward is `{v}`, {fmt_ms(at(v, b))} ms, "
                         f"{formatting.faster_or_slower(a_us / at(v, b))} than the fastest PyTorch anchor, "
                         f"{label(a)} ({fmt_ms(a_us)} ms).")
    # At batch 256 cuBLAS wins autotuning's race by a wide margin wherever it compiled.
    small = {b: n for b, n in compiled_in_sitting(data).items() if b <= 32}
    if small:
        lines.append(compiled_in_sitting_line(data, small))
    gpu = rundata.gpu_of(run)
    n_rounds = max(rounds) if rounds else 1
    lines.append(f"All from one sitting: run folder `{run.name}` on {gpu}, "
                 f"{n_rounds} interleaved round{'s' if n_rounds > 1 else ''} (medians), commit "
                 f"{', '.join(dict.fromkeys(rundata.short_commit(x, 7) for x in ok['commit'].astype(str)))}"
                 + ("." if is_final else "; not a final sitting (`./study run final`), so README's "
                    "answer does not come from it.") + f" {rundata.weights_phrase(ok)}")
    if is_final and np.isfinite(c256):
        lines += other_sittings(data, [v for v in (s8, s16) if v is not None], c256)
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
    at, at_key, prov, run, where = data.at, data.at_key, ctx.provenance(), data.run, data.where
    # Any run with the rows gets the table (the quick preset's run reproduces README's); only a
    # final sitting gives README its answer.
    is_final = rundata.holds_final_sitting(run)
    if data.targets_apply and len(at_key) and any(np.isfinite(at(COMPILE, b)) for b in KEY_BATCHES):
        # The answer's fp16 forward must compute timm's model; a faster one that fails parity is
        # named beside it.
        named = answer_steps(data)
        lines = answer_lines(data, named, is_final)
        final_table = formatting.markdown_table(pd.DataFrame(final_rows(data, named.s16, named.s8)))
        if is_final:
            ctx.answer = "\n".join(f"- {x}" for x in lines) + "\n\n" + final_table
        # The report opens its encoder section with the same answer README gives.
        ctx.text("encoder_answer", lines)
        ctx.table("encoder_final", final_table,
                  f"{'The final sitting' if is_final else 'This run'} ({run.name}): the fastest fp16 and FP8 steps (at batch 256) and every "
                  f"PyTorch anchor at {where}: median time of one forward, images per second and per joule "
                  f"(the energy loop, docs/method.md), the SM clock of the timed loop, and torch.compile's "
                  f"time over each forward's. {prov}.")
    else:
        why = (f"run folder {run.name} has no timed {LABEL[COMPILE]} rows at {where}"
               if data.targets_apply and len(at_key) else f"run folder {run.name} has no timed rows at {KEY_MODEL}, {KEY_IMAGE} px")
        ctx.missing("text", "encoder_answer", why)
        ctx.missing("table", "encoder_final", why)


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
        mark = " (fails timm parity with every parameter drawn)" if step_table.fails_parity(top, parity_newest) else ""
        shown = d[d["version"].isin([top, *[a for a in ANCHORS if a in med.index]])]
        return (not timm, -ratio), dict(family="Whole ViT", shape=f"{where}, batch {head_batch}, fp16", fastest=label(top) + mark,
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


def accuracy_targets(data, ctx):
    """The FP8 accuracy targets."""
    FP8_STEPS, fastest_of, run, targets_apply = data.fp8_steps, data.fastest_of, data.run, data.targets_apply
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

        judged = accuracy_result(run, "*/fp8_accuracy*/accuracy.json", beside_torchao)
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
                         f"{measured_on(run, judged_acc['gpu'])})"
                       + ("" if worst[2] <= 0 else torchao_in_fp32(V8_JUDGED, mine)))
        else:
            ctx.target(what, "not judged",
                       f"no fp8_accuracy result on this GPU or its architecture holds {V8_JUDGED} beside torchao")
        what = f"FP8: digits model, fp32 at least 97% top-1 and {V8_JUDGED} within 2 held-out images of fp32"
        found = accuracy_result(run, "*/digits*/digits.json", lambda j: f"encoder {V8_JUDGED}" in j.get("forwards", {}))
        if found:
            f, j = found
            fp32, q = j["forwards"]["timm fp32"], j["forwards"][f"encoder {V8_JUDGED}"]
            crit = j["criteria"]
            ok_ = fp32["top1"] >= crit["fp32_min"] and q["disagree_with_fp32"] <= crit["fp8_disagree_max"]
            ctx.target(what, "met" if ok_ else "missed",
                       f"fp32 {fp32['top1']:.2%}, {V8_JUDGED} {q['top1']:.2%} with {q['disagree_with_fp32']} of "
                       f"{j['images_held_out']} held-out images away from fp32 ({rundata.show_path(f.parent)}"
                       f"{measured_on(run, j['gpu'])})")
        else:
            ctx.target(what, "not judged", f"no digits result on this GPU or its architecture holds {V8_JUDGED}")
