#!/usr/bin/env python3
"""tests/sanitize.py on a fake bench and a fake compute-sanitizer (no GPU): a clean run passes; a
report by the tool, a failure with or without the tool, a bench that declines the shape (a
`skipped` row, exit 0) and a bench that writes no row each fail; a doctest program passes only
where at least one test case ran and passed, with and without the tool."""
import contextlib
import os
import io
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
import sanitize  # beside this script, which runs by path

# The bench: writes one row with the status in $STATUS (none: no file) to the path after --csv,
# exits $EXIT_PLAIN without the tool ($UNDER_TOOL unset) and 0 under it.
BENCH = """#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --csv ] && csv=$2; shift; done
[ -n "$UNDER_TOOL" ] || [ "${EXIT_PLAIN:-0}" = 0 ] || exit "$EXIT_PLAIN"
[ "$STATUS" = none ] || printf 'family,status,note\\nattention,%s,B=3\\n' "$STATUS" > "$csv"
exit 0
"""
# compute-sanitizer: drops its own options, runs the program, then exits $TOOL_EXIT if set.
SANITIZER = """#!/bin/sh
while [ "${1#--}" != "$1" ]; do shift 2; done
UNDER_TOOL=1 "$@" || exit $?
exit "${TOOL_EXIT:-0}"
"""

# A doctest program: prints doctest's summary with $PASSED passed and $FAILED failed test cases
# (under the tool: $PASSED_UNDER_TOOL where set), exits $EXIT_PLAIN without the tool.
DOCTEST = """#!/bin/sh
[ -n "$UNDER_TOOL" ] || [ "${EXIT_PLAIN:-0}" = 0 ] || exit "$EXIT_PLAIN"
passed=${PASSED:-1}
[ -n "$UNDER_TOOL" ] && [ -n "$PASSED_UNDER_TOOL" ] && passed=$PASSED_UNDER_TOOL
[ "$NO_SUMMARY" = 1 ] || echo "[doctest] test cases: 3 | $passed passed | ${FAILED:-0} failed | 2 skipped"
[ "${FAILED:-0}" = 0 ]
"""


class SanitizeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.bench, self.sanitizer = root / "bench", root / "compute-sanitizer"
        self.doctest = root / "test_program"
        for path, text in ((self.bench, BENCH), (self.sanitizer, SANITIZER), (self.doctest, DOCTEST)):
            path.write_text(text)
            path.chmod(0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_with(self, env, call):
        """(exit code, stdout) of call() with `env` added to the environment (STUDY_REQUIRE_GPU
        dropped unless env sets it), the environment restored after."""
        saved = dict(os.environ)
        os.environ.pop("STUDY_REQUIRE_GPU", None)
        os.environ.update(env)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                rc = call()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        return rc, out.getvalue()

    def check(self, **env):
        return self.run_with({"STATUS": "ok", **env}, lambda: sanitize.check(
            "racecheck", [str(self.bench), "--batch", "3"], str(self.sanitizer)))

    def test_clean_run_passes(self):
        self.assertEqual(self.check()[0], 0)

    def test_tool_report_fails(self):
        rc, out = self.check(TOOL_EXIT=str(sanitize.ERROR_EXIT))
        self.assertEqual(rc, 1)
        self.assertIn("racecheck reported errors", out)

    def test_program_failing_under_the_tool_fails(self):
        rc, out = self.check(TOOL_EXIT="9")
        self.assertEqual(rc, 1)
        self.assertIn("failed under racecheck (exit 9)", out)

    def test_program_failing_plainly_fails(self):
        rc, out = self.check(EXIT_PLAIN="1")
        self.assertEqual(rc, 1)
        self.assertIn("failed without the tool", out)

    def test_declined_shape_fails(self):
        rc, out = self.check(STATUS="skipped")
        self.assertEqual(rc, 1)
        self.assertIn("ran nothing: status 'skipped'", out)

    def test_no_row_fails(self):
        rc, out = self.check(STATUS="none")
        self.assertEqual(rc, 1)
        self.assertIn("wrote no CSV", out)

    def check_doctest(self, **env):
        return self.run_with(env, lambda: sanitize.check_doctest(
            "memcheck", [str(self.doctest), "-sc=257 x*"], str(self.sanitizer)))

    def test_doctest_passing_passes(self):
        self.assertEqual(self.check_doctest()[0], 0)

    def test_doctest_tool_report_fails(self):
        rc, out = self.check_doctest(TOOL_EXIT=str(sanitize.ERROR_EXIT))
        self.assertEqual(rc, 1)
        self.assertIn("memcheck reported errors", out)

    def test_doctest_failing_case_fails(self):
        rc, out = self.check_doctest(FAILED="1")
        self.assertEqual(rc, 1)
        self.assertIn("failed without the tool", out)

    def test_doctest_filter_selecting_nothing_fails(self):
        rc, out = self.check_doctest(PASSED="0")
        self.assertEqual(rc, 1)
        self.assertIn("selected no test case, without the tool", out)
        rc, out = self.check_doctest(PASSED_UNDER_TOOL="0")
        self.assertEqual(rc, 1)
        self.assertIn("selected no test case, under memcheck", out)

    def test_doctest_without_summary_fails(self):
        rc, out = self.check_doctest(NO_SUMMARY="1")
        self.assertEqual(rc, 1)
        self.assertIn("no doctest summary", out)

    def test_doctest_gpu_skip_is_a_skip_unless_required(self):
        self.assertEqual(self.check_doctest(EXIT_PLAIN="77")[0], 77)
        self.assertEqual(self.check_doctest(EXIT_PLAIN="77", STUDY_REQUIRE_GPU="1")[0], 1)


if __name__ == "__main__":
    unittest.main()
