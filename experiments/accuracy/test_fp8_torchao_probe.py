#!/usr/bin/python3
"""Tests of fp8_torchao_probe.py, in two suites. Its command-line checks run anywhere (they happen
before torch is imported); with --torch, its emulation of torchao's per-tensor arithmetic against
fp8_recipes.py's tensor_dynamic recipe and against plain rounding rules, which needs torch and
timm: that suite exits 77 (skipped, saying why) where this interpreter lacks them.

  /usr/bin/python3 experiments/accuracy/test_fp8_torchao_probe.py            the command-line checks
  .venv/bin/python experiments/accuracy/test_fp8_torchao_probe.py --torch    the emulation
"""

import subprocess
import sys
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
from experiments.accuracy import fp8_torchao_probe as probe
# The command-line test helpers and the torch check (the probe needs torch and timm too).
from experiments.accuracy.test_fp8_recipes import HAVE_TORCH, WHY, CliUsage

if HAVE_TORCH:
    import torch


class Usage(CliUsage):
    MAIN = staticmethod(probe.main)

    def refused(self, *argv, says):
        line = super().refused(*argv, says=says)
        self.assertFalse(self.out.exists())  # nothing created on a refusal
        return line

    def test_bad_sizes(self):
        self.refused("--images", "0", "--out", str(self.out), says="--images must be positive")
        self.refused("--image-size", "100", "--out", str(self.out), says="multiple of 16")
        self.refused("--image-size", "-16", "--out", str(self.out), says="multiple of 16")

    def test_unwritable_out(self):
        blocker = Path(self.tmp.name) / "a_file"
        blocker.write_text("not a folder\n")
        self.refused("--out", str(blocker), says="cannot write to --out")
        self.refused("--out", str(blocker / "sub"), says="cannot write to --out")

    def test_missing_torch(self):
        with mock.patch.dict(sys.modules, {"torch": None, "timm": None}):
            self.refused("--out", str(self.out), says="needs torch and timm")

    def test_command_line_exit_code(self):
        proc = subprocess.run([sys.executable, str(HERE / "fp8_torchao_probe.py"), "--images", "-1",
                               "--out", str(self.out)], capture_output=True, text=True, timeout=60)
        self.assertEqual((proc.returncode, proc.stdout), (2, ""))
        self.assertTrue(proc.stderr.startswith("fp8_torchao_probe.py: error: --images"), proc.stderr)


@unittest.skipUnless(HAVE_TORCH, WHY)
class Emulation(unittest.TestCase):
    def setUp(self):
        g = torch.Generator().manual_seed(5)
        self.lin = torch.nn.Linear(48, 80)
        with torch.no_grad():
            self.lin.weight.copy_(torch.randn(80, 48, generator=g) * 0.05)
        self.x = torch.randn(3, 7, 48, generator=g) * 2

    def test_fake_quant_rounds_to_e4m3_and_saturates(self):
        t = torch.tensor([0.0, 1.0, 1.0625, 1.1875, 500.0, -1000.0])
        # 1.0625 lies halfway between 1 and 1.125: ties to even (1); 1.1875 halfway to 1.25: 1.25
        self.assertEqual(probe.fake_quant(t, 1.0).tolist(), [0.0, 1.0, 1.0, 1.25, 448.0, -448.0])
        self.assertEqual(probe.fake_quant(t, 2.0).tolist()[4:], [512.0, -896.0])  # 250 -> 256; -500 -> -448

    def test_equals_the_recipe_simulation(self):
        from experiments.accuracy import fp8_recipes as fr
        y = probe.emulated_linear(self.lin, {})(self.x)
        ref = fr.fake_quant_linear(self.lin, fr.RECIPES["tensor_dynamic"])(self.x)
        self.assertTrue(torch.equal(y, ref))
        exact = self.lin(self.x)
        err = ((y - exact).norm() / exact.norm()).item()
        self.assertGreater(err, 1e-3)  # E4M3 rounding happened
        self.assertLess(err, 0.1)

    def test_roundings_take_effect(self):
        base = probe.emulated_linear(self.lin, {})(self.x)
        out16 = probe.emulated_linear(self.lin, {"round_out": True})(self.x)
        self.assertTrue(torch.equal(out16, out16.half().float()))
        self.assertFalse(torch.equal(out16, base))
        self.assertTrue(torch.allclose(out16, base, rtol=1e-3, atol=1e-3))
        y16 = probe.emulated_linear(self.lin.half(), {})(self.x.half())
        self.assertEqual(y16.dtype, torch.float16)


if __name__ == "__main__":
    if "--torch" in sys.argv:
        sys.argv.remove("--torch")
        if not HAVE_TORCH:
            print(f"skipped: {WHY}")
            sys.exit(77)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Emulation)
    else:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Usage)
    sys.exit(0 if unittest.TextTestRunner(verbosity=1).run(suite).wasSuccessful() else 1)
