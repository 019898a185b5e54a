#!/usr/bin/env python3
"""experiments/accuracy/timm_parity.py against fake encoder benches (needs torch and timm; exits 77, saying
why, where this interpreter lacks them): a bench that computes timm's forward exactly passes; one
that drops fc1's bias fails with every parameter randomized, and passes on timm's own init, whose
zero biases hide the bug (why the random weight set is the default); one that computes GELU in
its tanh form fails with every parameter randomized (the drawn fc1 biases put the pre-activations
where that form is furthest from erf) and passes when --compose asks it for the exact form.

  .venv/bin/python experiments/accuracy/test_timm_parity.py
"""
import sys
import tempfile
import unittest
from pathlib import Path


try:
    import torch
    import timm  # noqa: F401
    import safetensors  # noqa: F401
    HAVE_TORCH, WHY = True, ""
except ImportError as e:
    HAVE_TORCH, WHY = False, f"needs torch, timm and safetensors, which {sys.executable} lacks ({e})"

# The fake bench: the encoder bench's command line, timm's fp32 forward on the weights and images
# it is given (fc1's bias zeroed for BUG "no_fc1_bias"; for "gelu_tanh" in fp16, with GELU's tanh
# form unless --compose names "erf"), the logits written where the real bench writes them.
FAKE = """#!{python}
import argparse
import torch
from reference import export_timm_fixture as fx
from safetensors.torch import load_file, save_file
ap = argparse.ArgumentParser()
for opt in ("--model", "--weights", "--images", "--logits-out", "--csv", "--warmup", "--iters"):
    ap.add_argument(opt)
ap.add_argument("--image-size", type=int)
ap.add_argument("--batch", type=int)
ap.add_argument("--compose", default="")
a = ap.parse_args()
model = fx.timm_vit(a.model, a.image_size, 0)
state = load_file(a.weights)
if {bug!r} == "no_fc1_bias":
    for k in state:
        if k.endswith("mlp.fc1.bias"):
            state[k] = torch.zeros_like(state[k])
model.load_state_dict(state)
images = load_file(a.images)["images"].float()
if {bug!r} == "gelu_tanh":  # an fp16 forward, as the real benches run, with tanh GELU unless asked for erf
    model, images = model.half(), images.half()
    for m in model.modules():
        if isinstance(m, torch.nn.GELU) and "erf" not in a.compose:
            m.approximate = "tanh"
with torch.inference_mode():
    logits = model(images)
save_file({{"logits": logits.half().contiguous()}}, a.logits_out)
"""


def fake_build(root, bug=""):
    build = Path(root) / (bug or "exact")
    bench = build / "stages" / "encoder" / "encoder_fake"
    bench.parent.mkdir(parents=True)
    bench.write_text(FAKE.format(python=sys.executable, bug=bug))
    bench.chmod(0o755)
    return build


def parity(build, out, weight_set, *extra):
    from experiments.accuracy import timm_parity
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return timm_parity.main(["--model", "vit_ti", "--image-size", "32", "--images", "256", "--version", "fake",
                             "--build-dir", str(build), "--out", str(out), "--weight-set", weight_set,
                             "--device", device, *extra])


class Parity(unittest.TestCase):
    def test_exact_forward_passes_both_weight_sets(self):
        with tempfile.TemporaryDirectory() as d:
            build = fake_build(d)
            for ws in ("random", "timm"):
                self.assertEqual(parity(build, Path(d) / ws, ws), 0, (Path(d) / ws / "parity.txt").read_text())

    def test_a_dropped_bias_fails_random_weights_only(self):
        with tempfile.TemporaryDirectory() as d:
            build = fake_build(d, "no_fc1_bias")
            self.assertEqual(parity(build, Path(d) / "random", "random"), 1)
            self.assertIn("FAILED", (Path(d) / "random" / "parity.txt").read_text())
            # timm's init has zero biases: the same bug passes there.
            self.assertEqual(parity(build, Path(d) / "timm", "timm"), 0)

    def test_tanh_gelu_fails_random_weights_and_compose_reaches_the_bench(self):
        import json
        with tempfile.TemporaryDirectory() as d:
            build = fake_build(d, "gelu_tanh")
            self.assertEqual(parity(build, Path(d) / "tanh", "random"), 1)
            self.assertEqual(parity(build, Path(d) / "erf", "random", "--compose", "mlp=cutlass_epilogue_erf"), 0,
                             (Path(d) / "erf" / "parity.txt").read_text())
            result = json.loads((Path(d) / "erf" / "parity.json").read_text())
            self.assertEqual(result["compose"], "mlp=cutlass_epilogue_erf")
            self.assertIn("--compose mlp=cutlass_epilogue_erf", result["command"])
            self.assertIn("fake + mlp=cutlass_epilogue_erf vs timm", (Path(d) / "erf" / "parity.txt").read_text())

    def test_bad_use(self):
        from experiments.accuracy import timm_parity
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(timm_parity.main(["--image-size", "30", "--out", d]), 2)
            self.assertEqual(timm_parity.main(["--version", "none", "--build-dir", d, "--out", d]), 2)


if __name__ == "__main__":
    if not HAVE_TORCH:
        print(f"skipping: {WHY}")
        sys.exit(77)
    unittest.main()
