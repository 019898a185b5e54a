#!/usr/bin/env python3
"""tests/clean_rows.py on hand-made results trees: a -dirty row outside the allowed folders fails,
and so does a run id whose rows lie further apart than one sitting.
  python3 tests/test_clean_rows.py      (PYTHONPATH=the repository root)"""
import contextlib
import io
import tempfile
import unittest
from pathlib import Path

import clean_rows  # beside this script, which runs by path


class CleanRows(unittest.TestCase):
    def tree(self, rows, allowed=""):
        root = Path(self.enterContext(tempfile.TemporaryDirectory()))
        (root / "tests").mkdir()
        (root / "tests" / "dirty_rows_allowed.txt").write_text(allowed)
        run = root / "experiments" / "results" / "20260101_GPU_run"
        run.mkdir(parents=True)
        (run / "x.csv").write_text("run_id,utc,commit\n" + "".join(f"{r}\n" for r in rows))
        return root

    def check(self, root):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = clean_rows.main(root)
        return code, out.getvalue()

    def test_one_sitting_passes(self):
        code, out = self.check(self.tree(["a,2026-01-01T10:00:00Z,abc", "a,2026-01-01T11:30:00Z,abc",
                                          "b,2026-01-02T10:00:00Z,abc"]))
        self.assertEqual(code, 0, out)

    def test_run_id_across_two_sittings_fails(self):
        code, out = self.check(self.tree(["a,2026-01-01T10:00:00Z,abc", "a,2026-01-01T11:00:00Z,abc",
                                          "a,2026-01-02T16:00:00Z,abc"]))
        self.assertEqual(code, 1)
        self.assertIn("run a has rows 1 day, 5:00:00 apart", out)

    def test_dirty_row_fails_outside_the_allowed_folders(self):
        rows = ["a,2026-01-01T10:00:00Z,abc-dirty"]
        self.assertEqual(self.check(self.tree(rows))[0], 1)
        self.assertEqual(self.check(self.tree(rows, allowed="20260101_GPU_run  measured before\n"))[0], 0)


if __name__ == "__main__":
    unittest.main()
