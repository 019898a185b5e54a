#!/usr/bin/env python3
"""tests/mutants.py on fake test executables (no GPU): a bug its test catches is reported caught, a
bug it misses fails the suite, a failing control fails it, a build without test hooks is refused;
and the suite's list of bugs is the one common/harness/test_hooks.cpp can plant."""
import contextlib
import io
import json
import re
import tempfile
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
import mutants  # beside this script, which runs by path

FAKE = """#!/bin/sh
# Fails when a bug is planted ({catches}), or always ({broken}).
[ "{broken}" = yes ] && {{ echo "ERROR: CHECK( cmp.ok ) is NOT correct!"; exit 1; }}
if [ -n "$STUDY_PLANT" ] && [ "{catches}" = yes ]; then echo "ERROR: CHECK( s.ok ) is NOT correct!"; exit 1; fi
exit 0
"""


def fake_build(root, hooks=True, catches=True, broken_control=False):
    build = Path(root) / "build"
    (build / "meson-info").mkdir(parents=True)
    (build / "meson-info" / "intro-buildoptions.json").write_text(
        json.dumps([{"name": "test_hooks", "value": hooks}, {"name": "buildtype", "value": "release"}]))
    for _, exe, _, _ in mutants.MUTANTS:
        p = build / exe
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(FAKE.format(catches="yes" if catches else "no", broken="yes" if broken_control else "no"))
        p.chmod(0o755)
    return build


def run_suite(*args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            rc = mutants.main(list(args))
        except SystemExit as e:
            rc = e.code
    return rc, buf.getvalue()


class MutantsTest(unittest.TestCase):
    def test_every_plant_has_a_mutant_and_back(self):
        src = (HERE.parent / "common" / "harness" / "test_hooks.cpp").read_text()
        plants = set(re.findall(r'^\s*\{"(\w+)",', src, flags=re.M))
        self.assertGreaterEqual(len(plants), 11)
        self.assertEqual(plants, {m[0] for m in mutants.MUTANTS})

    def test_all_caught(self):
        with tempfile.TemporaryDirectory() as d, mock.patch.object(mutants, "gpu_count", return_value=2):
            rc, out = run_suite("--build-dir", str(fake_build(d)), "--out", d)
            self.assertEqual(rc, 0, out)
            report = (Path(d) / "mutants.md").read_text()
            self.assertIn("Every bug caught", report)
            self.assertNotIn("not run", report)
            self.assertEqual(report.count("| yes |"), len(mutants.MUTANTS) + len({(m[1], m[2]) for m in mutants.MUTANTS}))
            self.assertTrue((Path(d) / "mutants.log").is_file())

    def test_two_gpu_bugs_not_run_on_one_gpu(self):
        with tempfile.TemporaryDirectory() as d, mock.patch.object(mutants, "gpu_count", return_value=1):
            rc, out = run_suite("--build-dir", str(fake_build(d)), "--out", d)
            self.assertEqual(rc, 0, out)
            report = (Path(d) / "mutants.md").read_text()
            for bug in mutants.TWO_GPUS:
                self.assertIn(f"| `{bug}` |", report)
                self.assertIn(bug, report.strip().splitlines()[-1])  # the verdict says it was not run
            self.assertIn("not run | needs two GPUs, this node has 1", report)

    def test_the_record_names_the_builds_commit(self):
        with tempfile.TemporaryDirectory() as d:
            build = fake_build(d)
            (build / "common" / "build_info.cpp").write_text('const char* const kBuildCommit = "0123456789ab";\n')
            rc, out = run_suite("--build-dir", str(build), "--out", d, "--only", "prefetch_noop")
            self.assertEqual(rc, 0, out)
            self.assertIn("of commit `0123456789ab`", (Path(d) / "mutants.md").read_text())
            (build / "common" / "build_info.cpp").unlink()
            run_suite("--build-dir", str(build), "--out", d, "--only", "prefetch_noop")
            self.assertIn("of commit `unknown`", (Path(d) / "mutants.md").read_text())

    def test_a_missed_bug_fails(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out = run_suite("--build-dir", str(fake_build(d, catches=False)), "--out", d)
            self.assertEqual(rc, 1)
            self.assertIn("**no**", (Path(d) / "mutants.md").read_text())

    def test_a_failing_control_fails(self):
        with tempfile.TemporaryDirectory() as d:
            rc, _ = run_suite("--build-dir", str(fake_build(d, broken_control=True)), "--out", d)
            self.assertEqual(rc, 1)

    def test_a_build_without_hooks_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            rc, _ = run_suite("--build-dir", str(fake_build(d, hooks=False)), "--out", d)
            self.assertIn("without test hooks", str(rc))

    def test_only_one(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out = run_suite("--build-dir", str(fake_build(d)), "--out", d, "--only", "prefetch_noop")
            self.assertEqual(rc, 0, out)
            self.assertIn("prefetch_noop", (Path(d) / "mutants.md").read_text())
            rc, _ = run_suite("--build-dir", str(fake_build(Path(d) / "x")), "--out", d, "--only", "no_such")
            self.assertIn("no such bug", str(rc))


if __name__ == "__main__":
    unittest.main()
