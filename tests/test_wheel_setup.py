#!/usr/bin/env python3
"""The wheel's build set-up (pyproject.toml's meson-python arguments) fails at set-up, saying what
to fetch, when the CUTLASS headers are missing: the module's default steps run CUTLASS kernels,
and a module built without them would only refuse them at run time. Also: the set-up builds no
test program (no doctest needed).

  tests/test_wheel_setup.py MESON SOURCE_ROOT
"""
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python before 3.11
    tomllib = None


def main(argv):
    meson, root = argv[1], Path(argv[2])
    if tomllib is None:
        print("SKIP: this Python has no tomllib (3.11 on) to read pyproject.toml")
        return 77
    args = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["meson-python"]["args"]["setup"]
    for want in ("-Dpython_module=enabled", "-Dtests=false", "-Dcutlass=enabled"):
        if want not in args:
            print(f"FAIL: pyproject.toml's set-up arguments {args} lack {want}")
            return 1
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([meson, "setup", str(Path(d) / "build"), str(root), *args,
                            f"-Dcutlass_include={Path(d) / 'no_cutlass'}"],
                           capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    if r.returncode == 0:
        print("FAIL: the wheel's set-up succeeded without the CUTLASS headers")
        return 1
    if "CUTLASS kernels requested" not in out or "./study setup" not in out:
        print("FAIL: the wheel's set-up failed, but not with the CUTLASS message:\n" + out[-3000:])
        return 1
    print("the wheel's set-up without CUTLASS headers fails: " + next(
        line for line in out.splitlines() if "CUTLASS kernels requested" in line).strip()[:200])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
