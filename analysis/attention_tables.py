"""The attention section's tables: the ladder at the target shapes, what each step taught, every
timed configuration, Nsight Compute's metrics and the rows' status. analysis/attention.py calls
them; each returns its table for the notebook to show."""
from __future__ import annotations

import numpy as np
import pandas as pd

import studylib
from analysis.attention_data import CUDNN, CUDNN_GRAPH, HEAD_DIM, HEADS, label
from studylib import catalog, formatting, notes, paths, rundata
from studylib.claims import claim

NCU_COLUMNS = {  # ncu metric -> table column
    "launch__grid_size": "grid", "launch__block_size": "block",
    "launch__registers_per_thread": "registers",
    "launch__shared_mem_per_block_dynamic": "dyn smem (B)",
    "launch__shared_mem_per_block_static": "static smem (B)",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM %",
    "gpu__time_duration.sum": "time (ns)"}


def summary(data, ctx):
    """Every version at the target token counts: time, rounds' range, gain over the step before,
    time over the best cuDNN result."""
    at, order, key_tokens = data.at, data.order, data.key_tokens
    own = [v for v in order if catalog.is_own(v)]  # the ladder's steps, in order
    ceilings = data.run.ceilings()
    rows = []
    for v in order:
        row = {"version": v}
        prev = own[own.index(v) - 1] if v in own and own.index(v) > 0 else None
        for n in key_tokens:
            m = at(v, n)
            row[f"{n}: us"] = m
            if data.rounds:
                row[f"{n}: range"] = formatting.fmt_spread(at(v, n, col="lo_us"), at(v, n, col="hi_us"))
            row[f"{n}: x prev"] = at(prev, n) / m if prev else np.nan
            row[f"{n}: / best cuDNN"] = m / data.best_cudnn(n)[0]
            row[f"{n}: % of floor"] = 100 * ceilings.floor_share(at(v, n, col="tflops"), at(v, n, col="gbps"))
        row["idea"] = notes.idea("attention", v)
        if any(np.isfinite(row[f"{n}: us"]) for n in key_tokens):
            rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        formats = {}
        for n in key_tokens:
            formats.update({f"{n}: us": formatting.fmt_us, f"{n}: x prev": formatting.fmt_ratio,
                            f"{n}: / best cuDNN": formatting.fmt_ratio, f"{n}: % of floor": formatting.fmt_pct})
        ctx.table("attention_summary", formatting.markdown_table(table, formats),
                  claim("summary_caption", batch=data.key_batch, heads=HEADS, head_dim=HEAD_DIM, tokens=key_tokens,
                        rounds=data.rounds_caption, cudnn=CUDNN, graph=label(CUDNN_GRAPH), floor=claim("floor_columns"),
                        flush=data.flush_said,
                        prov=data.prov))
    else:
        ctx.missing("table", "attention_summary", claim("none_at_head_shape"))
    return table


def lesson(version):
    """First paragraph under '## Lesson' in stages/attention/<version>/NOTES.md, or None."""
    notes = paths.REPO / "stages" / "attention" / version / "NOTES.md"
    if not notes.is_file():
        return None
    text = notes.read_text()
    if "## Lesson" not in text:
        return None
    body = text.split("## Lesson", 1)[1].split("\n## ", 1)[0].strip()
    return " ".join(body.split("\n\n", 1)[0].split())


def lessons(data, ctx):
    """What each step taught: the `## Lesson` of every version's NOTES.md."""
    table = pd.DataFrame([{"version": v, "what it taught": lesson(v)}
                          for v in data.order if not catalog.is_anchor(v)])
    table = table[table["what it taught"].notna()]
    if len(table):
        ctx.table("attention_lessons", formatting.markdown_table(table), claim("lessons_caption"))
    else:
        ctx.missing("table", "attention_lessons", claim("no_lessons"))
    return table


def sweep(data, ctx):
    """Every timed configuration (median us)."""
    ctx.table("attention_sweep", formatting.sweep_table(data.timed, ["tokens", "batch"], "version", data.order,
                                                        formatting.fmt_us,
                                                        {"tokens": formatting.fmt_int, "batch": formatting.fmt_int}),
              claim("sweep_caption", cells=data.rounds_cells, prov=data.prov))


def ncu_profile(run):
    """This run's ncu/attention.csv, else the newest run folder's beside it on the same GPU (a
    profile reads the kernels, which are frozen, not the sitting's times); None when none has one."""
    own = run.path / "ncu" / "attention.csv"
    if own.is_file():
        return own
    gpu = rundata.gpu_of(run)
    others = sorted(run.path.parent.glob("*/ncu/attention.csv"), key=lambda p: p.parent.parent.name)
    return next((p for p in reversed(others) if rundata.gpu_of(rundata.load_run(p.parent.parent)) == gpu), None)


def ncu(data, ctx):
    """Nsight Compute's metrics of each version's kernels (experiments/probes/ncu_family.sh
    attention), when this run folder or one beside it on its GPU has them."""
    path = ncu_profile(data.run)
    if path is None:
        ctx.missing("table", "attention_ncu", claim("no_ncu"))
        return None
    raw = pd.read_csv(path, dtype=str)
    missing = [c for c in ["version", "Kernel Name", *NCU_COLUMNS] if c not in raw.columns]
    if missing:
        raise studylib.DataError(f"{rundata.show_path(path)}: missing column(s) {', '.join(missing)}")
    table = raw[["version", "Kernel Name", *NCU_COLUMNS]].rename(columns=NCU_COLUMNS)
    # "void attention::<unnamed>::kernel<4, 2, 1>(const __half *, ...)" -> "kernel<4, 2, 1>"
    table["Kernel Name"] = (table["Kernel Name"].str.replace(r"\(.*$", "", regex=True)
                            .str.replace(r"^.*::", "", regex=True).str.slice(0, 60))
    same_run = path.parent.parent == data.run.path
    ctx.table("attention_ncu", formatting.markdown_table(table),
              claim("ncu_caption" if same_run else "ncu_caption_other_run", path=rundata.show_path(path),
                    prov=data.prov, their_prov=None if same_run else rundata.load_run(path.parent.parent).provenance()))
    return table


def status(data, ctx):
    """What was timed, skipped or failed, in ladder order."""
    everything, order = data.everything, data.order
    st = formatting.status_in_order(everything, order)
    left_out = ([claim("other_shape", count=data.other_shape)] if data.other_shape else []) + (
        [claim("other_flush", count=data.flush_dropped)] if data.flush_dropped else [])
    ctx.table("attention_status", formatting.markdown_table(st),
              claim("status_caption", family="Attention", left_out=left_out, prov=data.prov))
    return st
