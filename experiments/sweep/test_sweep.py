"""Tests of the sweep runner with fake benches and a fake kept anchor (experiments/sweep/fakes.py):
the schema, crash safety and resume, rounds, failures, timeouts, signals, specs and budgets.

  python3 -m experiments.sweep.test_sweep      (from the repository root)
"""
import collections
import csv
import os
import re
import signal
import subprocess
import textwrap
import time
import unittest

from experiments.sweep.fakes import FAKE_SERVER, PY, RUNNER, SweepCase
from studylib import schema, specs
from studylib.paths import REPO


class SweepTest(SweepCase):
    def test_columns_match_cpp(self):
        src = (REPO / "common" / "harness" / "csv.cpp").read_text()
        body = src[src.index("csv_columns()"):]
        body = body[body.index("{", body.index("static")):body.index("};")]
        self.assertEqual(re.findall(r'"([a-z0-9_]+)"', body), schema.COLUMNS)

    def test_energy_seconds_reach_every_row(self):
        # energy_s: each configuration gets --energy (the fake bench notes it); out of range is refused.
        configs, _ = specs.select_configs(specs.load_spec(self.spec(energy_s="5")), self.build, PY, dry_run=True)
        self.assertTrue(configs)
        for c in configs:
            args = c.args("x.csv", 0)
            self.assertEqual(args[args.index("--energy") + 1], "5")
        configs, _ = specs.select_configs(specs.load_spec(self.spec()), self.build, PY, dry_run=True)
        self.assertNotIn("--energy", configs[0].args("x.csv", 0))
        with self.assertRaises(specs.SpecError):
            specs.load_spec(self.spec(energy_s="-1"))

    def test_gemm_choices_kept_in_the_run_folder(self):
        # Every process of a sitting reads and writes the GEMM search's choices in one file beside
        # its CSV, not in the user's cache; a path given in the environment is kept.
        self.run_sweep(self.spec(batches="[1]"), env={"FAKE_SHOW_CACHE": "1"})
        here = self.out.resolve().parent / "cutlass_gemm.tsv"
        for r in self.rows():
            self.assertIn(f"gemm_cache={here}", r["note"])
        given = self.dir / "mine.tsv"
        self.run_sweep(self.spec(batches="[1]"), env={"FAKE_SHOW_CACHE": "1", "STUDY_CUTLASS_CACHE": str(given)},
                       out=self.dir / "given.csv")
        for r in self.rows(self.dir / "given.csv"):
            self.assertIn(f"gemm_cache={given}", r["note"])

    def test_timm_weights_exported_once_and_given_to_every_row(self):
        # A fake python for the exporter: writes "<model> <image> <seed>" to --out, counts its calls.
        calls = self.dir / "exports"
        python = self.dir / "fake_python"
        python.write_text(textwrap.dedent(f"""\
            #!{PY}
            import sys
            a = sys.argv[2:]
            assert sys.argv[1].endswith("export_timm_fixture.py"), sys.argv
            open({str(calls)!r}, "a").write("x")
            get = lambda f: a[a.index(f) + 1]
            if get("--seed") == "13":
                sys.exit("no timm here")
            open(get("--out"), "w").write(" ".join(get(f) for f in ("--model", "--image-size", "--seed")))
            """))
        python.chmod(0o755)
        env = {"STUDY_WEIGHTS_DIR": str(self.dir / "weights")}
        spec = self.spec(timm_weights="true", batches="[1, 2]")
        self.run_sweep(spec, "--python", str(python), env=env)
        rows = self.rows()
        self.assertEqual(len(rows), 6)
        for r in rows:
            self.assertIn("weights=vit_ti 32 1234", r["note"])
            self.assertIn(specs.weights_tag(1234), r["note"])
        self.assertEqual(calls.read_text(), "x")  # one export for the one shape
        # Another sweep of the same shape finds the file; a failed export is one clear error.
        self.run_sweep(spec, "--python", str(python), env=env, out=self.dir / "again.csv")
        self.assertEqual(calls.read_text(), "x")
        r = self.run_sweep(self.spec(timm_weights="true", seed="13"), "--python", str(python), env=env,
                           out=self.dir / "bad.csv", check=False)
        self.assertEqual(r.returncode, specs.EXIT_USAGE)
        self.assertIn("timm_weights", r.stderr)
        self.assertIn("no timm here", r.stderr)
        # Without the key no row gets --weights.
        configs, _ = specs.select_configs(specs.load_spec(self.spec()), self.build, PY, dry_run=True)
        self.assertNotIn("--weights", configs[0].args("x.csv", 0))

    # ---- basic run, resume ---------------------------------------------------------------

    def test_rows_of_another_commit_are_refused(self):
        # A bench built from another commit than the checkout's: nothing is written, exit 2.
        spec = self.spec()
        r = self.run_sweep(spec, env={"FAKE_COMMIT": "0123abcd-stale"}, check=False)
        self.assertEqual(r.returncode, specs.EXIT_USAGE)
        self.assertIn("built from 0123abcd-stale", r.stderr)
        self.assertIn("rebuild", r.stderr)
        self.assertEqual(self.rows(), [])
        # A CSV that holds another commit's rows is not resumed from this checkout.
        self.run_sweep(spec)
        r = self.run_sweep(spec, env={"STUDY_COMMIT": "fedcba98"}, check=False)
        self.assertEqual(r.returncode, specs.EXIT_USAGE)
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

    def test_resumed_sweep_keeps_its_run_id(self):
        spec = self.spec()
        counter = self.dir / "counter"
        env = {"FAKE_COUNTER": str(counter), "FAKE_KILL_PARENT_AT": "3", "STUDY_RUN_ID": ""}
        r = self.run_sweep(spec, env=env, check=False, run_id="first-sitting")
        self.assertEqual(r.returncode, -signal.SIGKILL)
        # Resumed without a run id: the rows it adds carry the first part's.
        r = self.run_sweep(spec, env={"STUDY_RUN_ID": ""}, run_id=None)
        self.assertIn("run first-sitting", r.stdout)
        self.assertEqual({x["run_id"] for x in self.rows()}, {"first-sitting"})
        # Resumed hours later, the same file's new rows are another sitting: a run id of their own.
        with open(self.out, newline="") as f:
            header, *lines = list(csv.reader(f))
        for cells in lines[:3]:
            cells[header.index("utc")] = "2026-01-02T03:04:05Z"
        with open(self.out, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows([header] + lines[:3])
        r = self.run_sweep(spec, env={"STUDY_RUN_ID": ""}, run_id=None)
        self.assertIn("another sitting", r.stdout)
        ids = [x["run_id"] for x in self.rows()]
        self.assertEqual(ids[:3], ["first-sitting"] * 3)
        self.assertEqual(len(set(ids[3:])), 1)
        self.assertNotIn("first-sitting", ids[3:])
        # A new sweep into another file gets a new run id.
        other = self.dir / "other.csv"
        self.run_sweep(spec, env={"STUDY_RUN_ID": ""}, run_id=None, out=other)
        self.assertNotIn("first-sitting", {x["run_id"] for x in self.rows(other)})

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
        old = ",".join(schema.COLUMNS[:schema.COLUMNS.index("note") + 1])
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
            r = subprocess.run(RUNNER + ["--spec", str(spec), "--build-dir",
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
        server.write_text(FAKE_SERVER.format(py=PY))
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
        server.write_text(FAKE_SERVER.format(py=PY))
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
        from studylib import run_folder
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
            f.write(",".join(schema.COLUMNS) + "\n")
            for status, commit, clock in (("ok", "0123456789abcdef0123-dirty", "1500"),
                                          ("failed", "0123456789abcdef0123-dirty", "")):
                row = dict.fromkeys(schema.COLUMNS, "")
                row.update(status=status, commit=commit, gpu="GPU X", sm_clock_mhz=clock,
                           run_id="id1", utc="2026-01-01T00:00:00Z")
                f.write(",".join(row[c] for c in schema.COLUMNS) + "\n")
        for _ in range(2):   # a second write replaces the block, never appends another
            run_folder.write(run)
        text = (run / "README.md").read_text()
        self.assertTrue(text.startswith("# r\n\nWhy this run was made.\n"))
        self.assertEqual(text.count(run_folder.START), 1)
        self.assertIn("- `a.csv`: 2 rows (1 ok, 0 skipped, 1 failed); commit `0123456789ab-dirty` "
                      "(2 rows from a tree with uncommitted changes); GPU GPU X; SM clock 1,500-1,500 MHz", text)
        self.assertIn("- 1 other CSV file (Nsight Compute pages, probes): no study rows.", text)
        self.assertIn("- test suites (`tests/tests.txt`): Ok 1, Fail 0, Skipped 1.", text)
        self.assertIn("- planted bugs (`mutants.md`): 11 of 11 planted bugs caught.", text)
        self.assertIn("- compiled forwards (`compile_kernels.txt`): 3 generated forwards and the kernels "
                      "each calls: batch 1, 256 at 224 px; batch 32 at 384 px.", text)
        r = subprocess.run([PY, "-m", "studylib.run_folder", str(self.dir / "none")],
                           capture_output=True, text=True, timeout=60, env=self.env)
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
        self.assertRegex(r.stdout, r"\[11/11\] b\s+b=2\s+img=32\s+round 3/3 -> ok")
        rows = self.rows()
        self.assertEqual(len(rows), 18)
        self.assertEqual(self.keys(rows), self.expected_keys(spec, rounds=3))
        self.assertTrue(all(n == 1 for n in self.keys(rows).values()))
        # All versions of a shape, then all again, each round one place further down the list:
        # the order on disk.
        self.assertEqual([(x["batch"], x["version"], specs.row_round(x)) for x in rows[:9]],
                         [("1", v, k) for k, order in ((1, "abc"), (2, "bca"), (3, "cab")) for v in order])
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
        self.assertEqual([specs.row_round(x) for x in self.rows()[18:]], [4] * 6)

    def test_shapes_run_only_the_listed_shapes_in_order(self):
        # A list of shapes, not the product of the axes: vit_ti at 32 px batch 3 and vit_s at 64
        # px batch 1, each with every version, rounds interleaved per shape.
        spec = self.spec(models=None, batches=None, image_sizes=None, versions='["a", "b"]', rounds="2",
                         shapes='[["vit_ti", 32, 3], ["vit_s", 64, 1]]')
        r = self.run_sweep(spec)
        rows = self.rows()
        self.assertEqual([(x["model"], x["image_size"], x["batch"], x["version"]) for x in rows],
                         [("vit_ti", "32", "3", v) for v in "abba"] + [("vit_s", "64", "1", v) for v in "abba"])
        self.assertEqual(self.keys(rows), self.expected_keys(spec))
        self.assertRegex(r.stdout, r"\[8/8\] a\s+b=1\s+img=64\s+vit_s\s+round 2/2 -> ok")
        for kw, needle in (({"shapes": '[["vit_ti", 32, 3]]'}, "'shapes' replaces"),
                           ({"models": None, "batches": None, "image_sizes": None, "shapes": "[]"},
                            "'shapes' must be a non-empty list"),
                           ({"models": None, "batches": None, "image_sizes": None, "shapes": '[["vit_ti", 32]]'},
                            "'shapes' must be a non-empty list"),
                           ({"models": None, "batches": None, "image_sizes": None,
                             "shapes": '[["vit_ti", 32, 1], ["vit_ti", 32, 1]]'}, "lists a shape twice"),
                           ({"models": None, "batches": None, "image_sizes": None, "shapes": '[["vit_ti", 40, 1]]'},
                            "not a multiple of the patch size"),
                           ({"models": None, "batches": None, "image_sizes": None, "shapes": '[["vit_x", 32, 1]]'},
                            "unknown model 'vit_x'")):
            r = self.run_sweep(self.spec("bad.toml", **kw), check=False)
            self.assertEqual(r.returncode, 2, kw)
            self.assertIn(needle, r.stderr, kw)

    def test_rounds_spec_key_tags_before_extra_and_single_round_is_untagged(self):
        spec = self.spec(versions='["a"]', batches="[1]", rounds="2",
                         extra_args='[[], ["--rows", "64"]]')
        self.run_sweep(spec)
        notes = [x["note"] for x in self.rows()]
        self.assertEqual(notes, ["[round: 1]", "[round: 2]", "rows=64 [round: 1] [extra: --rows 64]",
                                 "rows=64 [round: 2] [extra: --rows 64]"])
        self.assertEqual([specs.row_key(x)[-2:] for x in self.rows()],
                         [("", "1"), ("", "2"), ("--rows 64", "1"), ("--rows 64", "2")])
        # One round (the default) writes rows as before: no tag; such rows are round 1.
        one = self.dir / "one.csv"
        self.run_sweep(self.spec("one.toml", versions='["a"]', batches="[1]"), out=one)
        self.assertEqual([(x["note"], specs.row_round(x)) for x in self.rows(one)], [("", 1)])

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
        cmd = RUNNER + ["--spec", str(spec), "--build-dir", str(self.build),
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
        sm = [r for r in rows if specs.STREAMS_SM_TAG in r["note"]]
        self.assertEqual(len(sm), 3)
        self.assertTrue(all(r["streams"] == "132" for r in sm))  # the count used, not "sm"
        r = self.run_sweep(spec)  # resume: nothing left to run, nothing duplicated
        self.assertIn("0 to run", r.stdout)
        self.assertEqual(len(self.rows()), 6)
        for bad in ('["SM"]', '[0]', '["sm", "sm"]', '[]'):
            with self.assertRaises(specs.SpecError):
                specs.load_spec(self.spec(name="bad.toml", streams=bad))

    def test_specs_resolve_the_version_lists_words(self):
        spec = specs.load_spec(self.spec(family='"encoder"',
                                      versions='["e6_best", "fastest_fp8", "fastest_fp16", "e15_fp8_attention_e4m3"]'))
        table = {a: v["step"] for a, v in specs.step_table.aliases().items()}
        # aliases resolved in place, a step named twice (by an alias and by name) kept once
        named = ["e6_best", table["fastest_fp8"], table["fastest_fp16"], "e15_fp8_attention_e4m3"]
        self.assertEqual(spec["versions"], list(dict.fromkeys(named)))
        twice = specs.load_spec(self.spec(family='"encoder"', versions=f'["fastest_fp8", "{table["fastest_fp8"]}"]'))
        self.assertEqual(twice["versions"], [table["fastest_fp8"]])
        every = specs.load_spec(self.spec(family='"encoder"', versions='["@versions"]'))["versions"]
        self.assertEqual(every, specs.step_table.ladder())
        self.assertIn("e1_library", every)
        ln = specs.load_spec(self.spec(family='"layernorm"', versions='["@versions"]'))["versions"]
        self.assertEqual(ln[0], "v1_shared")
        self.assertIn("cudnn", ln)
        with self.assertRaises(specs.SpecError):
            specs.load_spec(self.spec(family='"nosuchfamily"', versions='["@versions"]'))

    def test_build_targets(self):
        # What a sitting builds and checks: each version's bench and GPU test, a binary without
        # versions alone, the Python module where an anchor is the study's forward from Python.
        spec = specs.load_spec(self.spec(versions='["a", "b"]'))
        self.assertEqual(specs.build_targets(spec), (["stages/fake/fake_a", "stages/fake/test_fake_a",
                                                      "stages/fake/fake_b", "stages/fake/test_fake_b"],
                                                     ["fake_a", "fake_b"]))
        spec = specs.load_spec(self.spec(versions=None, binary='"stages/fake/fake_two"',
                                         row_versions='["copy", "gemm"]'))
        self.assertEqual(specs.build_targets(spec), (["stages/fake/fake_two"], []))
        spec = self.spec(versions=None, anchors='["pytorch_timm", "vitstudy_fp8"]', anchor_script='"x.py"')
        self.assertEqual(specs.build_targets(specs.load_spec(spec)), (["python_module"], []))
        r = subprocess.run(RUNNER + ["--spec", str(self.spec(versions='["a"]')), "--targets"],
                           capture_output=True, text=True, env=self.env, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, "stages/fake/fake_a stages/fake/test_fake_a\n"), r.stderr)
        r = subprocess.run(RUNNER + ["--spec", str(self.spec(versions='["a"]')), "--tests"],
                           capture_output=True, text=True, env=self.env, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, "fake_a\n"), r.stderr)

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
                           ({"anchors": '["p"]'}, "'anchor_script'"),
                           ({"comparison": '{step = "a", against = ["b"], caption = "x"}'},
                            "'comparison' is for a side experiment"),
                           ({"side_experiment": "true", "comparison": '{step = "a", against = ["zzz"], caption = "x"}'},
                            "'comparison' names 'zzz'"),
                           ({"side_experiment": "true", "comparison": '{step = "a", against = ["b"]}'},
                            "'comparison' needs 'caption'"),
                           ({"side_experiment": "true", "comparison": '{step = "a", against = ["b"], caption = "x", plot = 1}'},
                            "'comparison' has unknown key 'plot'"),
                           ({"side_experiment": "true",
                             "comparison": '{step = "a", against = ["b"], caption = "x", ratios = [["c", "a"]]}'},
                            "'comparison.ratios' holds [column, version, over version] triples"),
                           ({"side_experiment": "true",
                             "comparison": '{step = "a", against = ["b"], caption = "x", ratios = [["c", "a", "zzz"]]}'},
                            "'comparison' names 'zzz'")):
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


if __name__ == "__main__":
    unittest.main()
