#!/usr/bin/python3
"""Tests of the sweep runner and the shard merge, with fake benches (small Python scripts
written into a temporary build dir) so they need neither a GPU nor a build.

  /usr/bin/python3 -m unittest experiments/test_run_sweep.py      (from the repo root)
  /usr/bin/python3 experiments/test_run_sweep.py
"""

import collections
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import run_sweep as rs  # noqa: E402

RUNNER = HERE / "run_sweep.py"
MERGE = REPO / "sbatch" / "merge.py"
PY = sys.executable

# A fake bench: the shared CLI, one row per call. Its behaviour comes from its version name
# (the part after "fake_"): crash, hang, norow, two (writes copy + gemm rows), slow; and from
# FAKE_KILL_PARENT_AT=N: the N-th call (counted in FAKE_COUNTER) SIGKILLs the runner, which
# is how a sweep dies mid-way in these tests.
FAKE = textwrap.dedent('''\
    #!{py}
    import argparse, csv, os, signal, sys, time
    sys.path.insert(0, {anchors!r})
    from common import COLUMNS
    version = os.path.basename(sys.argv[0]).split("_", 1)[1]
    p = argparse.ArgumentParser()
    for a in ("--batch", "--image-size", "--model", "--streams", "--warmup", "--iters", "--seed",
              "--csv", "--device", "--rows"):
        p.add_argument(a)
    p.add_argument("--flush-l2", action="store_true")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--energy", default="")
    a = p.parse_args()
    counter = os.environ.get("FAKE_COUNTER")
    if counter:
        n = int(open(counter).read() or 0) + 1 if os.path.exists(counter) else 1
        open(counter, "w").write(str(n))
        if n == int(os.environ.get("FAKE_KILL_PARENT_AT", "0")):
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(5)
    if os.environ.get("FAKE_PIDFILE"):
        open(os.environ["FAKE_PIDFILE"], "w").write(str(os.getpid()))
    if version == "crash":
        print("fake: about to crash", file=sys.stderr)
        print("fake: segfault in kernel", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGSEGV)
    if version == "hang":
        time.sleep(600)
    if version == "norow":
        print("fake: bad usage", file=sys.stderr)
        sys.exit(2)
    def row(v, status="ok", median="12.5"):
        r = dict.fromkeys(COLUMNS, "")
        r.update(run_id=os.environ.get("STUDY_RUN_ID", ""), commit=os.environ.get("FAKE_COMMIT") or os.environ.get("STUDY_COMMIT", ""),
                 family=os.path.basename(os.path.dirname(sys.argv[0])), version=v, model=a.model, batch=a.batch, image_size=a.image_size,
                 streams="132" if a.streams == "sm" else a.streams, warmup=a.warmup, iters=a.iters,
                 flush_l2="1" if a.flush_l2 else "0", median_us=median, status=status,
                 note="rows=%s" % a.rows if a.rows else "")
        if os.environ.get("FAKE_SHAPELESS") == "1":
            r.update(model="", batch="", image_size="")
        if status == "skipped" and os.environ.get("FAKE_NODEV") == "1":
            r["note"] = "no CUDA device"
        return [r[c] for c in COLUMNS]
    new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    with open(a.csv, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\\n")
        if new:
            w.writerow(COLUMNS)
        if version == "two" and os.environ.get("FAKE_NODEV") == "1":
            w.writerow(row("copy", "skipped"))
            f.flush()
            print("fake: no CUDA device", file=sys.stderr)
            sys.exit(2)
        if version == "oom":  # a bench refusing a problem larger than the memory free
            r = row(version, "skipped", median="")
            r[COLUMNS.index("note")] = ("out of host memory: fake_oom needs 1128.6 GiB (1211827200000 bytes) "
                                        "of host memory, 60.0 GiB (64424509440 bytes) free")
            w.writerow(r)
            f.flush()
            print("fake_oom: error: out of host memory: needs 1128.6 GiB, 60.0 GiB free", file=sys.stderr)
            sys.exit(3)
        if version == "two":
            w.writerow(row("copy"))
            if os.environ.get("FAKE_ONLY_ONE") != "1":
                w.writerow(row("gemm"))
        else:
            w.writerow(row(version, "skipped" if a.batch == "3" else "ok"))
    ''')


# A fake anchor script in serving mode (--serve): one row per stdin line, then the sentinel line.
# Its note says which process wrote the row and how many rows of that version and batch the
# process wrote before (what a kept compiled model would serve). p_hang hangs on its first row
# only; p_die exits without answering.
FAKE_SERVER = textwrap.dedent('''\
    #!{py}
    import argparse, json, os, sys, time
    sys.path.insert(0, {anchors!r})
    from common import COLUMNS, SERVE_DONE, append_row
    assert sys.argv[1:] == ["--serve"], sys.argv
    built = {{}}
    for line in sys.stdin:
        p = argparse.ArgumentParser()
        for f in ("--version", "--batch", "--image-size", "--model", "--streams", "--warmup",
                  "--iters", "--seed", "--csv", "--device", "--energy"):
            p.add_argument(f)
        p.add_argument("--flush-l2", action="store_true")
        p.add_argument("--no-check", action="store_true")
        a = p.parse_args(json.loads(line))
        if a.version == "p_hang" and not os.path.exists(os.environ["FAKE_HUNG"]):
            open(os.environ["FAKE_HUNG"], "w").close()
            time.sleep(600)
        if a.version == "p_die":
            print("fake server: dying", file=sys.stderr, flush=True)
            os._exit(3)
        built[a.version, a.batch] = built.get((a.version, a.batch), 0) + 1
        r = dict.fromkeys(COLUMNS, "")
        r.update(run_id=os.environ.get("STUDY_RUN_ID", ""), commit=os.environ.get("STUDY_COMMIT", ""),
                 family="fake", version=a.version, model=a.model, batch=a.batch,
                 image_size=a.image_size, streams=a.streams, warmup=a.warmup, iters=a.iters,
                 flush_l2="0", median_us="7.5", status="ok",
                 note="pid=%d row=%d" % (os.getpid(), built[a.version, a.batch]))
        append_row(a.csv, r)
        # A summary line and the answer in one write, as a real anchor's print then sentinel can
        # arrive: the runner must not wait for a line it has already read.
        sys.stdout.write("fake server: row written\\n%s 0\\n" % SERVE_DONE)
        sys.stdout.flush()
''')


class SweepTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_run_sweep_")
        self.dir = Path(self.tmp.name)
        self.build = self.dir / "build"
        (self.build / "stages" / "fake").mkdir(parents=True)
        for v in ("a", "b", "c", "crash", "hang", "norow", "two", "oom"):
            p = self.build / "stages" / "fake" / f"fake_{v}"
            p.write_text(FAKE.format(py=PY, anchors=str(HERE / "anchors")))
            p.chmod(p.stat().st_mode | stat.S_IXUSR)
        self.out = self.dir / "results" / "out.csv"
        # The runner's private temp dirs go here: a SIGKILLed runner cannot remove its own.
        (self.dir / "tmp").mkdir()
        self.env = dict(os.environ, TMPDIR=str(self.dir / "tmp"))

    def tearDown(self):
        self.tmp.cleanup()

    def spec(self, name="s.toml", **kw):
        base = {"family": '"fake"', "versions": '["a", "b", "c"]', "models": '["vit_ti"]',
                "batches": "[1, 2, 3]", "image_sizes": "[32]", "iters": "2", "warmup": "0"}
        base.update({k: v for k, v in kw.items() if v is not None})
        for k in [k for k, v in kw.items() if v is None]:
            base.pop(k)
        path = self.dir / name
        path.write_text("".join(f"{k} = {v}\n" for k, v in base.items()))
        return path

    def run_sweep(self, spec, *extra, env=None, out=None, check=True):
        cmd = [PY, str(RUNNER), "--spec", str(spec), "--build-dir", str(self.build),
               "--out", str(out or self.out), "--run-id", "test"] + list(extra)
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(self.env, **(env or {})),
                           timeout=120)
        if check and r.returncode != 0:
            self.fail(f"runner exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def rows(self, path=None):
        rows, problems = rs.read_csv(path or self.out)
        self.assertEqual(problems, [])
        return rows

    def keys(self, rows):
        return collections.Counter(rs.row_key(r) for r in rows)

    def expected_keys(self, spec, **kw):
        configs, _ = rs.select_configs(rs.load_spec(spec), self.build, PY, dry_run=True, **kw)
        return collections.Counter(k for c in configs for k in c.keys())

    # ---- schema --------------------------------------------------------------------------

    def test_columns_match_cpp(self):
        src = (REPO / "common" / "harness" / "csv.cpp").read_text()
        body = src[src.index("csv_columns()"):]
        body = body[body.index("{", body.index("static")):body.index("};")]
        self.assertEqual(re.findall(r'"([a-z0-9_]+)"', body), rs.COLUMNS)

    def test_energy_seconds_reach_every_row(self):
        # energy_s: each configuration gets --energy (the fake bench notes it); out of range is refused.
        configs, _ = rs.select_configs(rs.load_spec(self.spec(energy_s="5")), self.build, PY, dry_run=True)
        self.assertTrue(configs)
        for c in configs:
            args = c.args("x.csv", 0)
            self.assertEqual(args[args.index("--energy") + 1], "5")
        configs, _ = rs.select_configs(rs.load_spec(self.spec()), self.build, PY, dry_run=True)
        self.assertNotIn("--energy", configs[0].args("x.csv", 0))
        with self.assertRaises(rs.SpecError):
            rs.load_spec(self.spec(energy_s="-1"))

    # ---- basic run, resume ---------------------------------------------------------------

    def test_rows_of_another_commit_are_refused(self):
        # A bench built from another commit than the checkout's: nothing is written, exit 2.
        spec = self.spec()
        r = self.run_sweep(spec, env={"FAKE_COMMIT": "0123abcd-stale"}, check=False)
        self.assertEqual(r.returncode, rs.EXIT_USAGE)
        self.assertIn("built from 0123abcd-stale", r.stderr)
        self.assertIn("rebuild", r.stderr)
        self.assertEqual(self.rows(), [])
        # A CSV that holds another commit's rows is not resumed from this checkout.
        self.run_sweep(spec)
        r = self.run_sweep(spec, env={"STUDY_COMMIT": "fedcba98"}, check=False)
        self.assertEqual(r.returncode, rs.EXIT_USAGE)
        self.assertIn("holds rows of commit", r.stderr)

    def test_runs_every_config_once_and_sets_provenance(self):
        spec = self.spec()
        r = self.run_sweep(spec)
        rows = self.rows()
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        self.assertEqual(len(rows), 9)
        self.assertTrue(all(r["run_id"] == "test" and r["commit"] for r in rows))
        self.assertEqual(collections.Counter(r["status"] for r in rows), {"ok": 6, "skipped": 3})
        self.assertRegex(r.stdout, r"\[9/9\] c\s+b=3\s+img=32\s+-> skipped 12.5 us\s+\(.*ETA")
        # A second run finds everything done and appends nothing.
        before = self.out.read_bytes()
        r = self.run_sweep(spec)
        self.assertIn("0 to run", r.stdout)
        self.assertEqual(self.out.read_bytes(), before)

    def test_resume_after_kill_neither_loses_nor_duplicates(self):
        spec = self.spec()
        counter = self.dir / "counter"
        r = self.run_sweep(spec, env={"FAKE_COUNTER": str(counter), "FAKE_KILL_PARENT_AT": "3"},
                           check=False)
        self.assertEqual(r.returncode, -signal.SIGKILL)
        self.assertEqual(len(self.rows()), 2)  # the third config's row never reached the output
        r = self.run_sweep(spec)
        self.assertIn("2 already in", r.stdout)
        rows = self.rows()
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        self.assertEqual(len(rows), 9)

    def test_truncated_last_line_is_dropped_and_rerun(self):
        spec = self.spec()
        self.run_sweep(spec)
        lines = self.out.read_text().splitlines(keepends=True)
        # Keep header + 3 rows and half of the 4th, as a crash in the middle of a write would.
        self.out.write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
        r = self.run_sweep(spec)
        self.assertIn("truncated last line", r.stderr)
        rows = self.rows()
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        self.assertEqual(len(rows), 9)
        self.assertTrue(self.out.read_text().endswith("\n"))

    def test_foreign_header_is_refused(self):
        self.out.parent.mkdir(parents=True)
        self.out.write_text("a,b,c\n1,2,3\n")
        r = self.run_sweep(self.spec(), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("header", r.stderr)

    def test_older_schema_is_refused_naming_the_difference(self):
        # An output written before the appended columns: rows of the current schema would
        # land under the wrong header.
        self.out.parent.mkdir(parents=True)
        old = ",".join(rs.COLUMNS[:rs.COLUMNS.index("note") + 1])
        self.out.write_text(old + "\n")
        r = self.run_sweep(self.spec(), check=False)
        self.assertEqual(r.returncode, 2)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(str(self.out), lines[0])
        self.assertIn("lacks column(s) rows, h2d_us, preprocess_us", lines[0])
        self.assertEqual(self.out.read_text(), old + "\n")  # left as it was

    def test_runner_rows_record_the_problem_rows(self):
        spec = self.spec(versions='["norow"]', batches="[2]", extra_args='[[], ["--rows", "64"]]')
        self.run_sweep(spec)
        rows = sorted(r["rows"] for r in self.rows())
        self.assertEqual(rows, ["10", "64"])  # 2 x 5 tokens of a 32 px image; --rows 64

    def test_run_dir_keeps_side_experiments_apart(self):
        run = self.dir / "run"
        main = self.spec("fam_quick.toml", batches="[1]")
        side = self.spec("side.toml", batches="[1]", side_experiment="true")
        for spec in (main, side):
            r = subprocess.run([PY, str(RUNNER), "--spec", str(spec), "--build-dir",
                                str(self.build), "--run-dir", str(run), "--run-id", "t"],
                               capture_output=True, text=True, env=self.env, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(str(p.relative_to(run)) for p in run.rglob("*.csv")),
                         ["fam.csv", "side/side.csv"])
        self.assertEqual(len(self.rows(run / "side" / "side.csv")), 3)
        # The folder's README, written by the runner, summarizes both CSVs.
        readme = (run / "README.md").read_text()
        self.assertTrue(readme.startswith("# run\n"))
        self.assertRegex(readme, r"- `fam.csv`: 3 rows \(3 ok, 0 skipped, 0 failed\); commit `[^`]+`")
        self.assertIn("- `side/side.csv`: 3 rows (3 ok", readme)
        r = self.run_sweep(main, "--run-dir", str(run), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not both", r.stderr)

    def test_kept_anchors_serve_every_round_from_one_process(self):
        server = self.dir / "fake_server.py"
        server.write_text(FAKE_SERVER.format(py=PY, anchors=str(HERE / "anchors")))
        spec = self.spec(versions='["a"]', batches="[1, 2]", anchors='["p_a", "p_b"]',
                         anchor_script=f'"{server}"', keep_anchors="true", rounds="3")
        self.run_sweep(spec)
        rows = [r for r in self.rows() if r["version"].startswith("p_")]
        self.assertEqual(len(rows), 12)
        self.assertEqual(len({re.search(r"pid=(\d+)", r["note"]).group(1) for r in rows}), 1)
        # Interleaved rounds: round k of a shape is the k-th row of that shape in the process
        # (a model kept for the shape serves rounds 2 and 3).
        for r in rows:
            self.assertEqual(re.search(r"row=(\d+)", r["note"]).group(1),
                             re.search(r"round: (\d+)", r["note"]).group(1), r["note"])

    def test_kept_anchor_past_its_timeout_or_dead_is_replaced(self):
        server = self.dir / "fake_server.py"
        server.write_text(FAKE_SERVER.format(py=PY, anchors=str(HERE / "anchors")))
        spec = self.spec(versions='["a"]', batches="[1]", anchors='["p_hang", "p_die", "p_b"]',
                         anchor_script=f'"{server}"', keep_anchors="true", timeout_s="3", rounds="2")
        r = self.run_sweep(spec, env={"FAKE_HUNG": str(self.dir / "hung")})
        got = collections.defaultdict(list)
        for x in self.rows():
            got[x["version"]].append(x)
        self.assertEqual([x["status"] for x in got["p_hang"]], ["failed", "ok"])
        self.assertIn("timeout after 3 s", got["p_hang"][0]["note"])
        self.assertEqual([x["status"] for x in got["p_die"]], ["failed", "failed"])
        self.assertIn("exit code 3, no row: fake server: dying", got["p_die"][0]["note"])
        self.assertEqual([x["status"] for x in got["p_b"]], ["ok", "ok"])
        self.assertIn("done:", r.stdout)

    def test_keep_anchors_needs_anchors(self):
        spec = self.spec(keep_anchors="true")
        r = self.run_sweep(spec, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'keep_anchors' needs 'anchors'", r.stderr)

    def test_run_readme_keeps_the_hand_written_part(self):
        import run_readme
        run = self.dir / "r"
        (run / "tests").mkdir(parents=True)
        (run / "README.md").write_text("# r\n\nWhy this run was made.\n")
        (run / "tests" / "tests.txt").write_text(" 1/2 gpu - x  OK  1s\nOk:   1\nFail:   0\nSkipped:  1\n")
        (run / "mutants.md").write_text("# m\n\n**11 of 11 planted bugs caught**\n")
        (run / "ncu.csv").write_text('"ID","Kernel Name"\n"0","k"\n')
        (run / "compile_kernels.txt").write_text(
            "# Kernels\n== ab/c1.py (images 256 x 3 x 224 x 224)\n      2 extern_kernels.bias_addmm\n"
            "== cd/c2.py (images 1 x 3 x 224 x 224)\n      4 triton_tem_fused_addmm\n"
            "== ef/c3.py (images 32 x 3 x 384 x 384)\n      2 extern_kernels.bias_addmm\n")
        with open(run / "a.csv", "w") as f:
            f.write(",".join(rs.COLUMNS) + "\n")
            for status, commit, clock in (("ok", "0123456789abcdef0123-dirty", "1500"),
                                          ("failed", "0123456789abcdef0123-dirty", "")):
                row = dict.fromkeys(rs.COLUMNS, "")
                row.update(status=status, commit=commit, gpu="GPU X", sm_clock_mhz=clock,
                           run_id="id1", utc="2026-01-01T00:00:00Z")
                f.write(",".join(row[c] for c in rs.COLUMNS) + "\n")
        for _ in range(2):   # a second write replaces the block, never appends another
            run_readme.write(run)
        text = (run / "README.md").read_text()
        self.assertTrue(text.startswith("# r\n\nWhy this run was made.\n"))
        self.assertEqual(text.count(run_readme.START), 1)
        self.assertIn("- `a.csv`: 2 rows (1 ok, 0 skipped, 1 failed); commit `0123456789ab-dirty` "
                      "(2 rows from a tree with uncommitted changes); GPU GPU X; SM clock 1,500-1,500 MHz", text)
        self.assertIn("- 1 other CSV file (Nsight Compute pages, probes): no study rows.", text)
        self.assertIn("- test suites (`tests/tests.txt`): Ok 1, Fail 0, Skipped 1.", text)
        self.assertIn("- planted bugs (`mutants.md`): 11 of 11 planted bugs caught.", text)
        self.assertIn("- compiled forwards (`compile_kernels.txt`): 3 generated forwards and the kernels "
                      "each calls: batch 1, 256 at 224 px; batch 32 at 384 px.", text)
        r = subprocess.run([PY, str(HERE / "run_readme.py"), str(self.dir / "none")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such run folder", r.stderr)

    # ---- interleaved rounds ----------------------------------------------------------------

    def test_rounds_interleave_tag_and_resume(self):
        spec = self.spec(batches="[1, 2]")
        counter = self.dir / "counter"
        # Killed during the 8th call: rounds 1 and 2 of batch 1 and round 3's a are on disk.
        r = self.run_sweep(spec, "--rounds", "3",
                           env={"FAKE_COUNTER": str(counter), "FAKE_KILL_PARENT_AT": "8"},
                           check=False)
        self.assertEqual(r.returncode, -signal.SIGKILL)
        self.assertEqual(len(self.rows()), 7)
        r = self.run_sweep(spec, "--rounds", "3")
        self.assertIn("(3 interleaved rounds)", r.stdout)
        self.assertIn("7 already in", r.stdout)
        self.assertRegex(r.stdout, r"\[11/11\] c\s+b=2\s+img=32\s+round 3/3 -> ok")
        rows = self.rows()
        self.assertEqual(len(rows), 18)
        self.assertEqual(self.keys(rows), self.expected_keys(spec, rounds=3))
        self.assertTrue(all(n == 1 for n in self.keys(rows).values()))
        # All versions of a shape, then all again: the order on disk.
        self.assertEqual([(x["batch"], x["version"], rs.row_round(x)) for x in rows[:6]],
                         [("1", v, k) for k in (1, 2, 3) for v in ("a", "b", "c")][:6])
        self.assertEqual([x["note"] for x in rows[:4]],
                         ["[round: 1]", "[round: 1]", "[round: 1]", "[round: 2]"])
        # Round k of a configuration is done or not: a rerun appends nothing, and asking
        # for 4 rounds runs round 4 of each configuration only.
        before = self.out.read_bytes()
        r = self.run_sweep(spec, "--rounds", "3")
        self.assertIn("0 to run", r.stdout)
        self.assertEqual(self.out.read_bytes(), before)
        r = self.run_sweep(spec, "--rounds", "4")
        self.assertIn("18 already in", r.stdout)
        self.assertEqual([rs.row_round(x) for x in self.rows()[18:]], [4] * 6)

    def test_rounds_spec_key_tags_before_extra_and_single_round_is_untagged(self):
        spec = self.spec(versions='["a"]', batches="[1]", rounds="2",
                         extra_args='[[], ["--rows", "64"]]')
        self.run_sweep(spec)
        notes = [x["note"] for x in self.rows()]
        self.assertEqual(notes, ["[round: 1]", "[round: 2]", "rows=64 [round: 1] [extra: --rows 64]",
                                 "rows=64 [round: 2] [extra: --rows 64]"])
        self.assertEqual([rs.row_key(x)[-2:] for x in self.rows()],
                         [("", "1"), ("", "2"), ("--rows 64", "1"), ("--rows 64", "2")])
        # One round (the default) writes rows as before: no tag; such rows are round 1.
        one = self.dir / "one.csv"
        self.run_sweep(self.spec("one.toml", versions='["a"]', batches="[1]"), out=one)
        self.assertEqual([(x["note"], rs.row_round(x)) for x in self.rows(one)], [("", 1)])

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
        r = subprocess.run([PY, str(MERGE), "--results", str(res), "--num-shards", "2",
                            "--out", str(merged), "--spec", str(spec)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("all 12 configurations", r.stdout)

    def test_bad_rounds_are_refused(self):
        r = self.run_sweep(self.spec(), "--rounds", "0", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--rounds must be >= 1", r.stderr)
        r = self.run_sweep(self.spec(rounds="0"), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'rounds' must be >= 1", r.stderr)

    # ---- failures become rows ------------------------------------------------------------

    def test_crash_and_missing_row_become_failed_rows(self):
        spec = self.spec(versions='["a", "crash", "norow", "noexec"]', batches="[1]")
        (self.build / "stages" / "fake" / "fake_noexec").write_text("not a program\n")
        self.run_sweep(spec)
        rows = {r["version"]: r for r in self.rows()}
        self.assertEqual(rows["noexec"]["status"], "failed")
        self.assertIn("cannot run", rows["noexec"]["note"])
        self.assertEqual(rows["a"]["status"], "ok")
        self.assertEqual(rows["crash"]["status"], "failed")
        self.assertIn(f"signal {int(signal.SIGSEGV)}", rows["crash"]["note"])
        self.assertIn("fake: segfault in kernel", rows["crash"]["note"])
        self.assertEqual(rows["norow"]["status"], "failed")
        self.assertIn("exit code 2, no row: fake: bad usage", rows["norow"]["note"])
        self.assertEqual(rows["crash"]["tokens"], "5")  # (32/16)^2 + 1, filled by the runner
        # --strict makes failed rows an error; --retry failed reruns them (still failing).
        r = self.run_sweep(spec, "--retry", "failed", "--strict", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("dropped 3 row(s)", r.stdout)
        self.assertEqual(len(self.rows()), 4)

    def test_out_of_memory_row_is_recorded_and_the_sweep_goes_on(self):
        # A bench that refuses a problem larger than the free memory exits 3 with its
        # `skipped` row written: the runner keeps that row (no `failed` row of its own) and
        # runs the next configurations; --strict does not count it as a failure.
        spec = self.spec(versions='["a", "oom", "b"]', batches="[1, 2]")
        r = self.run_sweep(spec, "--strict")
        rows = self.rows()
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        oom = [x for x in rows if x["version"] == "oom"]
        self.assertEqual(len(oom), 2)
        for x in oom:
            self.assertEqual(x["status"], "skipped")
            self.assertIn("out of host memory", x["note"])
            self.assertIn("(1211827200000 bytes)", x["note"])
        self.assertEqual({x["status"] for x in rows if x["version"] != "oom"}, {"ok"})
        self.assertIn("skipped 2", r.stdout)
        self.assertIn("failed 0", r.stdout)

    def test_timeout_kills_the_bench(self):
        spec = self.spec(versions='["hang", "a"]', batches="[1]", timeout_s="1")
        pidfile = self.dir / "pid"
        t0 = time.monotonic()
        self.run_sweep(spec, env={"FAKE_PIDFILE": str(pidfile)})
        self.assertLess(time.monotonic() - t0, 30)
        rows = {r["version"]: r for r in self.rows()}
        self.assertEqual(rows["hang"]["status"], "failed")
        self.assertIn("timeout after 1 s", rows["hang"]["note"])
        self.assertEqual(rows["a"]["status"], "ok")

    def test_sigterm_stops_cleanly_and_resumes(self):
        spec = self.spec(versions='["a", "hang"]', batches="[1]")
        pidfile = self.dir / "pid"
        cmd = [PY, str(RUNNER), "--spec", str(spec), "--build-dir", str(self.build),
               "--out", str(self.out)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(self.env, FAKE_PIDFILE=str(pidfile)))
        for _ in range(200):  # wait until the hanging bench runs
            if pidfile.exists() and len(self.rows() if self.out.exists() else []) == 1 \
                    and pidfile.read_text():
                break
            time.sleep(0.05)
        time.sleep(0.3)
        hang_pid = int(pidfile.read_text())
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("reruns on resume", err)
        time.sleep(0.2)
        with self.assertRaises(ProcessLookupError):  # the bench went with the runner
            os.kill(hang_pid, 0)
        self.assertEqual([r["version"] for r in self.rows()], ["a"])

    # ---- sharding and merge --------------------------------------------------------------

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
        r = subprocess.run([PY, str(MERGE), "--results", str(res), "--num-shards", "4",
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
        cmd = [PY, str(MERGE), "--results", str(res), "--num-shards", "3", "--out", str(res / "m.csv")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("shard_1.csv", r.stdout)
        # The file exists but the shard never finished: the spec check catches it.
        (res / "shards" / "shard_1.csv").write_text(rs.HEADER_LINE + "\n")
        r = subprocess.run(cmd + ["--spec", str(spec)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("3 configuration(s) of the spec have no row", r.stdout)

    def set_gpu(self, path, gpu, only_ok=False):
        rows, _ = rs.read_csv(path)
        for r in rows:
            if not only_ok or r["status"] == "ok":
                r["gpu"] = gpu
        path.write_text(rs.HEADER_LINE + "\n" + "".join(rs.format_row(r) for r in rows))

    def test_merge_refuses_to_mix_gpu_models(self):
        spec = self.spec()
        res = self.dir / "res"
        shards = [res / "shards" / f"shard_{i}.csv" for i in range(2)]
        for i, f in enumerate(shards):
            self.run_sweep(spec, "--shard", str(i), "--num-shards", "2", out=f)
        self.set_gpu(shards[0], "NVIDIA H200")
        self.set_gpu(shards[1], "NVIDIA H100 80GB HBM3")
        cmd = [PY, str(MERGE), "--results", str(res), "--num-shards", "2", "--spec", str(spec)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("2 GPU models", r.stdout)
        self.assertIn("NVIDIA H200: shard_0.csv", r.stdout)
        self.assertIn("NVIDIA H100 80GB HBM3: shard_1.csv", r.stdout)
        self.assertFalse((res / "s.csv").exists(), "a refused merge must write nothing")
        # The same with plain CSV inputs.
        r = subprocess.run([PY, str(MERGE), "--out", str(self.dir / "m.csv")] + [str(f) for f in shards],
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
        ceil = {c: "" for c in rs.COLUMNS}
        ceil.update(run_id="test", family="ceilings", streams="1", flush_l2="0", status="ok",
                    gpu="NVIDIA H200")
        rows = [dict(ceil, version="copy", gbps="4000"), dict(ceil, version="gemm_fp16", tflops="700"),
                dict(ceil, version="gemm_fp8", tflops="1400")]
        (res / "shards" / "ceilings.csv").write_text(
            rs.HEADER_LINE + "\n" + "".join(rs.format_row(r) for r in rows))
        cmd = [PY, str(MERGE), "--results", str(res), "--num-shards", "1", "--spec", str(spec),
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

    def test_extra_args_are_part_of_the_key(self):
        spec = self.spec(versions='["a"]', batches="[1]", extra_args='[[], ["--rows", "64"]]')
        self.run_sweep(spec)
        rows = self.rows()
        self.assertEqual(sorted(r["note"] for r in rows), ["", "rows=64 [extra: --rows 64]"])
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        self.assertIn("0 to run", self.run_sweep(spec).stdout)

    def test_streams_sm_is_resolved_by_the_bench_and_keeps_its_identity(self):
        spec = self.spec(streams='[1, "sm"]', batches="[1]")
        self.run_sweep(spec)
        rows = self.rows()
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        sm = [r for r in rows if rs.STREAMS_SM_TAG in r["note"]]
        self.assertEqual(len(sm), 3)
        self.assertTrue(all(r["streams"] == "132" for r in sm))  # the count used, not "sm"
        r = self.run_sweep(spec)  # resume: nothing left to run, nothing duplicated
        self.assertIn("0 to run", r.stdout)
        self.assertEqual(len(self.rows()), 6)
        for bad in ('["SM"]', '[0]', '["sm", "sm"]', '[]'):
            with self.assertRaises(rs.SpecError):
                rs.load_spec(self.spec(name="bad.toml", streams=bad))

    def test_specs_resolve_the_version_lists_words(self):
        spec = rs.load_spec(self.spec(family='"encoder"',
                                      versions='["e6_best", "fastest_fp8", "fastest_fp16", "e15_fp8_attention_e4m3"]'))
        table = {a: v["step"] for a, v in rs.step_table.aliases().items()}
        # aliases resolved in place, a step named twice (by an alias and by name) kept once
        named = ["e6_best", table["fastest_fp8"], table["fastest_fp16"], "e15_fp8_attention_e4m3"]
        self.assertEqual(spec["versions"], list(dict.fromkeys(named)))
        twice = rs.load_spec(self.spec(family='"encoder"', versions=f'["fastest_fp8", "{table["fastest_fp8"]}"]'))
        self.assertEqual(twice["versions"], [table["fastest_fp8"]])
        every = rs.load_spec(self.spec(family='"encoder"', versions='["@versions"]'))["versions"]
        self.assertEqual(every, rs.step_table.ladder())
        self.assertIn("e1_library", every)
        ln = rs.load_spec(self.spec(family='"layernorm"', versions='["@versions"]'))["versions"]
        self.assertEqual(ln[0], "v1_shared")
        self.assertIn("cudnn", ln)
        with self.assertRaises(rs.SpecError):
            rs.load_spec(self.spec(family='"nosuchfamily"', versions='["@versions"]'))

    def test_one_invocation_many_rows(self):
        spec = self.spec(versions=None, binary='"stages/fake/fake_two"',
                         row_versions='["copy", "gemm"]', batches="[1, 2]")
        dry = self.run_sweep(spec, "--dry-run")
        self.assertIn("2 configurations (4 rows)", dry.stderr)
        self.run_sweep(spec, env={"FAKE_ONLY_ONE": "1"})
        rows = self.rows()
        self.assertEqual(collections.Counter((r["version"], r["status"]) for r in rows),
                         {("copy", "ok"): 2, ("gemm", "failed"): 2})
        self.run_sweep(spec, "--retry", "failed")
        rows = self.rows()
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        self.assertEqual(collections.Counter(r["status"] for r in rows), {"ok": 4})

    def test_shapeless_rows_resume(self):
        spec = self.spec(versions=None, binary='"stages/fake/fake_two"', shapeless="true",
                         row_versions='["copy", "gemm"]', batches=None, image_sizes=None,
                         models=None)
        env = {"FAKE_SHAPELESS": "1"}
        self.run_sweep(spec, env=env)
        rows = self.rows()
        self.assertEqual(sorted((r["version"], r["status"], r["batch"]) for r in rows),
                         [("copy", "ok", ""), ("gemm", "ok", "")])
        self.assertIn("0 to run", self.run_sweep(spec, env=env).stdout)
        r = self.run_sweep(self.spec(shapeless="true", batches="[1, 2]"), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'batches' takes one value", r.stderr)

    def test_no_device_after_some_rows_skips_the_rest(self):
        spec = self.spec(versions=None, binary='"stages/fake/fake_two"',
                         row_versions='["copy", "gemm"]', batches="[1]")
        self.run_sweep(spec, env={"FAKE_NODEV": "1"})
        rows = self.rows()
        self.assertEqual(sorted((r["version"], r["status"], r["note"]) for r in rows),
                         [("copy", "skipped", "no CUDA device"), ("gemm", "skipped", "no CUDA device")])

    def test_memory_budget_skips_with_reason(self):
        spec = self.spec(versions='["a"]', family='"layernorm"', batches="[1, 100000]",
                         image_sizes="[224]", models='["vit_b"]', max_device_gib="1")
        (self.build / "stages" / "layernorm").mkdir()
        os.symlink(self.build / "stages" / "fake" / "fake_a",
                   self.build / "stages" / "layernorm" / "layernorm_a")
        self.run_sweep(spec)
        rows = {r["batch"]: r for r in self.rows()}
        self.assertEqual(rows["1"]["status"], "ok")
        self.assertEqual(rows["100000"]["status"], "skipped")
        self.assertIn("over budget", rows["100000"]["note"])

    # ---- errors --------------------------------------------------------------------------

    def test_bad_spec_names_the_key(self):
        for kw, needle in (({"batchez": "[1]"}, "unknown key 'batchez'"),
                           ({"batches": "[0]"}, "'batches'"),
                           ({"image_sizes": "[100]"}, "'image_sizes'"),
                           ({"models": '["vit_x"]'}, "'models'"),
                           ({"batches": None}, "missing required key 'batches'"),
                           ({"anchors": '["p"]'}, "'anchor_script'")):
            r = self.run_sweep(self.spec(**kw), check=False)
            self.assertEqual(r.returncode, 2, kw)
            self.assertIn(needle, r.stderr, kw)

    def test_missing_binary_says_build_first(self):
        r = self.run_sweep(self.spec(versions='["a", "zzz"]'), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("ninja -C", r.stderr)
        self.assertIn("fake_zzz", r.stderr)
        self.assertFalse(self.out.exists())
        r = self.run_sweep(self.spec(versions='["a", "zzz"]'), "--skip-unbuilt")
        self.assertEqual({x["version"] for x in self.rows()}, {"a"})

    def test_unwritable_output(self):
        blocker = self.dir / "file"
        blocker.write_text("")
        r = self.run_sweep(self.spec(), out=blocker / "out.csv", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot write output CSV", r.stderr)

    def test_output_dir_is_created(self):
        self.run_sweep(self.spec(batches="[1]"), out=self.dir / "a" / "b" / "c.csv")
        self.assertEqual(len(self.rows(self.dir / "a" / "b" / "c.csv")), 3)

    # ---- the PyTorch anchor (torch and a GPU are optional here) --------------------------

    def test_layernorm_anchor_writes_one_schema_row(self):
        csv_path = self.dir / "anchor.csv"
        r = subprocess.run([PY, str(HERE / "anchors" / "torch_layernorm.py"), "--version",
                            "pytorch_layer_norm", "--batch", "2", "--image-size", "64",
                            "--iters", "3", "--warmup", "1", "--csv", str(csv_path)],
                           capture_output=True, text=True, timeout=300)
        rows = self.rows(csv_path)
        self.assertEqual(len(rows), 1)
        row = rows[0]
        self.assertEqual((row["family"], row["version"], row["tokens"], row["hidden"]),
                         ("layernorm", "pytorch_layer_norm", "17", "768"))
        if row["status"] == "skipped":
            self.assertTrue(row["note"].startswith(("torch not installed", "no CUDA device")),
                            row["note"])
            self.assertEqual(r.returncode, 2)
        else:
            self.assertEqual((row["status"], r.returncode), ("ok", 0), row["note"])
            self.assertLessEqual(float(row["rel_l2_err"]), 5e-3)

    def test_anchor_serves_rows_from_stdin(self):
        # --serve: one row per request line, each answered by the sentinel with the row's exit
        # code; a bad line is answered too, and the process ends with its input.
        csv_path = self.dir / "served.csv"
        args = ["--batch", "2", "--image-size", "32", "--model", "vit_ti", "--iters", "2",
                "--warmup", "0", "--csv", str(csv_path)]
        lines = [json.dumps(["--version", v] + args) for v in ("pytorch_timm", "pytorch_timm_graph")]
        r = subprocess.run([PY, str(HERE / "anchors" / "torch_vit.py"), "--serve"],
                           input="\n".join(lines + ["not json", json.dumps(["--version", "nope"])]) + "\n",
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        done = [l for l in r.stdout.splitlines() if l.startswith("STUDY_ANCHOR_DONE")]
        self.assertEqual(len(done), 4, r.stdout)
        self.assertEqual(done[2:], ["STUDY_ANCHOR_DONE 2", "STUDY_ANCHOR_DONE 2"])
        rows = self.rows(csv_path)
        self.assertEqual([x["version"] for x in rows], ["pytorch_timm", "pytorch_timm_graph"])
        for x, d in zip(rows, done):
            if x["status"] == "skipped":
                self.assertTrue(x["note"].startswith(("torch not installed", "no CUDA device")), x["note"])
                self.assertEqual(d, "STUDY_ANCHOR_DONE 2")
            else:
                self.assertEqual((x["status"], d), ("ok", "STUDY_ANCHOR_DONE 0"), x["note"])

    def test_a_graph_keeps_what_its_forward_reads_alive(self):
        # A captured graph reads the model's weights by address; if nothing held the model after
        # the capture, its memory went back to the allocator and the timed replays ran on
        # whatever the next allocation wrote there. Fake torch: the graph API as no-ops.
        sys.path.insert(0, str(HERE / "anchors"))
        import common
        import contextlib
        import gc
        import types
        import weakref

        class Stream:
            def wait_stream(self, other):
                pass

        class Model:
            def __call__(self):
                return types.SimpleNamespace(fill_=lambda v: None)
        cuda = types.SimpleNamespace(
            Stream=lambda device=None: Stream(), current_stream=lambda dev=None: Stream(),
            stream=lambda s: contextlib.nullcontext(), graph=lambda g: contextlib.nullcontext(),
            CUDAGraph=lambda: types.SimpleNamespace(replay=lambda: None))
        fake_torch = types.SimpleNamespace(cuda=cuda)

        def build():  # as torch_vit.build: the model reachable only through forward
            model = Model()
            return common.eager_or_graph(fake_torch, lambda: model(), "cuda:0", True), weakref.ref(model)
        (run, result, note), model = build()
        gc.collect()
        self.assertEqual(note, "cuda-graph replay")
        self.assertIsNotNone(model(), "the graphed forward's model was freed while its graph can replay")
        run()
        result()
        del run, result
        gc.collect()
        self.assertIsNone(model())  # and nothing holds it longer than the replays

    def test_keep_makes_once_per_key_while_serving(self):
        sys.path.insert(0, str(HERE / "anchors"))
        import common
        made = []
        self.assertEqual(common.keep(("k",), lambda: made.append(1) or len(made)), 1)  # one-row run
        self.assertEqual(common.keep(("k",), lambda: made.append(1) or len(made)), 2)  # makes again
        rows = [json.dumps(["--row", k]) for k in ("a", "b", "a")]
        seen = []

        def run_one(argv):
            seen.append(common.keep((argv[1],), lambda: made.append(argv[1]) or len(made)))
            return 0
        import io
        out = io.StringIO()
        try:
            common.serve(run_one, io.StringIO("\n".join(rows) + "\n"), out)
        finally:
            common._kept = None
        self.assertEqual(seen, [3, 4, 3])   # the third row reuses the first row's object
        self.assertEqual(out.getvalue().splitlines(), ["STUDY_ANCHOR_DONE 0"] * 3)
        self.assertEqual(common.kept_by_other_rows(), 0)   # nothing on a GPU here

    def test_patch_embed_anchors_write_one_schema_row_each(self):
        for version in ("pytorch_conv2d", "pytorch_patchify_linear"):
            csv_path = self.dir / f"{version}.csv"
            r = subprocess.run([PY, str(HERE / "anchors" / "torch_patch_embed.py"), "--version",
                                version, "--batch", "2", "--image-size", "64", "--model",
                                "vit_ti", "--iters", "3", "--warmup", "1", "--csv",
                                str(csv_path)], capture_output=True, text=True, timeout=300)
            rows = self.rows(csv_path)
            self.assertEqual(len(rows), 1)
            row = rows[0]
            self.assertEqual((row["family"], row["version"], row["tokens"], row["hidden"],
                              row["rows"]), ("patch_embed", version, "17", "192", "32"))
            if row["status"] == "skipped":
                self.assertIn(row["note"], ("torch not installed", "no CUDA device"))
                self.assertEqual(r.returncode, 2)
            else:
                self.assertEqual((row["status"], r.returncode), ("ok", 0), row["note"])
                self.assertLessEqual(float(row["rel_l2_err"]), 5e-3)
                self.assertRegex(row["note"], r"timed: (eager|cuda-graph replay) \(the faster; "
                                              r"medians eager [0-9.e+]+ us, cuda-graph replay ")

    def test_patch_embed_anchor_refuses_streams(self):
        csv_path = self.dir / "streams.csv"
        subprocess.run([PY, str(HERE / "anchors" / "torch_patch_embed.py"), "--version",
                        "pytorch_conv2d", "--streams", "4", "--csv", str(csv_path)],
                       capture_output=True, text=True, timeout=300)
        row = self.rows(csv_path)[0]
        self.assertEqual(row["status"], "skipped")
        self.assertIn(row["note"], ("torch not installed", "no CUDA device",
                                    "PyTorch anchors run on one stream (streams=1 only)"))


if __name__ == "__main__":
    unittest.main()
