#!/usr/bin/env python3
"""tests/headline_sittings.py on hand-made checkouts: headlines and targets on one clean run folder
whose README names its specs pass; a pooled headline, a folder of -dirty rows, a folder without a
README, a README that does not name a CSV's spec, a missing folder and a README without a
headline table each fail."""
import contextlib
import io
import tempfile
import unittest
from pathlib import Path

import headline_sittings as hs  # beside this script, which runs by path

FOLDER = "20261201_GPU_headlines"


def readme(cell_extra: str = "", folder: str = FOLDER) -> str:
    link = f"[`{folder}`](experiments/results/{folder}/)"
    return "\n".join([
        "# Study", "",
        "**Targets** (docs/method.md, Targets):", "",
        f"- layernorm, at least 80% of the copy bandwidth: **met** (v5: 84%); run `{folder}`.", "",
        "| component | headline shape | fastest version | measured in |",
        "|---|---|---|---|",
        f"| LayerNorm | 50432 x 768 | v5: 43 us | GPU, {link}{cell_extra} |", "", ""])


class HeadlineSittings(unittest.TestCase):
    def checkout(self, text: str, folder_readme: str | None = "Rows of spec `layernorm_quick`.\n",
                 dirty: bool = False) -> Path:
        root = Path(self.enterContext(tempfile.TemporaryDirectory()))
        (root / "README.md").write_text(text)
        (root / "tests").mkdir()
        (root / "tests" / "dirty_rows_allowed.txt").write_text(
            "# folders measured before rows named their commit\n" + (f"{FOLDER}  why\n" if dirty else ""))
        run = root / "experiments" / "results" / FOLDER
        run.mkdir(parents=True)
        (run / "layernorm_quick.csv").write_text("family\nlayernorm\n")
        (run / "ceilings.csv").write_text("family\nceilings\n")
        if folder_readme is not None:
            (run / "README.md").write_text(folder_readme)
        return root

    def verdict(self, root: Path) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = hs.main(root)
        return rc, out.getvalue()

    def test_one_clean_sitting_passes(self):
        rc, out = self.verdict(self.checkout(readme()))
        self.assertEqual(rc, 0, out)
        self.assertIn("1 headlines and 1 targets checked; 0 headlines pool run ids", out)

    def test_pooled_headline_fails(self):
        rc, out = self.verdict(self.checkout(readme(" (**rows of 2 run ids**)")))
        self.assertEqual(rc, 1)
        self.assertIn("LayerNorm headline pools rows of 2 run ids", out)

    def test_dirty_folder_fails(self):
        rc, out = self.verdict(self.checkout(readme(), dirty=True))
        self.assertEqual(rc, 1)
        self.assertIn("holds -dirty rows", out)

    def test_folder_without_readme_fails(self):
        rc, out = self.verdict(self.checkout(readme(), folder_readme=None))
        self.assertEqual(rc, 1)
        self.assertIn("no README.md", out)

    def test_readme_without_the_spec_fails(self):
        rc, out = self.verdict(self.checkout(readme(), folder_readme="Rows of a sitting.\n"))
        self.assertEqual(rc, 1)
        self.assertIn("does not name the spec of layernorm_quick.csv", out)
        self.assertNotIn("ceilings.csv", out)

    def test_missing_folder_and_table_fail(self):
        rc, out = self.verdict(self.checkout(readme(folder="20261130_GPU_gone")))
        self.assertEqual(rc, 1)
        self.assertIn("20261130_GPU_gone: no such run folder", out)
        rc, out = self.verdict(self.checkout("# Study\n"))
        self.assertEqual(rc, 1)
        self.assertIn("README.md has no headline table", out)


if __name__ == "__main__":
    unittest.main()
