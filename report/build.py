#!/usr/bin/python3
"""Regenerate the report from the committed CSVs: no GPU, one command.

    /usr/bin/python3 report/build.py [--run DIR] [--results ROOT] [--out DIR] [--template FILE]

Without --run it rebuilds report/ from every run folder under the results root; with --run it
builds that one run's report inside the run folder (DIR/report/) and leaves report/ alone.

For every `<!-- family:NAME -->` ... `<!-- end:NAME -->` block of report/template.md it picks a
run folder (the newest one with timings of NAME on the primary GPU, the GPU most run folders were
measured on; or --run), executes analysis/NAME.py against it, and replaces the block's markers
with what the notebook produced (a CROSS_RUN block, `gpus`, reads every run folder instead, after
the families have picked theirs):

    <!-- figure:NAME_x -->   image + caption        (figures/NAME_x.png)
    <!-- table:NAME_x -->    markdown table          (tables/NAME_x.md)
    <!-- text:NAME_x -->     generated sentences     (text/NAME_x.md)

A family without data (or without a notebook yet) gets a one-line note instead of its block.
Outside the blocks, `table:study_runs` and `text:study_ceilings` describe the runs used.
The full build also writes the index of the results root (experiments/results/README.md: every
run folder, its GPU, commits and families, which the report uses and which are superseded), and
the headline table at the top of the repository's README.md, between
`<!-- headline:start -->` and `<!-- headline:end -->`: per family the fastest version at its
headline shape against its library version and PyTorch anchors, with the run named. A build
into another folder (--out) writes that table to OUT/headline.md instead; --check-readme
exits 1 when README.md's table is not the one the CSVs give (tests/report_committed.sh).
Unusable data or template: one line on stderr naming the file (and line, column), exit 2.
"""
from __future__ import annotations

import argparse
import os
import re
import runpy
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")  # before any notebook imports pyplot: no display

import studylib
from studylib import catalog, claims, formatting, notebook, notes, paths, rundata, schema
from studylib.paths import REPO
from report.results_index import beside_text, drawn_beside, results_index

# The notebooks run by path (runpy), each given its context; the report imports none of them.
ANALYSIS = REPO / "analysis"

BLOCK = re.compile(r"<!--\s*family:(\w+)\s*-->(.*?)<!--\s*end:\1\s*-->", re.S)
MARKER = re.compile(r"<!--\s*(figure|table|text):(\w+)\s*-->")
# Every declared comparison of a family (its spec's [comparison]) that no marker of its own places.
COMPARISONS = re.compile(r"^<!--\s*comparisons:(\w+)\s*-->\n\n?", re.M)
STRAY = re.compile(r"<!--\s*(family|end):(\w+)\s*-->")
HEADLINE_START, HEADLINE_END = "<!-- headline:start -->", "<!-- headline:end -->"
HEADLINE = re.compile(re.escape(HEADLINE_START) + r"\n(.*?)" + re.escape(HEADLINE_END), re.S)
VERSIONS_START, VERSIONS_END = "<!-- versions:start -->", "<!-- versions:end -->"
VERSIONS = re.compile(re.escape(VERSIONS_START) + r"\n(.*?)" + re.escape(VERSIONS_END), re.S)
# A region of a section that a first reading can skip: moved to report/appendix/<name>.md, and
# a link left in its place.
APPENDIX = re.compile(r"^<!--\s*appendix:(\w+)\s*-->\n(.*?)^<!--\s*/appendix\s*-->\n?", re.S | re.M)
RELATIVE_LINK = re.compile(r"\]\((?!https?:|#|/)([^)\s]+)\)")
# README's versions table: one line per family, in the order a forward runs them.
FAMILY_TITLES = {"patch_embed": "patch embedding", "layernorm": "LayerNorm", "attention": "attention",
                 "mlp": "MLP", "encoder": "encoder (whole ViT)"}

# An appendix page's title, what it holds, and the short form its link in the report gives.
APPENDIX_TITLES = {
    **{f: (t, "side experiments, every version's status and every timed configuration",
           "side experiments, status, every timed configuration") for f, t in FAMILY_TITLES.items()},
    "gpus": ("across GPUs", "every comparison on every GPU, with its times and SM clocks",
             "every comparison's times and clocks")}


class StaleReadme(Exception):
    """README.md's headline table is not what the committed CSVs give (exit 1)."""


class TemplateError(studylib.DataError):
    """A template marker that nothing fills: also exit 2, since the report would be wrong."""


def rel(path: Path, out_dir: Path) -> str:
    """Links in README.md are relative to the README, so the report folder can move."""
    return os.path.relpath(path, out_dir).replace(os.sep, "/")


def split_appendices(body: str, out_dir: Path) -> str:
    """Each appendix region of the filled report becomes its own page under appendix/ (its
    relative links one folder deeper), and a link to it takes its place; pages of regions the
    template no longer has are removed."""
    folder = out_dir / "appendix"
    written = set()

    def one(m):
        name, content = m.group(1), m.group(2)
        if name in written:
            raise TemplateError(f"two appendix regions named '{name}'")
        written.add(name)
        title, holds, short = APPENDIX_TITLES.get(name, (name, "", ""))
        folder.mkdir(parents=True, exist_ok=True)
        page = ("<!-- Generated by report/build.py with report/README.md; edit report/template.md. -->\n\n"
                f"# Appendix: {title}\n\nThe tables and figures of the report's {title} section that "
                f"its main text leaves out{': ' + holds if holds else ''}. Back to the [report](../README.md).\n\n"
                + RELATIVE_LINK.sub(lambda l: f"](../{l.group(1)})", content.strip("\n")) + "\n")
        (folder / f"{name}.md").write_text(page)
        return (f"*The rest of this section{' (' + short + ')' if short else ''}: "
                f"[appendix/{name}.md](appendix/{name}.md).*\n")

    body = APPENDIX.sub(one, body)
    if "appendix:" in "".join(re.findall(r"<!--[^>]*-->", body)) or "/appendix -->" in body:
        raise TemplateError("an appendix marker without its pair ('<!-- appendix:NAME -->' ... "
                            "'<!-- /appendix -->', each on a line of its own)")
    for stale in folder.glob("*.md") if folder.is_dir() else ():
        if stale.stem not in written:
            stale.unlink()
    return body


def fill(block: str, artifacts: dict, out_dir: Path, where: str) -> str:
    placed = {m.group(2) for m in MARKER.finditer(block)}

    def comparisons(_m):
        """The unplaced comparisons' outputs, each under its title; nothing when there are none."""
        sections = {}
        for a in artifacts.values():
            if a.section and a.name not in placed:
                sections.setdefault(a.section, []).append(f"<!-- {a.kind}:{a.name} -->")
        return "".join(f"#### {title}\n\n" + "\n\n".join(marks) + "\n\n" for title, marks in sections.items())

    block = COMPARISONS.sub(comparisons, block)

    def one(m):
        kind, name = m.group(1), m.group(2)
        a = artifacts.get(name)
        if a is None or a.kind != kind:
            raise TemplateError(f"{where}: marker '{kind}:{name}' has no generated {kind} "
                                f"(produced: {', '.join(sorted(artifacts)) or 'nothing'})")
        if a.path is None:
            return f"*{kind.capitalize()} `{name}` not produced: {a.reason}.*"
        if kind == "figure":
            return f"![{name}]({rel(a.path, out_dir)})\n\n*Figure: {a.caption}*"
        return a.path.read_text().rstrip("\n")
    return MARKER.sub(one, block)


def clean_family_outputs(out_dir: Path, family: str):
    """Stale outputs of a family (a figure the notebook no longer makes, or a family whose run
    was removed) must not linger beside fresh ones. Only NAME_* files are touched."""
    for sub, ext in (("figures", "png"), ("tables", "md"), ("text", "md")):
        for f in (out_dir / sub).glob(f"{family}_*.{ext}"):
            f.unlink()


def no_data_note(family: str, args) -> str:
    where = (f"run folder `{rundata.show_path(Path(args.run_dir))}`" if args.run_dir else
             f"`{rundata.show_path(Path(args.results))}/`")
    return (f"*No committed run yet: no CSV in {where} has rows with family `{family}`.*")


def build_cross_run(family: str, block: str, runs: list, used: dict, out_dir: Path):
    """A notebook over every run folder (notebook.CROSS_RUN), given the runs the sections used:
    (markdown for the block, the notebook's context)."""
    clean_family_outputs(out_dir, family)
    ctx = notebook.Context(family, None, out_dir, runs=runs, used=used)
    print(f"[{family}] {len(runs)} run folders: running analysis/{family}.py", flush=True)
    try:
        runpy.run_path(str(ANALYSIS / f"{family}.py"), init_globals={"STUDY_CONTEXT": ctx},
                       run_name=f"study_{family}")
    except Exception as e:
        if not isinstance(e, studylib.DataError):
            e.add_note(f"while running analysis/{family}.py over every run")
        raise
    return fill(block, ctx.artifacts, out_dir, f"template (block {family})").strip("\n"), ctx


def drawable(ctx) -> list:
    """(kind, name, caption) of the figures and tables a notebook drew."""
    return [(a.kind, a.name, a.caption) for a in ctx.artifacts.values() if a.kind in ("figure", "table") and a.path]


def build_family(family: str, block: str, runs: list, args, out_dir: Path):
    """Returns (markdown for the block, run used or None, the notebook's context or None: its
    headline line, the targets it judged and, for the encoder, the study's answer)."""
    clean_family_outputs(out_dir, family)
    run = runs[0] if args.run_dir else rundata.pick_run(runs, family, args.primary_gpu)
    if run is None or run.rows(family).empty:
        return no_data_note(family, args), None, None
    notebook_path = ANALYSIS / f"{family}.py"
    if not notebook_path.is_file():
        counts = run.rows(family)["status"].value_counts()
        summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in schema.STATUSES)
        return (f"*Run `{run.name}` has {len(run.rows(family))} rows with family `{family}` "
                f"({summary}), but there is no analysis notebook "
                f"`analysis/{family}.py` yet.*"), run, None
    targets = None if args.run_dir else rundata.targets_run(runs, family, run)
    section = run
    if targets is not None and targets.path == run.path:
        # The section's folder holds its targets file beside its sweep: the targets read that file
        # and the rest of the section the sweep alone, so no figure pools the two sittings' rows.
        section = run.without_file(f"{family}_targets.csv")
    ctx = notebook.Context(family, section, out_dir, targets_run=targets)
    print(f"[{family}] {run.name}{f' (targets: {targets.name})' if targets else ''}: running "
          f"analysis/{family}.py", flush=True)
    try:
        runpy.run_path(str(notebook_path), init_globals={"STUDY_CONTEXT": ctx},
                       run_name=f"study_{family}")
    except Exception as e:  # a bug, not bad data: keep the traceback, say where it happened
        if not isinstance(e, studylib.DataError):
            e.add_note(f"while running analysis/{family}.py on run {run.name}")
        raise
    text = fill(block, ctx.artifacts, out_dir, f"{rundata.show_path(args.template)} (family {family})")
    return text.strip("\n"), run, ctx


def headline_table(heads: list, used: dict) -> str:
    """README's headline table: one line per family with a headline, its run named."""
    import numpy as np
    import pandas as pd

    def t(x, unit):
        if x is None or not np.isfinite(x):
            return "-"
        return (f"{x / 1000:.2f} ms" if x < 10000 else f"{x / 1000:.1f} ms") if unit == "ms" \
            else f"{formatting.fmt_us(x)} us"

    def against(name, x, h):
        if not name or x is None or not np.isfinite(x):
            return "-"
        return f"{formatting.faster_or_slower(x / h.fastest_us)} than {name} ({t(x, h.unit)})"

    rows = []
    for family, h in heads:
        run = used[family]
        gpu = " + ".join(dict.fromkeys(run.rows(family)["gpu"].astype(str))) or "unknown GPU"
        folder = h.judged_in or run.name
        where = (f"[`{h.measured_in}`](experiments/results/{h.measured_in}/) (side experiment)"
                 if h.measured_in else f"[`{folder}`](experiments/results/{folder}/)"
                 + (" (targets sitting)" if h.judged_in else ""))
        if len(h.run_ids) > 1:
            where += (f"; **rows of {len(h.run_ids)} run ids** ({', '.join(h.run_ids)}): not one "
                      "sweep's comparison")
        rows.append({
            "component": h.family, "headline shape": h.shape,
            "fastest version": f"{h.fastest}: {t(h.fastest_us, h.unit)}",
            "fastest against the library": against(h.library, h.library_us, h),
            "fastest against PyTorch": "<br>".join(against(n, x, h) for n, x in h.anchors) or "-",
            "measured in": f"{gpu}, {where}"})
    if not rows:
        return "*No committed run yet: `./study run`, then `./study report`.*\n"
    return formatting.markdown_table(pd.DataFrame(rows))


TARGET_ORDER = ["patch_embed", "layernorm", "attention", "mlp", "encoder"]


def targets_list(targets: list) -> str:
    """Every target the notebooks judged, in the order a forward runs the families."""
    if not targets:
        return "*No target judged yet: no committed run.*\n"
    order = sorted(targets, key=lambda t: TARGET_ORDER.index(t.family) if t.family in TARGET_ORDER else 99)
    out = []
    for t in order:
        title = FAMILY_TITLES.get(t.family, t.family)
        out.append(f"- {title}, {t.what}: **{t.verdict}**" + (f" ({t.detail})" if t.detail else "")
                   + f"; run `{t.run}`.")
    return "\n".join(out) + "\n"


# The families whose gain README weighs (what_gains_buy): the eager breakdown names each one's
# component as the family.
WEIGHED = ("patch_embed", "layernorm", "attention", "mlp")


def what_gains_buy(heads: list, shares: tuple | None) -> str:
    """README's lines weighing each family's headline gain over its faster PyTorch anchor by the
    share its component takes of the answer's eager forward (Context.forward_shares), Amdahl's
    way; empty without a breakdown."""
    if shares is None:
        return ""
    step, batch, share, total = shares
    lines = []
    for family, h in heads:
        anchors = [(label, us) for label, us in h.anchors if us == us]
        if family not in WEIGHED or family not in share or not anchors or not h.fastest_us == h.fastest_us:
            continue
        label, anchor_us = min(anchors, key=lambda a: a[1])
        gain, s = anchor_us / h.fastest_us, share[family]
        lines.append("- " + claims.say(claims.claim("gains_buy", family=FAMILY_TITLES[family], share=s, gain=gain,
                                                    anchor=label, shape=h.shape, buys=1 + s * (gain - 1))) + ".")
    intro = claims.say(claims.claim("gains_buy_intro", step=step, batch=batch, total=formatting.fmt_ms(total)))
    return intro + "\n\n" + ("\n".join(lines) if lines else "- " + claims.say(claims.claim("gains_buy_none")) + ".") + "\n\n"


def headline_block(heads: list, used: dict, targets: list | None = None, answer: str | None = None,
                   shares: tuple | None = None) -> str:
    whole = next((h for f, h in heads if f == "encoder"), None)
    source = (f"`{whole.measured_in}`" if whole is not None and whole.measured_in else
              f"run `{used['encoder'].name}`" if "encoder" in used else "no run yet")
    answer_md = answer or (
        "*No final sitting is committed yet (`./study run final`, one uninterrupted sitting on one "
        "GPU: the fastest fp16 and FP8 steps against timm, torch.compile and torchao's FP8, 3 "
        "interleaved rounds, energy). Until then the whole-ViT line of the per-component table "
        f"below comes from {source}.*")
    return ("<!-- Generated by report/build.py (./study report) from the committed CSVs; do not "
            "edit: rebuild it. -->\n\n"
            "**The answer** (the whole ViT at vit_b, 224 px; the final sitting):\n\n"
            + answer_md + "\n\n"
            "How to call it: the fastest forward on a timm model from Python, "
            "[From Python: vitstudy](#from-python-vitstudy).\n\n"
            "**Targets** (docs/method.md, Targets), each judged in the run its family's section of "
            "the report uses:\n\n" + targets_list(targets or []) + "\n"
            "**Headline.** Per component, the fastest of all its versions (library versions "
            "included) at one representative shape, against the library version and the "
            "PyTorch anchors measured in the same run (median time per call; the report, "
            "`report/README.md`, has every size and version, and the targets):\n\n"
            + headline_table(heads, used) + "\n" + what_gains_buy(heads, shares))


def versions_block() -> str:
    """README's table of every family's versions, from the families' lists (versions.def, the
    encoder's step table), each linked to its NOTES.md."""
    lines = ["<!-- Generated by report/build.py from stages/<family>/versions.def and "
             "stages/encoder/steps.tsv; do not edit: rebuild it. -->", "",
             "| family | versions, in ladder order |", "|---|---|"]
    for family, title in FAMILY_TITLES.items():
        names = catalog.family_versions(family)
        lines.append(f"| {title} | " + ", ".join(f"[{v}](stages/{family}/{v}/NOTES.md)" for v in names) + " |")
    return "\n".join(lines) + "\n\n"


def measured_line(rungs: list, notes_measured: str) -> str:
    """A step's measured effect as the report says it: the rows its section's ladder figure (or
    ladder table) draws, so the two read one row; the NOTES' own words, said to be theirs, only
    where the figure does not draw it as a step (a reference, a side step, another sitting's)."""
    if not rungs:
        return claims.say(claims.claim("rung_elsewhere", measured=notes_measured))
    said = [claims.claim("rung_over" if r.over and r.gain == r.gain else "rung_at",
                         time=r.time, where=r.where, gain=r.gain, over=r.over) for r in rungs]
    return claims.say(claims.claim("rung_measured", rungs=said))


def ladder_outputs(out_dir: Path, drawn: dict) -> dict:
    """`text:ladder_<family>`: every version of the family in ladder order (its list, so no
    version is left out of the report), one line each: from its NOTES.md what it is (the title),
    the effect predicted and why (studylib/notes.py "In short"), and the effect measured as the
    section's ladder draws it (`drawn`: family -> [notebook.Rung], Context.ladder_drawn)."""
    art = {}
    for family in FAMILY_TITLES:
        lines = [f"*Every {FAMILY_TITLES[family]} version in ladder order (its version list): what it "
                 f"is, the effect predicted before it was measured and why the measurement differs, as "
                 f"`stages/{family}/<version>/NOTES.md` tells them; the effect measured, from the rows "
                 "the section's ladder figure draws (the NOTES' own words where it does not draw "
                 "the version as a step).*", ""]
        for v in catalog.family_versions(family):
            n = notes.read(REPO / "stages" / family / v / "NOTES.md", v)
            measured = measured_line([r for r in drawn.get(family, []) if r.version == v], n["Measured"])
            lines.append(f"- **`{v}`** ({n['title']}). *Predicted:* {n['Predicted']} "
                         f"{measured} *Why:* {n['Why']}")
        p = out_dir / "text" / f"ladder_{family}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(lines) + "\n")
        art[f"ladder_{family}"] = notebook.Artifact("text", f"ladder_{family}", p)
    return art


def with_block(readme: str, pattern, start: str, end: str, block: str, where: str) -> str:
    if not pattern.search(readme):
        raise TemplateError(f"{where}: no '{start}' ... '{end}' block")
    return pattern.sub(lambda m: f"{start}\n{block}{end}", readme, count=1)


def with_headline(readme: str, block: str, where: str) -> str:
    """README with its headline table and its versions table filled in."""
    readme = with_block(readme, HEADLINE, HEADLINE_START, HEADLINE_END, block, where)
    return with_block(readme, VERSIONS, VERSIONS_START, VERSIONS_END, versions_block(), where)


RUN_IDS_SHOWN = 5  # run ids a row of the runs table lists before "N more"


def ceilings_sentences(measured: dict) -> list[str]:
    """One sentence per GPU on the ceilings its section runs measured (run folder -> (GPU, copy
    GB/s, fp16 GEMM TFLOP/s), None where a run has no ceilings rows): their range, since each
    run's own are in the runs table and every share in the report is of its own run's."""
    out, by_gpu = [], {}
    for name, (gpu, copy, gemm) in measured.items():
        by_gpu.setdefault(gpu, []).append((name, copy, gemm))
    for gpu, runs in by_gpu.items():
        parts = []
        for label, vals, fmt, unit in (
                ("a device-to-device copy bandwidth (bytes read + written)", [r[1] for r in runs if r[1]],
                 formatting.fmt_gbps, "GB/s"),
                ("an fp16 tensor-core GEMM rate", [r[2] for r in runs if r[2]], lambda x: f"{x:,.0f}", "TFLOP/s")):
            if vals:
                lo, hi = min(vals), max(vals)
                parts.append(f"{label} of {fmt(lo)} {unit}" if lo == hi else
                             f"{label} of {fmt(lo)}-{fmt(hi)} {unit} ({100 * (hi / lo - 1):.1f}% apart)")
        with_ceilings = sum(1 for _, copy, gemm in runs if copy or gemm)
        if parts:
            out.append(f"On {gpu} the {f'{with_ceilings} section runs' if with_ceilings > 1 else 'section run'} "
                       f"above measured " + " and ".join(parts) + "; each share in the report is of "
                       f"its own run's (the runs table).")
        out += [f"Run `{name}` has no ceilings rows, so its bandwidth and throughput are shown "
                f"without a measured limit." for name, copy, gemm in runs if not (copy or gemm)]
    return out


def study_outputs(used: dict, out_dir: Path, judged: dict | None = None, beside: dict | None = None) -> dict:
    """The runs table and the ceilings sentences: one row per run folder the report uses, the
    targets sittings (`judged`) among them, and a row for each folder that figures or tables are
    drawn from beside their section's run (`beside`: run -> their (kind, name); their captions
    give its provenance, so no ceilings sentence)."""
    judged, beside = judged or {}, beside or {}
    rows, measured = [], {}
    # One row per folder: a targets sitting inside a section's folder is that folder's row.
    folders = {}
    for r in [*used.values(), *judged.values(), *beside]:
        folders.setdefault(r.path, r)
    for run in folders.values():
        c = run.ceilings()
        d = run.df
        fams = ([f for f, r in used.items() if r.path == run.path]
                + [f"{f} targets" for f, r in judged.items() if r.path == run.path and used.get(f) is not None
                   and used[f].path != run.path])
        figs = beside.get(run, [])
        if figs:
            fams.append(beside_text(figs))
        ids = list(dict.fromkeys(d["run_id"].astype(str)))
        rows.append({"run folder": run.name,
                     # A sweep resumed run by run lists many ids: the first few, the count of the rest
                     # (the folder's README and its CSVs have them all).
                     "run id": " + ".join(ids if len(ids) <= RUN_IDS_SHOWN else
                                          ids[:RUN_IDS_SHOWN - 1] + [f"{len(ids) - RUN_IDS_SHOWN + 1} more"]),
                     "GPU": " + ".join(dict.fromkeys(d["gpu"].astype(str))),
                     "commit": " + ".join(dict.fromkeys(rundata.short_commit(x) for x in d["commit"])),
                     "UTC": str(d["utc"].max()),
                     "families shown": ", ".join(fams),
                     "copy GB/s": c.copy_gbps if c.copy_gbps else float("nan"),
                     "GEMM fp16 TFLOP/s": c.gemm_tflops if c.gemm_tflops else float("nan")})
        if len(fams) == 1 and figs:
            continue  # figures only: their captions give the folder's provenance
        measured[run.name] = (rows[-1]["GPU"], c.copy_gbps, c.gemm_tflops)
    sentences = ceilings_sentences(measured)
    art = {}
    runs_md, ceilings_md = out_dir / "tables" / "study_runs.md", out_dir / "text" / "study_ceilings.md"
    for p in (runs_md, ceilings_md):
        p.unlink(missing_ok=True)  # never leave the table of a previous build behind
    if rows:
        for p in (runs_md, ceilings_md):
            p.parent.mkdir(parents=True, exist_ok=True)
        import pandas as pd
        p = runs_md
        p.write_text("*Runs this report is built from (one folder under experiments/results/ "
                     "each), with the ceilings measured in the same run.*\n\n" +
                     formatting.markdown_table(pd.DataFrame(rows), {
                         "copy GB/s": formatting.fmt_gbps,
                         "GEMM fp16 TFLOP/s": lambda x: formatting.fmt_gbps(x)}))
        art["study_runs"] = notebook.Artifact("table", "study_runs", p)
        p = ceilings_md
        p.write_text(" ".join(sentences) + "\n")
        art["study_ceilings"] = notebook.Artifact("text", "study_ceilings", p)
    else:
        why = "no committed run yet"  # fill() prints this at the marker
        art["study_runs"] = notebook.Artifact("table", "study_runs", None, reason=why)
        art["study_ceilings"] = notebook.Artifact("text", "study_ceilings", None, reason=why)
    return art


def build(args) -> Path:
    template = Path(args.template)
    if not template.is_file():
        raise TemplateError(f"{rundata.show_path(template)}: template not found")
    source = template.read_text()
    if args.run:
        args.run_dir = rundata.resolve_run_dir(args.run, args.results)
        runs = [rundata.load_run(args.run_dir)]
        # One run's report belongs to the run: report/ shows every committed run and must not
        # be replaced by a report of some families from one of them.
        out_dir = Path(args.out or Path(args.run_dir) / "report").resolve()
    else:
        if args.results_given and not Path(args.results).is_dir():
            raise studylib.DataError(f"{args.results}: results folder not found")
        args.run_dir = None
        runs = rundata.load_runs(args.results)
        out_dir = Path(args.out or REPO / "report").resolve()

    readme_target = None
    if not args.run_dir and (args.readme or args.check_readme or out_dir == (REPO / "report").resolve()):
        # The README whose tables this build fills must have their markers: said before the
        # notebooks run, not after.
        readme_target = Path(args.readme) if args.readme else REPO / "README.md"
        with_headline(readme_target.read_text() if readme_target.is_file() else "", "",
                      rundata.show_path(readme_target))

    args.primary_gpu = rundata.primary_gpu(runs)  # once: every family section picks its run on it
    used, pieces, pos, heads, cross, targets, answer = {}, [], 0, [], [], [], None
    judged = {}  # family -> its targets sitting, where the notebook judged its targets on one
    family_artifacts = []  # (kind, name, caption) of every family section's figures and tables
    drawn = {}  # family -> its ladder's steps as the section drew them (Context.ladder_drawn)
    shares = None  # the encoder's breakdown of its answer's forward (Context.forward_shares)
    for m in BLOCK.finditer(source):
        family, block = m.group(1), m.group(2)
        pieces.append(source[pos:m.start()])
        pos = m.end()
        if family in notebook.CROSS_RUN:  # filled once every family's section has picked its run
            cross.append((len(pieces), family, block))
            pieces.append("")
            continue
        text, run, ctx = build_family(family, block, runs, args, out_dir)
        pieces.append(text)
        if run is not None:
            used[family] = run
        if ctx is not None:
            family_artifacts += drawable(ctx)
            drawn[family] = ctx.rungs
            shares = ctx.forward_shares if ctx.forward_shares is not None else shares
            if ctx.judged_on is not None:
                judged[family] = ctx.judged_on
            if ctx.headline_entry is not None:
                heads.append((family, ctx.headline_entry))
            targets += ctx.targets
            answer = ctx.answer if ctx.answer is not None else answer
    pieces.append(source[pos:])
    for i, family, block in cross:
        pieces[i], ctx = build_cross_run(family, block, runs, used, out_dir)
        family_artifacts += drawable(ctx)
    body = "".join(pieces)
    stray = STRAY.search(body)
    if stray:
        raise TemplateError(f"{rundata.show_path(template)}: '{stray.group(0)}' has no matching "
                            f"{'end' if stray.group(1) == 'family' else 'family'} marker")
    # The figures and tables a family section draws from a folder beside its own run: the runs
    # table and the results index name them.
    beside = drawn_beside(family_artifacts, runs, used)
    body = fill(body, {**study_outputs(used, out_dir, judged, beside), **ladder_outputs(out_dir, drawn)}, out_dir,
                rundata.show_path(template))
    body = split_appendices(body, out_dir)
    source_csvs = (f"the CSVs of run folder {rundata.show_path(Path(args.run_dir))}" if args.run_dir
                   else "the CSVs under experiments/results/")
    header = (f"<!-- Generated by report/build.py from report/template.md and {source_csvs}. "
              "Edit the template, not this file. -->\n\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    readme = out_dir / "README.md"
    readme.write_text(header + body)
    if not args.run_dir and runs:
        # The index of the results root goes beside the runs it lists; a report built
        # elsewhere (--out) gets its copy beside it, so the committed one is never rewritten
        # by a build that is not the committed report's.
        index = (Path(args.results) / "README.md" if out_dir == (REPO / "report").resolve()
                 else out_dir / "results_index.md")
        index.write_text(results_index(runs, used, Path(args.results), judged, beside))
    if not args.run_dir:
        block = headline_block(heads, used, targets, answer, shares)
        target = readme_target or REPO / "README.md"
        if args.check_readme:
            current = target.read_text() if target.is_file() else ""
            if with_headline(current, block, rundata.show_path(target)) != current:
                raise StaleReadme(f"{rundata.show_path(target)}: the headline or versions table is not what "
                                  f"the committed CSVs and version lists give: run ./study report and "
                                  f"commit it")
        elif args.readme or out_dir == (REPO / "report").resolve():
            target.write_text(with_headline(target.read_text() if target.is_file() else "",
                                            block, rundata.show_path(target)))
        if out_dir != (REPO / "report").resolve():
            (out_dir / "headline.md").write_text(block)
    return readme


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", help="use this run folder for every family (a path, or a folder "
                                 "name under the results root); default: per family, the "
                                 "newest run with timings of that family on the primary GPU")
    p.add_argument("--results", help="results root (default: experiments/results)")
    p.add_argument("--out", help="output folder for README.md, figures/, tables/, text/ "
                                 "(default: report/, or with --run the run's DIR/report/)")
    p.add_argument("--template", default=str(REPO / "report" / "template.md"))
    p.add_argument("--readme", help="README whose headline block to fill (default: the "
                                    "repository's README.md, and only when building report/)")
    p.add_argument("--check-readme", action="store_true",
                   help="write no README; exit 1 when its headline table is stale")
    args = p.parse_args(argv)
    args.results_given = args.results is not None
    args.results = args.results or str(paths.RESULTS_ROOT)
    try:
        readme = build(args)
    except studylib.DataError as e:
        print(f"report/build.py: error: {e}", file=sys.stderr)
        return 2
    except StaleReadme as e:
        print(f"report/build.py: {e}", file=sys.stderr)
        return 1
    print(f"wrote {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
