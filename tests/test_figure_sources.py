#!/usr/bin/env python3
"""tests/figure_sources.py on hand-made report pages: a figure of one clean commit passes; one
of a -dirty commit, of several commits, of a folder with several, or with no commit fails; a
table is judged only where a page draws it and its caption names a commit."""
import unittest

import figure_sources as fs  # beside this script, which runs by path


def figure(name, provenance):
    return f"![{name}](figures/{name}.png)\n\n*Figure: What it plots. GPU X, run r1, {provenance}.*\n"


class FigureSources(unittest.TestCase):
    def test_what_passes_and_fails(self):
        page = "\n".join([
            figure("clean", "commit 7e8a7f701fb5"),
            figure("dirty", "commit 12298fbb9cc8-dirty"),
            figure("pooled", "commit 840f7c1b2917 + 4ebf52b22140"),
            figure("folders", "run folder a (commit 9f32dfc), run folder b (commit 840f7c1 + 4 more)"),
            "![sweeps](figures/sweeps.png)\n\n*Figure: Two sweeps. GPU X, run 20261127T120059Z-vm + "
            "20261127T120745Z-vm, commit 9f32dfc3e1b3.*\n",
            "![kept](figures/kept.png)\n\n*Figure: A pool awaiting its sitting. GPU X, run 20261202T202519Z-vm + "
            "20261202T203815Z-vm, commit 745d2d1d3c4b.*\n",
            "![bare](figures/bare.png)\n\n*Figure: no provenance.*\n"])
        got = fs.figure_problems([page])
        self.assertEqual(got["clean"], "")
        self.assertIn("-dirty commit 12298fbb9cc8-dirty", got["dirty"])
        self.assertEqual(got["pooled"], "rows of 2 commits")
        self.assertEqual(got["folders"], "b: rows of 5 commits")
        self.assertEqual(got["bare"], "its caption names no commit")
        self.assertEqual(got["sweeps"], "rows of 2 sweeps (20261127T120059Z-vm, 20261127T120745Z-vm)")
        self.assertEqual(got["kept"], "")

    def test_tables(self):
        tables = {name: f"*What it holds. GPU X, run r1, {prov}.*\n\n| a |\n|---|\n| 1 |\n"
                  for name, prov in [("clean", "commit 7e8a7f701fb5"), ("dirty", "commit 12298fbb9cc8-dirty"),
                                     ("undrawn", "commit 546b4c607a02-dirty")]}
        tables["lessons"] = "*Lessons from the NOTES.*\n\n| a |\n|---|\n| 1 |\n"
        page = "\n".join(["# Section", tables["clean"], tables["dirty"], tables["lessons"]])
        got = fs.table_problems([page], tables)
        self.assertEqual(got, {"clean": "", "dirty": "-dirty commit 12298fbb9cc8-dirty"})


if __name__ == "__main__":
    unittest.main()
