"""The encoder's step table, read without a build: stages/encoder/steps.tsv (generated from
stages/encoder/steps.cpp and kept current by a CPU test), and the composition text form that the
bench writes into each row's note and custom version, whose fields stages/encoder/composition.tsv
lists (generated from stages/encoder/composition.def, kept current the same way).

The text form (stages/encoder/composition.hpp): space-separated fields in composition.tsv's
order, pe= and ln= always, attn= and mlp= where the blocks run a family version of them (`none`
in a delta takes one out), then only the fields that differ from their defaults: choices
(blocks= tile_a= ... buffers= residual=), the set gemms= (members joined by '+', written in the
table's order), the count streams= and the switches (graph pdl l2_prefetch attn_e4m3 qkv_e4m3).
Rows written before the step table carry older forms, which parse() reads too:
  - custom versions `custom:pe=A,ln=B,attn=C,mlp=D,reuse,graph,streams=N,fused,cutlass,pdl,
    lnfold,cublaslt,split,fp8,attn8,persistent,prefetch` (the arena was on only with `reuse`);
  - note mixes `pe=A ln=B attn=C mlp=D gemms=cutlass+cublaslt+split pdl lnfold fp8 attn_e4m3
    l2_prefetch`, which say nothing of the arena, graph or residual (those fields stay None);
  - the tile-scheduled steps' own blocks (blocks=tiled_ln ... tiled_row_stats), one a form,
    before the form was the tile_ fields (LEGACY_BLOCKS).
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "stages" / "encoder" / "steps.tsv"
FIELDS_TABLE = REPO / "stages" / "encoder" / "composition.tsv"


def read_fields(path: Path = FIELDS_TABLE) -> dict[str, dict]:
    """composition.tsv as {key: {kind, scope, default, values}}, in the text form's order; values
    lists a choice's or a set's written values (empty for the other kinds)."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    rows = list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or set(rows[0]) != {"key", "kind", "scope", "default", "value", "field_meaning", "value_meaning"}:
        raise ValueError(f"{path}: not the composition's fields (regenerate it with --list-fields)")
    out: dict[str, dict] = {}
    for r in rows:
        f = out.setdefault(r["key"], {"kind": r["kind"], "scope": r["scope"], "default": r["default"],
                                      "values": []})
        if r["value"]:
            f["values"].append(r["value"])
    return out


FIELDS = read_fields()
_TYPED_DEFAULT = {"version": lambda d: "", "choice": str, "set": str, "count": int, "switch": lambda d: False}
# Field -> default, in the text form's order.
DEFAULTS = {k: _TYPED_DEFAULT[f["kind"]](f["default"]) for k, f in FIELDS.items()}
SWITCHES = tuple(k for k, f in FIELDS.items() if f["kind"] == "switch")
CHOICES = {k: tuple(f["values"]) for k, f in FIELDS.items() if f["kind"] == "choice"}
SETS = {k: tuple(f["values"]) for k, f in FIELDS.items() if f["kind"] == "set"}
VERSIONS = tuple(k for k, f in FIELDS.items() if f["kind"] == "version")
COUNTS = tuple(k for k, f in FIELDS.items() if f["kind"] == "count")
# Versions a block runner reads: named only where it runs one, `none` takes one out.
RUNNER_VERSIONS = tuple(k for k in VERSIONS if FIELDS[k]["scope"] == "runner")
# Older forms: a word -> the fields it set.
LEGACY_WORDS = {"reuse": {"buffers": "arena"}, "graph": {"graph": True},
                "fused": {"residual": "epilogue"}, "cutlass": {"gemms": "cutlass"},
                "pdl": {"pdl": True}, "lnfold": {"blocks": "fp16_ln_folded"},
                "cublaslt": {"gemms": "cutlass+cublaslt"}, "split": {"gemms": "cutlass+cublaslt+split"},
                "fp8": {"blocks": "fp8"}, "attn8": {"attn_e4m3": True}, "attn_e4m3": {"attn_e4m3": True},
                "persistent": {"blocks": "persistent"}, "prefetch": {"l2_prefetch": True},
                "l2_prefetch": {"l2_prefetch": True}}
LEGACY_GEMMS = {"cutlass": "cutlass", "cutlass+cublaslt": "cutlass+cublaslt",
                "cutlass+cublaslt+split": "cutlass+cublaslt+split"}
# The tile-scheduled forms as they were written, each its own blocks= value (e25 to e30).
_TWO_CTAS = {"tile_a": "streamed", "tile_ctas": "2"}
LEGACY_BLOCKS = {
    "tiled_ln": {"tile_ln": "tasks"},
    "tiled_2cta": {**_TWO_CTAS, "tile_ln": "tasks"},
    "tiled_wgmma": {**_TWO_CTAS, "tile_mma": "wgmma", "tile_ln": "tasks"},
    "tiled_folded": {**_TWO_CTAS, "tile_mma": "wgmma", "tile_ln": "folded"},
    "tiled_loads_first": {**_TWO_CTAS, "tile_mma": "wgmma", "tile_ln": "folded", "tile_loads": "first"},
    "tiled_row_stats": {**_TWO_CTAS, "tile_mma": "wgmma", "tile_ln": "row_stats", "tile_loads": "first"},
}


class FormError(ValueError):
    """Text that is no composition."""


def parse(text: str) -> dict:
    """A composition as {field: value} from the text form, a `custom:` version or an older note
    mix (module docstring). Fields an older note does not state are None."""
    text = text.strip()
    if text.startswith("custom:") and "," in text and " " not in text:
        return _parse_legacy_custom(text[len("custom:"):])
    if text.startswith("custom:"):
        text = text[len("custom:"):]
    fields = text.split()
    if any(f in ("lnfold", "fp8") or f.startswith("gemms=cutlass+cublaslt+split") for f in fields):
        return _parse_legacy_mix(fields)
    c = dict(DEFAULTS)
    for f in fields:
        key, eq, value = f.partition("=")
        if key in SWITCHES:
            if value not in ("", "on", "off"):
                raise FormError(f"{key} takes on or off, not {value!r}")
            c[key] = value != "off"
        elif key in RUNNER_VERSIONS and value == "none":
            c[key] = ""
        elif key in VERSIONS and eq and value:
            c[key] = value
        elif key == "blocks" and value in LEGACY_BLOCKS:
            c.update(blocks="tiled", **LEGACY_BLOCKS[value])
        elif key in CHOICES and value in CHOICES[key]:
            c[key] = value
        elif key in SETS and value and set(value.split("+")) <= set(SETS[key]):
            members = set(value.split("+"))
            c[key] = "+".join(m for m in SETS[key] if m in members)
        elif key in COUNTS and value.isdigit() and int(value) > 0:
            c[key] = int(value)
        elif key == "layers" and value.isdigit():
            continue  # a quick check's layer count, not part of the composition
        else:
            raise FormError(f"unknown field {f!r} in {text!r}")
    return c


def _parse_legacy_custom(body: str) -> dict:
    parts = body.split(",")
    c = dict(DEFAULTS, buffers="per_layer")
    for p in parts:
        key, eq, value = p.partition("=")
        if eq and key in ("pe", "ln", "attn", "mlp"):
            c[key] = value
        elif key == "streams" and eq:
            c["streams"] = int(value)
        elif p in LEGACY_WORDS:
            c.update(LEGACY_WORDS[p])
        else:
            raise FormError(f"unknown word {p!r} in custom:{body}")
    return c


def _parse_legacy_mix(fields: list[str]) -> dict:
    c = {k: None for k in DEFAULTS}
    c.update(blocks="fp16", gemms="cublaslt", pdl=False, l2_prefetch=False, attn_e4m3=False, qkv_e4m3=False)
    c.update({k: DEFAULTS[k] for k in FIELDS if k.startswith("tile_")})  # older than the tiled blocks
    for f in fields:
        key, eq, value = f.partition("=")
        if eq and key in ("pe", "ln", "attn", "mlp"):
            c[key] = value
        elif key == "gemms" and value in LEGACY_GEMMS:
            c["gemms"] = LEGACY_GEMMS[value]
        elif key == "layers":
            continue
        elif f in LEGACY_WORDS:
            c.update(LEGACY_WORDS[f])
        else:
            raise FormError(f"unknown word {f!r} in {' '.join(fields)!r}")
    return c


def to_string(c: dict) -> str:
    """The text form of a composition dict (fields at their defaults left out)."""
    out = [f"{k}={c[k]}" for k in VERSIONS if FIELDS[k]["scope"] == "forward" or c[k]]
    for k in FIELDS:
        if k in VERSIONS or c[k] == DEFAULTS[k]:
            continue
        out.append(k if k in SWITCHES else f"{k}={c[k]}")
    return " ".join(out)


def read_table(path: Path = TABLE) -> list[dict]:
    """The rows of steps.tsv: name, kind (step | alias), parent, delta, composition, measured, what."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    rows = list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or set(rows[0]) != {"name", "kind", "parent", "delta", "composition", "measured", "what"}:
        raise FormError(f"{path}: not the step table (regenerate it with --list-steps)")
    return rows


def steps(path: Path = TABLE) -> list[dict]:
    return [r for r in read_table(path) if r["kind"] == "step"]


def ladder(path: Path = TABLE) -> list[str]:
    """The step names in table order (parents before children)."""
    return [r["name"] for r in steps(path)]


def parents(path: Path = TABLE) -> dict[str, str]:
    """Each step's parent ("" for the root)."""
    return {r["name"]: r["parent"] for r in steps(path)}


def aliases(path: Path = TABLE) -> dict[str, dict]:
    """alias name -> {step, measured}."""
    return {r["name"]: {"step": r["parent"], "measured": r["measured"]}
            for r in read_table(path) if r["kind"] == "alias"}


def alias_field(alias: str, field: str, path: Path = TABLE) -> str:
    """One field of the composition an alias stands for (fastest_fp16's `mlp`: the MLP version
    of the fp16 answer)."""
    rows = {r["name"]: r for r in read_table(path)}
    if rows.get(alias, {}).get("kind") != "alias":
        raise KeyError(f"{path}: no alias '{alias}'")
    return parse(rows[alias]["composition"])[field]


# The image sizes at which an fp16 step must pass timm parity with every parameter drawn
# (experiments/accuracy/timm_parity.py) to stand for timm's model.
PARITY_SIZES = (224, 384)


class ParityFileError(ValueError):
    """A parity.json that is not a parity result; `path` names it."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: not a parity result ({why})")
        self.path, self.why = path, why


def parity_files(results: Path) -> list[tuple[Path, dict]]:
    """(path, result) of every timm parity file of a step (experiments/accuracy/timm_parity.py) under the
    run folders of `results`, in name order (dated folders: oldest first). A custom mix
    (--compose) vouches for no step and is left out."""
    import json
    out = []
    for f in sorted(results.glob("*/**/timm_parity*/parity.json"), key=lambda f: f.relative_to(results).parts):
        try:
            j = json.loads(f.read_text())
        except ValueError as e:
            raise ParityFileError(f, str(e)) from None
        if "version" in j and not j.get("compose"):
            out.append((f, j))
    return out


def parity_verdicts(results: Path) -> dict[str, dict[int, bool]]:
    """step -> image size -> the verdict of its newest timm parity file with every parameter drawn.
    The newest counts because the draw grew stricter (6ae25e7: weights of 1/sqrt(fan-in), GELU
    over its whole curve), under which e14's tanh GELU fails where it had passed."""
    out: dict[str, dict[int, bool]] = {}
    for _, j in parity_files(results):
        if j.get("weight_set") == "random":
            out.setdefault(j["version"], {})[int(j["image_size"])] = j.get("passed") is True
    return out


def models_timm(version: str, verdicts: dict[str, dict[int, bool]]) -> bool:
    """Whether a step computes timm's model as the study judges it: its newest timm parity with
    every parameter drawn passes at each of PARITY_SIZES and fails at no size. FP8 steps are
    judged by their own accuracy (experiments/accuracy/fp8_accuracy.py), not by this."""
    by_size = verdicts.get(version, {})
    return all(by_size.get(px) for px in PARITY_SIZES) and all(by_size.values())


def fails_parity(version: str, verdicts: dict[str, dict[int, bool]]) -> bool:
    """Whether the step's newest timm parity with every parameter drawn fails at some size."""
    return not all(verdicts.get(version, {}).values())


# Steps that left the build (stages/encoder/TRIED.md) -> their parent: committed rows still name them.
RETIRED = {"e11_split_gemms": "e10_fastest_gemms", "e31_small_m": "e19_exact_gelu"}


def analysis_ladder(path: Path = TABLE) -> list[str]:
    """ladder() with each retired step after its parent, for reading rows of any date."""
    out = ladder(path)
    for name, parent in RETIRED.items():
        out.insert(out.index(parent) + 1, name)
    return out


def analysis_parents(path: Path = TABLE) -> dict[str, str]:
    return {**parents(path), **RETIRED}


def fp16_steps_from(first: str, path: Path = TABLE) -> list[str]:
    """The fp16 steps (and retired ones) from `first` on, in analysis_ladder order."""
    table = {r["name"]: r for r in steps(path)}
    names = analysis_ladder(path)
    return [v for v in names[names.index(first):]
            if v not in table or precision(parse(table[v]["composition"])) == "fp16"]


def _timed(x) -> bool:
    return x is not None and x == x  # not None, not NaN


def fastest_at(candidates, batch, median, spread, parent_of=None):
    """The fastest of `candidates` at `batch` by the rule that names the answer: the fastest timed
    candidate, unless its parent (analysis_parents) is a candidate timed there that it does not beat
    beyond the rounds' spread, its slowest round not faster than the parent's fastest; then the
    parent, and so up the chain: a step that equals its parent does not take the title on a draw.
    median(v, b) -> us (None or NaN: no row); spread(v, b) -> (fastest round, slowest round) in us.
    None where no candidate is timed."""
    parent_of = analysis_parents() if parent_of is None else parent_of
    timed = [v for v in candidates if _timed(median(v, batch))]
    if not timed:
        return None
    top = min(timed, key=lambda v: median(v, batch))
    while parent_of.get(top) in timed:
        parent = parent_of[top]
        if spread(top, batch)[1] < spread(parent, batch)[0]:
            break
        top = parent
    return top


def fastest(candidates, batches, median, spread, parent_of=None):
    """The one of `candidates` fastest (fastest_at) at the most of `batches`, a tie going to the
    tied step fastest_at the largest batch that times one: "the fastest" step of a sitting, as the
    aliases and the answer name it, so that one batch's draw does not rename it. None where no
    candidate is timed."""
    parent_of = analysis_parents() if parent_of is None else parent_of
    wins = {}
    for b in batches:
        top = fastest_at(candidates, b, median, spread, parent_of)
        if top is not None:
            wins[top] = wins.get(top, 0) + 1
    if not wins:
        return None
    tied = [v for v in candidates if wins.get(v) == max(wins.values())]
    for b in sorted(batches, reverse=True):
        top = fastest_at(tied, b, median, spread, parent_of)
        if top is not None:
            return top
    return None


def precision(c: dict) -> str:
    return "fp8_e4m3" if c.get("blocks") == "fp8" else "fp16"


def is_fp8_step(version: str) -> bool:
    """Whether a step of the table runs its block GEMMs in FP8 (False for anything else)."""
    table = {r["name"]: r for r in steps()}
    return version in table and precision(parse(table[version]["composition"])) == "fp8_e4m3"


def is_graph_version(version: str) -> bool | None:
    """Whether a step or custom version replays a CUDA graph; None for a name it does not know."""
    table = {r["name"]: r for r in steps()}
    if version in table:
        return parse(table[version]["composition"])["graph"]
    if version in RETIRED:
        return is_graph_version(RETIRED[version])
    if version.startswith("custom:"):
        return bool(parse(version)["graph"])
    return None


NOTE_MIX = re.compile(r"\s*(pe=\S+ ln=\S+(?: attn=\S+)?(?: mlp=\S+)?(?: (?![a-z_]+:)[a-z0-9_]+(?:=[\w+]+)?)*)")


def note_mix(note: str) -> str | None:
    """The composition text at the start of a bench row's note (any form), or None."""
    m = NOTE_MIX.match(note)
    return m.group(1).strip() if m else None
