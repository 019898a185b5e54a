"""The README's two vitstudy examples, run as a user runs them (on a GPU with torch and timm): the
Model example's logits, features and FP8 model, and the nn.Module example inside
torch.compile(fullgraph=True), each checked beyond "it ran": shapes, finite values, the logits
against the timm model's own, the compiled probabilities summing to one. The README is found beside
the checkout's vitstudy/ or given as the one argument (the wheel's check runs this file outside
the checkout, against the installed wheel).
Exit 77 (skipped) without torch, timm or a GPU, unless STUDY_REQUIRE_GPU=1."""
import sys
import unittest
from pathlib import Path

from needs_gpu import torch_timm_vitstudy

torch, timm, vitstudy = torch_timm_vitstudy()

README = Path(sys.argv.pop(1)) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "README.md"


def example(marker):
    """The Python of the README's block between <!-- MARKER:start --> and <!-- MARKER:end -->."""
    text = README.read_text()
    block = text.split(f"<!-- {marker}:start -->")[1].split(f"<!-- {marker}:end -->")[0]
    return block.split("```python")[1].split("```")[0]


def run(marker):
    names = {"__name__": "__main__"}  # torch.compile looks its globals up by module name
    exec(compile(example(marker), f"README.md ({marker})", "exec"), names)
    torch.cuda.synchronize()
    return names


class ReadmeExamples(unittest.TestCase):
    def test_the_model_example(self):
        ns = run("vitstudy-example")
        logits, features, images = ns["logits"], ns["features"], ns["images"]
        self.assertEqual(tuple(logits.shape), (images.shape[0], 1000))
        self.assertEqual(tuple(features.shape), (images.shape[0], 768))
        self.assertTrue(torch.isfinite(logits).all() and torch.isfinite(features).all())
        with torch.no_grad():
            want = ns["vit"].float()(images.float())
        err = ((logits.float() - want).norm() / want.norm()).item()
        print(f"Model example: rel L2 against timm fp32 {err:.2e}")
        self.assertLess(err, 0.05)
        fp8 = ns["fp8"](images)
        torch.cuda.synchronize()
        self.assertTrue(torch.isfinite(fp8).all())
        self.assertEqual(tuple(fp8.shape), tuple(logits.shape))

    def test_the_module_example_compiled(self):
        ns = run("vitstudy-module-example")
        probs, embeddings = ns["probs"], ns["embeddings"]
        self.assertEqual(tuple(probs.shape), (8, 1000))
        self.assertEqual(tuple(embeddings.shape), (8, 768))
        self.assertTrue(torch.isfinite(probs).all() and torch.isfinite(embeddings).all())
        self.assertLess((probs.sum(-1) - 1).abs().max().item(), 1e-3)
        self.assertIsInstance(ns["vit"], torch.nn.Module)


if __name__ == "__main__":
    print("vitstudy from", vitstudy.__file__)
    sys.exit(unittest.main())
