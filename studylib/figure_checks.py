"""The reader's checklist for a figure, where code can check it before the PNG is written
(studylib.notebook.Context.figure runs every check; FigureError names the figure and the rule):
- a title of at most MAX_TITLE_LINES lines, the figure's and each panel's;
- every numeric axis of a panel named (its label says what and in which unit);
- a linear value axis that does not start at zero says so (in its label or a note on the panel);
- at most MAX_SERIES series in one panel.
(The PNG is saved with a tight bounding box, so no text is cut off by the figure's edge.)
What needs judgment stays with the reader: one message, the caption, the right kind of figure,
and a log axis only where the values span decades (a quick run's few sizes may not, where the
committed sittings' do)."""
from __future__ import annotations

from studylib import FigureError

MAX_TITLE_LINES = 2
MAX_SERIES = 10          # "about 8": a few more where the extra ones are anchors drawn in grey
NOT_FROM_ZERO = ("not from 0", "not from zero")  # what a value axis says when it starts above zero


def _panels(fig):
    """The panels a reader reads: visible axes that draw something (not a colour bar, not an
    empty slot of a grid, not a twin made only for a second scale)."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison and (ax.lines or ax.patches or ax.collections)]


def check_titles(fig, name: str):
    titles = [fig._suptitle] if getattr(fig, "_suptitle", None) is not None else []
    titles += [ax.title for ax in fig.axes]
    for t in titles:
        lines = t.get_text().strip().splitlines()
        if t.get_visible() and len(lines) > MAX_TITLE_LINES:
            raise FigureError(f"figure {name}: a title of {len(lines)} lines (at most {MAX_TITLE_LINES}): "
                              f"{lines[0][:50]!r}...; say the rest in the caption")


def _numeric_ticks(axis) -> bool:
    """Whether the axis's tick labels are numbers (a value axis), not category names."""
    labels = [t.get_text().strip() for t in axis.get_ticklabels() if t.get_text().strip()]
    if not labels:
        return False
    numeric = 0
    for label in labels:
        cleaned = label.replace(",", "").replace("\u2212", "-").replace("$", "").replace("x", "").replace("%", "")
        cleaned = cleaned.replace("\\mathdefault{", "").replace("}", "").replace("^", "e").replace("{", "")
        try:
            float(cleaned)
            numeric += 1
        except ValueError:
            pass
    return numeric == len(labels)


def check_axis_labels(fig, name: str):
    for i, ax in enumerate(_panels(fig)):
        for which, axis, label in (("x", ax.xaxis, ax.get_xlabel()), ("y", ax.yaxis, ax.get_ylabel())):
            if axis.get_visible() and _numeric_ticks(axis) and not label.strip() and not _named_beside(fig, ax, which):
                raise FigureError(f"figure {name}: panel {i + 1} ('{ax.get_title()[:40]}') has a numeric {which} "
                                  "axis without a label: name it and its unit")


def _named_beside(fig, ax, which: str) -> bool:
    """Whether the figure names the axis once for its panels (fig.supxlabel / supylabel), or
    another panel of the same column (x: the bottom one) or row (y: the left one) does."""
    if (fig._supxlabel if which == "x" else fig._supylabel) is not None:
        return True
    here = ax.get_position()
    for other in (o for o in fig.axes if o.get_visible()):  # an empty panel's label names its column too
        there = other.get_position()
        same = (abs(there.x0 - here.x0) < 0.02 and abs(there.x1 - here.x1) < 0.02) if which == "x" else \
            (abs(there.y0 - here.y0) < 0.02 and abs(there.y1 - here.y1) < 0.02)
        if other is not ax and same and (other.get_xlabel() if which == "x" else other.get_ylabel()).strip():
            return True
    return False


def _says_not_from_zero(ax, label: str) -> bool:
    words = [label] + [t.get_text() for t in ax.texts]
    return any(phrase in w.lower() for w in words for phrase in NOT_FROM_ZERO)


def check_zero(fig, name: str):
    """A panel's linear y axis of values (a line plot's result) whose view starts above zero, and
    a bar chart's value axis that does, say so."""
    for i, ax in enumerate(_panels(fig)):
        checks = []
        if ax.get_yscale() == "linear" and _numeric_ticks(ax.yaxis):
            checks.append(("y", ax.get_ylim(), ax.get_ylabel()))
        horizontal_bars = bool(ax.patches) and not _numeric_ticks(ax.yaxis)
        if horizontal_bars and ax.get_xscale() == "linear" and _numeric_ticks(ax.xaxis):
            checks.append(("x", ax.get_xlim(), ax.get_xlabel()))
        for which, (lo, hi), label in checks:
            if min(lo, hi) > 0 and not _says_not_from_zero(ax, label):
                raise FigureError(f"figure {name}: panel {i + 1} ('{ax.get_title()[:40]}') has a linear {which} "
                                  f"axis from {min(lo, hi):.3g}, not 0, and does not say so")


def check_series_count(fig, name: str):
    for i, ax in enumerate(_panels(fig)):
        labels = {a.get_label() for a in ax.lines + ax.collections + ax.containers
                  if a.get_label() and not a.get_label().startswith("_")}
        if len(labels) > MAX_SERIES:
            raise FigureError(f"figure {name}: panel {i + 1} draws {len(labels)} series (at most {MAX_SERIES}): "
                              "split the panel or grey the ones that do not matter")


CHECKS = (check_titles, check_axis_labels, check_zero, check_series_count)


def check_figure(fig, name: str):
    """Every check above on `fig` (before it is saved)."""
    for check in CHECKS:
        check(fig, name)
