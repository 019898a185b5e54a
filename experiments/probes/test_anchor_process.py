#!/usr/bin/python3
"""Tests of experiments/probes/anchor_variance.sh (with a fake anchor interpreter: no torch, no GPU) and
of the command line of experiments/probes/anchor_process.py (checked before torch is imported).

  /usr/bin/python3 experiments/test_anchor_process.py
"""
import csv
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANCE = HERE / "anchor_variance.sh"
PROBE = HERE / "anchor_process.py"

# Stands in for the anchors' python: `-c CODE ...` runs the real interpreter (the script's row
# printer); anything else is an anchor row: one CSV row, an autotuning table and kernel calls on
# stderr, and a failure where FAKE_FAIL names the version.
FAKE = textwrap.dedent(f'''\
    #!/bin/bash
    [ "$1" = -c ] && exec {sys.executable} "$@"
    while [ $# -gt 0 ]; do case "$1" in --csv) f=$2;; --version) v=$2;; esac; shift; done
    [ "$v" = "$FAKE_FAIL" ] && {{ echo "boom in $v" >&2; exit 1; }}
    [ -f "$f" ] || echo "version,status,median_us,energy_j,energy_sm_clock_mhz,cache" > "$f"
    echo "$v,ok,123.4,1.5,1800,$TORCHINDUCTOR_CACHE_DIR" >> "$f"
    echo "AUTOTUNE addmm(8x8, 8x8, 8x8)" >&2
    echo "strides: [0, 1], [8, 1], [1, 8]" >&2
    echo "dtypes: torch.float16, torch.float16, torch.float16" >&2
    echo "  bias_addmm 0.1 ms 100.0%" >&2
    echo "  triton_mm_3 0.2 ms 50.0%" >&2
    echo "  triton_mm_4 0.3 ms 33.0%" >&2
    echo "extern_kernels.bias_addmm(a) triton_poi_fused_gelu_view_7.run(b)" >&2
    ''')


class AnchorVariance(unittest.TestCase):
    def run_script(self, *args, fail=""):
        d = Path(tempfile.mkdtemp())
        fake = d / "python"
        fake.write_text(FAKE)
        fake.chmod(0o755)
        env = {**os.environ, "STUDY_PYTHON": str(fake), "FAKE_FAIL": fail}
        res = subprocess.run(["bash", str(VARIANCE), *[a.format(d=d) for a in args]], capture_output=True,
                             text=True, env=env, timeout=60)
        return res, d

    def test_rounds_caches_and_kernels(self):
        res, d = self.run_script("{d}/out", "4", "3")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        out = d / "out"
        for name, version in (("compile_a", "pytorch_timm_compile_graph"), ("compile_b", "pytorch_timm_compile_graph"),
                              ("control", "pytorch_timm_graph")):
            rows = list(csv.DictReader(open(out / f"{name}.csv")))
            self.assertEqual([r["version"] for r in rows], [version] * 3)  # one row a round
            self.assertEqual({r["cache"] for r in rows}, {str(out / f"cache_{name}")})  # its own cache
        self.assertIn("round 3: control", res.stdout)
        kernels = (out / "kernels.txt").read_text()
        for c in ("compile_a", "compile_b"):
            self.assertIn(f"== {c}: kernel calls", kernels)
        self.assertIn("1 extern_kernels.bias_addmm", kernels)
        self.assertIn("1 triton_poi_fused_gelu_view\n", kernels)  # the kernel's number dropped
        self.assertIn("  bias_addmm 0.1 ms 100.0%", kernels)   # the winner and the runner-up
        self.assertIn("  triton_mm_3 0.2 ms", kernels)
        self.assertNotIn("triton_mm_4", kernels)
        self.assertNotIn("strides:", kernels)
        with tarfile.open(out / "logs.tgz") as t:
            self.assertIn("logs/compile_a_round1.err", t.getnames())
        self.assertFalse((out / "logs").exists())

    def test_a_failed_forward_stops_with_its_error(self):
        res, _ = self.run_script("{d}/out", "4", "1", fail="pytorch_timm_graph")
        self.assertEqual(res.returncode, 1)
        self.assertIn("boom in pytorch_timm_graph", res.stderr)
        self.assertIn("error: control failed in round 1", res.stderr)

    def test_bad_arguments(self):
        for args, why in ((("",), "no output folder"), (("{d}/o", "0"), "positive integers"),
                          (("{d}/o", "4", "x"), "positive integers"), (("/proc/nope",), "cannot write")):
            res, _ = self.run_script(*args)
            self.assertEqual(res.returncode, 2, args)
            self.assertIn(why, res.stderr)


class ProbeCommandLine(unittest.TestCase):
    def test_bad_arguments_before_torch(self):
        for args, why in ((["--out", "/tmp/x", "--batch", "0"], "--batch must be positive"),
                          (["--out", "/proc/nope/x"], "cannot create"), ([], "--out")):
            res = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(res.returncode, 2, args)
            self.assertIn(why, res.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
