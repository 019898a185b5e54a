"""vitstudy on any machine (no GPU, no torch needed): the module imports, lists the steps, reads
the reference fixture's weights and refuses malformed ones before asking for a GPU, says "no
CUDA device" where there is none, and refuses the timm features the forward does not compute,
from a state dict's names and shapes and from a module's attributes; the README's example names
only what exists.
Run with the build folder on PYTHONPATH (meson test vitstudy)."""
import struct
import sys
import unittest
from pathlib import Path

import vitstudy
from vitstudy import timm_weights
from vitstudy.model import _safetensors_shapes

FIXTURE = Path(__file__).resolve().parent.parent / "reference" / "fixtures" / "tiny_vit.safetensors"
GPU = vitstudy.gpu_count() > 0


def fixture_shapes():
    return _safetensors_shapes(FIXTURE)


def fixture_arrays():
    """The fixture's tensors as float32 arrays (its dtype is F32), read with the standard library."""
    import json
    import numpy as np
    data = FIXTURE.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        assert t["dtype"] == "F32", t["dtype"]
        out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=np.float32).reshape(t["shape"]).copy()
    return out


class Module(unittest.TestCase):
    def test_steps_listed_with_the_aliases(self):
        steps = vitstudy.steps()
        for name in ("e1_library", "e19_exact_gelu", "fastest_fp16", "fastest_fp8"):
            self.assertIn(name, steps)

    def test_the_cache_is_read_set_and_freed_through_attributes(self):
        for name in ("cache_budget", "cache_bytes", "forwards_kept", "weight_bytes"):
            self.assertIsInstance(getattr(vitstudy.Model, name), property, name)
        self.assertIsNotNone(vitstudy.Model.cache_budget.fset)
        self.assertTrue(callable(vitstudy.Model.free_cache))
        session = vitstudy.model._engine_module().Session
        for name in ("budget_bytes", "held_bytes", "forwards_kept", "release_forwards", "add_image_size", "run",
                     "run_unbound", "calibrate"):
            self.assertTrue(hasattr(session, name), name)

    def test_a_headless_state_dict_has_no_classes(self):
        shapes = dict(fixture_shapes())
        del shapes["head.weight"], shapes["head.bias"]
        self.assertEqual(timm_weights.sizes_from_state_dict(shapes, heads=3)["num_classes"], 0)

    def test_sizes_from_the_fixture(self):
        self.assertEqual(timm_weights.sizes_from_state_dict(fixture_shapes(), heads=3),
                         dict(hidden=48, heads=3, layers=2, num_classes=10, image_size=32))
        with self.assertRaisesRegex(ValueError, "heads="):
            timm_weights.sizes_from_state_dict(fixture_shapes())

    @unittest.skipIf(GPU, "this machine has a GPU: the GPU tests cover the forward")
    def test_no_cuda_device(self):
        with self.assertRaisesRegex(RuntimeError, "no CUDA device"):
            vitstudy.Model.from_safetensors(FIXTURE, heads=3)
        with self.assertRaisesRegex(RuntimeError, "no CUDA device"):
            vitstudy.Model.from_state_dict(fixture_arrays(), heads=3)

    def test_malformed_weights_refused_before_the_gpu(self):
        arrays = fixture_arrays()
        arrays["blocks.1.mlp.fc2.bias"] = arrays["blocks.1.mlp.fc2.bias"][:-1]
        with self.assertRaisesRegex(ValueError, r"'blocks.1.mlp.fc2.bias' has shape \[47\], expected \[48\]"):
            vitstudy.Model(arrays, dict(hidden=48, heads=3, layers=2, num_classes=10, image_size=32))
        arrays = fixture_arrays()
        del arrays["norm.bias"]
        with self.assertRaisesRegex(ValueError, "missing tensor 'norm.bias'"):
            vitstudy.Model(arrays, dict(hidden=48, heads=3, layers=2, num_classes=10, image_size=32))

    def test_unknown_step_and_precision(self):
        sizes = dict(hidden=48, heads=3, layers=2, num_classes=10, image_size=32)
        with self.assertRaisesRegex(ValueError, "unknown encoder step 'e99_nothing'"):
            vitstudy.Model(fixture_arrays(), sizes, step="e99_nothing")
        with self.assertRaisesRegex(ValueError, "precision must be one of"):
            vitstudy.Model(fixture_arrays(), sizes, precision="int4")


class StateDictRefusals(unittest.TestCase):
    """Each feature the forward does not compute, planted into the fixture's names and shapes."""

    def refused(self, change, words):
        shapes = dict(fixture_shapes())
        change(shapes)
        with self.assertRaisesRegex(timm_weights.Unsupported, words):
            timm_weights.sizes_from_state_dict(shapes, heads=3)

    def test_each_feature(self):
        h = 48
        self.refused(lambda s: s.update({"blocks.0.ls1.gamma": (h,)}), "layer scale")
        self.refused(lambda s: s.update({"blocks.1.attn.q_norm.weight": (16,)}), "qk-norm")
        self.refused(lambda s: s.update({"reg_token": (1, 4, h)}), "register tokens")
        self.refused(lambda s: s.update({"fc_norm.weight": (h,)}), "global average pooling")
        self.refused(lambda s: s.update({"norm_pre.weight": (h,)}), "pre-norm")
        self.refused(lambda s: s.update({"patch_embed.proj.weight": (h, 3, 14, 14)}), "patch size 16 only")
        self.refused(lambda s: s.pop("cls_token"), "class token")
        self.refused(lambda s: s.pop("blocks.0.attn.qkv.bias"), "qkv_bias")
        self.refused(lambda s: s.update({"blocks.0.mlp.fc1.weight": (3 * h, h)}), "MLP of 4 x hidden")
        self.refused(lambda s: s.update({"pos_embed": (1, 6, h)}), "square grid")


def fake_vit(**changes):
    """An object shaped like a timm VisionTransformer (class names and the attributes
    check_timm_module reads), with `changes` applied."""
    def named(cls_name, **attrs):
        return type(cls_name, (), attrs)()
    block = named("Block", mlp=named("Mlp", act=named("GELU", approximate="none")),
                  norm1=named("LayerNorm", eps=1e-6), norm2=named("LayerNorm", eps=1e-6),
                  ls1=named("Identity"), ls2=named("Identity"),
                  attn=named("Attention", q_norm=named("Identity"), k_norm=named("Identity"), norm=named("Identity")))
    model = named("VisionTransformer", global_pool="token", num_reg_tokens=0, has_class_token=True,
                  no_embed_class=False, blocks=[block, block])
    for key, value in changes.items():
        target, attr = (block, key[len("block."):]) if key.startswith("block.") else (model, key)
        *path, last = attr.split(".")
        for p in path:
            target = getattr(target, p)
        setattr(target, last, value)
    return model


class ModuleRefusals(unittest.TestCase):
    def test_a_standard_vit_passes(self):
        timm_weights.check_timm_module(fake_vit())

    def test_each_feature(self):
        def named(cls_name, **attrs):
            return type(cls_name, (), attrs)()
        for changes, words in (
                (dict(global_pool="avg"), "global_pool='avg'"),
                (dict(num_reg_tokens=4), "register tokens"),
                (dict(has_class_token=False), "class token"),
                (dict(no_embed_class=True), "class token"),
                ({"block.mlp.act": named("GELU", approximate="tanh")}, "exact GELU"),
                ({"block.mlp.act": named("SiLU")}, "exact GELU"),
                ({"block.norm2": named("LayerNorm", eps=1e-5)}, "eps 1e-6"),
                ({"block.norm1": named("RmsNorm", eps=1e-6)}, "LayerNorm"),
                ({"block.ls1": named("LayerScale")}, "layer scale"),
                ({"block.attn.q_norm": named("LayerNorm")}, "q_norm")):
            with self.subTest(changes=changes), self.assertRaisesRegex(timm_weights.Unsupported, words):
                timm_weights.check_timm_module(fake_vit(**changes))
        with self.assertRaisesRegex(timm_weights.Unsupported, "not Deit"):
            timm_weights.check_timm_module(type("Deit", (), {})())


class ReadmeExample(unittest.TestCase):
    def test_module_example_parses_and_names_what_exists(self):
        """The README's module example is Python, and the module face it names exists (its
        methods read from the source: importing it needs torch)."""
        import ast
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
        block = readme.split("<!-- vitstudy-module-example:start -->")[1].split("<!-- vitstudy-module-example:end -->")[0]
        tree = ast.parse(block.split("```python")[1].split("```")[0])
        source = ast.parse((Path(__file__).resolve().parent / "module.py").read_text())
        face = next(n for n in source.body if isinstance(n, ast.ClassDef) and n.name == "VisionTransformer")
        methods = {n.name for n in face.body if isinstance(n, ast.FunctionDef)}
        self.assertIn("VisionTransformer", vitstudy.__all__)
        called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and isinstance(n.func.value, (ast.Name, ast.Attribute))
                  and (getattr(n.func.value, "id", None) == "vit" or getattr(n.func.value, "attr", None) == "VisionTransformer")}
        self.assertTrue({"from_timm", "forward_features"} <= called, called)
        for name in called:
            self.assertIn(name, methods)

    def test_example_parses_and_names_what_exists(self):
        """The README's example (between its markers) is Python, and every vitstudy name and Model
        method it calls exists: a renamed API fails here, not on a user's GPU."""
        import ast
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
        block = readme.split("<!-- vitstudy-example:start -->")[1].split("<!-- vitstudy-example:end -->")[0]
        code = block.split("```python")[1].split("```")[0]
        tree = ast.parse(code)
        called = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                  and isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Name)
                  and n.value.value.id == "vitstudy"}
        self.assertIn("from_timm", called)
        for name in called:
            self.assertTrue(hasattr(vitstudy.Model, name), name)
        model_methods = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                         and n.func.value.id == "model"}
        self.assertIn("features", model_methods)
        for name in model_methods:
            self.assertTrue(hasattr(vitstudy.Model, name), name)


if __name__ == "__main__":
    sys.exit(unittest.main())
