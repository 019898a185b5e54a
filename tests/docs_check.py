#!/usr/bin/env python3
"""The project's documents stand alone and its README's commands work as shown:
- no tracked file cites notes that are not in the repository (planning notes kept elsewhere);
- the README's `./study slurm` example gives --results, and `./study slurm` without it is
  refused with one usage line naming it (before any build);
- the README says where the executables are;
- `./study run` knows every preset the README names and refuses an unknown one at once;
- every run folder under experiments/results has a README whose hand-written part (before the
  generated summary) says what the run is for.
Usage: docs_check.py REPO_ROOT"""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

# Names of planning notes that live outside the repository.
OUTSIDE = re.compile(r"\b(DESIGN|TARGETS|STUDY|TOOLING|STYLE)\.md\b|\bDESIGN\b")


def main(root):
    root = Path(root).resolve()
    failures = []
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        path = root / f
        if f == "tests/docs_check.py" or not path.is_file() or path.suffix in (
                ".png", ".safetensors", ".bin", ".csv"):
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                failures.append(f"{f}:{n}: cites a note that is not in the repository: {line.strip()[:100]}")

    readme = (root / "README.md").read_text()
    slurm = [l for l in readme.splitlines() if l.strip().startswith("./study slurm")]
    if not slurm:
        failures.append("README.md: no `./study slurm` example")
    failures += [f"README.md: `./study slurm` example without --results: {l.strip()}"
                 for l in slurm if "--results" not in l]
    # Refused before anything is built: a script that starts building instead is stopped
    # (with everything it started) after a few seconds.
    proc = subprocess.Popen([str(root / "study"), "slurm", "layernorm_quick", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=20)
        lines = err.strip().splitlines()
        if proc.returncode != 2 or len(lines) != 1 or "--results DIR" not in lines[0]:
            failures.append(f"./study slurm without --results: rc={proc.returncode}, "
                            f"stderr={lines}")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        failures.append("./study slurm without --results did not refuse at once (it went on "
                        "to build)")
    # Every preset the README names is one `./study run` knows, and an unknown one is refused
    # with the list, before anything is built.
    presets = set(re.findall(r"\./study run (\w+)", readme))
    spec_dir = root / "experiments" / "specs"
    if "final" in presets and not sorted(spec_dir.glob("final*.toml")):
        failures.append("README.md names `./study run final` but experiments/specs has no final*.toml")
    proc = subprocess.Popen([str(root / "study"), "run", "bogus"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=20)
        if proc.returncode == 0 or "unknown preset 'bogus' (quick, full or final)" not in err:
            failures.append(f"./study run bogus: rc={proc.returncode}, stderr={err.strip()[:200]}")
        for name in presets - {"quick", "full", "final"}:
            failures.append(f"README.md names `./study run {name}`, which is no preset")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        failures.append("./study run bogus did not refuse at once (it went on to build)")
    for where in ("build/stages/<family>/<family>_<version>", "build/common/ceilings"):
        if where not in readme:
            failures.append(f"README.md does not say where the executables are ({where})")

    results = root / "experiments" / "results"
    for run in sorted(d for d in results.iterdir() if d.is_dir()):
        readme_path = run / "README.md"
        if not readme_path.is_file():
            failures.append(f"{run.relative_to(root)}: no README.md (what the run is for, how it was made)")
            continue
        text = readme_path.read_text()
        written = text.split("<!-- run-summary:start -->")[0].split("\n", 1)[-1].strip()
        if len(written) < 80:
            failures.append(f"{readme_path.relative_to(root)}: no hand-written part before the generated "
                            "summary (what the run is for, how it was made)")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
