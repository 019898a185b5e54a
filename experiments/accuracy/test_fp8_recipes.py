#!/usr/bin/python3
"""Tests of fp8_recipes.py, in two suites. Its command-line checks run anywhere (no torch needed:
they happen before torch is imported); with --torch, the E4M3 / E5M2 emulation on known values and
a whole run on a tiny ViT (the fp32 control agrees 100%, rel L2 0), which need torch and timm: that
suite exits 77 (skipped, saying why) where this interpreter lacks them, so no case passes unrun.

  /usr/bin/python3 experiments/accuracy/test_fp8_recipes.py              the command-line checks
  .venv/bin/python experiments/accuracy/test_fp8_recipes.py --torch      the emulation and the tiny run
"""

import contextlib
import csv
import io
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
from experiments.accuracy import fp8_recipes as fr

try:
    import torch
    import timm  # noqa: F401
    HAVE_TORCH, WHY = True, ""
except ImportError as e:
    HAVE_TORCH = False
    WHY = f"needs torch and timm, which {sys.executable} lacks ({e}); run with a Python that has them"


def run_main(*argv, main=None):
    """`main` (fp8_recipes.main by default) on argv: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = (main or fr.main)(list(argv))
        except SystemExit as e:  # argparse's own errors
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


class CliUsage(unittest.TestCase):
    """A temporary --out folder and `refused`: MAIN exits 2 with one line on stderr that says
    what is wrong. fp8_torchao_probe's tests reuse it with their own MAIN."""
    MAIN = staticmethod(fr.main)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name) / "out"

    def tearDown(self):
        self.tmp.cleanup()

    def refused(self, *argv, says):
        rc, out, err = run_main(*argv, main=self.MAIN)
        self.assertEqual(rc, 2, err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertIn(says, lines[0])
        return lines[0]


class Usage(CliUsage):

    def test_recipes_named_as_the_study_asks(self):
        for name in ("fp32", "fp16_inputs", "tensor_static", "tensor_dynamic", "channel_token",
                     "channel_token_mlp_only", "tensor_static_mlp_only", "tensor_static_qkv_proj_only",
                     "e5m2_tensor_static"):
            self.assertIn(name, fr.RECIPES)
        self.assertEqual(fr.RECIPES["tensor_static"].gemms, ("qkv", "proj", "fc1", "fc2"))
        self.assertEqual(fr.RECIPES["tensor_static_mlp_only"].gemms, ("fc1", "fc2"))
        self.assertEqual(fr.RECIPES["tensor_static_qkv_proj_only"].gemms, ("qkv", "proj"))
        self.assertEqual(fr.RECIPES["channel_token"].weight, "channel")
        self.assertEqual(fr.RECIPES["channel_token"].act, "token")
        self.assertIsNone(fr.RECIPES["fp32"].fmt)

    def test_unknown_recipe(self):
        line = self.refused("--recipes", "fp32,tensor_magic", "--out", str(self.out), says="tensor_magic")
        self.assertIn("tensor_static", line)  # the valid names are listed
        self.refused("--recipes", ",", "--out", str(self.out), says="unknown recipe")

    def test_unknown_weight_set(self):
        self.refused("--weight-sets", "pretrained", "--out", str(self.out), says="pretrained")

    def test_images_must_be_positive(self):
        self.refused("--images", "0", "--out", str(self.out), says="--images must be positive")
        self.refused("--images", "-3", "--out", str(self.out), says="--images must be positive")

    def test_bad_sizes(self):
        self.refused("--image-size", "100", "--out", str(self.out), says="multiple of 16")
        self.refused("--batch", "0", "--out", str(self.out), says="--batch must be positive")
        self.refused("--threads", "-1", "--out", str(self.out), says="--threads")
        self.refused("--device", "tpu", "--out", str(self.out), says="--device")

    def test_nothing_written_on_bad_use(self):
        self.refused("--images", "0", "--out", str(self.out), says="--images")
        self.assertFalse(self.out.exists())

    def test_unwritable_out(self):
        blocker = Path(self.tmp.name) / "a_file"
        blocker.write_text("not a folder\n")
        self.refused("--images", "2", "--out", str(blocker / "sub"), says="cannot write to --out")
        self.refused("--images", "2", "--out", str(blocker), says="cannot write to --out")

    def test_missing_torch_says_how_to_install(self):
        with mock.patch.dict(sys.modules, {"torch": None, "timm": None}):
            line = self.refused("--images", "2", "--out", str(self.out), says="needs torch and timm")
        self.assertIn("pip install torch timm", line)

    def test_out_is_required(self):
        rc, _, err = run_main("--images", "2")
        self.assertEqual(rc, 2)
        self.assertIn("--out", err)

    def test_command_line_exit_code(self):
        proc = subprocess.run([sys.executable, str(HERE / "fp8_recipes.py"), "--recipes", "nope",
                               "--out", str(self.out)], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stdout, "")
        self.assertTrue(proc.stderr.startswith("fp8_recipes.py: error: unknown recipe nope"), proc.stderr)


class Emulation(unittest.TestCase):
    def q(self, values, fmt="e4m3", scale=1.0):
        return fr.fake_quant(torch.tensor(values, dtype=torch.float32), scale, fmt).tolist()

    def test_e4m3_known_values(self):
        self.assertEqual(self.q([1.0, -1.0, 0.0, 448.0, -448.0]), [1.0, -1.0, 0.0, 448.0, -448.0])
        # 3 mantissa bits: spacing 1/8 in [1, 2); halfway cases go to the even mantissa.
        self.assertEqual(self.q([1.0625, 1.1875, 1.3125, 1.05, 1.07]), [1.0, 1.25, 1.25, 1.0, 1.125])
        self.assertEqual(self.q([3.3, 100.0, 300.0]), [3.25, 96.0, 288.0])

    def test_e4m3_saturates_instead_of_nan(self):
        self.assertEqual(self.q([1000.0, -1000.0, 464.0, 1e30, float("inf")]), [448.0, -448.0, 448.0, 448.0, 448.0])
        # Whether PyTorch's cast alone saturates depends on its version, device and format
        # (torch 2.15 on the CPU: E4M3 yes, E5M2 no): fake_quant clamps first, so it always does.
        self.assertEqual(self.q([1e30, -float("inf")], "e5m2"), [57344.0, -57344.0])

    def test_e4m3_subnormals(self):
        step = 2.0 ** -9  # the smallest subnormal and the spacing of all of them
        exact = [k * step for k in range(1, 8)] + [2.0 ** -6]
        self.assertEqual(self.q(exact), exact)
        # half a step: to the even neighbour (0, then 2 steps); just above half: up.
        self.assertEqual(self.q([0.5 * step, 1.5 * step, 0.51 * step, 0.49 * step]),
                         [0.0, 2 * step, step, 0.0])

    def test_scale(self):
        # x / scale is rounded, then multiplied back: 1000 / 2 = 500 saturates at 448 -> 896.
        self.assertEqual(self.q([2.125, 1000.0], scale=2.0), [2.0, 896.0])
        self.assertEqual(fr.scale_of(896.0, "e4m3"), 2.0)
        self.assertEqual(fr.scale_of(0.0, "e4m3"), 1.0)
        self.assertEqual(fr.scale_of(448.0, "e4m3", fr.STATIC_MARGIN), 2.0)
        rows = torch.tensor([[1.0, 4.0], [0.0, 0.0]])
        got = fr.scale_of(rows.abs().amax(dim=1, keepdim=True), "e4m3")
        self.assertEqual(tuple(got.shape), (2, 1))
        torch.testing.assert_close(got.flatten(), torch.tensor([4.0 / 448, 1.0]))

    def test_e5m2_and_fp16(self):
        self.assertEqual(self.q([1.0, 1.125, 1.375, 1e6, -1e6], "e5m2"), [1.0, 1.0, 1.5, 57344.0, -57344.0])
        self.assertEqual(self.q([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1e6], "fp16"), [1.0, 1.001953125, 65504.0])

    def test_saturated_count(self):
        x = torch.tensor([1.0, -1000.0, 900.0, 3.0])
        self.assertEqual(fr.saturated(x, 1.0, "e4m3"), 2)
        self.assertEqual(fr.saturated(x, 4.0, "e4m3"), 0)

    def test_linear_per_channel_and_per_token(self):
        gen = torch.Generator().manual_seed(3)
        lin = torch.nn.Linear(16, 8)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(8, 16, generator=gen) * torch.logspace(-5, 2, 8).unsqueeze(1))
        x = torch.randn(2, 5, 16, generator=gen) * 50
        q = fr.fake_quant_linear(lin, fr.RECIPES["channel_token"])
        # Each row's largest weight maps to 448, so it survives (to fp32 rounding), on every scale.
        torch.testing.assert_close(q.weight.abs().amax(1), lin.weight.detach().abs().amax(1), rtol=1e-6, atol=0)
        w_tensor = fr.fake_quant_linear(lin, fr.RECIPES["tensor_static"], static_amax=1.0).weight
        self.assertEqual(int((w_tensor[0] == 0).sum()), 16)  # the 1e-5 row underflows per tensor
        with torch.no_grad():
            y = q(x)
            xs = x.abs().amax(-1, keepdim=True) / 448
            want = torch.nn.functional.linear(fr.fake_quant(x, xs, "e4m3"), q.weight, lin.bias)
        self.assertTrue(torch.equal(y, want))
        exact = fr.fake_quant_linear(lin, fr.RECIPES["fp32"])
        with torch.no_grad():
            self.assertTrue(torch.equal(exact(x), lin(x)))

    def test_evaluate_on_known_logits(self):
        ref = torch.tensor([[3.0, 1.0, 0.0], [3.0, 0.0, 1.0], [0.0, 3.0, 1.0], [3.0, 2.9, 0.0]])
        shift = torch.tensor([[0.0, 3.5, 0.0]])  # the same error on every image
        m = fr.evaluate(ref + shift, ref)
        self.assertEqual(m["reference_classes"], 2)
        self.assertEqual(m["reference_majority_share"], 0.75)
        self.assertEqual(m["forward_classes"], 1)  # class 1 wins everywhere
        self.assertEqual(m["disagreements"], 3)
        self.assertAlmostEqual(m["error_common_fraction"], 1.0)
        self.assertEqual(m["top1_agreement_common_error_removed"], 1.0)
        self.assertEqual(m["disagreements_decisive"], 0)  # margins 2, 2, 3, 0.1 against an RMS error of 2.02
        self.assertEqual(m["decisive_images"], 0)


class TinyRun(unittest.TestCase):
    """A whole run on vit_ti at 32 px (5 tokens), 6 images, three recipes, two weight sets."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = Path(cls.tmp.name) / "run"
        cls.rc, cls.stdout, cls.stderr = run_main(
            "--model", "vit_ti", "--image-size", "32", "--images", "6", "--batch", "4",
            "--recipes", "fp32,tensor_static,channel_token", "--weight-sets", "timm_init,randomized",
            "--out", str(cls.out))
        with open(cls.out / "recipes.csv") as f:
            cls.rows = list(csv.DictReader(f))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_and_files(self):
        self.assertEqual(self.rc, 0, self.stderr)
        self.assertTrue((self.out / "recipes.txt").is_file())
        self.assertEqual(sorted(p.name for p in self.out.iterdir()), ["recipes.csv", "recipes.txt"])
        with open(self.out / "recipes.csv") as f:
            self.assertEqual(next(csv.reader(f)), fr.CSV_COLUMNS)

    def test_one_row_and_one_progress_line_per_weight_set_and_recipe(self):
        got = [(r["weights"], r["recipe"]) for r in self.rows]
        self.assertEqual(got, [(w, r) for w in ("timm_init", "randomized")
                               for r in ("fp32", "tensor_static", "channel_token")])
        progress = [l for l in self.stderr.splitlines() if l.startswith("fp8_recipes.py: [")]
        self.assertEqual(len(progress), 6, self.stderr)
        self.assertIn("[6/6] randomized channel_token", progress[-1])
        self.assertIn(" s;", progress[-1])

    def test_fp32_control_is_exact(self):
        for r in self.rows:
            if r["recipe"] == "fp32":
                self.assertEqual(float(r["top1_agreement"]), 1.0)
                self.assertEqual(float(r["logits_rel_l2"]), 0.0)
                self.assertEqual(int(r["decisive_images"]), 6)
                self.assertEqual(int(r["disagreements"]), 0)
                self.assertEqual(float(r["error_common_fraction"]), 0.0)
                self.assertEqual(r["reference_classes"], r["forward_classes"])

    def test_e4m3_moves_the_logits(self):
        for r in self.rows:
            if r["recipe"] != "fp32":
                self.assertGreater(float(r["logits_rel_l2"]), 1e-3)
                self.assertLess(float(r["logits_rel_l2"]), 0.5)
                self.assertEqual(r["finite"], "True")
                self.assertEqual(r["images"], "6")
                self.assertEqual(r["model"], "vit_tiny_patch16_224")

    def test_modules_restored(self):
        from experiments.accuracy import fp8_accuracy as fa
        model = fa.build_weights("timm_init", "vit_ti", 32, 0)
        before = [id(m) for m in model.modules()]
        amax = fr.calibrate(model, torch.randn(2, 3, 32, 32), 2, torch.device("cpu"))
        self.assertEqual(len(amax), 4 * len(model.blocks))
        with fr.recipe_applied(model, fr.RECIPES["tensor_static"], amax):
            self.assertEqual(type(model.blocks[0].mlp.fc2).__name__, "FakeQuantLinear")
            self.assertEqual(type(model.blocks[0].norm1).__name__, "LayerNorm")
        self.assertEqual([id(m) for m in model.modules()], before)


if __name__ == "__main__":
    torch_suite = "--torch" in sys.argv
    if torch_suite and not HAVE_TORCH:
        print(f"skipping: {WHY}")
        sys.exit(77)
    cases = (Emulation, TinyRun) if torch_suite else (Usage,)
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in cases)
    result = unittest.TextTestRunner(verbosity=1).run(suite)
    sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)
