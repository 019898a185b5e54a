#!/usr/bin/env python3
"""One Compute Sanitizer check of one executable: `compute-sanitizer --tool TOOL` on a bench run at
a small odd shape (docs/sanitizers.md says which tools run where, and why). Passes only when the
tool reports no error and the program itself succeeds.

The program runs once without the tool first: it must pass plainly, and the CUTLASS layer's
per-shape kernel search (minutes under racecheck, and most of the host's memory) is then read
from its cache (~/.cache/vit-cuda-study), so the tool checks the kernels the program runs, not
the search.

  tests/sanitize.py TOOL EXECUTABLE [ARGS...]

Exit 77 (skip) where there is no compute-sanitizer or no GPU, unless STUDY_REQUIRE_GPU=1 (the GPU
job), which makes that a failure.
"""
import os
import shutil
import subprocess
import sys

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
ERROR_EXIT = 99


def find_sanitizer():
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        candidate = os.path.join(root, "bin", "compute-sanitizer")
        if root and os.access(candidate, os.X_OK):
            return candidate
    return None


def skip(why):
    if os.environ.get("STUDY_REQUIRE_GPU") == "1":
        print(f"{why}: failing (STUDY_REQUIRE_GPU=1)")
        return 1
    print(f"{why}: skipping")
    return 77


def main(argv):
    if len(argv) < 3 or argv[1] not in TOOLS:
        sys.exit(__doc__)
    tool, program = argv[1], argv[2:]
    sanitizer = find_sanitizer()
    if not sanitizer:
        return skip("no compute-sanitizer on PATH or in the CUDA toolkit")
    if not os.path.exists("/dev/nvidiactl") and not os.path.exists("/dev/dxg"):
        return skip("no NVIDIA GPU device node")
    plain = subprocess.run(program).returncode
    if plain != 0:
        print(f"the program failed without the tool (exit {plain})")
        return 1
    cmd = [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "20"]
    print("$ " + " ".join(cmd + program), flush=True)
    rc = subprocess.run(cmd + program).returncode
    if rc == ERROR_EXIT:
        print(f"{tool} reported errors")
        return 1
    if rc != 0:
        print(f"the program failed under {tool} (exit {rc})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
