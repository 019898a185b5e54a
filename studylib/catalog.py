"""Which versions a family has, in ladder order, and of which kind: the study's own, a library
call, or a PyTorch anchor."""
from __future__ import annotations

import re

from studylib import DataError, steps
from studylib.paths import STAGES_DIR

ANCHOR_PREFIX = "pytorch_"

LIBRARY_PREFIXES = ("cudnn", "cublas")


def is_anchor(version: str) -> bool:
    return str(version).startswith(ANCHOR_PREFIX)


def is_library(version: str) -> bool:
    return str(version).startswith(LIBRARY_PREFIXES)


def is_own(version: str) -> bool:
    """A version written in this repository (not a library call, not a PyTorch anchor)."""
    return not is_anchor(version) and not is_library(version)


def family_versions(family: str) -> list[str]:
    """A family's versions in ladder order, from its one list (stages/<family>/versions.def; the
    encoder's from its step table, stages/encoder/steps.tsv)."""
    if family == "encoder":
        return steps.ladder()
    path = STAGES_DIR / family / "versions.def"
    try:
        text = path.read_text()
    except OSError as e:
        raise DataError(f"{path}: cannot read the family's version list ({e.strerror})")
    return re.findall(r"^STUDY_VERSION\((\w+)\)", text, flags=re.M)


def version_order(present, preferred) -> list[str]:
    """The family's ladder order first, then anything new (a version added after the notebook
    was written still shows up), anchors last."""
    present = list(dict.fromkeys(present))
    known = [v for v in preferred if v in present]
    extra = sorted(v for v in present if v not in preferred)
    order = known + extra
    return [v for v in order if not is_anchor(v)] + [v for v in order if is_anchor(v)]
