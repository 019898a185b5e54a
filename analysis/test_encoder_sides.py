"""The whole ViT's side sittings in the report on synthetic runs: the ladder sitting's gains over
each step's parent, where the per-GEMM FP8 table takes e15's breakdown from, and the batch-1
waterfall from a folder beside the run.

    python3 -m analysis.test_encoder_sides      (from the repository root)
"""
import math
import re
import shutil
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace

from analysis.testing import skip_without_pandas

skip_without_pandas(__name__)

from analysis import encoder_ladder, encoder_side, synthetic, synthetic_encoder  # noqa: E402
from analysis.testing import REPO, build, hand_made_encoder, read_report, read_rows  # noqa: E402
from studylib import notebook, rundata  # noqa: E402


class LadderSitting(unittest.TestCase):
    """The whole ladder's sitting (encoder_ladder): each step's gain over its parent from the
    sitting's own rows, none where the parent was not timed there; a note where no sitting is."""

    def test_gains_over_parents_figure_and_table(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic_encoder.write_encoder_run(Path(d) / "results" / "enc")
            shutil.rmtree(run / "encoder_ladder")  # the synthetic run's own ladder sitting
            gpu = read_rows(run / "ceilings.csv")[0]["gpu"]
            data = SimpleNamespace(run=rundata.load_run(run))
            ctx = notebook.Context("encoder", data.run, Path(d) / "out")
            self.assertIsNone(encoder_ladder.ladder_figure(data, ctx))
            for name in ("encoder_ladder_steps", "encoder_ladder_gains"):
                self.assertIn("no encoder_ladder sitting", ctx.artifacts[name].reason)
            synthetic_encoder.write_side_encoder(
                run, "encoder_ladder", synthetic.base_fields("ladder-run", "abcdef0123456789", gpu,
                                                             "2026-12-01T00:00:00Z"),
                ((1, {"e1_library": 1200.0, "e2_buffer_reuse": 1000.0, "e6_best": 450.0, "e12_fp8": 430.0}),
                 (256, {"e1_library": 40000.0, "e2_buffer_reuse": 36000.0, "e6_best": 18000.0,
                        "e12_fp8": 12000.0})))
            t = encoder_ladder.ladder_figure(data, ctx).set_index(["batch", "step"])
            self.assertAlmostEqual(t.loc[(1, "e2_buffer_reuse"), "gain"], 1.2, places=6)
            self.assertAlmostEqual(t.loc[(256, "e12_fp8"), "gain"], 1.5, places=6)  # parent e6_best
            self.assertTrue(math.isnan(t.loc[(1, "e1_library"), "gain"]))  # no parent
            self.assertTrue(math.isnan(t.loc[(1, "e6_best"), "gain"]))  # its parent e5_fused not timed here
            self.assertEqual(int(t["n"].min()), 3)
            self.assertTrue((Path(d) / "out" / "figures" / "encoder_ladder_steps.png").is_file())
            table = (Path(d) / "out" / "tables" / "encoder_ladder_gains.md").read_text()
            self.assertIn("| 256 | e12_fp8 | e6_best | 12.024 | 12.000-12.048 | 1.50x |", table)
            self.assertIn("ladder-run", table)


class Fp8Gemms(unittest.TestCase):
    """The per-GEMM FP8 table takes e15's eager breakdown from the ladder sitting where it timed
    e15 at the largest batch, else from e15's own side sitting."""

    def test_e15_from_the_ladder_else_its_own_sitting(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic_encoder.write_encoder_run(Path(d) / "results" / "enc")
            data = SimpleNamespace(run=rundata.load_run(run), key_image=224, key_model="vit_b",
                                   label=lambda v: v, where="vit_b, 224 px")

            def e15_qkv_ms():
                ctx = notebook.Context("encoder", data.run, Path(d) / "out")
                encoder_side.fp8_tables(data, ctx)
                text = ctx.artifacts["encoder_fp8_gemms"].path.read_text()
                return text.splitlines()[0], float(re.search(r"\| e15_fp8_attention_e4m3 \| qkv \| ([0-9.]+) \|", text)[1])

            caption, ms = e15_qkv_ms()  # the synthetic ladder has no e15
            self.assertTrue(caption.endswith("enc/encoder_fp8_fused.*"), caption)
            self.assertAlmostEqual(ms, 0.17 * 11913.3 * 1.002 / 1e3, places=2)  # its median round
            gpu = read_rows(run / "ceilings.csv")[0]["gpu"]
            breakdown = lambda v, us: {"note": f"synthetic; eager breakdown us: qkv={0.2 * us:.1f} "
                                               f"projection={0.08 * us:.1f} mlp={0.45 * us:.1f}"}
            synthetic_encoder.write_side_encoder(
                run, "encoder_ladder", synthetic.base_fields("ladder-run", "abcdef0123456789", gpu,
                                                             "2026-12-01T00:00:00Z"),
                ((256, {"e6_best": 18000.0, "e12_fp8": 12000.0, "e15_fp8_attention_e4m3": 11000.0}),), breakdown)
            caption, ms = e15_qkv_ms()
            self.assertTrue(caption.endswith("enc/encoder_ladder.*"), caption)
            self.assertAlmostEqual(ms, 0.2 * 11000.0 * 1.002 / 1e3, places=2)


class Waterfall(unittest.TestCase):
    def report(self, run):
        res = build("--run", run, "--out", run.parent / "out")
        self.assertEqual(res.returncode, 0, res.stderr)
        return read_report(run.parent / "out")

    def test_the_waterfall_from_a_folder_beside_the_run(self):
        # No waterfall beside the run: a note at the marker. A committed one (an H100's, the run
        # a synthetic GPU's): drawn, its caption naming the folder, the other GPU and its rows.
        src = REPO / "experiments" / "results" / "20261206_NVIDIA_H100_80GB_HBM3_waterfall_e32"
        with tempfile.TemporaryDirectory() as d:
            readme = self.report(hand_made_encoder(Path(d) / "r"))
            self.assertIn("no batch-1 waterfall committed yet", readme)
            for sub in ("waterfall", "batch1_read_once"):
                shutil.copytree(src / sub, Path(d) / "wf" / sub)
            readme = self.report(Path(d) / "r")
            self.assertIn("![encoder_waterfall](figures/encoder_waterfall.png)", readme)
            caption = readme.split("![encoder_waterfall](figures/encoder_waterfall.png)", 1)[1].split("\n\n")[1]
            self.assertIn("run folder `wf`, measured on another GPU than the section's", caption)
            self.assertRegex(caption, r"GPU NVIDIA H100 80GB HBM3, run \S+, commit dec69bd46e15\.\*$")
            self.assertIn("this folder's bars predate the bar of the bench's clock", caption)
            self.assertTrue((Path(d) / "out" / "figures" / "encoder_waterfall.png").is_file())
            self.assertIn("no batch-256 waterfall committed yet", readme)

    def test_the_batch_256_waterfall_draws_the_clock_in_ms(self):
        # A batch-256 waterfall (bars in us in its CSV, a clock bar, no targets): its own figure,
        # in ms, its caption naming the batch and the clock ratio, without the batch-1 targets.
        src = REPO / "experiments" / "results" / "20261206_NVIDIA_H100_80GB_HBM3_waterfall_e32"
        bars = dict(floor=11600.0, clock=3480.0, l2=0.0, chain=2500.0, handoffs=60.0)
        row = dict(step="e19_exact_gelu", kind="measured", precision="fp16", clock_ratio=1.3, l2_mb=9000,
                   l2_us=1100, total_us=sum(bars.values()), bench_us=17700, bench_low_us=17600,
                   bench_high_us=17800, low_us="", high_us="", **{f"{k}_bar_us": v for k, v in bars.items()})
        with tempfile.TemporaryDirectory() as d:
            run = hand_made_encoder(Path(d) / "r")
            shutil.copytree(src / "batch1_read_once", Path(d) / "wf" / "batch256_waterfall")
            (Path(d) / "wf" / "waterfall").mkdir()
            (Path(d) / "wf" / "waterfall" / "waterfall_b256.csv").write_text(
                ",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n")
            readme = self.report(run)
            marker = "![encoder_waterfall_b256](figures/encoder_waterfall_b256.png)"
            self.assertIn(marker, readme)
            caption = readme.split(marker, 1)[1].split("\n\n")[1]
            self.assertIn("Where batch 256's time goes", caption)
            self.assertIn("the ceilings' clock is up to 1.30x the bench's here", caption)
            self.assertNotIn("batch-1 targets", caption)
            self.assertIn("no batch-1 waterfall committed yet", readme)


if __name__ == "__main__":
    unittest.main()
