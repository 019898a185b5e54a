#!/usr/bin/python3
"""Tests of experiments/anchors/precompile.py with a fake anchor script (no torch, no GPU): only
the torch.compile anchors run (not torchao's, which the cache does not serve), once per shape,
with one call and no check or energy loop, one at a time per GPU named, each seeing its GPU as
device 0 (the caller's CUDA_VISIBLE_DEVICES entry where it has one), several specs in one pool;
--kernels lists the kernels of the forwards generated now; a failing compile fails the script.

  python3 -m experiments.anchors.test_precompile
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a user runs it, by module name from the checkout (cwd), in a bare environment.
PRECOMPILE = [sys.executable, "-m", "experiments.anchors.precompile"]
REPO = HERE.parent.parent

# Records its arguments, its CUDA_VISIBLE_DEVICES and its start and end time; fails at the batch
# size in FAKE_FAIL_BATCH.
FAKE = textwrap.dedent('''\
    import json, os, sys, time
    start = time.time()
    time.sleep(0.3)
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(json.dumps({"argv": sys.argv[1:], "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
                            "pythonpath": os.environ.get("PYTHONPATH", ""),
                            "start": start, "end": time.time()}) + "\\n")
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache and os.environ.get("FAKE_GENERATES"):  # a generated forward, as Inductor writes one
        b = sys.argv[sys.argv.index("--batch") + 1]
        d = os.path.join(cache, "ab")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"module_b{b}.py"), "w") as f:
            f.write(f"def call(args):\\n    assert_size_stride(arg0, ({b}, 3, 224, 224), ())\\n"
                    "    extern_kernels.bias_addmm(x)\\n    extern_kernels.bias_addmm(y)\\n"
                    "    triton_tem_fused_addmm_gelu_3.run(z)\\n    triton_per_fused_layer_norm_12.run(w)\\n")
        with open(os.path.join(d, "helper.py"), "w") as f:
            f.write("triton_poi_fused_0 = async_compile.triton('x')\\n")
    sys.exit(3 if sys.argv[sys.argv.index("--batch") + 1] == os.environ.get("FAKE_FAIL_BATCH") else 0)
    ''')

SPEC = textwrap.dedent('''\
    description = "fake"
    family = "encoder"
    versions = ["e6_best"]
    anchor_script = "{script}"
    anchors = {anchors}
    models = ["vit_b"]
    batches = [1, 32]
    image_sizes = [224]
    streams = [1]
    rounds = 3
    warmup = 5
    iters = 20
    seed = 1234
    timeout_s = 60
    energy_s = 5
    ''')


class Precompile(unittest.TestCase):
    def run_script(self, anchors, gpus, fail_batch="", extra=(), env=None):
        d = Path(tempfile.mkdtemp())
        (d / "fake.py").write_text(FAKE)
        (d / "spec.toml").write_text(SPEC.format(script=d / "fake.py", anchors=json.dumps(anchors)))
        log = d / "log.jsonl"
        res = subprocess.run([*PRECOMPILE, "--spec", str(d / "spec.toml"), "--gpus", gpus,
                              "--python", sys.executable, *extra], capture_output=True, text=True,
                             env={"FAKE_LOG": str(log), "FAKE_FAIL_BATCH": fail_batch, "PATH": "/usr/bin:/bin",
                                  **(env or {})}, cwd=REPO, timeout=60)
        calls = [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
        return res, calls

    def test_compiled_anchors_once_per_shape_over_the_gpus(self):
        res, calls = self.run_script(["pytorch_timm_graph", "pytorch_timm_compile_graph",
                                      "pytorch_torchao_fp8_tensor_graph", "vit_compile_graph_2"], "2,5")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        shapes = sorted((c["argv"][c["argv"].index("--version") + 1], c["argv"][c["argv"].index("--batch") + 1])
                        for c in calls)
        self.assertEqual(shapes, [("pytorch_timm_compile_graph", "1"), ("pytorch_timm_compile_graph", "32"),
                                  ("vit_compile_graph_2", "1"), ("vit_compile_graph_2", "32")])
        # no eager, graph or torchao anchor, one round; the larger batch first
        self.assertEqual([c["argv"][c["argv"].index("--batch") + 1] for c in sorted(calls, key=lambda c: c["start"])][:2],
                         ["32", "32"])
        for c in calls:
            a = c["argv"]
            # The anchor scripts import the study's package: the checkout comes first on their path.
            self.assertEqual(c["pythonpath"].split(os.pathsep)[0], str(REPO))
            self.assertEqual(a[a.index("--warmup") + 1], "0")
            self.assertEqual(a[a.index("--iters") + 1], "1")
            self.assertEqual(a[a.index("--device") + 1], "0")
            self.assertIn("--no-check", a)
            self.assertNotIn("--energy", a)
        self.assertEqual({c["gpu"] for c in calls}, {"2", "5"})
        for gpu in ("2", "5"):  # one process per GPU at a time
            mine = sorted((c["start"], c["end"]) for c in calls if c["gpu"] == gpu)
            self.assertTrue(all(a[1] <= b[0] for a, b in zip(mine, mine[1:])), mine)
        self.assertIn("compiled in", res.stdout)

    def test_several_specs_in_one_pool(self):
        d = Path(tempfile.mkdtemp())
        (d / "fake.py").write_text(FAKE)
        (d / "a.toml").write_text(SPEC.format(script=d / "fake.py", anchors='["pytorch_timm_compile_graph"]'))
        (d / "b.toml").write_text(SPEC.format(script=d / "fake.py", anchors='["vit_compile_graph_2"]')
                                  .replace("batches = [1, 32]", "batches = [8]"))
        log = d / "log.jsonl"
        res = subprocess.run([*PRECOMPILE, "--spec", str(d / "a.toml"), "--spec", str(d / "b.toml"),
                              "--gpus", "0,1", "--python", sys.executable], capture_output=True, text=True,
                             env={"FAKE_LOG": str(log), "PATH": "/usr/bin:/bin"}, cwd=REPO, timeout=60)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        calls = [json.loads(l) for l in log.read_text().splitlines()]
        self.assertEqual(sorted((c["argv"][c["argv"].index("--version") + 1], c["argv"][c["argv"].index("--batch") + 1])
                                for c in calls),
                         [("pytorch_timm_compile_graph", "1"), ("pytorch_timm_compile_graph", "32"),
                          ("vit_compile_graph_2", "8")])
        spans = sorted((c["start"], c["end"]) for c in calls)
        self.assertEqual({c["gpu"] for c in calls}, {"0", "1"})  # one pool over the GPUs

    def test_kernels_of_the_forwards_compiled_now(self):
        cache = Path(tempfile.mkdtemp())
        old = cache / "zz" / "old.py"  # a forward from an earlier compile: not this one's
        old.parent.mkdir()
        old.write_text("def call(args):\n    extern_kernels.mm(x)\n")
        os.utime(old, (1e9, 1e9))
        out = Path(tempfile.mkdtemp()) / "run" / "compile_kernels.txt"
        res, calls = self.run_script(["pytorch_timm_compile_graph"], "0", extra=["--kernels", str(out)],
                                     env={"TORCHINDUCTOR_CACHE_DIR": str(cache), "FAKE_GENERATES": "1"})
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        text = out.read_text()
        self.assertIn("== ab/module_b1.py (images 1 x 3 x 224 x 224)\n      2 extern_kernels.bias_addmm\n"
                      "      1 triton_per_fused_layer_norm\n      1 triton_tem_fused_addmm_gelu\n", text)
        self.assertIn("== ab/module_b32.py (images 32 x 3 x 224 x 224)", text)
        self.assertNotIn("old.py", text)
        self.assertNotIn("helper.py", text)  # no call(): not a forward
        # Nothing compiled now (all served by the cache): said so.
        res, _ = self.run_script(["pytorch_timm_compile_graph"], "0", extra=["--kernels", str(out)],
                                 env={"TORCHINDUCTOR_CACHE_DIR": str(cache)})
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("no generated forward was written", out.read_text())
        # An unwritable path: a clear error before any compile.
        res, calls = self.run_script(["pytorch_timm_compile_graph"], "0", extra=["--kernels", "/proc/nope/k.txt"])
        self.assertEqual((res.returncode, calls), (2, []))
        self.assertIn("cannot write --kernels", res.stderr)

    def test_gpus_index_the_callers_visible_devices(self):
        res, calls = self.run_script(["pytorch_timm_compile_graph"], "0,1", env={"CUDA_VISIBLE_DEVICES": "6,3"})
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual({c["gpu"] for c in calls}, {"6", "3"})
        res, calls = self.run_script(["pytorch_timm_compile_graph"], "2", env={"CUDA_VISIBLE_DEVICES": "6,3"})
        self.assertEqual((res.returncode, calls), (2, []))
        self.assertIn("not among CUDA_VISIBLE_DEVICES=6,3", res.stderr)

    def test_a_failed_compile_fails_the_script(self):
        res, calls = self.run_script(["pytorch_timm_compile_graph", "vit_compile_graph_2"], "0", fail_batch="32")
        self.assertEqual(res.returncode, 1)
        self.assertEqual(len(calls), 4)  # the others still compile
        self.assertIn("FAILED", res.stdout)
        self.assertIn("2 anchor shapes did not compile", res.stderr)

    def test_nothing_to_compile_and_bad_arguments(self):
        res, calls = self.run_script(["pytorch_timm", "pytorch_timm_graph", "pytorch_torchao_fp8_tensor_graph"], "0")
        self.assertEqual((res.returncode, calls), (0, []))
        self.assertIn("nothing to compile", res.stdout)
        for gpus in ("a", "0,0", ""):
            res, _ = self.run_script(["pytorch_timm_compile_graph"], gpus)
            self.assertEqual(res.returncode, 2, gpus)
            self.assertIn("--gpus", res.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
