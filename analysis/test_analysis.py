"""Tests of the analysis and report build, on synthetic runs in temporary folders (no GPU, no
committed data needed).

    /usr/bin/python3 -m unittest discover -s analysis -p 'test_*.py'
    /usr/bin/python3 analysis/test_analysis.py      # same; exit 77 without pandas/matplotlib

The report build runs as a subprocess, exactly as a user runs it, so exit codes and messages
are tested too.
"""
import csv
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUILD = REPO / "report" / "build.py"
sys.path.insert(0, str(HERE))

try:
    import matplotlib  # noqa: F401
    import pandas  # noqa: F401
except ImportError as e:
    if __name__ == "__main__":
        print(f"SKIP: {e} (use an interpreter with pandas and matplotlib, e.g. /usr/bin/python3)")
        sys.exit(77)  # meson's "skipped"
    raise unittest.SkipTest(f"{e}: needs pandas and matplotlib")

import study_data as sd  # noqa: E402
import synthetic  # noqa: E402

OWN = ["v1_shared", "v2_cub", "v3_seq_tiling", "v4_vectorized", "v5_unrolled"]


def build(*args, env=None):
    return subprocess.run([sys.executable, str(BUILD), *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "MPLBACKEND": "Agg", **(env or {})},
                          timeout=300)


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


class ReportBuild(unittest.TestCase):
    """One synthetic results root with two runs; the report is built once into a temp dir."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        cls.results = root / "results"
        # An older run with different numbers: the default build must pick the newer one.
        cls.old = synthetic.write_run(cls.results / "a_old", run_id="old-run",
                                      utc="2025-11-01T00:00:00Z", configs=synthetic.SMALL_CONFIGS,
                                      copy_gbps=2500.0, seed=7)
        cls.new = synthetic.write_run(cls.results / "b_new", run_id="new-run",
                                      utc="2025-11-21T00:00:00Z", configs=synthetic.SMALL_CONFIGS)
        cls.out = root / "out"
        cls.res = build("--results", cls.results, "--out", cls.out)
        cls.readme = (cls.out / "README.md").read_text() if cls.res.returncode == 0 else ""

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_build_succeeds(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)

    def test_figures_written(self):
        for name in ("layernorm_time", "layernorm_gbps", "layernorm_speedup"):
            p = self.out / "figures" / f"{name}.png"
            self.assertTrue(p.is_file(), p)
            self.assertEqual(p.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
            self.assertIn(f"](figures/{name}.png)", self.readme)

    def test_tables_written(self):
        for name in ("layernorm_summary", "layernorm_status", "layernorm_sweep", "study_runs"):
            p = self.out / "tables" / f"{name}.md"
            self.assertTrue(p.is_file(), p)
            self.assertIn("|---", p.read_text())
        summary = (self.out / "tables" / "layernorm_summary.md").read_text()
        for v in OWN + ["cudnn", "pytorch_layer_norm", "pytorch_layer_norm_graph"]:
            self.assertIn(f"| {v} |", summary)
        status = (self.out / "tables" / "layernorm_status.md").read_text()
        self.assertIn("| cudnn | 4 | 1 | 0 |", status)   # the 256 x 1025 rows are skipped
        self.assertIn("| v2_cub | 4 | 0 | 1 |", status)
        self.assertIn("no engine for rows", status)

    def test_no_marker_left(self):
        self.assertNotRegex(self.readme, r"<!--\s*(figure|table|text|family|end):")

    def test_newest_run_and_provenance(self):
        self.assertIn("run new-run, commit 0123456789ab", self.readme)
        self.assertNotIn("old-run", self.readme)
        self.assertIn("GPU NVIDIA H100 80GB HBM3 (synthetic)", self.readme)

    def test_sentences_match_data(self):
        best, pct, best_small, graph_ratio = expected_findings(self.new)
        text = (self.out / "text" / "layernorm_findings.md").read_text()
        headline = (f"The fastest version, {best}, reaches {pct:.0f}% of the measured copy "
                    f"bandwidth at 50432 x 768")
        self.assertIn(headline, text)
        self.assertIn(headline, self.readme)
        self.assertIn(f"At 6304 x 768, the fastest version, {best_small} ", text)
        self.assertIn(f"{graph_ratio:.2f}x faster than F.layer_norm replayed as a CUDA graph",
                      text)
        self.assertIn("at 50432 x 768 is " + ("met" if pct >= 80 else "not met"), text)
        self.assertIn("1 configuration skipped and 1 failed", text)

    def test_families_without_data(self):
        for family in ("patch_embed", "attention", "mlp", "encoder"):
            self.assertRegex(self.readme,
                             rf"No committed run yet: no CSV in .* has rows with family "
                             rf"`{family}`")

    def test_ceilings_sentence(self):
        self.assertIn("copy bandwidth of 3,000 GB/s", self.readme)
        self.assertIn("720 TFLOP/s", self.readme)

    def test_results_index(self):
        index = (self.out / "results_index.md").read_text()
        runs = index.split("## Runs")[1].split("## Which run")[0]
        old = next(l for l in runs.splitlines() if l.startswith("| [a_old]"))
        new = next(l for l in runs.splitlines() if l.startswith("| [b_new]"))
        self.assertIn("NVIDIA H100 80GB HBM3 (synthetic)", new)
        # Full hashes; these synthetic commits do not exist in this clone, and it says so.
        self.assertIn("0123456789abcdef0123456789abcdef01234567 (not in this clone)", new)
        self.assertRegex(new, r"\| layernorm \| - \|$")          # used for, superseded for
        self.assertRegex(old, r"\| - \| layernorm \(by b_new\) \|$")
        self.assertIn("| layernorm | b_new | a_old |", index)
        self.assertNotIn("ceilings (", index)  # ceilings is part of each run, not a family

    def test_run_option_selects_folder(self):
        out = Path(self.tmp.name) / "out_old"
        res = build("--results", self.results, "--run", "a_old", "--out", out)
        self.assertEqual(res.returncode, 0, res.stderr)
        readme = (out / "README.md").read_text()
        self.assertIn("run old-run", readme)
        self.assertNotIn("new-run", readme)
        best, pct, _, _ = expected_findings(self.old)
        self.assertIn(f"The fastest version, {best}, reaches {pct:.0f}% of the measured copy "
                      f"bandwidth", readme)


class FastestIncludesLibraries(unittest.TestCase):
    def test_library_faster_than_every_own_version_is_named_fastest(self):
        with tempfile.TemporaryDirectory() as d:
            model = dict(synthetic.MODEL, cudnn=(0.95, 1.0))
            run = synthetic.write_run(Path(d) / "r", configs=synthetic.SMALL_CONFIGS,
                                      model=model)
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            text = (Path(d) / "out" / "text" / "layernorm_findings.md").read_text()
            self.assertIn("At 6304 x 768, the fastest version is the library version cudnn", text)
            self.assertIn("At 6304 x 768, our fastest version, v5_unrolled", text)
            self.assertIn("The fastest version, cudnn (a library version), reaches", text)
            self.assertNotIn("the fastest version, v5_unrolled", text)


class TargetMissed(unittest.TestCase):
    def test_sentence_follows_data(self):
        with tempfile.TemporaryDirectory() as d:
            model = dict(synthetic.MODEL, v5_unrolled=(0.62, 2.0), v4_vectorized=(0.60, 2.2))
            run = synthetic.write_run(Path(d) / "r", configs=[(224, 256)], model=model)
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            text = (Path(d) / "out" / "text" / "layernorm_findings.md").read_text()
            rows = read_rows(run / "layernorm.csv")
            best = min((r for r in rows if r["version"] in OWN and r["status"] == "ok"),
                       key=lambda r: float(r["median_us"]))
            pct = 100 * float(best["gbps"]) / synthetic.COPY_GBPS
            self.assertLess(pct, 80)
            self.assertIn(f"The fastest version, {best['version']}, reaches {pct:.0f}%", text)
            self.assertIn("at 50432 x 768 is not met", text)


def mlp_timings(run_dir, hidden=768):
    """MLP sweep timings {(version, rows): row} straight from mlp.csv with the csv module
    (the sweep's rows: no extra arguments, L2 flushed), independent of the pandas code."""
    return {(r["version"], int(r["batch"]) * int(r["tokens"])): r
            for r in read_rows(run_dir / "mlp.csv")
            if r["status"] == "ok" and r["hidden"] == str(hidden) and r["flush_l2"] == "1"
            and "[extra:" not in r["note"]}


def us(x):
    """sd.fmt_us on a CSV value: the sentences print times this way."""
    return sd.fmt_us(float(x))


class MlpReport(unittest.TestCase):
    """A results root with a LayerNorm run and a newer MLP run: each family picks its own run,
    and the MLP section's sentences follow the MLP CSV."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        results = root / "results"
        cls.ln = synthetic.write_run(results / "a_layernorm", configs=synthetic.SMALL_CONFIGS)
        cls.mlp = synthetic.write_mlp_run(results / "b_mlp")
        cls.out = root / "out"
        cls.res = build("--results", results, "--out", cls.out)
        cls.readme = (cls.out / "README.md").read_text() if cls.res.returncode == 0 else ""
        cls.text = ((cls.out / "text" / "mlp_findings.md").read_text()
                    if cls.res.returncode == 0 else "")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_build_succeeds(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        self.assertNotRegex(self.readme, r"<!--\s*(figure|table|text|family|end):")
        self.assertNotRegex(self.readme, r"No committed run yet: .* family `(mlp|layernorm)`")

    def test_outputs_written(self):
        for name in ("mlp_time", "mlp_tflops", "mlp_speedup"):
            p = self.out / "figures" / f"{name}.png"
            self.assertEqual(p.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
            self.assertIn(f"](figures/{name}.png)", self.readme)
        for name in ("mlp_summary", "mlp_widths", "mlp_cublaslt", "mlp_algorithms", "mlp_pingpong",
                     "mlp_status", "mlp_sweep"):
            self.assertIn("|---", (self.out / "tables" / f"{name}.md").read_text(), name)
        summary = (self.out / "tables" / "mlp_summary.md").read_text()
        for v in synthetic.MLP_MODEL:
            self.assertIn(f"| 6304 | {v} |", summary)
            self.assertIn(f"| 50432 | {v} |", summary)
        self.assertIn("| gemm_only | 24 | 0 | 0 |",
                      (self.out / "tables" / "mlp_status.md").read_text())
        widths = (self.out / "tables" / "mlp_widths.md").read_text()
        for h in ("| vit_s | 384 |", "| vit_b | 768 |", "| vit_l | 1024 |"):
            self.assertIn(h, widths)
        cublaslt = (self.out / "tables" / "mlp_cublaslt.md").read_text()
        self.assertIn("| every call | 4 |", cublaslt)
        self.assertIn("| cached | 0 |", cublaslt)
        self.assertIn("L2 not flushed", cublaslt)
        algorithms = (self.out / "tables" / "mlp_algorithms.md").read_text()
        self.assertIn("| 6304 | heuristic's first | 1 |", algorithms)
        self.assertIn("| 50432 | fastest of every algorithm | 243 |", algorithms)
        self.assertEqual(algorithms.count("| 6304 |"), 3)   # the sweep's rows do not leak in
        pingpong = (self.out / "tables" / "mlp_pingpong.md").read_text()
        self.assertIn("| 6304 |", pingpong)
        self.assertIn("| 1.40x |", pingpong)   # own GEMM / cuBLASLt: the synthetic factor
        self.assertIn("the fastest of every one cuBLASLt will run (up to 243 candidates timed per "
                      "GEMM), fused_epilogue costs", self.text)

    def test_provenance_per_family(self):
        self.assertIn("run synthetic-mlp-run, commit fedcba987654", self.readme)
        self.assertIn("GPU NVIDIA H200 (synthetic)", self.readme)
        self.assertIn("run synthetic-run-1", self.readme)   # the LayerNorm section's own run

    def test_sentences_match_data(self):
        t = mlp_timings(self.mlp)
        ratios = []
        for rows in (6304, 50432):
            f = float(t[("fused_epilogue", rows)]["median_us"])
            g = float(t[("pytorch_mlp_graph", rows)]["median_us"])
            go = float(t[("gemm_only", rows)]["median_us"])
            ratios.append((f < g, f / go))
            self.assertIn(f"At {rows} x 768 (batch {rows // 197}, 224 px), fused_epilogue takes "
                          f"{us(f)} us", self.text)
            self.assertIn(f"{sd.faster_or_slower(g / f)} than the PyTorch MLP replayed as a CUDA "
                          f"graph ({us(g)} us)", self.text)
            self.assertIn(f"{f / go:.2f}x the time of gemm_only ({us(go)} us", self.text)
        met = "met" if all(faster for faster, _ in ratios) else "not met"
        self.assertIn("replayed as a CUDA graph (the stricter anchor) at 6304 and 50432 rows is "
                      + met + ".", self.text)
        met = "met" if all(r <= 1.05 for _, r in ratios) else "not met"
        self.assertIn(f"costing at most 1.05x gemm_only at 6304 and 50432 rows is {met} "
                      f"({ratios[0][1]:.2f}x and {ratios[1][1]:.2f}x)", self.text)
        self.assertIn("fused_epilogue runs as many kernels as gemm_only's 2", self.text)
        self.assertIn("unfused, unfused_graph and handwritten_epilogue run 2 kernels beyond",
                      self.text)
        self.assertIn("1 configuration skipped and 1 failed", self.text)
        self.assertIn(self.text.splitlines()[0][2:], self.readme)

    def test_graph_and_cublaslt_sentences(self):
        t = mlp_timings(self.mlp)
        u, ug = (float(t[(v, 197)]["median_us"]) for v in ("unfused", "unfused_graph"))
        self.assertIn(f"unfused_graph takes {us(ug)} us against unfused's {us(u)} us", self.text)
        default = {}
        every = {}
        for r in read_rows(self.mlp / "mlp_cublaslt.csv"):
            if r["version"] != "unfused":
                continue
            if "[extra:" not in r["note"]:
                default[r["batch"]] = float(r["median_us"])
            elif "--heuristic-every-call" in r["note"]:
                every[r["batch"]] = float(r["median_us"])
        self.assertIn(f"With the GEMM heuristic queried on every call, the time per call relative "
                      f"to the default", self.text)
        self.assertIn(f"unfused {every['1'] / default['1']:.2f}x at batch 1, "
                      f"{every['8'] / default['8']:.2f}x at batch 8", self.text)


class MlpTargetMissed(unittest.TestCase):
    def test_sentences_follow_data(self):
        with tempfile.TemporaryDirectory() as d:
            # fused_epilogue 1.5x the GEMMs: slower than PyTorch's graph and over 1.05x.
            model = dict(synthetic.MLP_MODEL, fused_epilogue=(3.2, 1.5, 0.0, 3))
            run = synthetic.write_mlp_run(Path(d) / "r", model=model, batches=(1, 32, 256),
                                          image_sizes=(224,), widths=(), cublaslt=False,
                                          with_status_rows=False)
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            out = Path(d) / "out"
            text = (out / "text" / "mlp_findings.md").read_text()
            t = mlp_timings(run)
            f, g = (float(t[(v, 50432)]["median_us"]) for v in ("fused_epilogue",
                                                                 "pytorch_mlp_graph"))
            self.assertGreater(f, g)
            self.assertIn(f"{sd.faster_or_slower(g / f)} than the PyTorch MLP replayed", text)
            self.assertIn("(the stricter anchor) at 6304 and 50432 rows is not met.", text)
            r = [float(t[("fused_epilogue", n)]["median_us"]) / float(t[("gemm_only", n)]
                                                                   ["median_us"])
                 for n in (6304, 50432)]
            self.assertIn(f"at 6304 and 50432 rows is not met ({r[0]:.2f}x and {r[1]:.2f}x)",
                          text)
            self.assertIn("fused_epilogue runs 1 kernel beyond gemm_only's 2: cuBLASLt ran at "
                          "least one extra kernel", text)
            self.assertIn("Every configuration passed the correctness check", text)
            readme = (out / "README.md").read_text()
            self.assertIn("*Table `mlp_widths` not produced: this run times only hidden 768", readme)
            self.assertIn("*Table `mlp_cublaslt` not produced: this run has no rows", readme)
            self.assertRegex(readme, r"No committed run yet: .* family `layernorm`")


class BadInput(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.run = synthetic.write_run(self.dir / "results" / "r", configs=[(224, 1)])

    def tearDown(self):
        self.tmp.cleanup()

    def rewrite(self, fn):
        """Apply fn to the rows (list of dicts) of layernorm.csv, keeping its header order
        unless fn removes a column."""
        path = self.run / "layernorm.csv"
        rows = read_rows(path)
        rows = fn(rows)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    def assert_exit2(self, *needles, args=None):
        res = build(*(args or ["--run", self.run]), "--out", self.dir / "out")
        self.assertEqual(res.returncode, 2, res.stdout + res.stderr)
        self.assertNotIn("Traceback", res.stderr)
        self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
        for n in needles:
            self.assertIn(n, res.stderr)
        return res.stderr

    def test_missing_column(self):
        self.rewrite(lambda rows: [{k: v for k, v in r.items() if k != "median_us"}
                                   for r in rows])
        self.assert_exit2("layernorm.csv", "missing column 'median_us'")

    def test_non_numeric_value(self):
        def bad(rows):
            rows[2]["median_us"] = "fast"
            return rows
        self.rewrite(bad)
        self.assert_exit2("layernorm.csv:4", "column 'median_us'", "'fast'")

    def test_bad_status(self):
        def bad(rows):
            rows[0]["status"] = "okay"
            return rows
        self.rewrite(bad)
        self.assert_exit2("layernorm.csv:2", "column 'status'", "'okay'")

    def test_ok_row_without_timing(self):
        def bad(rows):
            rows[1]["median_us"] = ""
            return rows
        self.rewrite(bad)
        self.assert_exit2("layernorm.csv:3", "column 'median_us'", "status 'ok'")

    def test_empty_file(self):
        (self.run / "layernorm.csv").write_text("")
        self.assert_exit2("layernorm.csv", "empty file")

    def test_missing_run_folder(self):
        self.assert_exit2("run folder", "nope", args=["--run", self.dir / "nope"])

    def test_default_root_with_bad_csv(self):
        self.rewrite(lambda rows: [{k: v for k, v in r.items() if k != "gpu"} for r in rows])
        self.assert_exit2("layernorm.csv", "missing column 'gpu'",
                          args=["--results", self.dir / "results"])

    def test_unknown_template_marker(self):
        template = self.dir / "t.md"
        template.write_text("<!-- family:layernorm -->\n<!-- figure:layernorm_nosuch -->\n"
                            "<!-- end:layernorm -->\n")
        self.assert_exit2("t.md", "figure:layernorm_nosuch",
                          args=["--run", self.run, "--template", template])


def rewrite_csv(path, fn):
    """Apply fn to the rows (list of dicts) of a CSV; the header follows the first row's keys."""
    rows = fn(read_rows(path))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


class RowsColumn(unittest.TestCase):
    """`rows` is a column of the schema: the analysis reads it instead of rebuilding it from
    batch x tokens, and CSVs written before it (and the other appended columns) still load."""

    def test_rows_column_wins_over_batch_times_tokens(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic.write_run(Path(d) / "r", configs=synthetic.SMALL_CONFIGS)
            best, pct, _, _ = expected_findings(run)

            # As a `--rows` sweep writes them: batch 1, the problem's rows in their column.
            def as_rows_run(rows):
                for r in rows:
                    if r["family"] == "layernorm":
                        r["rows"] = str(int(r["batch"]) * int(r["tokens"]))
                        r["batch"], r["note"] = "1", ""
                return rows
            for name in ("layernorm.csv", "anchors.csv"):
                rewrite_csv(run / name, as_rows_run)
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            readme = (Path(d) / "out" / "README.md").read_text()
            self.assertIn(f"The fastest version, {best}, reaches {pct:.0f}% of the measured "
                          f"copy bandwidth", readme)
            self.assertIn("50432", (Path(d) / "out" / "tables" / "layernorm_summary.md")
                          .read_text())

    def test_csv_without_later_columns_loads(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic.write_run(Path(d) / "r", configs=[(224, 32)])
            for f in run.glob("*.csv"):
                rewrite_csv(f, lambda rows: [{k: v for k, v in r.items()
                                              if k not in sd.LATER_COLUMNS} for r in rows])
            self.assertNotIn("rows", (run / "layernorm.csv").read_text().splitlines()[0])
            df = sd.read_csv(run / "layernorm.csv")
            for c in sd.LATER_COLUMNS:
                self.assertTrue(df[c].isna().all(), c)
            self.assertEqual(set(sd.rows_of(df)), {32 * 197})
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)

    def test_schema_appends_new_columns_after_note(self):
        self.assertEqual(sd.COLUMNS[:sd.COLUMNS.index("note") + 1][-1], "note")
        self.assertEqual(sd.LATER_COLUMNS, ["rows", "h2d_us", "preprocess_us", "d2h_us",
                                            "sm_clock_mhz", "mem_clock_mhz", "power_limit_w"])


def tree_bytes(folder):
    return {str(f.relative_to(folder)): f.read_bytes()
            for f in sorted(Path(folder).rglob("*")) if f.is_file()}


class RunReport(unittest.TestCase):
    """The report of one run is written inside its run folder; the committed report/ (built
    from every committed run) is never touched by it."""

    def test_run_report_leaves_report_folder_identical(self):
        before = tree_bytes(REPO / "report")
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            run = synthetic.write_run(results / "r1", configs=[(224, 32)])
            res = build("--run", run)
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertEqual(tree_bytes(REPO / "report"), before)
            readme = (run / "report" / "README.md").read_text()
            self.assertIn("the CSVs of run folder", readme)
            self.assertTrue(any((run / "report" / "figures").glob("layernorm_*.png")))
            # The run's report/ is not mistaken for a run or for data of the run.
            self.assertEqual(sd.run_folders(results), [run])
            res = build("--results", results, "--out", Path(d) / "all")
            self.assertEqual(res.returncode, 0, res.stderr)


class Helpers(unittest.TestCase):
    def test_markdown_table_escapes_and_formats(self):
        df = pandas.DataFrame({"version": ["a|b"], "us": [1234.5], "n": [float("nan")]})
        md = sd.markdown_table(df, {"us": sd.fmt_us})
        self.assertIn("| a\\|b | 1,234 | - |", md)
        self.assertIn("|---|---:|---:|", md)

    def test_one_setting_keeps_majority(self):
        df = pandas.DataFrame({"flush_l2": [0.0, 0.0, 1.0]})
        kept, value, dropped = sd.one_setting(df)
        self.assertEqual((len(kept), value, dropped), (2, 0.0, 1))

    def test_pick_run_prefers_timed(self):
        with tempfile.TemporaryDirectory() as d:
            good = synthetic.write_run(Path(d) / "good", utc="2025-01-01T00:00:00Z",
                                       configs=[(224, 1)])
            newer = synthetic.write_run(Path(d) / "newer", utc="2025-02-01T00:00:00Z",
                                        configs=[(224, 1)])
            # Everything in the newer run skipped (say, no GPU): not the run to show.
            rows = read_rows(newer / "layernorm.csv")
            for r in rows:
                r.update(status="skipped", note="no CUDA device", median_us="")
            with open(newer / "layernorm.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
            (newer / "anchors.csv").unlink()
            runs = sd.load_runs(d)
            self.assertEqual(sd.pick_run(runs, "layernorm").path, good)
            self.assertIsNone(sd.pick_run(runs, "attention"))

    def test_short_commit_keeps_dirty_flag(self):
        self.assertEqual(sd.short_commit("0123456789abcdef0123456789abcdef01234567-dirty"),
                         "0123456789ab-dirty")


if __name__ == "__main__":
    unittest.main()
