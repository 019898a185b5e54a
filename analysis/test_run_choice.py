"""Which run folder each part of the report comes from: the section's run (newest timed; a
targets sitting apart or as the section), the sweep beside a targets sitting, and the targets
sitting that judges a family's targets and headline.

    python3 -m analysis.test_run_choice      (from the repository root)
"""
import csv
import shutil
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from analysis.testing import skip_without_pandas

skip_without_pandas(__name__)

from analysis import synthetic  # noqa: E402
from analysis.testing import read_rows  # noqa: E402
from studylib import notebook, rundata  # noqa: E402


def as_targets_sitting(folder):
    """A synthetic LayerNorm run made a targets sitting: the family's rows (ours and the anchors) in
    layernorm_targets.csv, as a targets spec writes them."""
    rows = read_rows(folder / "layernorm.csv") + read_rows(folder / "anchors.csv")
    for name in ("layernorm.csv", "anchors.csv"):
        (folder / name).unlink()
    with open(folder / "layernorm_targets.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return folder


class RunChoice(unittest.TestCase):
    def test_pick_run_prefers_timed(self):
        with tempfile.TemporaryDirectory() as d:
            good = synthetic.write_run(Path(d) / "good", utc="2025-01-01T00:00:00Z",
                                       configs=[(224, 1)])
            newer = synthetic.write_run(Path(d) / "newer", utc="2025-02-01T00:00:00Z",
                                        configs=[(224, 1)])
            # Everything in the newer run skipped (say, no GPU): not the run to show.
            rows = read_rows(newer / "layernorm.csv")
            for r in rows:
                r.update(status="skipped", note="no CUDA device", median_us="")
            with open(newer / "layernorm.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
            (newer / "anchors.csv").unlink()
            runs = rundata.load_runs(d)
            self.assertEqual(rundata.pick_run(runs, "layernorm").path, good)
            self.assertIsNone(rundata.pick_run(runs, "attention"))

    def test_sweep_run_falls_back_to_an_older_sweep_on_the_same_gpu(self):
        with tempfile.TemporaryDirectory() as d:
            full = synthetic.write_run(Path(d) / "a_full", utc="2025-01-01T00:00:00Z",
                                       configs=synthetic.SMALL_CONFIGS)
            other_gpu = synthetic.write_run(Path(d) / "c_other", utc="2025-01-03T00:00:00Z",
                                            configs=synthetic.SMALL_CONFIGS, gpu="GPU B (synthetic)")
            targets = synthetic.write_run(Path(d) / "b_targets", utc="2025-01-02T00:00:00Z",
                                          configs=[(224, 32), (224, 256)])
            runs = {r.name: r for r in rundata.load_runs(d)}
            self.assertGreaterEqual(rundata.shapes_of(runs["a_full"], "layernorm"), 3)
            self.assertEqual(rundata.sweep_run(runs["b_targets"], "layernorm").path, full)
            self.assertEqual(rundata.sweep_run(runs["a_full"], "layernorm").path, full)
            self.assertEqual(rundata.sweep_run(runs["c_other"], "layernorm").path, other_gpu)
            # No sweep of the family anywhere: the run itself.
            self.assertEqual(rundata.sweep_run(runs["b_targets"], "attention").path, targets)

    def test_targets_sitting_judges_targets_and_leaves_the_section_to_the_full_run(self):
        with tempfile.TemporaryDirectory() as d:
            full = synthetic.write_run(Path(d) / "a_full", utc="2025-01-01T00:00:00Z",
                                       configs=synthetic.SMALL_CONFIGS)
            later = as_targets_sitting(synthetic.write_run(Path(d) / "b_targets", utc="2025-01-02T00:00:00Z",
                                                           configs=[(224, 32), (224, 256)], run_id="targets-run"))
            as_targets_sitting(synthetic.write_run(Path(d) / "0_older_targets", utc="2024-12-01T00:00:00Z",
                                                   configs=[(224, 32)]))
            as_targets_sitting(synthetic.write_run(Path(d) / "c_other_gpu", utc="2025-01-03T00:00:00Z",
                                                   configs=[(224, 32)], gpu="GPU B (synthetic)"))
            runs = {r.name: r for r in rundata.load_runs(d)}
            gpu = rundata.gpu_of(runs["a_full"])
            # A family outside TARGETS_APART: its newest run is its section, targets included.
            with mock.patch.object(rundata, "TARGETS_APART", ()):
                self.assertEqual(rundata.pick_run(list(runs.values()), "layernorm", gpu).path, later)
                self.assertIsNone(rundata.targets_run(list(runs.values()), "layernorm", runs["a_full"]))
                # One of TARGETS_SECTION (as the MLP): its newest targets sitting is its section
                # even beside a newer sweep, which draws the figures over batch (sweep_run).
                with tempfile.TemporaryDirectory() as d2:
                    newer = synthetic.write_run(Path(d2) / "e_newer_full", utc="2025-01-05T00:00:00Z",
                                                configs=synthetic.SMALL_CONFIGS)
                    pool = list(runs.values()) + [rundata.load_run(newer)]
                    self.assertEqual(rundata.pick_run(pool, "layernorm", gpu).path, newer)
                    with mock.patch.object(rundata, "TARGETS_SECTION", ("layernorm",)):
                        self.assertEqual(rundata.pick_run(pool, "layernorm", gpu).path, later)
                        self.assertIsNone(rundata.targets_run(pool, "layernorm", runs["b_targets"]))
            apart = mock.patch.object(rundata, "TARGETS_APART", ("layernorm",))
            apart.start()
            self.addCleanup(apart.stop)
            self.assertTrue(rundata.targets_sitting(runs["b_targets"], "layernorm"))
            self.assertFalse(rundata.targets_sitting(runs["a_full"], "layernorm"))
            section = rundata.pick_run(list(runs.values()), "layernorm", gpu)
            self.assertEqual(section.path, full)
            # The newest targets sitting on the section's GPU measured after it; one measured before
            # it only where the section timed each configuration once (no rounds to judge by).
            self.assertEqual(rundata.targets_run(list(runs.values()), "layernorm", section).path, later)
            self.assertTrue(rundata.one_round(runs["a_full"], "layernorm"))
            older = [runs["a_full"], runs["0_older_targets"]]
            self.assertEqual(rundata.targets_run(older, "layernorm", runs["a_full"]).name, "0_older_targets")
            with tempfile.TemporaryDirectory() as d3:
                rounds = shutil.copytree(full, Path(d3) / "a_full")
                synthetic.as_rounds(rounds)
                multi = rundata.load_run(rounds)
                self.assertFalse(rundata.one_round(multi, "layernorm"))
                self.assertIsNone(rundata.targets_run([multi, runs["0_older_targets"]], "layernorm", multi))
            # With only a targets sitting, it is the section's run and judges its own targets.
            only = [runs["b_targets"]]
            self.assertEqual(rundata.pick_run(only, "layernorm").path, later)
            self.assertIsNone(rundata.targets_run(only, "layernorm", only[0]))
            # A target and a headline name the targets sitting only once the notebook takes it.
            ctx = notebook.Context("layernorm", section, Path(d) / "out",
                                   targets_run=runs["b_targets"])
            ctx.target("t", "met")
            self.assertEqual(ctx.targets[-1].run, "a_full")
            self.assertIsNone(ctx.judged_apart())
            self.assertIs(ctx.take_targets_run(), runs["b_targets"])
            # The one sentence that says so names the sitting's files, folder and provenance.
            said = ctx.judged_apart("The targets")
            self.assertTrue(said.startswith("The targets are judged on the targets sitting, "
                                            "layernorm_targets.csv in `b_targets` ("), said)
            self.assertIn("targets-run", said)
            ctx.target("t", "met")
            ctx.headline(family="LayerNorm", shape="s", fastest="v", fastest_us=1.0)
            self.assertEqual(ctx.targets[-1].run, "b_targets")
            self.assertEqual(ctx.headline_entry.judged_in, "b_targets")
            # No later sitting, but the section's folder holds its targets file beside its sweep:
            # the targets are judged on that file's rows alone (with the folder's ceilings).
            shutil.copy(later / "layernorm_targets.csv", full / "layernorm_targets.csv")
            both = rundata.load_run(full)
            inside = rundata.targets_run([both], "layernorm", both)
            self.assertEqual(inside.path, full)
            self.assertEqual(set(inside.rows("layernorm")["run_id"]), {"targets-run"})
            self.assertEqual(len(inside.rows("layernorm")), len(read_rows(full / "layernorm_targets.csv")))
            self.assertEqual(inside.sources["layernorm"], {"layernorm_targets.csv"})
            self.assertTrue(len(inside.ok("ceilings")))


if __name__ == "__main__":
    unittest.main()
