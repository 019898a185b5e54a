#!/usr/bin/env python3
"""Measured rungs stay as they were measured: the PTX of every version's kernel.cu (sm_90a, the
build's flags less -lineinfo) must hash to what stages/frozen_rungs.tsv records, so an edit of a
header that several rungs share (attention/flash.cuh, patch_embed/implicit_wgmma.cuh,
common/device/reduce.cuh, ...) cannot change an old rung unseen. A version missing from the file is
reported as not frozen yet (a new one, until its first measurement: then --update).

  tests/frozen_rungs.py NVCC ROOT            check (exit 1 on a changed rung, 77 when this nvcc
                                             is not the release the file was made with)
  tests/frozen_rungs.py NVCC ROOT --update   rewrite the file from this tree
"""
import concurrent.futures
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ANON = re.compile(r"(_GLOBAL__N__|_INTERNAL_)[0-9a-f]{8}_")
FLAGS = ["-std=c++17", "-ptx", "-gencode", "arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr",
         "-DSTUDY_SM90A"]


def nvcc_release(nvcc):
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release [\d.]+, V[\d.]+", out)
    return m.group(0) if m else "unknown"


def rungs(root):
    """(family/version, kernel.cu) for every listed version with device code of its own."""
    out = []
    for defs in sorted((root / "stages").glob("*/versions.def")):
        for v in re.findall(r"^STUDY_VERSION\((\w+)\)", defs.read_text(), flags=re.M):
            kernel = defs.parent / v / "kernel.cu"
            if kernel.is_file():
                out.append((f"{defs.parent.name}/{v}", kernel))
    return out


def fingerprint(nvcc, root, kernel):
    with tempfile.TemporaryDirectory() as d:
        ptx = Path(d) / "kernel.ptx"
        r = subprocess.run([nvcc] + FLAGS + ["-I", str(root / "stages"), "-I", str(root / "common"), str(kernel),
                                             "-o", str(ptx)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{kernel}: nvcc failed\n{r.stderr[-2000:]}")
        text = ptx.read_text()
    # Comment lines name the compiler build, and the mangled names of internal-linkage entities
    # carry a hash of the file's path (_GLOBAL__N__<8 hex>_, _INTERNAL_<8 hex>_): neither is the
    # rung's code.
    body = "\n".join(ANON.sub(r"\1", line) for line in text.splitlines() if not line.startswith("//"))
    return hashlib.sha256(body.encode()).hexdigest()


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    nvcc, root, update = argv[1], Path(argv[2]).resolve(), "--update" in argv[3:]
    table = root / "stages" / "frozen_rungs.tsv"
    release = nvcc_release(nvcc)
    recorded, made_with = {}, None
    if table.is_file():
        for line in table.read_text().splitlines():
            if line.startswith("# nvcc: "):
                made_with = line[len("# nvcc: "):]
            elif line and not line.startswith("#"):
                name, digest = line.split("\t")
                recorded[name] = digest
    if not update and made_with != release:
        print(f"skip: {table.name} was made with nvcc {made_with}, this is {release}: PTX differs between "
              f"releases (tests/frozen_rungs.py NVCC ROOT --update on the new one)")
        return 77
    todo = rungs(root)
    with concurrent.futures.ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        got = dict(zip((n for n, _ in todo), pool.map(lambda nk: fingerprint(nvcc, root, nk[1]), todo)))
    if update:
        lines = ["# The PTX fingerprint (sha256, comment lines left out) of every version's kernel.cu as",
                 "# measured; tests/frozen_rungs.py checks it. Regenerate only for a new rung or nvcc release.",
                 f"# nvcc: {release}"] + [f"{n}\t{d}" for n, d in got.items()]
        table.write_text("\n".join(lines) + "\n")
        print(f"wrote {len(got)} fingerprints to {table}")
        return 0
    changed = [n for n, d in got.items() if n in recorded and recorded[n] != d]
    for n in [n for n in got if n not in recorded]:
        print(f"not frozen yet: {n} (add it with --update once it is measured)")
    for n in changed:
        print(f"FAIL {n}: its PTX changed since it was measured; a changed kernel is a new version")
    print(f"{len(got)} rungs compiled, {len(changed)} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
