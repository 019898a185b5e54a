"""Tests of a sweep split into shards and merged back (sbatch/merge.py): shards partition the
configurations, rounds stay in one shard, the merge dedupes, refuses missing shards and mixed GPUs,
and lays out a run folder with its ceilings.

  python3 -m experiments.sweep.test_shards      (from the repository root)
"""
import collections
import subprocess
import unittest

from experiments.sweep.fakes import MERGE, SweepCase
from studylib import row_file, schema


class ShardTest(SweepCase):
    def test_rounds_stay_in_one_shard_and_merge_checks_every_round(self):
        spec = self.spec(batches="[1, 2]", rounds="2")
        res = self.dir / "res"
        (res / "shards").mkdir(parents=True)  # the layout sbatch/submit.sh gives merge.py
        for i in range(2):
            lines = self.run_sweep(spec, "--dry-run", "--shard", str(i), "--num-shards", "2").stdout.splitlines()
            self.assertEqual(len(lines), 6)
            self.assertEqual(collections.Counter(l.split()[0] for l in lines),
                             {f"#{j}": 2 for j in range(6) if j % 2 == i})
            self.run_sweep(spec, "--shard", str(i), "--num-shards", "2",
                           out=res / "shards" / f"shard_{i}.csv")
        merged = res / "merged.csv"
        r = subprocess.run(MERGE + ["--results", str(res), "--num-shards", "2",
                            "--out", str(merged), "--spec", str(spec)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("all 12 configurations", r.stdout)

    def test_shards_partition_the_configs_and_merge_dedupes(self):
        spec = self.spec(batches="[1, 2, 3, 4, 5]")
        full = self.run_sweep(spec, "--dry-run").stdout.splitlines()
        self.assertEqual(len(full), 15)
        parts = []
        for i in range(4):
            lines = self.run_sweep(spec, "--dry-run", "--shard", str(i), "--num-shards", "4").stdout.splitlines()
            self.assertTrue(all(int(l.split()[0][1:]) % 4 == i for l in lines))
            parts += lines
        self.assertEqual(sorted(parts), sorted(full))  # disjoint and complete
        res = self.dir / "res"
        for i in range(4):
            self.run_sweep(spec, "--shard", str(i), "--num-shards", "4",
                           out=res / "shards" / f"shard_{i}.csv")
        # A copy of shard 0 with one row turned `failed` must not add rows, and not win.
        dup = self.dir / "dup.csv"
        text = (res / "shards" / "shard_0.csv").read_text().splitlines(keepends=True)
        dup.write_text(text[0] + text[1].replace(",ok,", ",failed,") + "".join(text[2:]))
        # No --out: the merged sweep goes where a run folder has it, DIR/<spec name>.csv.
        merged = res / "s.csv"
        r = subprocess.run(MERGE + ["--results", str(res), "--num-shards", "4",
                            "--spec", str(spec), str(dup)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"{len(text) - 1} duplicate(s) dropped", r.stdout)
        self.assertIn("all 15 configurations", r.stdout)
        rows = self.rows(merged)
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        self.assertEqual(collections.Counter(r["status"] for r in rows), {"ok": 12, "skipped": 3})

    def test_merge_fails_on_missing_shard_or_config(self):
        spec = self.spec()
        res = self.dir / "res"
        for i in (0, 2):
            self.run_sweep(spec, "--shard", str(i), "--num-shards", "3",
                           out=res / "shards" / f"shard_{i}.csv")
        cmd = MERGE + ["--results", str(res), "--num-shards", "3", "--out", str(res / "m.csv")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("shard_1.csv", r.stdout)
        # The file exists but the shard never finished: the spec check catches it.
        (res / "shards" / "shard_1.csv").write_text(row_file.HEADER_LINE + "\n")
        r = subprocess.run(cmd + ["--spec", str(spec)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("3 configuration(s) of the spec have no row", r.stdout)

    def set_gpu(self, path, gpu, only_ok=False):
        rows, _ = row_file.read_csv(path)
        for r in rows:
            if not only_ok or r["status"] == "ok":
                r["gpu"] = gpu
        path.write_text(row_file.HEADER_LINE + "\n" + "".join(row_file.format_row(r) for r in rows))

    def test_merge_refuses_to_mix_gpu_models(self):
        spec = self.spec()
        res = self.dir / "res"
        shards = [res / "shards" / f"shard_{i}.csv" for i in range(2)]
        for i, f in enumerate(shards):
            self.run_sweep(spec, "--shard", str(i), "--num-shards", "2", out=f)
        self.set_gpu(shards[0], "NVIDIA H200")
        self.set_gpu(shards[1], "NVIDIA H100 80GB HBM3")
        cmd = MERGE + ["--results", str(res), "--num-shards", "2", "--spec", str(spec)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("2 GPU models", r.stdout)
        self.assertIn("NVIDIA H200: shard_0.csv", r.stdout)
        self.assertIn("NVIDIA H100 80GB HBM3: shard_1.csv", r.stdout)
        self.assertFalse((res / "s.csv").exists(), "a refused merge must write nothing")
        # The same with plain CSV inputs.
        r = subprocess.run(MERGE + ["--out", str(self.dir / "m.csv")] + [str(f) for f in shards],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertFalse((self.dir / "m.csv").exists())
        # One model, with rows that name no GPU (skipped for want of a device): merged.
        self.set_gpu(shards[0], "NVIDIA H200", only_ok=True)
        self.set_gpu(shards[1], "")
        self.set_gpu(shards[1], "NVIDIA H200", only_ok=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(self.rows(res / "s.csv")), 9)

    def test_merge_lays_out_a_run_folder_with_ceilings(self):
        spec = self.spec(name="fake_quick.toml")
        res = self.dir / "res"
        self.run_sweep(spec, out=res / "shards" / "shard_0.csv")
        ceil = {c: "" for c in schema.COLUMNS}
        ceil.update(run_id="test", family="ceilings", streams="1", flush_l2="0", status="ok",
                    gpu="NVIDIA H200")
        rows = [dict(ceil, version="copy", gbps="4000"), dict(ceil, version="gemm_fp16", tflops="700"),
                dict(ceil, version="gemm_fp8", tflops="1400")]
        (res / "shards" / "ceilings.csv").write_text(
            row_file.HEADER_LINE + "\n" + "".join(row_file.format_row(r) for r in rows))
        cmd = MERGE + ["--results", str(res), "--num-shards", "1", "--spec", str(spec),
               "--ceilings", "--build-dir", str(self.build)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # A quick sweep lands where its full sweep would: fake.csv, as ./study run writes it.
        self.assertEqual(sorted(p.name for p in res.glob("*.csv")), ["ceilings.csv", "fake.csv"])
        self.assertEqual(len(self.rows(res / "fake.csv")), 9)
        self.assertEqual([r["version"] for r in self.rows(res / "ceilings.csv")], ["copy", "gemm_fp16", "gemm_fp8"])
        self.assertIn("./study report --run", r.stdout)
        # Ceilings measured on another GPU model than the sweep: refused.
        self.set_gpu(res / "shards" / "shard_0.csv", "NVIDIA A100-SXM4-80GB", only_ok=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("ceilings.csv", r.stdout)
        # A missing ceilings file fails the merge, and says which.
        (res / "shards" / "ceilings.csv").unlink()
        self.set_gpu(res / "shards" / "shard_0.csv", "NVIDIA H200", only_ok=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("ceilings.csv", r.stdout)

    # ---- spec features -------------------------------------------------------------------


if __name__ == "__main__":
    unittest.main()
