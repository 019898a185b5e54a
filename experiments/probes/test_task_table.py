#!/usr/bin/python3
"""Tests of experiments/probes/task_table.py on a hand-made --task-times CSV (no GPU).

  /usr/bin/python3 -m experiments.probes.test_task_table
"""
import csv
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from experiments.probes import task_table

HEADER = "version,model,batch,image_size,ticket,kind,block,row_tile,col,slice,sm,start_us,ready_us,end_us\n"
# Two SMs, span 10 us: SM 0 runs a qkv task (waits 1, runs 3) and an attention task (waits 2, runs
# 4); SM 1 a qkv task (waits 0, runs 5). CTA time 20 us: run 12, wait 3, idle 5.
ROWS = ["e24_tiled,vit_b,1,224,0,qkv,0,0,0,0,0,0,1,4",
        "e24_tiled,vit_b,1,224,1,qkv,0,0,1,0,1,0,0,5",
        "e24_tiled,vit_b,1,224,2,attention,0,0,0,0,0,4,6,10"]


class TaskTable(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(Path(f.name).unlink)
        return f.name

    def test_the_kinds_the_total_and_the_idle_time(self):
        rows = task_table.table(task_table.read(self.write(HEADER + "\n".join(ROWS) + "\n")))
        by = {r["kind"]: r for r in rows}
        self.assertEqual(by["qkv"]["tasks"], 2)
        self.assertEqual(by["qkv"]["run_total_us"], 8)
        self.assertEqual(by["qkv"]["wait_total_us"], 1)
        self.assertAlmostEqual(by["qkv"]["share_of_cta_time"], 0.4)
        self.assertEqual(by["attention"]["run_median_us"], 4)
        total = next(r for r in rows if r["kind"].startswith("all"))
        self.assertIn("2 CTAs on 2 SMs, span 10.0 us", total["kind"])
        self.assertEqual(by["qkv"]["stage_span_median_us"], 5)  # block 0: ready at 0, last end 5
        self.assertEqual((total["run_total_us"], total["wait_total_us"]), (12, 3))
        idle = next(r for r in rows if r["kind"].startswith("idle"))
        self.assertAlmostEqual(idle["share_of_cta_time"], 0.25)

    def test_two_ctas_on_an_sm_count_twice(self):
        # SM 0 holds two CTAs (tasks overlapping 1-3), SM 1 one; a task starting as another ends on
        # SM 1 is the same CTA. Span 4 us, 3 CTAs: CTA time 12 us, run 8, wait 1, idle 3.
        rows = task_table.table(task_table.read(self.write(HEADER + "\n".join([
            "e26_two_ctas,vit_b,1,224,0,qkv,0,0,0,0,0,0,0,3",
            "e26_two_ctas,vit_b,1,224,1,qkv,0,0,1,0,0,1,2,4",
            "e26_two_ctas,vit_b,1,224,2,qkv,0,0,2,0,1,0,0,2",
            "e26_two_ctas,vit_b,1,224,3,fc1,1,0,0,0,1,2,2,3"]) + "\n")))
        total = next(r for r in rows if r["kind"].startswith("all"))
        self.assertIn("3 CTAs on 2 SMs, span 4.0 us", total["kind"])
        idle = next(r for r in rows if r["kind"].startswith("idle"))
        self.assertAlmostEqual(idle["run_total_us"], 3)
        self.assertGreaterEqual(idle["share_of_cta_time"], 0)

    def test_the_command_line_writes_the_table(self):
        src = self.write(HEADER + "\n".join(ROWS) + "\n")
        out = self.write("")
        p = subprocess.run([sys.executable, "-m", "experiments.probes.task_table", src, "--out", out],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("| qkv | 2 |", p.stdout)
        with open(out, newline="") as f:
            self.assertEqual(len(list(csv.DictReader(f))), 4)

    def test_bad_files_get_one_line_and_exit_2(self):
        for text in ("", "a,b\n1,2\n", HEADER + ROWS[0].replace(",0,1,4", ",0,x,4") + "\n"):
            p = subprocess.run([sys.executable, "-m", "experiments.probes.task_table", self.write(text)],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn("task_table.py:", p.stderr)
        p = subprocess.run([sys.executable, "-m", "experiments.probes.task_table", "/no/such.csv"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()
