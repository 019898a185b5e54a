#!/usr/bin/env python3
"""Which cuDNN the cuDNN versions are built against (./study passes it as -Dcudnn_root).

The cuDNN that PyTorch loads where a Python with torch ships one (the `nvidia-cudnn-cu*` wheel
beside torch in its site-packages: nvidia/cudnn/include and nvidia/cudnn/lib), so that the
library baseline is the one PyTorch's anchors measure; otherwise the newest system cuDNN by
the CUDNN_MAJOR / CUDNN_MINOR / CUDNN_PATCHLEVEL of each candidate's cudnn_version.h.

    find_cudnn.py [--python PY]... [--system ROOT]...

prints two lines: the chosen root (empty when there is none) and why it was chosen. A root
holds include/ (or include/<multiarch>/) with cudnn.h and cudnn_version.h, and lib64/, lib/ or
lib/<multiarch>/ with libcudnn.so.9 or libcudnn.so; meson.build reads cudnn_root the same way.
"""
import os
import re
import subprocess
import sys

MULTIARCH = ("x86_64-linux-gnu", "aarch64-linux-gnu")
LIB_NAMES = ("libcudnn.so.9", "libcudnn.so")


def layout(root):
    """(include folder, library file) of the cuDNN under root, or None."""
    incs = [os.path.join(root, "include")] + [os.path.join(root, "include", m) for m in MULTIARCH]
    libs = [os.path.join(root, "lib64"), os.path.join(root, "lib")] + \
        [os.path.join(root, "lib", m) for m in MULTIARCH]
    inc = next((d for d in incs if os.path.isfile(os.path.join(d, "cudnn.h"))
                and os.path.isfile(os.path.join(d, "cudnn_version.h"))), None)
    lib = next((os.path.join(d, n) for d in libs for n in LIB_NAMES
                if os.path.isfile(os.path.join(d, n))), None)
    return (inc, lib) if inc and lib else None


def header_version(include_dir):
    """(major, minor, patch) from cudnn_version.h, or None."""
    try:
        text = open(os.path.join(include_dir, "cudnn_version.h")).read()
    except OSError:
        return None
    parts = []
    for name in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        m = re.search(r"^\s*#\s*define\s+%s\s+(\d+)" % name, text, re.M)
        if not m:
            return None
        parts.append(int(m.group(1)))
    return tuple(parts)


def version_name(v):
    return ".".join(map(str, v))


# Run by the candidate Python: the site-packages folder holding torch, without importing it.
_TORCH_SITE = ("import importlib.util, os\n"
               "s = importlib.util.find_spec('torch')\n"
               "print(os.path.dirname(list(s.submodule_search_locations)[0]) if s and s.submodule_search_locations else '')\n")


def torch_cudnn(python, env=None):
    """The nvidia/cudnn folder beside the torch of `python`, when it holds a cuDNN; else None."""
    try:
        out = subprocess.run([python, "-c", _TORCH_SITE], capture_output=True, text=True,
                             timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    site = out.stdout.strip() if out.returncode == 0 else ""
    if not site:
        return None
    root = os.path.join(site, "nvidia", "cudnn")
    return root if layout(root) else None


def choose(pythons, system_roots, env=None):
    """(root, reason): PyTorch's cuDNN where one of `pythons` has it, else the newest system one."""
    asked = set()
    for py in pythons:
        if not py or py in asked:
            continue
        asked.add(py)
        root = torch_cudnn(py, env)
        if root:
            v = header_version(layout(root)[0])
            if v:
                return root, "cuDNN %s of the PyTorch of %s (the library its anchors load)" % (
                    version_name(v), py)
    found, seen = [], set()
    for root in system_roots:
        real = os.path.realpath(root) if root else ""
        if not real or real in seen:
            continue
        seen.add(real)
        lay = layout(root)
        v = lay and header_version(lay[0])
        if v:
            found.append((v, root))
    if not found:
        return "", "no cuDNN found (no PyTorch with one; none in %s)" % ", ".join(r for r in system_roots if r)
    best_v, best_root = max(found, key=lambda f: f[0])  # the first of equal versions
    others = ", ".join("%s at %s" % (version_name(v), r) for v, r in found if r != best_root)
    return best_root, "cuDNN %s, the newest system cuDNN (no PyTorch with its own cuDNN%s)" % (
        version_name(best_v), "; also " + others if others else "")


def main(argv):
    pythons, systems = [], []
    it = iter(argv)
    for a in it:
        if a == "--python":
            pythons.append(next(it, ""))
        elif a == "--system":
            systems.append(next(it, ""))
        else:
            print("usage: find_cudnn.py [--python PY]... [--system ROOT]...", file=sys.stderr)
            return 2
    root, why = choose(pythons, systems)
    print(root)
    print(why)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
