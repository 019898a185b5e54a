"""experiments/results/README.md, the index of every run folder (report/build.py writes it beside
the runs it lists): what each folder holds, which section of the report uses it or draws figures
from it, and which families it is superseded for."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from studylib import formatting, rundata
from studylib.paths import REPO


def full_commit(recorded: str, cache: dict) -> str:
    """The full hash of a recorded commit ('git describe' form, maybe with '-dirty'), looked up
    in this clone; as recorded, marked, when the clone does not have it."""
    if recorded not in cache:
        m = re.match(r"^(?:.*-g)?([0-9a-fA-F]{7,40})(-dirty)?$", recorded.strip())
        full = None
        if m:
            r = subprocess.run(["git", "rev-parse", "--verify", "--quiet", m.group(1) + "^{commit}"],
                               cwd=REPO, capture_output=True, text=True)
            full = r.stdout.strip() + (m.group(2) or "") if r.returncode == 0 else None
        cache[recorded] = full or f"{recorded} (not in this clone)"
    return cache[recorded]


def folder_summary(folder: Path) -> str:
    """The first sentence of a folder's README.md after its title, or '-'."""
    readme = folder / "README.md"
    if not readme.is_file():
        return "-"
    paragraphs = [" ".join(x.split()) for x in readme.read_text().split("\n\n")
                  if x.strip() and not x.lstrip().startswith(("#", "<!--"))]
    if not paragraphs:
        return "-"
    m = re.match(r"(.+?[.!?])(\s|$)", paragraphs[0])
    first = m.group(1) if m else paragraphs[0]
    return first if len(first) <= 240 else first[:240].rsplit(" ", 1)[0] + " ..."


def side_folders_section(runs: list, root: Path, cache: dict) -> str:
    """The folders that hold no top-level rows (tests, sanitizer and mutation reports, accuracy
    checks, side experiments measured apart from any run): what each is, where its CSVs are and
    which commits their rows name, so the index lists every folder under the results root."""
    import pandas as pd
    known = {r.path.resolve() for r in runs}
    rows = []
    for folder in sorted(d for d in root.iterdir() if d.is_dir() and d.resolve() not in known):
        csvs = [c for c in folder.rglob("*.csv") if "report" not in c.relative_to(folder).parts]
        commits, gpus = {}, {}
        for c in csvs:
            try:
                d = pd.read_csv(c, dtype=str, usecols=lambda col: col in ("commit", "gpu"))
            except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
                continue
            for col, seen in (("commit", commits), ("gpu", gpus)):
                if col in d:
                    seen.update(dict.fromkeys(x for x in d[col].dropna().str.strip() if x))
        subs = sorted({str(c.parent.relative_to(folder)) for c in csvs if c.parent != folder})
        rows.append({
            "folder": f"[{folder.name}]({folder.name}/)",
            "what": folder_summary(folder),
            "GPU": " + ".join(gpus) or "-",
            "commits of its rows": "<br>".join(full_commit(c, cache) for c in commits) or "-",
            "CSV folders": ", ".join(subs) or ("top level" if csvs else "no CSV"),
        })
    if not rows:
        return ""
    return ("\n## Folders without a run's rows\n\nTest-suite, sanitizer and mutation reports, "
            "accuracy checks and side experiments: the report reads them only for their own "
            "tables (each folder's README says how it was made).\n\n"
            + formatting.markdown_table(pd.DataFrame(rows)))


def shapes(run, family: str) -> set:
    """The (model, image size) pairs of a run's rows of one family."""
    g = run.rows(family)
    px = [str(int(v)) if v == v else "" for v in g["image_size"]]  # NaN: a shapeless row
    return set(zip(g["model"].astype(str), px))


def shapes_it_lacks(run, family: str, newer) -> str:
    """The models and image sizes of run's rows of a family that `newer` has none of ('vit_b 384
    px'), or '' when it covers them all."""
    return ", ".join(f"{m} {px} px" if px else m for m, px in sorted(shapes(run, family) - shapes(newer, family)))


def superseded_text(run, family: str, newer) -> str:
    """'encoder (by RUN)' where the run the report uses for the family holds every model and image
    size this one does; otherwise what this run holds that it lacks (not superseded)."""
    held = shapes_it_lacks(run, family, newer)
    return f"not {family}: it holds {held}, which {newer.name} lacks" if held else f"{family} (by {newer.name})"


def artifacts_drawn_from(artifacts, names: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Run folder name -> the (kind, name) of the artifacts (of `artifacts`, (kind, name,
    caption)) whose caption names that folder: the figures and tables a section draws from a run
    other than its own (a sweep beside a targets sitting, a side experiment's sitting, a probe's
    table) name the folder they come from."""
    out = {}
    for kind, artifact, caption in artifacts:
        for name in names:
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", caption):
                out.setdefault(name, []).append((kind, artifact))
    return out


def figure_section(figure: str, sections) -> str:
    """The section a figure or table belongs to, the longest of `sections` its name starts with
    (patch_embed_memory: patch_embed); '' for none."""
    return max((f for f in sections if figure.startswith(f + "_")), key=len, default="")


def drawn_beside(artifacts, runs: list, used: dict) -> dict:
    """Run -> the (kind, name) of the figures and tables (of `artifacts`, (kind, name, caption))
    drawn from its folder beside their section's run: the caption names the folder and the
    section's run is another."""
    named = artifacts_drawn_from(artifacts, [r.name for r in runs])
    out = {}
    for run in runs:
        found = [a for a in named.get(run.name, []) if used.get(figure_section(a[1], used)) is not run]
        if found:
            out[run] = found
    return out


def beside_text(found) -> str:
    """'figures a and b, table c' for the (kind, name) pairs drawn_beside gives a run."""
    parts = []
    for kind in ("figure", "table"):
        names = [n for k, n in found if k == kind]
        if names:
            parts.append(f"{kind}{'s' if len(names) > 1 else ''} {formatting.join_and(names)}")
    return ", ".join(parts)


def results_index(runs: list, used: dict, root: Path, judged: dict | None = None,
                  drawn: dict | None = None) -> str:
    """experiments/results/README.md: every run folder, what it holds, which families the
    report takes from it (`judged`: family -> the targets sitting its targets and headline are
    judged on; `drawn`: run -> the figures and tables drawn from it beside their section's run,
    as drawn_beside gives them) and which it is superseded for."""
    judged, drawn = judged or {}, drawn or {}
    import pandas as pd
    cache = {}
    rows = []
    primary = rundata.primary_gpu(runs)
    families = sorted({f for r in runs for f in r.families()})
    for run in sorted(runs, key=lambda r: r.name):
        d = run.df

        def values(col):
            return [x for x in dict.fromkeys(d[col].astype(str).str.strip()) if x and x != "none"]

        fams = []
        for f in run.families():
            g = run.rows(f)
            fams.append(f"{f} ({int((g['status'] == 'ok').sum())}/{len(g)})")
        side_csvs = sorted(c for c in run.path.rglob("*.csv")
                           if c.parent != run.path and "report" not in c.relative_to(run.path).parts)
        side = [str(c.parent.relative_to(run.path)) for c in side_csvs]
        # The folder's time span covers its side folders' rows too (those that record one).
        utc = [str(x) for x in d["utc"].dropna()]
        for c in side_csvs:
            try:
                utc += [str(x) for x in pd.read_csv(c, usecols=["utc"])["utc"].dropna()]
            except (ValueError, pd.errors.ParserError):
                pass
        uses = [f for f in families if used.get(f) is run]
        uses += [f"{f} targets and headline" for f in families if judged.get(f) is run]
        other_gpu = rundata.gpu_of(run) != primary
        # Another GPU's run serves the across-GPUs section only where that section's captions
        # name it (analysis/gpus.py picks each family's clean run there).
        if other_gpu and not uses and any(name.startswith("gpus_") for _, name in drawn.get(run, [])):
            uses = [f"across GPUs ({rundata.gpu_of(run)} beside {primary})"]
        if drawn.get(run):
            uses.append(beside_text(drawn[run]))
        superseded = [] if other_gpu else [superseded_text(run, f, used[f]) for f in run.families()
                                           if f in used and used[f] is not run and judged.get(f) is not run]
        rows.append({
            "run folder": f"[{run.name}]({run.name}/)",
            "GPU": " + ".join(values("gpu")) or "none",
            "commits": "<br>".join(full_commit(c, cache) for c in values("commit")) or "unknown",
            "UTC": f"{min(utc)} .. {max(utc)}" if utc else "-",
            "families (ok/all rows)": ", ".join(fams) or ("none at the top: its side folders hold the rows"
                                                          if side else "ceilings only"),
            "side folders": ", ".join(dict.fromkeys(side)) or "-",
            "report uses it for": ", ".join(uses) or "-",
            "superseded for": ", ".join(superseded) or "-",
        })
    per_family = [{"family": f, "report uses": used[f].name if f in used else
                   "- (no section of the report)",
                   "also measured in (superseded)": ", ".join(
                       r.name + (f" (not superseded: {held}, which {used[f].name} lacks)"
                                 if f in used and (held := shapes_it_lacks(r, f, used[f])) else "")
                       for r in sorted(runs, key=lambda r: r.name)
                       if len(r.rows(f)) and used.get(f) is not r and judged.get(f) is not r
                       and rundata.gpu_of(r) == primary) or "-"}
                  for f in families]
    return ("<!-- Generated by report/build.py (./study report) from the run folders below. "
            "Do not edit: rebuild it. -->\n\n"
            "# experiments/results/\n\n"
            "Every folder under this one: a GPU run holds the CSVs of its sweeps and its `ceilings.csv` "
            "(the GPU's measured copy bandwidth and GEMM rate); side experiments and Nsight "
            "Compute tables sit in sub-folders, which the report reads only for their own "
            "tables. Per family, the report (`report/README.md`) uses the newest run with "
            "timings of that family on the primary GPU (the GPU most run folders were measured "
            "on; runs on other GPUs are compared with it in the report's across-GPUs section); "
            "older runs of the family are superseded and kept for the record, unless they hold "
            "models or image sizes that the run it uses lacks (then the table says which). A figure "
            "or table drawn from a folder other than its section's run (a sweep beside a targets "
            "sitting, one experiment's sitting, a probe's table) is named in that folder's row. Commits are full hashes (`-dirty`: built from a tree with uncommitted "
            "changes). The CSV columns are described in `docs/method.md`.\n\n"
            "## Runs\n\n" + formatting.markdown_table(pd.DataFrame(rows)) +
            side_folders_section(runs, root, cache) +
            "\n## Which run the report uses, per family\n\n" +
            formatting.markdown_table(pd.DataFrame(per_family, columns=[
                "family", "report uses", "also measured in (superseded)"])))
