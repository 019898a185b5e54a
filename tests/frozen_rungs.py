#!/usr/bin/env python3
"""Measured rungs stay as they were measured: the PTX of every version's kernel.cu (sm_90a, the
build's flags less -lineinfo) must hash to what stages/frozen_rungs.tsv records, so an edit of a
header that several rungs share (attention/flash.cuh, patch_embed/implicit_wgmma.cuh,
common/device/reduce.cuh, ...) cannot change an old rung unseen. The tile-scheduled encoder steps
(blocks=tiled) are rungs too: each is one instantiation of stages/encoder/tiled.cu's kernel, found
by its form's code (tiled.hpp) in the entry's mangled name, and its PTX (the timed and the
task-clock instantiations, names of symbols, labels and the local depot left out) is hashed the
same way. A version missing from the file is reported as not frozen yet (a new one, until its
first measurement: then --update).

  tests/frozen_rungs.py NVCC ROOT            check (exit 1 on a changed rung, 77 when this nvcc
                                             is not the release the file was made with)
  tests/frozen_rungs.py NVCC ROOT --update   rewrite the file from this tree
(with PYTHONPATH=ROOT: it reads the step table through studylib)
"""
import concurrent.futures
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from studylib import steps as step_table  # the step table and the composition's fields

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


def compile_ptx(nvcc, root, source):
    with tempfile.TemporaryDirectory() as d:
        ptx = Path(d) / "kernel.ptx"
        r = subprocess.run([nvcc] + FLAGS + ["-I", str(root / "stages"), "-I", str(root / "common"), str(source),
                                             "-o", str(ptx)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{source}: nvcc failed\n{r.stderr[-2000:]}")
        return ptx.read_text()


def tiled_steps():
    """(encoder/step, form code) of every tile-scheduled step: the tile_ fields' value indexes in
    composition.tsv's order, mixed radix, the first field lowest (tiled.hpp's code())."""
    fields = step_table.FIELDS
    tile = [k for k in fields if k.startswith("tile_")]
    out = []
    for r in step_table.steps():
        c = step_table.parse(r["composition"])
        if c["blocks"] != "tiled":
            continue
        code = 0
        for k in reversed(tile):
            code = code * len(fields[k]["values"]) + fields[k]["values"].index(c[k])
        out.append((f"encoder/{r['name']}", code))
    return out


SYMBOL = re.compile(r"_Z[A-Za-z0-9_]+")


def entries(text):
    """{entry name: its PTX}: each .entry with the module-level declarations it names, every
    mangled symbol renamed by its order of first use in the entry, and the labels and local depot
    without the function's index in the module: what is left is the entry's code, not its names."""
    lines = [line for line in text.splitlines() if not line.startswith("//")]
    declared, bodies, i = {}, {}, 0
    while i < len(lines):
        m = re.match(r"\s*(\.visible\s+)?\.entry\s+(\S+?)\(", lines[i])
        if m:
            # The entry ends where its braces close: inline asm blocks open and close their own
            # at the start of a line, and vector operands close theirs on the same line.
            body, depth, opened = [], 0, False
            while not (opened and depth == 0):
                body.append(lines[i])
                depth += lines[i].count("{") - lines[i].count("}")
                opened = opened or depth > 0
                i += 1
            bodies[m.group(2)] = body
            continue
        elif re.search(r"\.(shared|global|const)\b", lines[i]):
            for sym in SYMBOL.findall(lines[i]):
                declared.setdefault(sym, lines[i])
        i += 1
    out = {}
    for name, body in bodies.items():
        order = {}
        for sym in SYMBOL.findall("\n".join(body)):
            order.setdefault(sym, f"S{len(order)}")
        text = "\n".join([declared[s] for s in order if s in declared] + body)
        text = SYMBOL.sub(lambda m: order[m.group(0)], text)
        text = re.sub(r"\$L__BB\d+_", "$L__BB_", text)
        out[name] = re.sub(r"__local_depot\d+", "__local_depot", text)
    return out


def tiled_fingerprints(nvcc, root):
    """{encoder/step: fingerprint} of the tile-scheduled steps' instantiations."""
    found = entries(compile_ptx(nvcc, root, root / "stages" / "encoder" / "tiled.cu"))
    out = {}
    for name, code in tiled_steps():
        both = [t for e, t in sorted(found.items()) if re.search(rf"tiled_kernelILj{code}ELb[01]EE", e)]
        if len(both) != 2:
            raise RuntimeError(f"{name}: tiled.cu has {len(both)} instantiations of form {code}, not 2")
        out[name] = hashlib.sha256("\n".join(both).encode()).hexdigest()
    return out


def fingerprint(nvcc, root, kernel):
    text = compile_ptx(nvcc, root, kernel)
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
        tiled = pool.submit(tiled_fingerprints, nvcc, root)
        got = dict(zip((n for n, _ in todo), pool.map(lambda nk: fingerprint(nvcc, root, nk[1]), todo)))
        got.update(tiled.result())
    if update:
        lines = ["# The PTX fingerprint (sha256, comment lines left out) of every version's kernel.cu as",
                 "# measured, and of each tile-scheduled encoder step's instantiation of tiled.cu;",
                 "# tests/frozen_rungs.py checks it. Regenerate only for a new rung or nvcc release.",
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
