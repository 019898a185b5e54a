#!/usr/bin/env python3
"""experiments/accuracy/digits_accuracy.py without torch: its command-line checks and the dataset loader on
the copy `./study setup` extracts (a small fake here). The training and the forwards need torch,
timm and a GPU (the script itself, on the GPU machine)."""
import contextlib
import gzip
import io
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
from experiments.accuracy import digits_accuracy as da


def run(*argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = da.main(list(argv))
        except SystemExit as e:
            rc = e.code
    return rc, err.getvalue()


class Digits(unittest.TestCase):
    def test_loader_reads_the_extracted_csv(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / ".deps" / "digits").mkdir(parents=True)
            rows = [",".join(["0"] * 63 + ["16", str(k)]) for k in (3, 7)]
            (Path(d) / ".deps" / "digits" / "digits.csv.gz").write_bytes(gzip.compress("\n".join(rows).encode()))
            pixels, labels = da.load_digits(d, use_sklearn=False)
            self.assertEqual(labels, [3, 7])
            self.assertEqual([len(p) for p in pixels], [64, 64])
            self.assertEqual(pixels[1][63], 16.0)

    def test_no_data_is_one_clear_error(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(FileNotFoundError) as e:
                da.load_digits(d, use_sklearn=False)
            self.assertIn("./study setup", str(e.exception))

    def test_bad_use(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(run("--out", d, "--epochs", "0")[0], 2)
            self.assertEqual(run("--out", d, "--layers", "13")[0], 2)
            rc, err = run("--out", d, "--build-dir", d)
            self.assertEqual(rc, 2)
            self.assertIn("not built", err)
            rc, err = run("--out", d, "--build-dir", d, "--fp8-step", "no_such_step")
            self.assertEqual(rc, 2)


if __name__ == "__main__":
    unittest.main()
