"""Claims: what a notebook found, as typed records; the sentences that state them, as templates.

A notebook computes `Claim` records: a kind, the numbers and names its sentence states, and where
it judges a target, the target, the measured value, the rounds' band, the verdict and the run. The
family's sentence file, `report/sentences/<family>.md`, holds one template per kind with `{field}`
or `{field:format}` slots (the formats below, else Python's; `{flag:either:this|that}` says this
where the field is true, that where not); `Context.claims` renders the records
into a text marker. Wording lives in the sentence file, so changing it is not a code change, and a
record names every number its sentence states, so a test can check the numbers against the rows.

A sentence file: `kind: template` lines; a line starting with whitespace continues the one above;
`#` starts a comment line; blank lines are ignored.
"""
from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from studylib import formatting

SENTENCES = Path(__file__).resolve().parent.parent / "report" / "sentences"


def _share(x) -> str:
    """A fraction as a whole percent: 0.873 -> '87%'."""
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.0f}%"


# Named formats a template may use beside Python's own ({x:.2f}).
FORMATS = {
    "us": formatting.fmt_us,               # 0.5 -> '0.50', 1234 -> '1,234'
    "ms": formatting.fmt_ms,               # microseconds as ms: 448.2 -> '0.448', 18234 -> '18.2'
    "gbps": formatting.fmt_gbps,           # 2345.6 -> '2,346'
    "whole": formatting.fmt_gbps,          # any rate as a whole number: 171.4 -> '171'
    "share": _share,                       # 0.873 -> '87%'
    "tflops": lambda x: "-" if x is None or not math.isfinite(x) else f"{x:.2f}" if x < 10 else f"{x:,.0f}",
    "ratio": formatting.fmt_ratio,         # 1.234 -> '1.23x'
    "faster": formatting.faster_or_slower,  # baseline / ours: '1.23x faster' or '1.30x slower'
    "band": formatting.band_text,          # (lo, hi) -> '; rounds 0.99-1.01x', '' for a point
    "sittings_band": lambda b: formatting.band_text(b, "rounds and sittings span"),
    "int": formatting.fmt_int,
    "and": lambda xs: formatting.join_and([str(x) for x in xs]),  # ['a', 'b', 'c'] -> 'a, b and c'
    "both": lambda xs: " and ".join(str(x) for x in xs),          # 'a and b and c'
    "sentences": lambda xs: " ".join(str(x) for x in xs),         # sentences one after another
    "list": lambda xs: ", ".join(str(x) for x in xs),              # 'a, b, c'
    "parts": lambda xs: "; ".join(str(x) for x in xs),             # 'a; b; c'
    "at_each": lambda xs: " and at ".join(str(x) for x in xs),     # 'a and at b'
    "vs": lambda xs: " vs ".join(str(x) for x in xs),              # 'a vs b'
    "alternatives": lambda xs: " | ".join(str(x) for x in xs),     # 'a | b'
}


class TemplateError(ValueError):
    """A sentence file that cannot render a record: the file, line or kind, and what is wrong."""


@dataclass(frozen=True)
class Claim:
    kind: str
    fields: Mapping = field(default_factory=dict)
    target: float | None = None
    value: float | None = None
    band: tuple | None = None
    verdict: str | None = None
    run: str | None = None

    def slots(self) -> dict:
        return {**self.fields, "target": self.target, "value": self.value, "band": self.band,
                "verdict": self.verdict, "run": self.run}


def claim(kind: str, *, target=None, value=None, band=None, verdict=None, run=None, **fields) -> Claim:
    return Claim(kind, dict(fields), target, value, band, verdict, run)


def load(path: Path) -> dict[str, str]:
    """kind -> template of one sentence file."""
    templates: dict[str, str] = {}
    last = None
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace():
            if last is None:
                raise TemplateError(f"{path}:{n}: a continuation line with no template above it")
            templates[last] += " " + line.strip()
            continue
        kind, sep, text = line.partition(":")
        if not sep or not kind.strip().isidentifier():
            raise TemplateError(f"{path}:{n}: expected 'kind: template', got {line[:60]!r}")
        last = kind.strip()
        if last in templates:
            raise TemplateError(f"{path}:{n}: kind '{last}' given twice")
        templates[last] = text.strip()
    return templates


class _Formatter(string.Formatter):
    def format_field(self, value, spec):
        if spec.startswith("either:"):
            this, sep, that = spec[len("either:"):].partition("|")
            if not sep:
                raise TemplateError(f"'{{...:{spec}}}' needs two wordings: 'either:this|that'")
            return this if value else that
        if spec in FORMATS:
            return FORMATS[spec](value)
        return super().format_field(value, spec)


def render(claims: list[Claim], templates: Mapping[str, str], where: str = "") -> list[str]:
    """One sentence per claim, in order. A slot holding a claim (or a list of them) is that
    claim's own sentence (or their list) first."""
    def filled(value):
        if isinstance(value, Claim):
            return render([value], templates, where)[0]
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, Claim) for v in value):
            return render(list(value), templates, where)
        return value

    out = []
    for c in claims:
        if c.kind not in templates:
            raise TemplateError(f"no sentence for claim kind '{c.kind}' in {where or 'the sentence file'}")
        try:
            out.append(_Formatter().format(templates[c.kind], **{k: filled(v) for k, v in c.slots().items()}))
        except (KeyError, IndexError) as e:
            raise TemplateError(f"{where}: the sentence of '{c.kind}' names {e}, which its record lacks "
                                f"(it has {', '.join(sorted(c.fields))})") from None
    return out


def sentence_file(family: str) -> Path:
    return SENTENCES / f"{family}.md"


def flush_setting(flush) -> Claim:
    """The L2 setting a section's timings share (rundata.one_setting's value), in common.md's words."""
    return claim({0.0: "flush_off", 1.0: "flush_on"}.get(flush, "flush_unknown"))


def say(c: Claim, family: str | None = None) -> str:
    """One claim's sentence through the family's sentences (for text outside a context: a figure's
    title, a data class's field); without a family, through the shared ones (common.md) alone."""
    if family is None:
        return render([c], load(SENTENCES / "common.md"), str(SENTENCES / "common.md"))[0]
    return render([c], family_sentences(family), str(sentence_file(family)))[0]


def family_sentences(family: str) -> dict[str, str]:
    """The family's sentence file with the kinds every family shares (report/sentences/common.md);
    a kind in both is an error: each wording lives in one place."""
    common, own = load(SENTENCES / "common.md"), load(sentence_file(family))
    both = sorted(set(common) & set(own))
    if both:
        raise TemplateError(f"{sentence_file(family)}: {', '.join(both)} also in common.md: keep one")
    return {**common, **own}
