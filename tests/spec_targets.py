#!/usr/bin/env python3
"""Every committed spec names only what this build can make: the ninja targets each spec's rows
need (studylib.specs.build_targets: the benches, their GPU tests, the Python module), as
`experiments/gpu_job.sh` builds them with STUDY_TARGETS=auto, are targets of the configured
build. The module's target is checked only where the build configured the module.
Usage: spec_targets.py NINJA BUILD_DIR"""
import subprocess
import sys

from studylib import specs


def main(ninja, build_dir):
    listing = subprocess.run([ninja, "-C", build_dir, "-t", "targets", "all"], capture_output=True,
                             text=True, check=True).stdout
    known = {line.rsplit(": ", 1)[0] for line in listing.splitlines() if ": " in line}
    unknown, checked = [], 0
    for path in sorted(specs.SPECS_DIR.glob("*.toml")):
        for target in specs.build_targets(specs.load_spec(path))[0]:
            if target == specs.MODULE_TARGET and target not in known:
                continue  # the module is not configured here (no Python headers or pybind11)
            checked += 1
            if target not in known:
                unknown.append(f"{path.name}: {target}")
    if unknown:
        print("specs name targets this build does not know:\n  " + "\n  ".join(unknown), file=sys.stderr)
        return 1
    print(f"{checked} targets of the specs, all known to the build")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[-1])
    sys.exit(main(*sys.argv[1:]))
