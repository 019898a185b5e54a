"""The whole-ViT section of the report on synthetic and hand-made runs: the ladder, the final
sitting and the study's answer, side headlines and README's headline table.

    python3 -m analysis.test_encoder_report      (from the repository root)
"""
import csv
import json
import math
import re
import shutil
import tempfile
import textwrap
import unittest
from pathlib import Path

from analysis.testing import BuiltReport, skip_without_pandas, read_report

skip_without_pandas(__name__)

from analysis import synthetic, synthetic_encoder  # noqa: E402
from analysis.testing import REPO, build, hand_made_encoder, headline_line, read_rows  # noqa: E402
from studylib import catalog, formatting, notebook  # noqa: E402

WATERFALL = REPO / "experiments" / "results" / "20261206_NVIDIA_H100_80GB_HBM3_waterfall_e32"
WATERFALL_B256 = REPO / "experiments" / "results" / "20261207_NVIDIA_H100_80GB_HBM3_b256_waterfall"


ENCODER_TEMPLATE = REPO / "report" / "template.md"


def encoder_markers():
    """(kind, name) of every marker in the template's encoder block."""
    import re
    text = ENCODER_TEMPLATE.read_text()
    block = re.search(r"<!--\s*family:encoder\s*-->(.*?)<!--\s*end:encoder\s*-->", text, re.S)
    return re.findall(r"<!--\s*(figure|table|text):(\w+)\s*-->", block.group(1))


class EncoderReport(BuiltReport):
    """A full synthetic encoder run (ladder, e4 stream counts, a custom mix, every anchor,
    two image sizes, three rounds, skipped and failed rows): every output the template names
    is produced."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        cls.run_dir = synthetic_encoder.write_encoder_run(root / "results" / "enc")
        # The batch-1 and batch-256 waterfalls beside it (committed ones, measured on another GPU).
        for sub in ("waterfall", "batch1_read_once"):
            shutil.copytree(WATERFALL / sub, root / "results" / "wf" / sub)
        for sub in ("waterfall", "batch256_waterfall"):
            shutil.copytree(WATERFALL_B256 / sub, root / "results" / "wf256" / sub)
        cls.out = root / "out"
        cls.res = build("--results", root / "results", "--out", cls.out)
        cls.readme = read_report(cls.out) if cls.res.returncode == 0 else ""
        cls.text = ((cls.out / "text" / "encoder_findings.md").read_text()
                    if cls.res.returncode == 0 else "")

    def test_every_step_table(self):
        # Every step of the table and of TRIED.md, each from the newest sitting that has it.
        table = (self.out / "tables" / "encoder_every_step.md").read_text()
        self.assertRegex(table, r"\| e6_best \| yes \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| `enc` \|")
        self.assertRegex(table, r"\| e14_l2_prefetch \| yes \| .* \| `enc/encoder_\w+` \|")
        self.assertIn("| e11_split_gemms | left it (TRIED.md) |", table)
        self.assertIn("not measured on this GPU", table)

    def test_every_template_artifact(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        self.assertNotRegex(self.readme, r"<!--\s*(figure|table|text|family|end):")
        markers = encoder_markers()
        self.assertGreaterEqual(len(markers), 8)
        # A run that is no final sitting still gets the answer's table, saying it is no final sitting.
        self.assertIn("not a final sitting (`./study run final`), so README's answer does not come from it",
                      self.readme)
        for kind, name in markers:
            self.assertNotIn(f"`{name}` not produced", self.readme, name)
            if kind == "figure":
                p = self.out / "figures" / f"{name}.png"
                self.assertEqual(p.read_bytes()[:8], b"\x89PNG\r\n\x1a\n", name)
                self.assertIn(f"](figures/{name}.png)", self.readme)
            elif kind == "table":
                self.assertIn("|---", (self.out / "tables" / f"{name}.md").read_text(), name)
            else:
                self.assertTrue((self.out / "text" / f"{name}.md").read_text().strip(), name)
        self.assertIn("run synthetic-encoder-run, commit abcdef012345", self.readme)

    def test_energy_against_torch_compile(self):
        # Synthetic energy: 600 W for our steps, 650 W for the anchors, so images per joule is
        # the time ratio times 650/600, and torch.compile's own row is 1.00x.
        table = (self.out / "tables" / "encoder_images_per_joule.md").read_text()
        self.assertIn("| timm torch.compile + CUDA graph | 256 |", table)
        self.assertRegex(table, r"\| timm torch\.compile \+ CUDA graph \| 256 \|[^\n]*\| 650 \| 1500 \| 1\.00x \|")
        e6 = re.search(r"\| e6_best \| 256 \| ([0-9.]+) \| [0-9.]+ \| 600 \| 1500 \| ([0-9.]+)x \|", table)
        comp = re.search(r"\| timm torch\.compile \+ CUDA graph \| 256 \| ([0-9.]+) \|", table)
        self.assertAlmostEqual(float(e6.group(2)), float(comp.group(1)) / float(e6.group(1)) * 650 / 600, delta=0.02)
        self.assertIn("](figures/encoder_energy.png)", self.readme)

    def test_median_of_rounds_in_ladder(self):
        rows = [r for r in read_rows(self.run_dir / "encoder.csv")
                if r["version"] == "e6_best" and r["batch"] == "256" and r["image_size"] == "224"
                and r["status"] == "ok"]
        self.assertEqual(len(rows), 3)
        times = sorted(float(r["median_us"]) for r in rows)
        ladder = (self.out / "tables" / "encoder_ladder.md").read_text()
        ms = lambda us: f"{us / 1000:.1f}"  # noqa: E731  (above 10 ms: one decimal)
        self.assertIn(f"| 256 | e6_best | - | {ms(times[1])} | {ms(times[0])}-{ms(times[2])} |",
                      ladder)
        self.assertIn("measured in 3 rounds", self.text)

    def test_compiled_anchor_launches_only_when_counted_after_compiling(self):
        ladder = (self.out / "tables" / "encoder_ladder.md").read_text()
        cells = {b: [c.strip() for c in l.split("|")]
                 for b in ("1", "256") for l in ladder.splitlines()
                 if l.startswith(f"| {b} | timm torch.compile + CUDA graph |")}
        col = [c.strip() for c in ladder.splitlines()[2].split("|")].index("launches/layer")
        self.assertEqual(cells["1"][col], "-")        # counted with the autotuning kernels: not shown
        self.assertNotEqual(cells["256"][col], "-")   # counted after compiling

    def test_status_and_streams(self):
        status = (self.out / "tables" / "encoder_status.md").read_text()
        self.assertIn("| e1_library | 51 | 3 | 0 |", status)
        self.assertIn("| custom A | 6 | 0 | 3 |", status)
        self.assertIn("custom A = `pe=v5_im2col_gemm,ln=v4_vectorized", status)
        streams = (self.out / "tables" / "encoder_stream_counts.md").read_text()
        self.assertIn("| 2 streams ms | 4 streams ms | 8 streams ms |", streams)
        self.assertIn("e6_best resolved its family versions to patch_embed=v5_im2col_gemm "
                      "(passed over v6_implicit_gemm: not built in this tree; see its NOTES) "
                      "layernorm=v5_unrolled attention=v7_flash mlp=fused_epilogue.", self.text)


class EncoderHandMade(unittest.TestCase):
    def findings(self, run):
        out = run.parent / "out"
        res = build("--run", run, "--out", out)
        self.assertEqual(res.returncode, 0, res.stderr)
        return (out / "text" / "encoder_findings.md").read_text(), read_report(out)

    def test_the_fastest_is_fastest_across_the_batches(self):
        """One batch's draw does not rename "the fastest" step (the aliases' rule)."""
        from analysis.encoder_data import fastest_across
        us = {("a", 1): 440, ("a", 32): 2170, ("a", 256): 18170,
              ("b", 1): 449, ("b", 32): 2250, ("b", 256): 17670, ("c", 1): 900}
        time = lambda v, b: us.get((v, b), math.nan)
        self.assertEqual(fastest_across(time, ["a", "b"], (1, 32, 256)), "a")
        self.assertEqual(fastest_across(time, ["b", "a"], (1, 32, 256)), "a")
        # One win each: the faster at the largest batch that times them.
        self.assertEqual(fastest_across(time, ["a", "b"], (32, 256)), "b")
        self.assertEqual(fastest_across(time, ["a", "c"], (1,)), "a")
        self.assertEqual(fastest_across(time, ["c", "b"], (1, 32, 256)), "b")
        self.assertIsNone(fastest_across(time, ["c"], (32, 256)))

    def test_ratio_sentences(self):
        with tempfile.TemporaryDirectory() as d:
            text, readme = self.findings(hand_made_encoder(Path(d) / "r"))
            # 23.6 / 18.0 = 1.311x; 256 / 18 ms = 14,222 img/s; 23.6 ms / 1.3 = 18.15 ms. e6_best's
            # rounds span 17.8-18.2 ms, so the ratio 1.30-1.33x: the target is inside that band.
            self.assertIn("Target 1.3x torch.compile's throughput at batch 256: met within noise; e6_best "
                          "takes 18.0 ms (14,222 img/s), 1.31x the throughput of timm "
                          "torch.compile + CUDA graph (23.6 ms, 10,847 img/s); the target asks "
                          "for at most 18.2 ms; rounds and sittings span 1.30-1.33x.", text)
            self.assertIn("Target faster than the fastest PyTorch anchor at batch 1, 32 and 256: "
                          "met; batch 1: e6_best 0.410 ms against timm in a CUDA graph 0.690 ms "
                          "(1.68x faster); batch 32: e6_best 2.50 ms against timm in a CUDA "
                          "graph 3.31 ms (1.32x faster); batch 256: e6_best 18.0 ms against timm "
                          "torch.compile + CUDA graph 23.6 ms (1.31x faster).", text)
            self.assertIn("Target at most 0.4 ms at batch 1: missed; e6_best takes 0.410 ms.",
                          text)
            self.assertIn("batch 1: timm in a CUDA graph (0.690 ms, of timm eager, timm in a CUDA "
                          "graph and timm torch.compile + CUDA graph); batch 32: timm in a CUDA "
                          "graph (3.31 ms, of timm eager and timm in a CUDA graph)", text)
            self.assertIn("(passed over v6_implicit_gemm: not built; see (a) NOTES) "
                          "layernorm=v5_unrolled attention=v7_flash mlp=fused_epilogue.", text)
            self.assertIn("measured in 1 to 2 rounds", text)
            self.assertIn(text.splitlines()[0][2:], readme)
            ladder = (Path(d) / "out" / "tables" / "encoder_ladder.md").read_text()
            self.assertIn("| 256 | e6_best | - | 18.0 | 17.8-18.2 | 14,222 | - | 1.31x |", ladder)

    def test_missed_targets(self):
        with tempfile.TemporaryDirectory() as d:
            run = hand_made_encoder(Path(d) / "r", e6_256=(25000.0,))
            # A streams sitting that times e4 on one stream too: that is the baseline (e3's
            # forward in the same sitting), not an e3_graph row of another file.
            synthetic_encoder.write_encoder_rows(run, [
                dict(version="e4_streams", batch=b, streams=s, median_us=us) for b, s, us in
                ((32, 1, 2500.0), (32, 2, 2400.0), (32, 4, 2600.0), (256, 1, 25000.0), (256, 2, 25250.0))],
                name="encoder_streams.csv", ceilings=False)
            text, _ = self.findings(run)
            self.assertIn("Splitting the batch over streams (e4_streams at its fastest stream count, against "
                          "e4_streams on one stream (e3_graph's forward)): faster at batch 32 (2 streams, "
                          "0.96x); at batch 256 1.01x its time.", text)
            streams = (Path(d) / "out" / "tables" / "encoder_stream_counts.md").read_text()
            self.assertIn("| 32 | 2.50 | 2.40 | 2.60 | 2 | 0.96x |", streams)
            self.assertIn("at batch 1, 32 and 256: missed (slower at batch 256); ", text)
            self.assertIn("batch 256: e6_best 25.0 ms against timm torch.compile + CUDA graph "
                          "23.6 ms (1.06x slower)", text)
            self.assertIn("Target 1.3x torch.compile's throughput at batch 256: missed; e6_best "
                          "takes 25.0 ms", text)

    def test_without_anchors_or_breakdown(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic_encoder.write_encoder_run(Path(d) / "r", anchors=False, breakdown=False,
                                              image_sizes=(224,), batches=(1, 32, 256),
                                              rounds=1, custom=False, with_status_rows=False)
            text, readme = self.findings(run)
            self.assertIn("*Figure `encoder_breakdown` not produced: no row's note carries an "
                          "eager breakdown.*", readme)
            self.assertIn("Target 1.3x torch.compile's throughput at batch 256: cannot be "
                          "judged", text)
            self.assertIn("Target faster than the fastest PyTorch anchor at batch 1, 32 and 256: "
                          "cannot be judged from this run", text)
            self.assertIn("This run has no PyTorch anchor rows at vit_b, 224 px", text)
            self.assertIn("measured once (one round)", text)
            self.assertIn("Every row passed its logits check and was timed.", text)
            for name in ("encoder_throughput", "encoder_latency", "encoder_streams"):
                self.assertTrue((Path(d) / "out" / "figures" / f"{name}.png").is_file(), name)

    def test_only_failed_rows(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic_encoder.write_encoder_rows(Path(d) / "r", [
                dict(version="e6_best", batch=1, status="failed", note="logits check failed"),
                dict(version="e3_graph", batch=1, status="skipped", note="no CUDA device")])
            text, readme = self.findings(run)
            self.assertIn("This run has no timed encoder rows", text)
            self.assertIn("| e6_best | 0 | 0 | 1 | failed x1: logits check failed |", readme)
            self.assertIn("*Figure `encoder_throughput` not produced", readme)


class FinalSitting(BuiltReport):
    """README's one answer and targets: from a run folder holding a final sitting (final.csv),
    the fastest fp16 and FP8 steps against every anchor, and every target the notebooks judged;
    before one is committed, a note that says so."""

    # median us at batch 1, 32, 256 (3 rounds with the round factors below)
    TIMES = {"e6_best": (440.0, 2290.0, 18300.0), "e14_l2_prefetch": (420.0, 2130.0, 17100.0),
             "e15_fp8_attention_e4m3": (410.0, 1620.0, 9500.0),
             "pytorch_timm": (3000.0, 3400.0, 25000.0), "pytorch_timm_graph": (690.0, 3200.0, 22000.0),
             "pytorch_timm_compile_graph": (730.0, 3500.0, 19800.0),
             "pytorch_torchao_fp8_tensor_graph": (900.0, 2600.0, 12500.0)}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        cls.results = root / "results"
        cls.write_final_sitting()
        cls.write_compiled_ahead()
        cls.write_other_sittings()
        # e14 and e6_best pass timm parity with every parameter drawn at 224 and 384 px.
        for v in ("e14_l2_prefetch", "e6_best"):
            for px in (224, 384):
                cls.parity(cls.results / "final_run", v, px, True)
        cls.write_accuracy()
        cls.readme = root / "README.md"
        cls.res, cls.text = cls.build_readme(root, "out")
        # The same sitting after e14 fails a newer parity run: e6_best answers for fp16.
        cls.parity(cls.results / "zz_later", "e14_l2_prefetch", 224, False)
        cls.res_failed, cls.text_failed = cls.build_readme(root, "out_failed")

    @classmethod
    def write_final_sitting(cls):
        """The final sitting: every step and anchor of TIMES at batch 1, 32 and 256, 3 rounds."""
        rows = []
        for k, f in enumerate((1.0, 1.01, 0.99)):
            for v, ts in cls.TIMES.items():
                for b, t in zip((1, 32, 256), ts):
                    # torch.compile's first round: batch 32 loaded a compile made ahead (6 s), batch 1
                    # and 256 compiled in the sitting's anchor process.
                    compiled = (f"; compiled in this row ({ {1: 84, 32: 6, 256: 150}[b]} s to its first call)"
                                if v == "pytorch_timm_compile_graph" and k == 0 else "")
                    # The energy loop: 200 calls, 2% slower than the burst for the steps, 5% for the anchors.
                    slower = 1.02 if v.startswith("e") else 1.05
                    rows.append(dict(version=v, batch=b, median_us=t * f, sm_clock_mhz=1700,
                                     energy_j=(600.0 if v.startswith("e") else 680.0) * t * 1e-6,
                                     energy_calls=200, energy_s=200 * t * f * slower * 1e-6,
                                     note=f"checked; cuda-graph replay{compiled} [round: {k + 1}]"))
        synthetic_encoder.write_encoder_rows(cls.results / "final_run", rows, name="final.csv")

    @classmethod
    def write_compiled_ahead(cls):
        # torch.compile at batch 1 compiled ahead (compile_kernels.txt lists the shape) and loaded,
        # beside timm in a graph: 702 / 690 = 1.02x its time, against 730 / 690 = 1.06x in the
        # sitting. Decoys that must not count: the same rows without compile_kernels.txt (a compile
        # not made by precompile_anchors.py), and on another GPU.
        loaded = [dict(version="pytorch_timm_compile_graph", batch=1, median_us=702.0,
                       note="checked; compiled in this row (9 s to its first call) [round: 1]"),
                  dict(version="pytorch_timm_graph", batch=1, median_us=690.0)]
        for folder, gpu, t in (("ahead_b1", "NVIDIA H200 (synthetic)", 702.0),
                               ("no_kernels", "NVIDIA H200 (synthetic)", 600.0),
                               ("other_gpu", "NVIDIA H100 80GB HBM3 (synthetic)", 600.0)):
            synthetic_encoder.write_encoder_rows(cls.results / folder / "anchors", [dict(loaded[0], median_us=t), loaded[1]],
                                         name="anchors.csv", run_id=folder, gpu=gpu, utc="2025-11-24T12:00:00Z")
            if folder != "no_kernels":
                (cls.results / folder / "compile_kernels.txt").write_text(
                    "# kernels\n== ab/cabc.py (images 1 x 3 x 224 x 224)\n     48 triton_tem_fused_addmm\n")

    @classmethod
    def write_other_sittings(cls):
        # An older one-round final sitting on the same GPU with the FP8 step and torch.compile;
        # a run that is no final sitting (its anchors one process a row), and one whose
        # torch.compile is from another sitting (another run id): neither may count.
        synthetic_encoder.write_encoder_rows(cls.results / "another_sitting", [
            dict(version="e15_fp8_attention_e4m3", batch=256, median_us=9600.0),
            dict(version="pytorch_timm_compile_graph", batch=256, median_us=16830.0)],
            name="final.csv", run_id="another", utc="2025-11-22T12:00:00Z")
        synthetic_encoder.write_encoder_rows(cls.results / "one_row_anchors", [
            dict(version="e15_fp8_attention_e4m3", batch=256, median_us=9600.0),
            dict(version="pytorch_timm_compile_graph", batch=256, median_us=15000.0)],
            run_id="one-row", utc="2025-11-22T14:00:00Z")
        synthetic_encoder.write_encoder_rows(cls.results / "split_sitting", [
            dict(version="e15_fp8_attention_e4m3", batch=256, median_us=9600.0)],
            run_id="split-a", utc="2025-11-22T12:00:00Z")
        synthetic_encoder.write_encoder_rows(cls.results / "split_sitting", [
            dict(version="pytorch_timm_compile_graph", batch=256, median_us=16830.0)],
            name="encoder_compile.csv", run_id="split-b", utc="2025-11-22T13:00:00Z")

    @classmethod
    def write_accuracy(cls):
        # The FP8 step's accuracy beside torchao's, and its digits result.
        acc = cls.results / "final_run" / "fp8_accuracy"
        acc.mkdir(parents=True)
        row = dict(precision="fp8_e4m3", images=256, finite=True, max_abs_logit_difference=0.1,
                   top1_agreement=0.9, decisive_images=100, top1_agreement_decisive=1.0)
        (acc / "accuracy.json").write_text(json.dumps({
            "model": "vit_base_patch16_224", "image_size": 224, "images": 256, "calibration_images": 32,
            "timm": "1.0.29", "gpu": "NVIDIA H200 (synthetic)", "rows": [
                dict(row, weights=w, forward=f, logits_rel_l2=e) for w, f, e in (
                    ("timm_init", "encoder e15_fp8_attention_e4m3", 0.100),
                    ("timm_init", "torchao per tensor", 0.104),
                    ("timm_init", "torchao per row (bf16)", 0.105),
                    ("outliers", "encoder e15_fp8_attention_e4m3", 0.036),
                    ("outliers", "torchao per tensor", 0.040),
                    ("outliers", "torchao per row (bf16)", 0.030))]}))
        # torchao's per-tensor FP8 on an fp32 model, from two probe runs: the newest folder counts.
        for folder, e in (("aa_probe", 0.050), ("zz_probe", 0.035)):
            probe = cls.results / folder / "probe"
            probe.mkdir(parents=True)
            with open(probe / "probe.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["gpu", "weights", "forward", "logits_rel_l2"])
                w.writerows(["NVIDIA H200 (synthetic)", *r] for r in (
                    ("timm_init", "torchao, fp16 model (default: fast accum)", 0.090),
                    ("timm_init", "torchao, fp32 model", 0.101),
                    ("outliers", "torchao, fp16 model (default: fast accum)", 0.020),
                    ("outliers", "torchao, fp32 model", e)))
        digits = cls.results / "final_run" / "digits_e15"
        digits.mkdir()
        (digits / "digits.json").write_text(json.dumps({  # another GPU of the same architecture
            "gpu": "NVIDIA H100 80GB HBM3 (synthetic)", "images_held_out": 360,
            "criteria": {"fp32_min": 0.97, "fp8_disagree_max": 2},
            "forwards": {"timm fp32": {"top1": 0.98, "disagree_with_fp32": 0},
                         "encoder e15_fp8_attention_e4m3": {"top1": 0.975, "disagree_with_fp32": 3}}}))

    @classmethod
    def parity(cls, run, version, px, passed):
        d = run / f"timm_parity_{version}_{px}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "parity.json").write_text(json.dumps({
            "image_size": px, "images": 256, "version": version, "weight_set": "random", "compose": "",
            "logits_rel_l2_vs_timm_fp16": 1e-3, "timm_fp16_vs_fp32_rel_l2": 1.2e-3,
            "max_abs_logit_difference": 0.005, "decisive_images": 240, "top1_agreement_decisive": 1.0,
            "top1_agreement_all": 1.0, "passed": passed, "gpu": "NVIDIA H200 (synthetic)", "timm": "1.0.29",
            "criteria": {"rel_l2_max": 0.01, "agreement_min": 0.99, "margin_factor": 10.0, "fp32_ratio_max": 1.5}}))

    @classmethod
    def build_readme(cls, root, out):
        cls.readme.write_text("# T\n\n<!-- headline:start -->\nold\n<!-- headline:end -->\n\n"
                              "<!-- versions:start -->\nold\n<!-- versions:end -->\n")
        res = build("--results", cls.results, "--out", root / out, "--readme", cls.readme)
        return res, cls.readme.read_text() if res.returncode == 0 else ""

    def test_answer_from_the_final_sitting(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        # Burst 19800 / 17100; sustained 19800 x 1.05 / (17100 x 1.02) = 20.8 / 17.4 ms.
        self.assertIn("- The fastest fp16 forward, `e14_l2_prefetch`, takes 17.1 ms at batch 256: "
                      "1.16x torch.compile's throughput (19.8 ms) in the timed burst; sustained over the energy "
                      "loop 1.19x (17.4 against 20.8 ms), and 1.31x its images per joule.", self.text)
        self.assertIn("| fastest fp16 step: e14_l2_prefetch | 256 | 17.1 | 14,971 | 25.0 | 1,700 | 1.16x | 17.4 | "
                      "1.19x |", self.text)
        self.assertIn("- The fastest FP8 forward, `e15_fp8_attention_e4m3`, takes 9.50 ms at batch 256: "
                      "2.08x torch.compile's throughput", self.text)
        # Its accuracy cost beside its speed, from the fp8_accuracy result that holds it.
        self.assertIn("Its accuracy cost, on timm's init (untrained weights) against timm fp32 (256 images): logits "
                      "rel L2 0.100 (torchao FP8 per tensor 0.104), top-1 agreement 90% (torchao FP8 per tensor 90%), "
                      "100% on the 100 images whose "
                      "class margin exceeds 4x its RMS logit error (", self.text)
        self.assertIn("All from one sitting: run folder `final_run`", self.text)
        # Compiled in the sitting at batch 1 and 256 (not 32, loaded in 6 s): the answer says so
        # for batch 1 (at 256 autotuning's race is not close).
        self.assertIn("- torch.compile compiled inside this sitting's anchor process at batch 1 (84 s to its "
                      "first call) instead of loading a compile made ahead, alone, in a fresh process; "
                      "compiled so, max-autotune can pick a slower forward at small batches", self.text)
        self.assertIn("At batch 1, compiled ahead and loaded in another sitting on this GPU model (run folder "
                      "`ahead_b1`), torch.compile took 1.02x timm in a graph's time, against 1.06x here: 4% "
                      "faster than this sitting's, so the steps' lead over it is smaller by about as much.",
                      self.text)
        self.assertNotIn("may be faster than this sitting shows", self.text)
        # 16830 / 9600 = 1.75x inside that sitting; its times beside this sitting's, no ratio across.
        self.assertIn("- Another final sitting on this GPU model (run folder `another_sitting`, 1 round) gave at "
                      "batch 256 `e15_fp8_attention_e4m3` 1.75x torch.compile (9.60 ms; 9.50 here), "
                      "with torch.compile at 16.8 ms (19.8 here; ratios are only taken inside a sitting).",
                      self.text)
        self.assertNotIn("split_sitting", self.text)
        self.assertNotIn("one_row_anchors", self.text)
        self.assertIn("| fastest fp16 step: e14_l2_prefetch | 256 | 17.1 |", self.text)
        self.assertIn("| torchao FP8, per tensor (CUDA graph) | 32 | 2.60 |", self.text)
        self.assertNotIn("No final sitting is committed yet", self.text)
        # The report opens its encoder section with the same answer.
        report = read_report(Path(self.tmp.name) / "out")
        self.assertIn("- The fastest fp16 forward, `e14_l2_prefetch`, takes 17.1 ms at batch 256", report)
        self.assertIn("| fastest FP8 step: e15_fp8_attention_e4m3 | 256 | 9.50 |", report)

    def test_the_fp16_answer_computes_timms_model(self):
        # A faster step whose newest parity fails is named beside the answer, not as it.
        self.assertEqual(self.res_failed.returncode, 0, self.res_failed.stderr)
        self.assertIn("- The fastest fp16 forward, `e6_best`, takes 18.3 ms at batch 256", self.text_failed)
        self.assertIn("- `e14_l2_prefetch` is faster (17.1 ms at batch 256, 1.16x torch.compile) but fails timm "
                      "parity with every parameter drawn", self.text_failed)
        self.assertIn("| fastest fp16 step: e6_best | 256 | 18.3 |", self.text_failed)
        # The fp16 targets are judged on the same step (19800 / 18300 = 1.08x), not on e14.
        self.assertIn("encoder (whole ViT), fp16: 1.3x torch.compile's throughput at batch 256 "
                      "(vit_b, 224 px): **missed** (e6_best 18.3 ms, 1.08x", self.text_failed)
        # README's whole-ViT headline line names the answer's step too, never the faster failing one.
        self.assertIn("| Whole ViT | vit_b, 224 px, batch 256, fp16 | e6_best: 18.3 ms |", self.text_failed)
        self.assertIn("| Whole ViT | vit_b, 224 px, batch 256, fp16 | e14_l2_prefetch: 17.1 ms |", self.text)
        self.assertNotIn("fails timm parity", self.text)

    def test_targets_judged_in_the_final_sitting(self):
        # 2.08x here, but the other final sitting gave 1.75x: the margin is inside the spread.
        self.assertIn("encoder (whole ViT), FP8: 2.0x torch.compile's fp16 throughput at batch 256 "
                      "(vit_b, 224 px): **met within noise** (e15_fp8_attention_e4m3 9.50 ms, 2.08x torch.compile's "
                      "19.8 ms in the timed burst; rounds and sittings span 1.75-2.13x;", self.text)
        # torchao is faster at batch 1 (900 us against e15's 410: no) ... e15 wins everywhere here.
        self.assertIn("encoder (whole ViT), FP8: faster than torchao's FP8 at batch 1, 32 and 256 "
                      "(vit_b, 224 px): **met**", self.text)
        self.assertIn("encoder (whole ViT), fp16: 1.3x torch.compile's throughput at batch 256 "
                      "(vit_b, 224 px): **missed** (e14_l2_prefetch 17.1 ms, 1.16x torch.compile's 19.8 ms in the "
                      "timed burst; rounds and sittings span 1.13-1.18x; sustained over the energy loop 1.19x (17.4 "
                      "against 20.8 ms): missed)", self.text)
        self.assertIn("encoder (whole ViT), fp16: at most 0.4 ms at batch 1 (vit_b, 224 px): **missed**",
                      self.text)
        # Near the hardware's floor: each precision's fastest step at batch 1 (this run's notes give
        # no weights' size, so no floor multiple).
        self.assertIn("encoder (whole ViT), fp16: at most 0.20 ms at batch 1, near the hardware's floor (vit_b, "
                      "224 px): **missed** (e14_l2_prefetch 0.420 ms; stages/encoder/NOTES.md", self.text)
        self.assertIn("encoder (whole ViT), FP8: at most 0.15 ms at batch 1, near the hardware's floor (vit_b, "
                      "224 px): **missed** (e15_fp8_attention_e4m3 0.410 ms; stages/encoder/NOTES.md", self.text)
        # 0.036 / 0.030 - 1 = 20% larger than per row on outliers; below both on timm_init.
        self.assertIn("FP8: logits error no larger than torchao's FP8 (per tensor and per row), "
                      "e15_fp8_attention_e4m3: **missed** (20.0% larger at most, outliers against torchao "
                      "per row (bf16); timm_init: 0.1000 against per tensor 0.1040, per row (bf16) 0.1050;",
                      self.text)
        # The same arithmetic on an fp32 model (the newest probe): 0.036 / 0.035 - 1 = +2.9% at most.
        self.assertIn("; torchao per tensor on an fp32 copy of the model: timm_init 0.1010, outliers 0.0350, "
                      "e15_fp8_attention_e4m3 +2.9% against it at most (", self.text)
        self.assertIn("zz_probe", self.text)
        self.assertNotIn("aa_probe", self.text)
        # 3 held-out images away from fp32, 2 allowed.
        self.assertIn("FP8: digits model, fp32 at least 97% top-1 and e15_fp8_attention_e4m3 within 2 "
                      "held-out images of fp32: **missed** (fp32 98.00%, e15_fp8_attention_e4m3 97.50% with "
                      "3 of 360 held-out images away from fp32", self.text)
        self.assertIn("measured on NVIDIA H100 80GB HBM3 (synthetic): Hopper (sm_90), the same binaries "
                      "and arithmetic as on NVIDIA H200 (synthetic)", self.text)

    def test_a_margin_inside_the_spread_is_within_noise(self):
        # The verdict follows the ratio; the band of rounds and sittings holding the target makes it
        # "within noise" on either side, and a band that leaves the target out changes nothing.
        from analysis.encoder_answer import ratio_verdict
        from studylib.claims import FORMATS
        band_text = FORMATS["sittings_band"]
        self.assertEqual(ratio_verdict(2.04, 2.0, (2.01, 2.05)), "met")
        self.assertEqual(ratio_verdict(2.04, 2.0, (1.98, 2.05)), "met within noise")
        self.assertEqual(ratio_verdict(1.28, 1.3, (1.27, 1.29)), "missed")
        self.assertEqual(ratio_verdict(1.28, 1.3, (1.27, 1.31)), "missed within noise")
        self.assertEqual(ratio_verdict(1.28, 1.3, (float("nan"), float("nan"))), "missed")
        self.assertEqual(band_text((1.27, 1.29)), "; rounds and sittings span 1.27-1.29x")
        self.assertEqual(band_text((float("nan"), float("nan"))), "")

    def test_verdicts_within_noise(self):
        # At least / at most a target; "within noise" where the rounds' band holds the target;
        # a point band (one round) or an unknown one never does.
        nan = float("nan")
        self.assertEqual(notebook.verdict(0.897, 0.9, (0.89, 0.905), at_most=True), "met within noise")
        self.assertEqual(notebook.verdict(0.85, 0.9, (0.84, 0.86), at_most=True), "met")
        self.assertEqual(notebook.verdict(0.95, 0.9, (0.94, 0.96), at_most=True), "missed")
        self.assertEqual(notebook.verdict(1.00, 1.0, (0.99, 1.01)), "met within noise")
        self.assertEqual(notebook.verdict(0.998, 1.0, (0.99, 1.01)), "missed within noise")
        self.assertEqual(notebook.verdict(0.998, 1.0, (nan, nan)), "missed")
        self.assertEqual(notebook.combined_verdict(["met", "met within noise"]), "met within noise")
        self.assertEqual(notebook.combined_verdict(["met within noise", "missed"]), "missed within noise")
        self.assertEqual(notebook.combined_verdict(["met", "met"]), "met")
        # A ratio's band: the top's fastest round over the bottom's slowest, and the other way.
        self.assertEqual(notebook.ratio_band(9.0, 11.0, 18.0, 22.0), (9.0 / 22.0, 11.0 / 18.0))
        self.assertEqual(formatting.band_text((0.89, 0.905)), "; rounds 0.89-0.91x")
        self.assertEqual(formatting.band_text((1.01, 1.01)), "")
        self.assertEqual(formatting.band_text((nan, nan)), "")

    def test_without_a_final_sitting_it_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            synthetic_encoder.write_encoder_run(results / "enc", rounds=1)
            readme = Path(d) / "README.md"
            readme.write_text(self.readme.read_text())
            res = build("--results", results, "--out", Path(d) / "out", "--readme", readme)
            self.assertEqual(res.returncode, 0, res.stderr)
            text = readme.read_text()
            self.assertIn("No final sitting is committed yet (`./study run final`", text)
            # The run's own table is in the report, not in README.
            self.assertNotIn("| timm torch.compile + CUDA graph | 256 |", text)
            report = read_report(Path(d) / "out")
            self.assertRegex(report, r"\| timm torch.compile \+ CUDA graph \| 256 \| [0-9.]+ \|")
            self.assertIn("This run (enc): the fastest fp16 and FP8 steps", report)
            self.assertRegex(text, r"below comes from (run )?`enc[`/]")
            self.assertRegex(text, r"- encoder \(whole ViT\), FP8: 2.0x torch.compile's fp16 "
                                   r"throughput at batch 256 \(vit_b, 224 px\): \*\*not judged\*\*")


class EncoderSideHeadline(unittest.TestCase):
    """README's whole-ViT line: the sitting whose fastest fp16 step is fastest relative to the
    torch.compile measured beside it; a side folder whose torch.compile rows come from another
    sitting (another run id) does not count, however fast its step."""

    def test_side_sitting_with_its_own_compile_wins(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            run = results / "enc"
            C = "pytorch_timm_compile_graph"

            def rows(times, run_ids):
                return [dict(version=v, batch=256, median_us=us, run_id=run_ids[v],
                             note="checked; cuda-graph replay") for v, us in times.items()]
            synthetic_encoder.write_encoder_rows(run, rows({"e6_best": 18600.0, C: 19500.0},
                                                   {"e6_best": "m", C: "m"}))
            synthetic_encoder.write_encoder_rows(run / "encoder_gemm_ceiling",
                                         rows({"e14_l2_prefetch": 17100.0, C: 19500.0},
                                              {"e14_l2_prefetch": "s1", C: "s1"}),
                                         name="encoder_gemm_ceiling.csv", ceilings=False)
            synthetic_encoder.write_encoder_rows(run / "encoder_mixed",
                                         rows({"e14_l2_prefetch": 15000.0, C: 19500.0},
                                              {"e14_l2_prefetch": "s2", C: "earlier"}),
                                         name="encoder_mixed.csv", ceilings=False)
            line = headline_line(self, results, Path(d) / "out", "Whole ViT")
            self.assertIn("| e14_l2_prefetch: 17.1 ms |", line)
            self.assertIn("1.14x faster than timm torch.compile + CUDA graph (19.5 ms)", line)
            self.assertIn("[`enc/encoder_gemm_ceiling`]", line)

    def test_a_final_sitting_keeps_its_own_headline(self):
        # However fast a side sitting's step against its own torch.compile, the final sitting's
        # headline is the final sitting's: the best ratio over sittings would be a selection.
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            run = results / "enc"
            C = "pytorch_timm_compile_graph"
            rows = [dict(version=v, batch=256, median_us=us, run_id="f", note="checked; cuda-graph replay")
                    for v, us in {"e6_best": 18600.0, C: 19500.0}.items()]
            synthetic_encoder.write_encoder_rows(run, rows, name="final.csv")
            side = [dict(version=v, batch=256, median_us=us, run_id="s1", note="checked; cuda-graph replay")
                    for v, us in {"e14_l2_prefetch": 17100.0, C: 19500.0}.items()]
            synthetic_encoder.write_encoder_rows(run / "encoder_gemm_ceiling", side,
                                                 name="encoder_gemm_ceiling.csv", ceilings=False)
            line = headline_line(self, results, Path(d) / "out", "Whole ViT")
            self.assertIn("| e6_best: 18.6 ms |", line)
            self.assertNotIn("encoder_gemm_ceiling", line)


class HeadlineTable(BuiltReport):
    """README's headline table: written between its markers by the full build, one line per
    family (the fastest of all versions against library and anchors, the run named), and
    --check-readme fails on a stale one; its versions table, from the families' lists."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        cls.results = root / "results"
        cls.ln = synthetic.write_run(cls.results / "ln_run")
        synthetic.write_attention_run(cls.results / "attn_run")
        synthetic_encoder.write_encoder_run(cls.results / "enc_run", rounds=1)
        cls.readme = root / "README.md"
        cls.readme.write_text("# Title\n\nFirst paragraph.\n\n<!-- headline:start -->\nold\n"
                              "<!-- headline:end -->\n\n## More\n\n<!-- versions:start -->\nold\n"
                              "<!-- versions:end -->\n")
        cls.out = root / "out"
        cls.res = build("--results", cls.results, "--out", cls.out, "--readme", cls.readme)

    def table(self):
        text = self.readme.read_text()
        return text[text.index("<!-- headline:start -->"):text.index("<!-- headline:end -->")]

    def test_written_between_markers(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        text = self.readme.read_text()
        self.assertTrue(text.startswith("# Title\n\nFirst paragraph.\n\n<!-- headline:start -->\n"))
        self.assertIn("<!-- headline:end -->\n\n## More\n\n<!-- versions:start -->\n", text)
        self.assertTrue(text.endswith("<!-- versions:end -->\n"))
        self.assertNotIn("\nold\n", text)
        self.assertEqual((self.out / "headline.md").read_text(),
                         self.table().removeprefix("<!-- headline:start -->\n"))

    def test_one_line_per_family_from_the_csv(self):
        rows = read_rows(self.ln / "layernorm.csv") + read_rows(self.ln / "anchors.csv")
        t = {r["version"]: float(r["median_us"]) for r in rows
             if r["batch"] == "256" and r["image_size"] == "224" and r["status"] == "ok"}
        best = min((v for v in t if not v.startswith("pytorch_")), key=t.get)
        line = next(x for x in self.table().splitlines() if x.startswith("| LayerNorm |"))
        self.assertIn(f"| {best}: {formatting.fmt_us(t[best])} us |", line)
        self.assertIn(f"{formatting.faster_or_slower(t['cudnn'] / t[best])} than cudnn "
                      f"({formatting.fmt_us(t['cudnn'])} us)", line)
        self.assertIn(f"{formatting.faster_or_slower(t['pytorch_layer_norm_graph'] / t[best])} than "
                      f"PyTorch F.layer_norm (CUDA graph)", line)
        self.assertIn("[`ln_run`](experiments/results/ln_run/)", line)
        self.assertIn("| Attention | batch 32, 197 tokens", self.table())
        vit = next(x for x in self.table().splitlines() if x.startswith("| Whole ViT |"))
        self.assertIn("| vit_b, 224 px, batch 256, fp16 | e6_best: ", vit)
        self.assertIn("than timm torch.compile + CUDA graph (", vit)
        self.assertIn("[`enc_run`]", vit)

    def test_versions_table_from_the_lists(self):
        text = self.readme.read_text()
        block = text[text.index("<!-- versions:start -->"):text.index("<!-- versions:end -->")]
        ln = next(x for x in block.splitlines() if x.startswith("| LayerNorm |"))
        self.assertEqual([v for v in catalog.family_versions("layernorm")],
                         [m for m in re.findall(r"\[(\w+)\]\(stages/layernorm/", ln)])
        steps = next(x for x in block.splitlines() if x.startswith("| encoder (whole ViT) |"))
        self.assertIn("[e1_library](stages/encoder/e1_library/NOTES.md)", steps)

    def test_check_readme(self):
        # A current README passes the check: tests/report_committed.sh checks the committed one.
        text = self.readme.read_text()
        stale = self.readme.parent / "stale.md"
        stale.write_text(text.replace("| LayerNorm |", "| LayerNorm (old) |"))
        r = build("--results", self.results, "--out", self.out, "--readme", stale,
                  "--check-readme")
        self.assertEqual(r.returncode, 1)
        self.assertIn("headline or versions table is not what the committed CSVs", r.stderr)
        stale.write_text("# no markers\n")
        r = build("--results", self.results, "--out", self.out, "--readme", stale)
        self.assertEqual(r.returncode, 2)
        self.assertIn("headline:start", r.stderr)


class DeclaredComparison(unittest.TestCase):
    """A side experiment that only declares a comparison in its spec (no code): its table and
    figure appear in the encoder section, under its title, read from the newest run folder on the
    GPU that has its rows; the comparisons placed by markers of their own stay where they are."""

    def test_a_spec_alone_adds_a_table_and_a_figure(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            spec_dir = root / "specs"
            shutil.copytree(REPO / "experiments" / "specs", spec_dir)
            (spec_dir / "encoder_demo.toml").write_text(textwrap.dedent("""\
                family = "encoder"
                side_experiment = true
                versions = ["e6_best", "e19_exact_gelu"]
                anchors = ["pytorch_timm_graph"]
                anchor_script = "torch_vit"
                models = ["vit_b"]
                batches = [1, 256]
                image_sizes = [224]
                [comparison]
                step = "e19_exact_gelu"
                against = ["e6_best"]
                title = "Demo: e19 against e6_best"
                caption = "e19_exact_gelu against e6_best and timm in a CUDA graph, {where}."
                figure = true
                """))
            run = synthetic_encoder.write_encoder_run(root / "results" / "enc")
            gpu = read_rows(run / "ceilings.csv")[0]["gpu"]
            synthetic_encoder.write_side_encoder(
                run, "encoder_demo", synthetic.base_fields("demo-run", "abcdef0123456789", gpu, "2026-11-30T00:00:00Z"),
                ((1, {"e6_best": 437.0, "e19_exact_gelu": 400.0, "pytorch_timm_graph": 692.0}),
                 (256, {"e6_best": 18400.0, "e19_exact_gelu": 17600.0, "pytorch_timm_graph": 21940.0})))
            out = root / "out"
            res = build("--results", root / "results", "--out", out, env={"STUDY_SPECS_DIR": str(spec_dir)})
            self.assertEqual(res.returncode, 0, res.stderr)
            readme = read_report(out)
            self.assertIn("#### Demo: e19 against e6_best", readme)
            # The caption says which weights the rows ran (their notes carry no timm-init tag).
            self.assertIn("e19_exact_gelu against e6_best and timm in a CUDA graph, vit_b, 224 px. The steps on "
                          "the study's own weight draw, the anchors on timm's init. Medians of 3", readme)
            self.assertRegex(readme, r"\| 256 \| 18\.4\d* \| 17\.6\d* \| 21\.9\d* \| 1\.05x \| 1\.25x \|")
            self.assertIn("![encoder_demo_ratios](figures/encoder_demo_ratios.png)", readme)
            self.assertTrue((out / "figures" / "encoder_demo_ratios.png").is_file())
            # The declared comparisons the template places keep their place, and appear once.
            self.assertEqual(readme.count("e14_l2_prefetch (e10 with each block's second LayerNorm"), 1)
            self.assertNotIn("<!-- comparisons:", readme)


if __name__ == "__main__":
    unittest.main()
