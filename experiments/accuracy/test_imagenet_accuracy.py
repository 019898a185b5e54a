#!/usr/bin/python3
"""Tests of imagenet_accuracy.py without torch, timm or a GPU: a tiny ImageFolder written into a
temporary dir, and fake encoder benches (small Python scripts in a temporary build dir) that
predict an image's class from its colour, so that every expected top-1 is exact.

  /usr/bin/python3 -m unittest experiments/accuracy/test_imagenet_accuracy.py      (from the repo root)
  /usr/bin/python3 experiments/accuracy/test_imagenet_accuracy.py

The val dir also holds files that are not images (a .txt in a class folder, a hidden file, a
CSV beside the class folders): list_images ignores them, as torchvision's ImageFolder does.
"""

import contextlib
import csv
import hashlib
import io
import json
import shutil
import stat
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
from experiments.accuracy import imagenet_accuracy as ia
from studylib.paths import REPO

PY = sys.executable
CLASSES = ["n01440764", "n02102040", "n03000134"]
# (width, height, format) of each class's three images: portrait, landscape and square, PNG and JPEG.
SHAPES = [(40, 30, "PNG"), (30, 52, "JPEG"), (48, 48, "PNG")]
MEAN = [0.5, 0.5, 0.5]
STD = [0.5, 0.5, 0.5]

# A fake bench: the encoder bench's CLI. Its logits are the per-channel means of each image, so the
# class whose colour channel dominates wins (every image is tinted by its class). Per version:
# *_fp8 moves the first image of each call to the next class (one error per call), broken exits 1,
# skip writes a `skipped` row and no logits, as a bench does on a GPU without FP8. Every call is
# logged to calls.jsonl beside the fake, with a hash of each image it received.
FAKE = textwrap.dedent('''\
    #!{py}
    import argparse, hashlib, json, os, sys
    import numpy as np
    from experiments.accuracy.imagenet_accuracy import read_safetensors, write_safetensors
    version = os.path.basename(sys.argv[0])[len("encoder_"):]
    p = argparse.ArgumentParser()
    for f in ("--model", "--image-size", "--batch", "--weights", "--images", "--calibration-images",
              "--logits-out", "--warmup", "--iters", "--csv", "--classes"):
        p.add_argument(f, required=f != "--classes")
    p.add_argument("--no-check", action="store_true")
    a = p.parse_args()
    if version == "broken":
        print("encoder_broken: out of device memory", file=sys.stderr)
        sys.exit(1)
    images = read_safetensors(a.images)[0]["images"]
    calibration = read_safetensors(a.calibration_images)[0]["images"]
    s = int(a.image_size)
    assert images.shape == (int(a.batch), 3, s, s), images.shape
    assert calibration.shape[1:] == (3, s, s), calibration.shape
    digest = lambda x: [hashlib.sha1(i.astype("<f4").tobytes()).hexdigest() for i in x]
    with open(os.path.join(os.path.dirname(sys.argv[0]), "calls.jsonl"), "a") as f:
        f.write(json.dumps({{"version": version, "batch": int(a.batch), "model": a.model, "classes": a.classes,
                            "weights": a.weights, "images": digest(images),
                            "calibration": digest(calibration)}}) + "\\n")
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as f:
        if new:
            f.write("gpu,precision,status,note\\n")
        if version == "skip":
            f.write("Fake GPU,fp8_e4m3,skipped,FP8 needs compute capability 8.9 or newer\\n")
            sys.exit(0)
        f.write("Fake GPU,%s,ok,\\n" % ("fp8_e4m3" if version.endswith("fp8") else "fp16"))
    logits = np.zeros((len(images), int(a.classes or 3)), np.float32)
    logits[:, :3] = images.mean(axis=(2, 3))
    if version.endswith("fp8"):
        logits[0] = np.roll(logits[0], 1)
    write_safetensors({{"logits": logits}}, a.logits_out)
    ''')


def digest(x):
    return hashlib.sha1(x.astype("<f4").tobytes()).hexdigest()


def tinted(rng, w, h, cls):
    """Noise whose channel `cls` is bright and the others dark."""
    x = rng.integers(0, 110, size=(h, w, 3), dtype=np.uint8)
    x[:, :, cls] = rng.integers(150, 256, size=(h, w), dtype=np.uint8)
    return x


def make_val_dir(root, rng):
    root.mkdir(parents=True)
    for c, wnid in enumerate(CLASSES):
        d = root / wnid
        d.mkdir()
        for k, (w, h, fmt) in enumerate(SHAPES):
            name = f"ILSVRC2012_val_{c * 10 + k:08d}." + ("JPEG" if fmt == "JPEG" else "png")
            im = Image.fromarray(tinted(rng, w, h, c))
            if k == 2 and c == 1:
                im = im.convert("RGBA")  # preprocess must drop the alpha channel
            im.save(d / name, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
        (d / "notes.txt").write_text("not an image\n")
        (d / ".DS_Store").write_bytes(b"\0\1")
    (root / "LOC_val_solution.csv").write_text("ImageId,PredictionString\n")
    return root


class ImageNetAccuracyTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_imagenet_accuracy_")
        self.dir = Path(self.tmp.name)
        self.val = make_val_dir(self.dir / "val", np.random.default_rng(0))
        self.build = self.dir / "build"
        bench_dir = self.build / "stages" / "encoder"
        bench_dir.mkdir(parents=True)
        for v in ("e6_best", "e12_fp8", "broken", "skip"):
            p = bench_dir / f"encoder_{v}"
            p.write_text(FAKE.format(py=PY))
            p.chmod(p.stat().st_mode | stat.S_IXUSR)
        self.calls = bench_dir / "calls.jsonl"
        self.weights = self.dir / "study_weights.safetensors"
        ia.write_safetensors({"head.weight": np.zeros((3, 8), np.float32)}, self.weights,
                             {"model": "vit_b_dummy", "mean": json.dumps(MEAN), "std": json.dumps(STD)})
        self.out = self.dir / "out"

    def tearDown(self):
        self.tmp.cleanup()

    def main(self, *extra, val=None, build=None, size="32"):
        argv = ["--val-dir", str(val or self.val), "--reference", "none", "--weights", str(self.weights),
                "--build-dir", str(build or self.build), "--image-size", size, "--batch", "4",
                "--calibration", "2", "--out", str(self.out)] + list(extra)
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            rc = ia.main(argv)
        return rc, stdout.getvalue(), stderr.getvalue()

    def logged_calls(self):
        return [json.loads(line) for line in self.calls.read_text().splitlines()] if self.calls.exists() else []

    # -- pure parts ----------------------------------------------------------------------------

    def test_list_images_sorts_classes_and_files_and_ignores_other_files(self):
        paths, labels, classes = ia.list_images(self.val)
        self.assertEqual(classes, CLASSES)
        self.assertEqual(labels, [0, 0, 0, 1, 1, 1, 2, 2, 2])
        self.assertEqual(len(paths), 9)
        self.assertEqual([p.parent.name for p in paths], [c for c in CLASSES for _ in range(3)])
        for c in range(3):
            names = [p.name for p in paths[3 * c:3 * c + 3]]
            self.assertEqual(names, sorted(names))
        self.assertFalse([p for p in paths if p.suffix.lower() not in (".png", ".jpeg")])

    def test_preprocess_shape_fp16_values_and_normalization(self):
        gray = self.dir / "gray.png"
        Image.new("RGB", (57, 41), (128, 128, 128)).save(gray)
        x = ia.preprocess(gray, 32)
        self.assertEqual(x.shape, (3, 32, 32))
        self.assertEqual(x.dtype, np.float32)
        self.assertTrue(np.array_equal(x, x.astype(np.float16).astype(np.float32)))
        for c in range(3):
            want = np.float32((np.float32(128) / np.float32(255) - np.float32(ia.IMAGENET_MEAN[c]))
                              / np.float32(ia.IMAGENET_STD[c]))
            np.testing.assert_array_equal(x[c], np.full((32, 32), np.float16(want), np.float32))
        y = ia.preprocess(gray, 32, MEAN, STD)
        np.testing.assert_array_equal(y, np.float32(np.float16((128 / 255 - 0.5) / 0.5)))

        for path in sorted(self.val.glob("*/*")):
            if path.suffix.lower() in (".png", ".jpeg"):
                x = ia.preprocess(path, 48)
                self.assertEqual(x.shape, (3, 48, 48), path)
                self.assertTrue(np.array_equal(x, x.astype(np.float16).astype(np.float32)), path)

    def test_preprocess_crops_the_center(self):
        # Red bands 20 px wide at both ends of a 100x50 image: the center crop of the resized
        # image (shorter side 37, then 32 of 74 columns) must hold only the gray middle.
        a = np.full((50, 100, 3), 128, np.uint8)
        a[:, :20] = a[:, 80:] = (255, 0, 0)
        path = self.dir / "bands.png"
        Image.fromarray(a).save(path)
        x = ia.preprocess(path, 32, MEAN, STD)
        np.testing.assert_allclose(x, (128 / 255 - 0.5) / 0.5, atol=0.02)

    def test_safetensors_round_trip(self):
        rng = np.random.default_rng(1)
        tensors = {"images": rng.standard_normal((2, 3, 4, 4)).astype(np.float32),
                   "b": np.arange(5, dtype=np.float32), "scalar": np.float32(3.5).reshape(())}
        path = self.dir / "t.safetensors"
        ia.write_safetensors(tensors, path, {"mean": "[0.5]"})
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        self.assertEqual(n % 8, 0)
        self.assertEqual(len(raw), 8 + n + 4 * (96 + 5 + 1))
        back, meta = ia.read_safetensors(path)
        self.assertEqual(meta, {"mean": "[0.5]"})
        self.assertEqual(sorted(back), sorted(tensors))
        for k, v in tensors.items():
            self.assertEqual(back[k].dtype, np.float32)
            np.testing.assert_array_equal(back[k], v)
        # A file from the safetensors package (the reference fixture) reads too.
        fixture = REPO / "reference" / "fixtures" / "tiny_vit_io.safetensors"
        if fixture.exists():
            self.assertEqual(ia.read_safetensors(fixture, ["logits"])[0]["logits"].shape, (2, 10))
        with self.assertRaises(ia.UsageError):
            ia.read_safetensors(self.val / CLASSES[0] / "notes.txt")

    def test_topk_accuracy(self):
        logits = np.array([[0.1, 0.9, 0.0, 0.2],
                           [0.8, 0.1, 0.05, 0.05],
                           [0.2, 0.3, 0.4, 0.1]], np.float32)
        labels = [1, 2, 0]
        self.assertAlmostEqual(ia.topk_accuracy(logits, labels, 1), 1 / 3)
        self.assertAlmostEqual(ia.topk_accuracy(logits, labels, 2), 1 / 3)
        self.assertAlmostEqual(ia.topk_accuracy(logits, labels, 3), 1.0)
        self.assertAlmostEqual(ia.topk_accuracy(logits, labels, 10), 1.0)
        np.testing.assert_array_equal(ia.topk_indices(logits, 2), [[1, 3], [0, 1], [2, 1]])

    # -- bad use -------------------------------------------------------------------------------

    def assert_usage_error(self, rc, err, *words):
        self.assertEqual(rc, 2, err)
        self.assertTrue(err.startswith("imagenet_accuracy.py: error: "), err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for w in words:
            self.assertIn(w, err)

    def test_missing_val_dir(self):
        rc, _, err = self.main(val=self.dir / "nowhere")
        self.assert_usage_error(rc, err, "nowhere", "no such directory")
        with self.assertRaises(ia.UsageError):
            ia.list_images(self.dir / "nowhere")

    def test_val_dir_without_class_folders(self):
        flat = self.dir / "flat"
        flat.mkdir()
        shutil.copy(next(self.val.glob("*/*.png")), flat / "ILSVRC2012_val_00000001.png")
        rc, _, err = self.main(val=flat)
        self.assert_usage_error(rc, err, "no class folders")

    def test_class_folder_without_images(self):
        (self.val / "n04000000").mkdir()
        (self.val / "n04000000" / "readme.txt").write_text("x")
        rc, _, err = self.main()
        self.assert_usage_error(rc, err, "n04000000", "without images")

    def test_image_size_not_a_multiple_of_16(self):
        rc, _, err = self.main(size="100")
        self.assert_usage_error(rc, err, "multiple of 16")
        self.assertFalse(self.calls.exists())

    def test_benches_not_built(self):
        rc, _, err = self.main(build=self.dir / "empty_build")
        self.assert_usage_error(rc, err, "encoder_e6_best", "not built")

    def test_unreadable_image_is_named(self):
        bad = self.val / CLASSES[0] / "ILSVRC2012_val_00000005.JPEG"
        bad.write_bytes(b"not a jpeg at all")
        rc, _, err = self.main()
        self.assert_usage_error(rc, err, "cannot read image", str(bad))

    def test_reference_none_needs_study_weights(self):
        rc, _, err = self.main("--weights", str(self.val / CLASSES[0] / "notes.txt"))
        self.assert_usage_error(rc, err, "notes.txt", "safetensors")

    # -- end to end ----------------------------------------------------------------------------

    def test_end_to_end_with_fake_benches(self):
        rc, out, err = self.main()
        self.assertEqual(rc, 0, err)
        self.assertIn("chunk 1/2: 4/7 images", out)
        self.assertIn("chunk 2/2: 7/7 images", out)

        with open(self.out / "imagenet_accuracy.csv", newline="") as f:
            rows = {r["forward"]: r for r in csv.DictReader(f)}
        self.assertEqual(list(rows), ["encoder e6_best", "encoder e12_fp8"])
        fp16, fp8 = rows["encoder e6_best"], rows["encoder e12_fp8"]
        self.assertEqual((fp16["precision"], fp16["images"], float(fp16["top1"]), float(fp16["top5"])),
                         ("fp16", "7", 1.0, 1.0))
        # The fake FP8 bench misses the first image of each call: images 0 and 4 of 7.
        self.assertEqual((fp8["precision"], fp8["images"], float(fp8["top5"])), ("fp8_e4m3", "7", 1.0))
        self.assertAlmostEqual(float(fp8["top1"]), 5 / 7)
        self.assertAlmostEqual(float(fp8["agreement_with_fp16_step"]), 5 / 7)
        self.assertEqual((fp16["agreement_with_timm_fp32"], fp8["agreement_with_timm_fp32"]), ("", ""))
        self.assertEqual((fp16["nonfinite_images"], fp8["nonfinite_images"]), ("0", "0"))

        result = json.loads((self.out / "imagenet_accuracy.json").read_text())
        self.assertEqual(result["images"], 7)
        self.assertEqual(result["images_in_val_dir"], 9)
        self.assertEqual(result["chunks"], [4, 3])
        self.assertEqual(result["classes"], 3)
        self.assertEqual(result["gpu"], "Fake GPU")
        self.assertIsNone(result["reference"])
        self.assertEqual(result["preprocessing"]["mean"], MEAN)
        self.assertEqual(result["versions"], {"fp16": "e6_best", "fp8": "e12_fp8"})
        self.assertEqual([r["forward"] for r in result["rows"]], ["encoder e6_best", "encoder e12_fp8"])
        self.assertAlmostEqual(result["rows"][1]["top1"], 5 / 7)
        self.assertEqual(len(result["commands"]), 4)
        self.assertIn("--batch 4", result["commands"][0])
        self.assertIn("--batch 3", result["commands"][3])
        paths, labels, _ = ia.list_images(self.val)
        self.assertEqual(result["calibration_images"], [paths[i].relative_to(self.val).as_posix() for i in (2, 6)])

        # What the benches got: the 7 other images in order, in calls of 4 then 3, each version
        # the same, and always images 2 and 6 (the middles of two halves of the sorted list, from
        # two classes) as calibration, none of them evaluated.
        evaluated_idx = [0, 1, 3, 4, 5, 7, 8]
        digests = {digest(ia.preprocess(p, 32, MEAN, STD)): i for i, p in enumerate(paths)}
        self.assertEqual(len(digests), 9)
        calls = self.logged_calls()
        self.assertEqual([(c["version"], c["batch"]) for c in calls],
                         [("e6_best", 4), ("e12_fp8", 4), ("e6_best", 3), ("e12_fp8", 3)])
        for c in calls:
            self.assertEqual([digests[d] for d in c["calibration"]], [2, 6])
            self.assertEqual((c["model"], c["classes"], c["weights"]), ("vit_b", "3", str(self.weights)))
        self.assertEqual([digests[d] for c in calls[0::2] for d in c["images"]], evaluated_idx)
        self.assertEqual([digests[d] for c in calls[1::2] for d in c["images"]], evaluated_idx)
        evaluated = {d for c in calls for d in c["images"]}
        self.assertFalse(evaluated & {d for c in calls for d in c["calibration"]})

        with open(self.out / "imagenet_predictions.csv", newline="") as f:
            pred = list(csv.DictReader(f))
        self.assertEqual([r["image"] for r in pred], [paths[i].relative_to(self.val).as_posix() for i in evaluated_idx])
        self.assertEqual([int(r["label"]) for r in pred], [labels[i] for i in evaluated_idx])
        self.assertEqual([int(r["top1 encoder e6_best"]) for r in pred], [labels[i] for i in evaluated_idx])
        self.assertEqual([int(r["top1 encoder e12_fp8"]) for r in pred], [1, 0, 1, 1, 2, 2, 2])

        text = (self.out / "imagenet_accuracy.txt").read_text()
        self.assertIn("71.43%", text)
        self.assertFalse((self.out / "work").exists())
        self.assertTrue((self.out / "encoder_e6_best_rows.csv").exists())

    def test_limit_keeps_the_first_images_and_the_same_calibration(self):
        rc, out, err = self.main("--limit", "5")
        self.assertEqual(rc, 0, err)
        result = json.loads((self.out / "imagenet_accuracy.json").read_text())
        self.assertEqual((result["images"], result["chunks"]), (5, [4, 1]))
        paths = ia.list_images(self.val)[0]
        self.assertEqual(result["calibration_images"], [paths[i].relative_to(self.val).as_posix() for i in (2, 6)])
        self.assertIn("chunk 2/2: 5/5 images", out)

    def test_failing_bench_is_a_clear_error(self):
        rc, _, err = self.main("--fp8-version", "broken")
        self.assertEqual(rc, 1, err)
        self.assertTrue(err.startswith("imagenet_accuracy.py: error: encoder_broken exited 1: "
                                       "encoder_broken: out of device memory"), err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertFalse((self.out / "imagenet_accuracy.csv").exists())

    def test_skipping_bench_says_why(self):
        rc, _, err = self.main("--fp8-version", "skip")
        self.assertEqual(rc, 1, err)
        self.assertIn("encoder_skip wrote no logits", err)
        self.assertIn("FP8 needs compute capability 8.9", err)


if __name__ == "__main__":
    unittest.main()
