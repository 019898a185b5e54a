"""What the analysis tests share: the report build run as a user runs it (a subprocess, so exit
codes and messages are tested too), the CSV read back with the csv module, and the expected
LayerNorm findings computed from a synthetic run independently of the pandas code under test.
"""
import csv
import os
import subprocess
import sys
import unittest
from pathlib import Path


def skip_without_pandas(module_name):
    """Without pandas or matplotlib: exit 77 (meson's "skipped") where the test module runs as
    the program (`module_name` is "__main__"), else skip it."""
    try:
        import matplotlib  # noqa: F401
        import pandas  # noqa: F401
    except ImportError as e:
        if module_name == "__main__":
            print(f"SKIP: {e} (use an interpreter with pandas and matplotlib, e.g. /usr/bin/python3)")
            sys.exit(77)
        raise unittest.SkipTest(f"{e}: needs pandas and matplotlib")


HERE = Path(__file__).resolve().parent

REPO = HERE.parent

BUILD = [sys.executable, "-m", "report.build"]

OWN = ["v1_shared", "v2_cub", "v3_seq_tiling", "v4_vectorized", "v5_unrolled"]


class BuiltReport(unittest.TestCase):
    """A test class over what its setUpClass built in cls.tmp (a TemporaryDirectory): cleaned up
    after the class; cls.res (the build) and cls.readme (its README text) for assert_built."""

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_built(self, *families):
        """The build succeeded, left no marker unfilled, and every named family has its section."""
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        self.assertNotRegex(self.readme, r"<!--\s*(figure|table|text|family|end):")
        self.assertNotRegex(self.readme, rf"No committed run yet: .* family `({'|'.join(families)})`")


def build(*args, env=None):
    return subprocess.run([*BUILD, *map(str, args)], capture_output=True, cwd=REPO,
                          text=True, env={**os.environ, "MPLBACKEND": "Agg", **(env or {})},
                          timeout=300)


def read_report(out_dir) -> str:
    """A built report as one text: README.md, then each appendix page with its links made
    relative to the README again (what a test looks for may sit in either)."""
    out_dir = Path(out_dir)
    pages = [(out_dir / "README.md").read_text()]
    pages += [p.read_text().replace("](../", "](") for p in sorted((out_dir / "appendix").glob("*.md"))]
    return "\n".join(pages)


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def expected_findings(run_dir):
    """The headline numbers computed straight from the CSV with the csv module, independent of
    the pandas code under test."""
    rows = read_rows(run_dir / "layernorm.csv") + read_rows(run_dir / "anchors.csv")
    copy = max(float(r["gbps"]) for r in read_rows(run_dir / "ceilings.csv")
               if r["version"] == "copy")

    def timed(n):
        return {r["version"]: r for r in rows if r["status"] == "ok"
                and int(r["batch"]) * int(r["tokens"]) == n and r["hidden"] == "768"}
    big = timed(50432)
    best = min((v for v in big if v in OWN), key=lambda v: float(big[v]["median_us"]))
    pct = 100 * float(big[best]["gbps"]) / copy
    small = timed(6304)
    best_small = min((v for v in small if v in OWN), key=lambda v: float(small[v]["median_us"]))
    graph_ratio = (float(small["pytorch_layer_norm_graph"]["median_us"])
                   / float(small[best_small]["median_us"]))
    return best, pct, best_small, graph_ratio


def rewrite_csv(path, fn):
    """Apply fn to the rows (list of dicts) of a CSV; the header follows the first row's keys."""
    rows = fn(read_rows(path))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def tree_bytes(folder):
    return {str(f.relative_to(folder)): f.read_bytes()
            for f in sorted(Path(folder).rglob("*")) if f.is_file()}


def us(x):
    """formatting.fmt_us on a CSV value: the sentences print times this way."""
    from studylib import formatting  # pandas: imported once the module is known to have it
    return formatting.fmt_us(float(x))


def headline_line(test, results, out, component):
    """Build the report of `results` into `out` and return README's headline line of `component`."""
    res = build("--results", results, "--out", out)
    test.assertEqual(res.returncode, 0, res.stderr)
    return next(l for l in (out / "headline.md").read_text().splitlines() if l.startswith(f"| {component} |"))


def hand_made_encoder(folder, e6_256=(17800.0, 18200.0)):
    """e6_best and the three anchors at batch 1, 32, 256 with chosen times; e6 at batch 256
    in two rounds (median 18 ms by default)."""
    from analysis import synthetic_encoder  # pandas: imported once the module is known to have it
    note = ("pe=v5_im2col_gemm ln=v5_unrolled attn=v7_flash mlp=fused_epilogue (best: "
            "patch_embed=v5_im2col_gemm (passed over v6_implicit_gemm: not built; see (a) NOTES) "
            "layernorm=v5_unrolled attention=v7_flash mlp=fused_epilogue); logits of image 0 "
            "checked, every logit finite; cuda-graph replay; activations 3.6 MB, weights "
            "172.3 MB; 7.1 launches per layer")
    rows = [dict(version="e6_best", batch=1, median_us=410.0, note=note),
            dict(version="e6_best", batch=32, median_us=2500.0, note=note)]
    rows += [dict(version="e6_best", batch=256, median_us=t, note=note) for t in e6_256]
    for version, times in (("pytorch_timm", (3030.0, 3460.0, 25700.0)),
                           ("pytorch_timm_graph", (690.0, 3310.0, 26000.0)),
                           ("pytorch_timm_compile_graph", (720.0, float("nan"), 23600.0))):
        for b, t in zip((1, 32, 256), times):
            if t == t:
                rows.append(dict(version=version, batch=b, median_us=t,
                                 note="timm; checked; cuda-graph replay"
                                 if version != "pytorch_timm" else "timm; checked; eager"))
    return synthetic_encoder.write_encoder_rows(folder, rows)
