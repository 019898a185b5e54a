#!/usr/bin/python3
"""Tests of experiments/probes/waterfall.py on a hand-made run folder (no GPU).

  /usr/bin/python3 -m experiments.probes.test_waterfall
"""
import csv
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from experiments.probes import waterfall

SCHEMA = ("run_id,utc,commit,gpu,sm_count,family,version,model,batch,image_size,device_bytes,median_us,gbps,tflops,"
          "status,note,precision").split(",")
TABLE = ("index,kernel,grid,block,cluster,waves,duration_us,gap_before_us,dram_bytes,fp16_tensor_flops,"
         "fp8_tensor_flops,floor_us,x_floor,ncu_duration_us,l2_bytes,ncu_kernel,mangled").split(",")


def row(**kw):
    base = dict(run_id="r", utc="2026-12-06T00:00:00Z", commit="abcdef1234567890", gpu="NVIDIA H200", sm_count=132,
                status="ok", note="", precision="fp16")
    base.update(kw)
    return base


def write(path: Path, columns, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def kernel(i, duration, gap, l2_bytes):
    return dict(index=i, kernel=f"k{i}", grid=132, block=256, cluster=0, waves=1, duration_us=duration,
                gap_before_us=gap, dram_bytes=0, fp16_tensor_flops=0, fp8_tensor_flops=0, floor_us=0, x_floor="",
                ncu_duration_us=duration, l2_bytes=l2_bytes, ncu_kernel="", mangled=f"k{i}")


class Waterfall(unittest.TestCase):
    def setUp(self):
        self.run = Path(tempfile.mkdtemp())
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", str(self.run)]))
        write(self.run / "ceilings.csv", SCHEMA, [
            row(family="ceilings", version="copy", gbps=4000), row(family="ceilings", version="gemm_fp16", tflops=800),
            row(family="ceilings", version="gemm_fp8", tflops=1600)])
        # 8 MiB at 7 TB/s, 40 MiB at 8 and 9 TB/s (rounds: median 8.5), DRAM at 4.5 and one SM alone
        l2 = [row(family="probes", version="l2_read", device_bytes=8 << 20, gbps=7000),
              row(family="probes", version="l2_read", device_bytes=40 << 20, gbps=8000),
              row(family="probes", version="l2_read", device_bytes=40 << 20, gbps=9000),
              row(family="probes", version="l2_read", device_bytes=2048 << 20, gbps=4500),
              row(family="probes", version="l2_read", device_bytes=24 << 20, gbps=60,
                  note="24 MiB buffer, 132 CTAs launched, the 1 on SMs below 1 (1 SMs) reading")]
        write(self.run / "l2_read.csv", SCHEMA, l2)
        # A graph step: three kernels (100 + 200 + 150 us), gaps 8 + 1 + 1, 850 MB through L2.
        write(self.run / "kernels" / "e19_exact_gelu.csv", TABLE,
              [kernel(0, 100, 8, 300e6), kernel(1, 200, 1, 400e6), kernel(2, 150, 1, 150e6)])
        # A tile-scheduled step: its persistent kernel (500 us) holds a path of 400 us run,
        # 50 us of hand-offs and 2 of queueing.
        write(self.run / "kernels" / "e30_row_stats.csv", TABLE,
              [kernel(0, 10, 8, 10e6), kernel(1, 500, 1, 1.2e9), kernel(2, 7, 1, 1e6)])
        write(self.run / "tasks" / "path_e30_row_stats.csv",
              ["version", "batch", "kind", "tasks", "run_us", "handoff_us", "queued_us", "share_of_span"],
              [dict(version="e30_row_stats", batch=1, kind="fc2", tasks=12, run_us=100, handoff_us=10, queued_us=0),
               dict(version="e30_row_stats", batch=1, kind="path (60 tasks, span 452 us)", tasks=60, run_us=400,
                    handoff_us=50, queued_us=2, share_of_span=1)])
        bench = [row(family="encoder", version="e19_exact_gelu", model="vit_b", batch=1, image_size=224, median_us=t)
                 for t in (440, 444, 450)]
        bench += [row(family="encoder", version="e30_row_stats", model="vit_b", batch=1, image_size=224,
                      median_us=580),
                  row(family="encoder", version="e19_exact_gelu", model="vit_b", batch=32, image_size=224,
                      median_us=2200)]
        write(self.run / "batch1_waterfall" / "batch1_waterfall.csv", SCHEMA, bench)

    def test_the_floor_is_the_model_read_once_or_its_flops(self):
        weights, math = waterfall.model_floor("fp16", 4000, 800, 1600)
        # vit_b: 86.6 M parameters, 173 MB in fp16; 35.1 GFLOP
        self.assertAlmostEqual(weights, 173.13e6 / 4000e9 * 1e6, delta=0.05)
        self.assertAlmostEqual(math, 35.12e9 / 800e12 * 1e6, delta=0.05)
        w8, m8 = waterfall.model_floor("fp8_e4m3", 4000, 800, 1600)
        self.assertAlmostEqual(w8, (173.13e6 - 84.93e6) / 4000e9 * 1e6, delta=0.05)  # the blocks' GEMMs one byte
        self.assertLess(m8, math / 1.8)

    def test_the_bars_add_up_to_the_traced_replay(self):
        bars, meta = waterfall.waterfall(self.run)
        self.assertEqual(meta["l2_gbps"], 8500)  # the largest buffer inside L2, median of its rounds
        by = {b.step: b for b in bars}
        g = by["e19_exact_gelu"]
        self.assertAlmostEqual(g.l2_us, 850e6 / 8500e9 * 1e6)
        self.assertEqual((g.chain_us, g.handoffs_us), (450, 10))
        self.assertAlmostEqual(g.total_us, 460)
        self.assertAlmostEqual(sum(g.bar(b) for b in waterfall.BARS), 460)
        self.assertEqual((g.bench_us, g.bench_range), (444, (440, 450)))
        self.assertAlmostEqual(g.bar("l2"), g.l2_us - g.floor_us)
        t = by["e30_row_stats"]
        # the path's hand-offs and queueing leave the chain for the hand-offs' bar
        self.assertAlmostEqual(t.chain_us, 517 - 52)
        self.assertAlmostEqual(t.handoffs_us, 10 + 52)
        self.assertAlmostEqual(t.total_us, 527)

    def test_another_batch(self):
        # The FLOPs scale with the batch, the weights read once do not; the bench rows and the
        # kernel tables are that batch's, and a step without a bench row there is refused.
        w1, m1 = waterfall.model_floor("fp16", 4000, 800, 1600)
        w32, m32 = waterfall.model_floor("fp16", 4000, 800, 1600, batch=32)
        self.assertEqual(w32, w1)
        self.assertAlmostEqual(m32, 32 * m1)
        p = subprocess.run([sys.executable, "-m", "experiments.probes.waterfall", str(self.run), "--batch", "32"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no batch-32 bench row of e30_row_stats", p.stderr)
        (self.run / "kernels" / "e30_row_stats.csv").unlink()
        bars, meta = waterfall.waterfall(self.run, batch=32)
        self.assertEqual((meta["batch"], [b.step for b in bars]), (32, ["e19_exact_gelu"]))
        self.assertEqual((bars[0].bench_us, bars[0].math_us), (2200, m32))
        p = subprocess.run([sys.executable, "-m", "experiments.probes.waterfall", str(self.run), "--batch", "32"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((self.run / "waterfall" / "waterfall_b32.csv").is_file())
        self.assertFalse((self.run / "waterfall" / "waterfall.csv").exists())

    def test_the_clock_bar_is_the_floor_at_the_bench_clock(self):
        # Ceilings at 1980 MHz, the batch-32 bench at 1500: a floor held by the FLOPs grows by
        # 1980 / 1500, out of the chain; at batch 1 the weights hold the floor and the bar is zero.
        write(self.run / "ceilings.csv", SCHEMA + ["sm_clock_mhz"], [
            row(family="ceilings", version="copy", gbps=4000, sm_clock_mhz=1980),
            row(family="ceilings", version="gemm_fp16", tflops=800, sm_clock_mhz=1980),
            row(family="ceilings", version="gemm_fp8", tflops=1600, sm_clock_mhz=1980)])
        bench = [row(family="encoder", version="e19_exact_gelu", model="vit_b", batch=b, image_size=224,
                     median_us=t, sm_clock_mhz=mhz) for b, t, mhz in ((1, 444, 1980), (32, 2200, 1500),
                                                                       (32, 2210, 1400), (32, 2190, 1600))]
        write(self.run / "batch1_waterfall" / "batch1_waterfall.csv", SCHEMA + ["sm_clock_mhz"], bench)
        (self.run / "kernels" / "e30_row_stats.csv").unlink()
        write(self.run / "kernels" / "e19_exact_gelu.csv", TABLE,
              [kernel(0, 1000, 8, 300e6), kernel(1, 1100, 1, 400e6)])
        (b32,), _ = waterfall.waterfall(self.run, batch=32)
        self.assertAlmostEqual(b32.clock_ratio, 1980 / 1500)
        self.assertAlmostEqual(b32.bar("clock"), b32.math_us * (1980 / 1500 - 1))
        self.assertAlmostEqual(b32.bar("l2"), 0)  # 700 MB at 8.5 TB/s is under the floor
        self.assertAlmostEqual(b32.total_us, 2100 + 9)  # the bars still add up to the replay
        self.assertAlmostEqual(b32.bar("chain"), 2100 - b32.math_us * 1980 / 1500)
        (b1,), _ = waterfall.waterfall(self.run)
        self.assertEqual((b1.clock_ratio, b1.bar("clock")), (1.0, 0.0))
        # a bench faster than the ceilings' clock never lowers the floor
        self.assertEqual(waterfall.Bars("x", "measured", "fp16", 40, 45, 1, 1, 100, 5, clock_ratio=0.9).bar("clock"), 0)

    def test_overlapping_kernels_shorten_the_chain(self):
        # Gaps that add up below zero (kernels started under their predecessors' tails): no
        # negative bar; the chain is the replay's length.
        write(self.run / "kernels" / "e19_exact_gelu.csv", TABLE,
              [kernel(0, 100, 8, 300e6), kernel(1, 200, -12, 400e6), kernel(2, 150, -6, 150e6)])
        g = {b.step: b for b in waterfall.waterfall(self.run)[0]}["e19_exact_gelu"]
        self.assertEqual((g.chain_us, g.handoffs_us), (440, 0))
        self.assertAlmostEqual(g.total_us, 440)
        self.assertTrue(all(g.bar(b) >= 0 for b in waterfall.BARS))

    def test_a_chain_under_the_traffic_bound_adds_nothing(self):
        b = waterfall.Bars("x", "measured", "fp16", 40, 45, 1000, 120, 100, 5)
        self.assertEqual((b.bar("floor"), b.bar("l2"), b.bar("chain")), (45, 75, 0))

    def test_predicted_steps_and_the_command_line(self):
        pred = self.run / "predicted.csv"
        write(pred, waterfall.PREDICTED_COLUMNS, [dict(step="e32_read_once", precision="fp16", l2_mb=720, chain_us=156,
                                                       handoffs_us=48, low_us=170, high_us=260, removes="L2 traffic")])
        out_csv = self.run / "w.csv"
        args = [sys.executable, "-m", "experiments.probes.waterfall", str(self.run), "--predicted", str(pred),
                "--out-csv", str(out_csv)]
        p = subprocess.run(args, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("e32_read_once: floor", p.stdout)
        with open(out_csv, newline="") as f:
            rows = {r["step"]: r for r in csv.DictReader(f)}
        self.assertEqual(rows["e32_read_once"]["kind"], "predicted")
        self.assertEqual(float(rows["e32_read_once"]["handoffs_bar_us"]), 48)
        self.assertEqual(float(rows["e19_exact_gelu"]["total_us"]), 460)
        self.assertEqual(list(rows["e19_exact_gelu"]), list(waterfall.CSV_COLUMNS))
        self.assertFalse(list(self.run.glob("**/*.png")))  # the report draws the figure

    def test_the_probe_script_refuses_before_measuring(self):
        # waterfall.sh (GPU work) stops before its first probe: a tile-scheduled step's task clock
        # off batch 1, and a folder without its sitting's ceilings.
        script = Path(waterfall.__file__).with_name("waterfall.sh")
        env = {"PATH": "/usr/bin:/bin", "KT_BATCH": "256"}
        p = subprocess.run(["bash", str(script), str(self.run), "e19_exact_gelu", "e30_row_stats"],
                           capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("the task clock of e30_row_stats runs at batch 1 only (KT_BATCH=256)", p.stderr)
        (self.run / "ceilings.csv").unlink()
        p = subprocess.run(["bash", str(script), str(self.run), "e19_exact_gelu"], capture_output=True, text=True,
                           env=env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("ceilings.csv missing", p.stderr)

    def test_bad_inputs_get_one_line_and_exit_2(self):
        def fails(run, *extra, says):
            p = subprocess.run([sys.executable, "-m", "experiments.probes.waterfall", str(run), *extra],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(says, p.stderr)
        fails(self.run / "none", says="no such run folder")
        bad = self.run / "bad.csv"
        write(bad, ["step", "precision"], [dict(step="x", precision="fp16")])
        fails(self.run, "--predicted", str(bad), says="needs columns")
        # a kernel table from before L2 traffic was measured
        t = self.run / "kernels" / "e19_exact_gelu.csv"
        t.write_text(t.read_text().replace(",300000000.0,", ",,"))
        fails(self.run, says="no l2_bytes")
        (self.run / "batch1_waterfall" / "batch1_waterfall.csv").unlink()
        fails(self.run, says="no batch-1 bench row")
        (self.run / "l2_read.csv").unlink()
        fails(self.run, says="l2_read.csv")


if __name__ == "__main__":
    unittest.main()
