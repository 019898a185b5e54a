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

    def test_the_read_once_meeting_splits_the_run(self):
        # A projection slice: inputs at 1, partial sums stored at 4, every slice arrived at 7, its
        # share stored at 9; an attention task, unstamped at a meeting (-1), is left out.
        text = (HEADER.strip() + ",arrived_us,met_us\n"
                "e32_read_once,vit_b,1,224,0,projection,0,0,0,0,0,0,1,9,4,7\n"
                "e32_read_once,vit_b,1,224,1,attention,0,0,0,0,1,0,0,5,-1,-1\n")
        rows = task_table.meeting_table(task_table.read(self.write(text)))
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["kind"], rows[0]["products_median_us"], rows[0]["meeting_median_us"],
                          rows[0]["share_median_us"], rows[0]["run_median_us"]), ("projection", 3, 3, 2, 8))
        self.assertEqual(task_table.meeting_table(task_table.read(self.write(HEADER + "\n".join(ROWS) + "\n"))), [])

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

    # a (ends at 4) and d (at 3) signal counter 0; b waits for its second arrival, a's; c waits for
    # b; e for counter 0's first arrival, d's. The path: a -> b -> c.
    PATH_HEADER = HEADER.strip() + ",signals,waits\n"
    PATH_ROWS = ["e28_folded_ln,vit_b,1,224,0,qkv,0,0,0,0,0,0,0,4,0,",
                 "e28_folded_ln,vit_b,1,224,1,qkv,0,0,1,0,2,0,0,3,0,",
                 "e28_folded_ln,vit_b,1,224,2,attention,0,0,0,0,1,1,5,8,1,0:2",
                 "e28_folded_ln,vit_b,1,224,3,projection,0,0,0,0,0,9,9.5,12,2,1:1",
                 "e28_folded_ln,vit_b,1,224,4,fc1,0,0,0,0,2,3,3.5,6,3,0:1"]

    def test_the_critical_path_adds_up_to_the_span(self):
        rows = task_table.path_table(task_table.read(self.write(self.PATH_HEADER + "\n".join(self.PATH_ROWS) + "\n")))
        by = {r["kind"]: r for r in rows}
        self.assertEqual((by["qkv"]["tasks"], by["qkv"]["run_us"], by["qkv"]["handoff_us"]), (1, 4, 0))
        # b: its CTA turned to it at 1, a stored at 4, b saw it at 5: a 1 us hand-off, nothing queued
        self.assertEqual((by["attention"]["run_us"], by["attention"]["handoff_us"], by["attention"]["queued_us"]),
                         (3, 1, 0))
        # c: b stored at 8, no CTA took c until 9 (queued 1), its wait seen at 9.5
        self.assertEqual((by["projection"]["run_us"], by["projection"]["handoff_us"],
                          by["projection"]["queued_us"]), (2.5, 0.5, 1))
        self.assertNotIn("fc1", by)  # e ended at 6, off the path
        total = next(r for r in rows if r["kind"].startswith("path"))
        self.assertIn("3 tasks, span 12.0 us", total["kind"])
        self.assertAlmostEqual(total["run_us"] + total["handoff_us"] + total["queued_us"], 12)

    def test_the_schedule_joins_an_older_file_by_ticket(self):
        older = [",".join(r.split(",")[:-2]) for r in self.PATH_ROWS]
        schedule = "ticket,kind,block,row_tile,col,slice,signals,waits\n" + "\n".join(
            f"{r.split(',')[4]},{r.split(',')[5]},{r.split(',')[6]},0,0,0,{r.split(',')[-2]},{r.split(',')[-1]}"
            for r in self.PATH_ROWS) + "\n"
        tasks = task_table.read(self.write(HEADER + "\n".join(older) + "\n"))
        task_table.join_schedule(tasks, self.write(schedule))
        rows = task_table.path_table(tasks)
        self.assertIn("3 tasks, span 12.0 us", rows[-1]["kind"])
        # A schedule of another forward (a kind that differs at a ticket) is refused.
        p = subprocess.run([sys.executable, "-m", "experiments.probes.task_table",
                            self.write(HEADER + "\n".join(older) + "\n"), "--schedule",
                            self.write(schedule.replace(",attention,", ",fc2,"))], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("does not match the tasks (ticket 2: attention of block 0)", p.stderr)

    def test_a_wait_no_task_meets_and_a_file_without_waits(self):
        bad = self.PATH_ROWS[:2] + [self.PATH_ROWS[2].replace("0:2", "0:3")]
        p = subprocess.run([sys.executable, "-m", "experiments.probes.task_table",
                            self.write(self.PATH_HEADER + "\n".join(bad) + "\n")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("waits for counter 0 to reach 3, which 2 tasks signal", p.stderr)
        p = subprocess.run([sys.executable, "-m", "experiments.probes.task_table", self.write(HEADER + ROWS[0] + "\n"),
                            "--path-out", "/tmp/never.csv"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no waits column", p.stderr)

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
