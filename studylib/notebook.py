"""The contract between an analysis notebook and report/build.py: where the data comes from,
where the outputs go, and what was produced (figures, tables, text, the headline line, the
targets judged). A notebook run on its own builds its context from its command line."""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from studylib import DataError, FigureError, NoData
from studylib import claims as claim_records
from studylib import figure_checks
from studylib.paths import REPORT_DIR, RESULTS_ROOT
from studylib.rundata import (Run, load_run, load_runs, pick_run, primary_gpu, resolve_run_dir, sections_runs,
                              show_path, targets_run)

FIGURE_DPI = 150

MAX_FIGURE_PX = 2000   # widest PNG the report embeds at its full resolution
# What a reader sees: the report's column is ~900 px wide, so a wider PNG is scaled down, and its
# smallest text must still be MIN_TEXT_PX tall there; a legend of more than MAX_LEGEND entries
# cannot be matched against its lines at a glance.
COLUMN_PX = 900
MIN_TEXT_PX = 9.0
MAX_LEGEND = 14


def _series_key(handle):
    """What tells a legend entry apart at a glance: colour, marker and how the marker is filled
    (full, hollow, half; a line without a marker: colour and line style; a patch: colour and hatch)."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    if isinstance(handle, Line2D):
        marker = handle.get_marker()
        if marker in (None, "None", "none", "", " "):
            return ("line", to_hex(handle.get_color()), handle.get_linestyle())
        face = handle.get_markerfacecolor()
        fill = "none" if isinstance(face, str) and face.lower() == "none" else handle.get_fillstyle()
        return ("marker", to_hex(handle.get_color()), str(marker), fill)
    if isinstance(handle, Patch):
        return ("patch", to_hex(handle.get_facecolor()), handle.get_hatch())
    try:   # a scatter's PathCollection: its colour and its marker's outline
        return ("points", to_hex(handle.get_facecolor()[0]),
                handle.get_paths()[0].vertices.round(3).tobytes())
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def legends_of(fig):
    """Every legend of `fig`: an axes' own, those it keeps as artists (a second legend), the
    figure's."""
    from matplotlib.legend import Legend
    return fig.findobj(Legend)


def check_series(fig, name: str):
    """Raise FigureError when two entries of one legend of `fig` name different series drawn
    alike (same colour and marker), so a reader could not tell them apart."""
    for lg in legends_of(fig):
        seen = {}
        handles = getattr(lg, "legend_handles", None) or getattr(lg, "legendHandles", [])
        for h, t in zip(handles, lg.get_texts()):
            label = t.get_text()
            key = _series_key(h)
            if key is None:
                continue
            other = seen.setdefault(key, label)
            if other != label:
                raise FigureError(f"figure {name}: '{other}' and '{label}' are drawn alike "
                                  f"({', '.join(map(str, key[1:]))})")


def smallest_text(fig):
    """(font size in points, text) of the smallest visible text of `fig`; None without text."""
    texts = [(t.get_fontsize(), t.get_text()) for t in fig.findobj(
        match=lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
        if t.get_visible() and t.get_text().strip()]
    return min(texts, key=lambda x: x[0]) if texts else None


def check_legends(fig, name: str):
    """FigureError for a legend of more than MAX_LEGEND entries."""
    for lg in legends_of(fig):
        if len(lg.get_texts()) > MAX_LEGEND:
            raise FigureError(f"figure {name}: a legend of {len(lg.get_texts())} entries (at most "
                              f"{MAX_LEGEND}): label the lines directly, split the panel or show fewer series")


def check_text_size(smallest, width_px: int, name: str):
    """FigureError when the smallest text, at the report's column width, is under MIN_TEXT_PX."""
    if smallest is None:
        return
    size_pt, text = smallest
    px = size_pt * FIGURE_DPI / 72 * min(1.0, COLUMN_PX / width_px)
    if px < MIN_TEXT_PX:
        raise FigureError(f"figure {name}: its smallest text ({size_pt:g} pt, {text.strip()[:40]!r}) is "
                          f"{px:.1f} px tall in a {COLUMN_PX} px column (the {width_px} px PNG scaled "
                          f"down), under {MIN_TEXT_PX:g}: enlarge it or narrow the figure")


def png_width(path: Path) -> int:
    """Pixel width from a PNG's IHDR chunk (bytes 16-19, big-endian)."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise FigureError(f"{path}: not a PNG")
    return int.from_bytes(head[16:20], "big")


@dataclass
class Artifact:
    kind: str               # figure | table | text
    name: str
    path: Path | None       # None when it could not be produced
    caption: str = ""
    reason: str = ""        # why it was not produced
    # A declared comparison's title (experiments/specs/*.toml, [comparison]): the report places
    # such outputs at its family's `comparisons` marker, under this title, unless a marker of
    # their own does.
    section: str = ""


@dataclass
class Headline:
    """A family's line of README's headline table: the fastest version of all (libraries
    included, anchors not) at the family's headline shape, against its library version and its
    PyTorch anchors there, all from one run."""
    family: str                       # as the table names it ("LayerNorm")
    shape: str                        # the headline shape, in words
    fastest: str
    fastest_us: float
    library: str | None = None        # the library version (or reference) compared with
    library_us: float = float("nan")
    anchors: list = field(default_factory=list)   # [(label, median us)]
    unit: str = "us"                  # "us" or "ms" for the printed times
    # A side experiment's folder under the results root when the line comes from it (its own
    # sitting, every number of the line from it) rather than from the family's run.
    measured_in: str | None = None
    # The sweeps (run ids) the line's rows came from: one for a line from one sitting; more
    # when its numbers pool sweeps, which README's table then says.
    run_ids: list = field(default_factory=list)
    # The run folder of a targets sitting when the line comes from it rather than from the
    # section's run (Context.targets_run; set by Context.headline).
    judged_in: str | None = None


@dataclass
class Target:
    """One of the study's targets (docs/method.md, Targets) as a notebook judged it on its run."""
    family: str
    what: str               # the target in words
    verdict: str            # VERDICTS: "met", "missed" (either "within noise"), or "not judged"
    detail: str = ""        # the numbers behind the verdict
    run: str = ""           # the run folder judged


@dataclass(frozen=True)
class Rung:
    """One step of a family's ladder as the section draws it (its ladder figure, or its ladder
    table where it has no figure): the version, the size (`where`, as the figure labels it), its
    time as shown (`time`, with its unit), and its gain over the step `over` (NaN for none). The
    report's line for the version says these, so its "Measured" and its figure read one row."""
    version: str
    where: str
    time: str
    gain: float = float("nan")
    over: str = ""


# "within noise": the margin to the target is smaller than the spread of the measurements (the
# rounds of the sitting and the other sittings of the same GPU model).
VERDICTS = ("met", "missed", "met within noise", "missed within noise", "not judged")


def verdict(value: float, target: float, band: tuple, at_most: bool = False) -> str:
    """'met' or 'missed' for a value against its target (at least the target, or with `at_most`
    at most it), 'met within noise' / 'missed within noise' where the band the measurements allow
    (lo, hi; NaN when unknown) holds the target: the margin is smaller than their spread."""
    met = value <= target if at_most else value >= target
    lo, hi = band
    noise = lo == lo and hi == hi and lo <= target <= hi   # NaN != NaN
    return ("met" if met else "missed") + (" within noise" if noise else "")


def ratio_band(top_lo: float, top_hi: float, bottom_lo: float, bottom_hi: float) -> tuple:
    """The band (lo, hi) the rounds allow a ratio top / bottom, from each side's fastest (lo) and
    slowest (hi) round: top's fastest over bottom's slowest, and the other way."""
    return (top_lo / bottom_hi, top_hi / bottom_lo)


def combined_verdict(verdicts: list[str]) -> str:
    """One verdict for a target judged at several shapes: missed where any shape misses, and
    "within noise" where any shape's verdict is."""
    out = "missed" if any(v.startswith("missed") for v in verdicts) else "met"
    return out + (" within noise" if any(v.endswith("within noise") for v in verdicts) else "")


@dataclass
class Context:
    """Handed to a notebook by report/build.py (as STUDY_CONTEXT), or built from the command
    line when the notebook runs on its own. The notebook writes through it, and build.py reads
    `artifacts` afterwards to fill the template markers."""
    family: str
    run: Run | None         # None for a notebook over every run (CROSS_RUN)
    out_dir: Path
    artifacts: dict = field(default_factory=dict)
    headline_entry: Headline | None = None
    runs: list = field(default_factory=list)   # CROSS_RUN notebooks: every run folder...
    used: dict = field(default_factory=dict)   # ...and the run each family section uses
    targets: list = field(default_factory=list)  # [Target] judged by the notebook
    answer: str | None = None  # the study's one answer (encoder, from a final sitting): markdown
    claims_made: dict = field(default_factory=dict)  # text marker -> [Claim] it rendered
    # The family's targets sitting measured after `run` (rundata.targets_run), offered by
    # build.py; a notebook that judges its targets and headline there takes it (take_targets_run).
    targets_run: Run | None = None
    judged_on: Run | None = None
    rungs: list = field(default_factory=list)  # [Rung]: the ladder as the section drew it
    # The encoder's (step, batch, {component: share of its eager forward}, total us): what README
    # weighs each family's gain by (report/build.py, what_gains_buy).
    forward_shares: tuple | None = None

    def take_targets_run(self) -> Run | None:
        """The targets sitting this family's targets and headline are judged on, from now on
        named by target() and headline(); None where there is none (they are judged on run)."""
        self.judged_on = self.targets_run
        return self.targets_run

    def judged_apart(self, scope: str = "The targets and the headline") -> str | None:
        """The finding that says where the targets sitting taken (take_targets_run) judges: its
        files, folder and provenance, and that the rest of the section reads this run; None where
        no targets sitting was taken. `scope` names the sentences it judges."""
        t = self.judged_on
        if t is None:
            return None
        files = ", ".join(sorted(t.sources.get(self.family, ())))
        return (f"{scope} are judged on the targets sitting, {files} in `{t.name}` "
                f"({t.provenance(self.family)}); the rest of the section on this run's rows.")

    def headline(self, **kw):
        """The family's line of README's headline table (report/build.py writes the table)."""
        if self.judged_on is not None and not kw.get("measured_in"):
            kw.setdefault("judged_in", self.judged_on.name)
        self.headline_entry = Headline(**kw)

    def target(self, what: str, verdict: str, detail: str = ""):
        """A study target judged on this run; README lists every one (report/build.py)."""
        if verdict not in VERDICTS:
            raise ValueError(f"target verdict must be one of {VERDICTS}, got {verdict!r}")
        judged = self.judged_on or self.run
        self.targets.append(Target(self.family, what, verdict, detail, judged.name if judged is not None else ""))

    def _path(self, sub: str, name: str, ext: str) -> Path:
        # Family-prefixed names let build.py clean a family's stale outputs safely.
        if not name.startswith(self.family + "_"):
            raise ValueError(f"artifact name '{name}' must start with '{self.family}_'")
        d = self.out_dir / sub
        d.mkdir(parents=True, exist_ok=True)
        return d / f"{name}.{ext}"

    def provenance(self) -> str:
        return self.run.provenance(self.family)

    def title_provenance(self) -> str:
        return self.run.title_provenance(self.family)

    def said(self, words) -> str:
        """A caption or reason: a str as it is, a claim record rendered through the family's
        sentence file (report/sentences/<family>.md)."""
        if not isinstance(words, claim_records.Claim):
            return words
        path = claim_records.sentence_file(self.family)
        return claim_records.render([words], claim_records.family_sentences(self.family), str(path))[0]

    def figure(self, name: str, fig, caption, section: str = ""):
        """Save `fig` as figures/NAME.png, after checking that no two of its series are drawn
        alike, no legend is too long and the reader's checklist holds (studylib.figure_checks);
        a PNG wider than MAX_FIGURE_PX, or whose smallest text
        is unreadable at the report's column width, is an error (FigureError names it). The
        caption: a str or a claim record (said)."""
        import matplotlib.pyplot as plt
        caption = self.said(caption)
        path = self._path("figures", name, "png")
        try:
            check_series(fig, name)
            check_legends(fig, name)
            figure_checks.check_figure(fig, name)
            smallest = smallest_text(fig)
            fig.savefig(path, dpi=FIGURE_DPI)
        finally:
            plt.close(fig)
        width = png_width(path)
        if width > MAX_FIGURE_PX:
            raise FigureError(f"figure {name} is {width} px wide, more than {MAX_FIGURE_PX}: "
                              "shorten its title, legend or panels")
        check_text_size(smallest, width, name)
        self.artifacts[name] = Artifact("figure", name, path, caption, section=section)
        return path

    def table(self, name: str, table_md: str, caption, section: str = ""):
        caption = self.said(caption)
        path = self._path("tables", name, "md")
        path.write_text(f"*{caption}*\n\n{table_md}")
        self.artifacts[name] = Artifact("table", name, path, caption, section=section)
        return path

    def text(self, name: str, sentences: list[str], bullets: bool = True):
        """Generated sentences; a bullet list by default so each finding reads on its own."""
        path = self._path("text", name, "md")
        items = [s.strip() for s in sentences if s.strip()]
        path.write_text(("\n".join(f"- {s}" for s in items) if bullets else
                         "\n\n".join(items)) + "\n")
        self.artifacts[name] = Artifact("text", name, path)
        return path

    def claims(self, name: str, items: list, bullets: bool = True):
        """Findings as claim records (studylib.claims), each rendered through the family's
        sentence file (report/sentences/<family>.md) into the text marker `name`, in order; a str
        item is a sentence one of studylib's shared helpers wrote (rounds, statuses)."""
        path = claim_records.sentence_file(self.family)
        templates = claim_records.family_sentences(self.family)
        sentences = [i if isinstance(i, str) else claim_records.render([i], templates, str(path))[0]
                     for i in items if i]
        self.claims_made[name] = [i for i in items if isinstance(i, claim_records.Claim)]
        return self.text(name, sentences, bullets)

    def judge(self, c: claim_records.Claim):
        """A target judged by a claim record (its verdict): README's line says what the target
        asks and what was measured through the sentence file's `<kind>_what` and `<kind>_detail`."""
        path = claim_records.sentence_file(self.family)
        templates = claim_records.family_sentences(self.family)
        what, detail = claim_records.render([claim_records.Claim(f"{c.kind}_{part}", c.fields, c.target, c.value,
                                                                 c.band, c.verdict, c.run)
                                             for part in ("what", "detail")], templates, str(path))
        self.target(what, c.verdict, detail)

    def ladder_drawn(self, rungs: list):
        """The ladder's steps as the section's ladder figure (or table) shows them: build.py's
        line for each version reads its measured numbers from here."""
        self.rungs = list(rungs)

    def missing(self, kind: str, name: str, reason):
        """Record that an output could not be made from this run (for example no baseline
        rows); the report prints the reason (a str or a claim record) at its marker instead of failing."""
        self.artifacts[name] = Artifact(kind, name, None, reason=self.said(reason))


# Notebooks that read every run folder instead of one (their template block is filled after
# the families' blocks, with the runs those used).
CROSS_RUN = ("gpus",)


def notebook_context(family: str, namespace: dict) -> Context:
    """The context build.py injected, or one from this notebook's own command line:
    `--run DIR`, `--results ROOT`, `--out DIR` (parse_known_args: Jupyter adds its own)."""
    given = namespace.get("STUDY_CONTEXT")
    if given is not None:
        return given
    os.environ.setdefault("MPLBACKEND", "Agg")
    p = argparse.ArgumentParser(description=f"{family} analysis notebook")
    p.add_argument("--run", help="run folder (path or name under the results root)")
    p.add_argument("--results", default=str(RESULTS_ROOT), help="results root")
    p.add_argument("--out", help="output folder (figures/, tables/); default report/, or with "
                                 "--run the run's DIR/report/")
    args, _ = p.parse_known_args()
    if family in CROSS_RUN:
        try:
            runs = [load_run(resolve_run_dir(args.run, args.results))] if args.run else \
                load_runs(args.results)
        except DataError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        return Context(family, None, Path(args.out or REPORT_DIR), runs=runs,
                       used=sections_runs(runs))
    try:
        if args.run:
            run_dir = resolve_run_dir(args.run, args.results)
            args.out = args.out or str(run_dir / "report")
            run = load_run(run_dir)
            targets = None
        else:
            runs = load_runs(args.results)
            run = pick_run(runs, family, primary_gpu(runs))
            targets = targets_run(runs, family, run)
        if run is None or run.rows(family).empty:
            raise NoData(f"no committed run has rows with family '{family}' "
                         f"(looked in {show_path(Path(args.run or args.results))})")
    except DataError as e:
        # The same one line and exit code 2 that report/build.py gives.
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    return Context(family, run, Path(args.out or REPORT_DIR), targets_run=targets)
