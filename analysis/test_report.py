"""The report build on synthetic LayerNorm runs: outputs, generated sentences, headline and
targets, bad input and its one-line errors, the rows column, one run's report, rounds, the helpers
and the timm parity files (which run each part comes from: test_run_choice).

    python3 -m analysis.test_report      (from the repository root)
"""
import csv
import json
import re
import tempfile
import unittest
from pathlib import Path

from analysis.testing import BuiltReport, skip_without_pandas, read_report

skip_without_pandas(__name__)

import pandas  # noqa: E402
from analysis import synthetic, synthetic_patch_embed  # noqa: E402
from analysis.testing import OWN, REPO, build, expected_findings, hand_made_encoder, read_rows, rewrite_csv, tree_bytes  # noqa: E402
from studylib import catalog, formatting, notes, rundata, schema  # noqa: E402


class ReportBuild(BuiltReport):
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
        # A folder with no top-level rows (a side experiment) and one with no CSV at all (a
        # test-suite report): the index lists them too.
        side = cls.results / "c_side" / "probe"
        side.mkdir(parents=True)
        (side / "probe.csv").write_text("version,commit,gpu,us\nx,0123456789abcdef0123456789abcdef01234567,GPU Z,1\n")
        (cls.results / "c_side" / "README.md").write_text("# c_side\n\nA probe on its own. More.\n")
        (cls.results / "d_tests").mkdir()
        (cls.results / "d_tests" / "README.md").write_text("# d_tests\n\nNo timings here: tests.\n")
        cls.out = root / "out"
        cls.res = build("--results", cls.results, "--out", cls.out)
        cls.readme = read_report(cls.out) if cls.res.returncode == 0 else ""

    def test_build_succeeds(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)

    def test_every_version_introduced(self):
        # Whatever data the runs hold, the report gives every version of every family one line,
        # from the version lists (no list can fall behind them): its NOTES.md title, predicted
        # and why word for word; measured as the section's ladder figure draws it, the NOTES'
        # words (said to be theirs) where it does not draw the version.
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        for family in ("patch_embed", "layernorm", "attention", "mlp", "encoder"):
            for v in catalog.family_versions(family):
                n = notes.read(REPO / "stages" / family / v / "NOTES.md", v)
                ladder = self.readme[self.readme.index(f"`stages/{family}/<version>/NOTES.md`"):]
                line = next((x for x in ladder.splitlines() if x.startswith(f"- **`{v}`** (")), "")
                self.assertTrue(line, f"{family}/{v}: no line")
                for field in ("title", "Predicted", "Why"):
                    self.assertIn(n[field], line, f"{family}/{v}: {field}")
                drawn = "*Measured:* " in line
                self.assertEqual(n["Measured"] in line, not drawn, f"{family}/{v}: Measured")

    def test_measured_is_the_ladder_figures(self):
        # The synthetic LayerNorm run's steps are drawn: each line's times are the newer run's
        # medians at the ladder's sizes (the older run, another seed, would differ).
        from analysis.layernorm_data import merged
        t = merged(rundata.load_run(self.new))[0]
        lines = (self.out / "text" / "ladder_layernorm.md").read_text()
        for v in OWN:
            line = next(x for x in lines.splitlines() if x.startswith(f"- **`{v}`**"))
            said = dict((int(r), float(us)) for us, r in re.findall(r"([\d.]+) us at (\d+) rows", line))
            self.assertTrue(said, f"{v}: {line}")
            for rows, us in said.items():
                median = float(t[(t["version"] == v) & (t["rows"] == rows)]["median_us"].iloc[0])
                self.assertAlmostEqual(us, median, delta=0.051, msg=f"{v} at {rows} rows")

    def test_figures_written(self):
        for name in ("layernorm_time", "layernorm_gbps", "layernorm_speedup", "layernorm_ladder_steps"):
            p = self.out / "figures" / f"{name}.png"
            self.assertTrue(p.is_file(), p)
            self.assertEqual(p.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
            appendix = (self.out / "appendix" / "layernorm.md").read_text()
            self.assertTrue(f"](figures/{name}.png)" in self.readme or f"](../figures/{name}.png)" in appendix, name)

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
        self.assertNotRegex(self.readme, r"<!--\s*(figure|table|text|family|end|appendix):")
        self.assertNotIn("/appendix -->", self.readme)

    def test_appendix_pages(self):
        # The regions a first reading skips are pages of their own, linked from their section,
        # with every relative link (figures, run folders) still reaching its file.
        page = self.out / "appendix" / "layernorm.md"
        self.assertTrue(page.is_file())
        self.assertIn("](appendix/layernorm.md)", self.readme)
        text = page.read_text()
        self.assertIn("Median time of every timed configuration", text)
        self.assertNotIn("Median time of every timed configuration", self.readme.split("## 3.")[0].split("## 2.")[1])
        links = re.findall(r"\]\(([^)#\s]+)\)", text)
        self.assertIn("../figures/layernorm_time.png", links)
        for link in links:
            if not link.startswith("http"):
                self.assertTrue((page.parent / link).exists(), link)

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
        self.assertIn("On NVIDIA H100 80GB HBM3 (synthetic) the section run above measured a device-to-device "
                      "copy bandwidth (bytes read + written) of 3,000 GB/s and an fp16 tensor-core GEMM rate "
                      "of 720 TFLOP/s;", self.readme)

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
        side = index.split("## Folders without a run's rows")[1].split("## Which run")[0]
        self.assertIn("| [c_side](c_side/) | A probe on its own. | GPU Z | "
                      "0123456789abcdef0123456789abcdef01234567 (not in this clone) | probe |", side)
        self.assertIn("| [d_tests](d_tests/) | No timings here: tests. | - | - | no CSV |", side)

    def test_run_option_selects_folder(self):
        out = Path(self.tmp.name) / "out_old"
        res = build("--results", self.results, "--run", "a_old", "--out", out)
        self.assertEqual(res.returncode, 0, res.stderr)
        readme = read_report(out)
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


class LayerNormNothingTimed(unittest.TestCase):
    """A run whose LayerNorm rows were all skipped (a CPU-only cluster: no CUDA device, no
    torch) still builds: status table and findings, and a reason at every figure and table."""

    def test_only_skipped_rows(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic.write_run(Path(d) / "r", configs=synthetic.SMALL_CONFIGS)
            for name in ("layernorm.csv", "anchors.csv", "ceilings.csv"):
                path = run / name
                if not path.is_file():
                    continue
                with open(path, newline="") as f:
                    reader = csv.DictReader(f)
                    fields, rows = reader.fieldnames, list(reader)
                for r in rows:
                    for c in ("mean_us", "std_us", "median_us", "min_us", "max_us", "gbps", "tflops"):
                        r[c] = ""
                    r.update(status="skipped", note="no CUDA device", gpu="none")
                with open(path, "w", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
                    w.writeheader()
                    w.writerows(rows)
            res = build("--run", run)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            readme = read_report(run / "report")
            appendix = (run / "report" / "appendix" / "layernorm.md").read_text()
            self.assertIn("*Figure `layernorm_gbps` not produced: no timed LayerNorm rows", readme)
            self.assertIn("*Figure `layernorm_time` not produced: no timed LayerNorm rows", appendix)
            self.assertIn("*Table `layernorm_sweep` not produced: no timed LayerNorm rows", appendix)
            self.assertRegex(appendix, r"\| v5_unrolled \| 0 \| \d+ \| 0 \| skipped x\d+: no CUDA device \|")
            self.assertIn("skipped and 0 failed the correctness check", readme)


class PooledHeadline(unittest.TestCase):
    def test_headline_of_two_run_ids_says_so(self):
        # One sweep's rows: a plain line. The anchors from another sweep: the line names both.
        from analysis.testing import headline_line
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            run = synthetic.write_run(results / "20251121_synthetic", configs=[(224, 256)])
            line = headline_line(self, results, Path(d) / "one", "LayerNorm")
            self.assertNotIn("run ids", line)
            rewrite_csv(run / "anchors.csv", lambda rows: [dict(r, run_id="another-sweep") for r in rows])
            line = headline_line(self, results, Path(d) / "two", "LayerNorm")
            self.assertIn("**rows of 2 run ids** (another-sweep, synthetic-run-1): not one sweep's comparison", line)


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
            self.assertIn("at 50432 x 768 is missed", text)


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

    def test_appendix_marker_without_its_pair(self):
        template = self.dir / "t.md"
        template.write_text("<!-- family:layernorm -->\n<!-- appendix:layernorm -->\nwords\n"
                            "<!-- end:layernorm -->\n")
        self.assert_exit2("an appendix marker without its pair", args=["--run", self.run, "--template", template])

    def test_unknown_template_marker(self):
        template = self.dir / "t.md"
        template.write_text("<!-- family:layernorm -->\n<!-- figure:layernorm_nosuch -->\n"
                            "<!-- end:layernorm -->\n")
        self.assert_exit2("t.md", "figure:layernorm_nosuch",
                          args=["--run", self.run, "--template", template])


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
            readme = read_report(Path(d) / "out")
            self.assertIn(f"The fastest version, {best}, reaches {pct:.0f}% of the measured "
                          f"copy bandwidth", readme)
            self.assertIn("50432", (Path(d) / "out" / "tables" / "layernorm_summary.md")
                          .read_text())

    def test_csv_without_later_columns_loads(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic.write_run(Path(d) / "r", configs=[(224, 32)])
            for f in run.glob("*.csv"):
                rewrite_csv(f, lambda rows: [{k: v for k, v in r.items()
                                              if k not in schema.LATER_COLUMNS} for r in rows])
            self.assertNotIn("rows", (run / "layernorm.csv").read_text().splitlines()[0])
            df = rundata.read_csv(run / "layernorm.csv")
            for c in schema.LATER_COLUMNS:  # numbers read as NaN, the one text column as empty
                text = c in ("precision", "energy_why_not")
                self.assertTrue((df[c] == "").all() if text else df[c].isna().all(), c)
            self.assertEqual(set(rundata.rows_of(df)), {32 * 197})
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)

    def test_schema_appends_new_columns_after_note(self):
        self.assertEqual(schema.COLUMNS[:schema.COLUMNS.index("note") + 1][-1], "note")
        self.assertEqual(schema.LATER_COLUMNS, ["rows", "h2d_us", "preprocess_us", "d2h_us",
                                            "sm_clock_mhz", "mem_clock_mhz", "power_limit_w",
                                            "precision", "energy_j", "images_per_j", "power_w",
                                            "energy_sm_clock_mhz", "energy_s", "energy_calls",
                                            "energy_why_not"])


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
            readme = read_report(run / "report")
            self.assertIn("the CSVs of run folder", readme)
            self.assertTrue(any((run / "report" / "figures").glob("layernorm_*.png")))
            # The run's report/ is not mistaken for a run or for data of the run.
            self.assertEqual(rundata.run_folders(results), [run])
            res = build("--results", results, "--out", Path(d) / "all")
            self.assertEqual(res.returncode, 0, res.stderr)


class Rounds(BuiltReport):
    """Every family's run written once as a single-round sweep and once in three interleaved
    rounds (times x0.9, x1.0, x1.3: the median is the single round). The multi-round report
    shows the median and the rounds' range in its tables and judges every target on the
    median: its findings are the single round's, plus one sentence saying so."""

    WRITERS = {"layernorm": (synthetic.write_run, "layernorm_summary"),
               "mlp": (synthetic.write_mlp_run, "mlp_summary"),
               "attention": (synthetic.write_attention_run, "attention_summary"),
               "patch_embed": (synthetic_patch_embed.write_patch_embed_run, "patch_embed_ladder")}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        cls.out, cls.res = {}, {}
        for kind in ("one", "three"):
            results = root / kind
            for family, (write, _) in cls.WRITERS.items():
                folder = write(results / family)
                if kind == "three":
                    synthetic.as_rounds(folder)
            cls.out[kind] = root / f"out_{kind}"
            cls.res[kind] = build("--results", results, "--out", cls.out[kind])

    def read(self, kind, sub, name):
        return (self.out[kind] / sub / f"{name}.md").read_text()

    def test_builds(self):
        for kind, res in self.res.items():
            self.assertEqual(res.returncode, 0, f"{kind}: {res.stderr}")

    def test_findings_are_judged_on_the_median(self):
        for family in self.WRITERS:
            one = self.read("one", "text", f"{family}_findings").splitlines()
            three = self.read("three", "text", f"{family}_findings").splitlines()
            self.assertFalse([x for x in one if "rounds" in x], family)
            self.assertIn("- Each configuration was measured 3 times (interleaved rounds", three[0],
                          family)
            # The same sentences on the rounds' medians; the rounds add only the band each target's
            # ratio spans and, where that band holds the target, "within noise".
            def without_bands(lines):
                return [re.sub(r"; rounds [0-9.,]+-[0-9.,]+x", "", x).replace(" within noise", "")
                        for x in lines]
            self.assertEqual(without_bands(three[1:]), one, family)

    def test_tables_show_median_and_range(self):
        # LayerNorm at 50432 rows, v5_unrolled: the table's median is the middle round.
        rows = [r for r in read_rows(self.out["one"].parent / "three" / "layernorm" / "layernorm.csv")
                if r["version"] == "v5_unrolled" and r["batch"] == "256" and r["image_size"] == "224"]
        times = sorted(float(r["median_us"]) for r in rows)
        self.assertEqual(len(times), 3)
        summary = self.read("three", "tables", "layernorm_summary")
        self.assertIn("| rows | version | median us | rounds' range us | GB/s |", summary)
        self.assertIn(f"| 50432 | v5_unrolled | {formatting.fmt_us(times[1])} | "
                      f"{formatting.fmt_us(times[0])}-{formatting.fmt_us(times[2])} |", summary)
        sweep = self.read("three", "tables", "layernorm_sweep")
        self.assertIn(f"{formatting.fmt_us(times[1])} ({formatting.fmt_us(times[0])}-{formatting.fmt_us(times[2])})", sweep)
        for family, (_, table) in self.WRITERS.items():
            self.assertNotIn("range", self.read("one", "tables", table), family)
            self.assertIn("range", self.read("three", "tables", table), family)
            self.assertNotIn("(", self.read("one", "tables", f"{family}_sweep").split("\n", 3)[3],
                             family)
            self.assertRegex(self.read("three", "tables", f"{family}_sweep"),
                             r"\| [0-9.,]+ \([0-9.,]+-[0-9.,]+\) \|", family)

    def test_collapse_rounds_helper(self):
        import pandas as pd
        df = pd.DataFrame({"version": ["a"] * 3 + ["b"], "median_us": [3.0, 1.0, 2.0, 5.0],
                           "note": ["[round: 1]", "[round: 2]", "x [round: 3] [extra: --y]", ""],
                           "gbps": [1.0, 3.0, 2.0, 4.0]})
        self.assertEqual(list(rundata.round_of(df)), [1, 2, 3, 1])
        t = rundata.collapse_rounds(df, ["version"], gbps=("gbps", "median"))
        self.assertEqual(t.to_dict("list"), {"version": ["a", "b"], "median_us": [2.0, 5.0],
                                             "lo_us": [1.0, 5.0], "hi_us": [3.0, 5.0],
                                             "n": [3, 1], "gbps": [2.0, 4.0]})
        self.assertTrue(rundata.multi_round(t))
        df["run_id"] = ["s1", "s1", "s2", "s1"]   # round 3 of a from another sweep
        t = rundata.collapse_rounds(df, ["version"])
        self.assertEqual(list(t["run_ids"]), ["s1 s2", "s1"])
        self.assertEqual(rundata.run_ids_of(t), ["s1", "s2"])
        self.assertEqual(rundata.run_ids_of(t[t["version"] == "b"]), ["s1"])
        self.assertFalse(rundata.multi_round(t[t["version"] == "b"]))
        self.assertIsNone(formatting.rounds_sentence(t[t["version"] == "b"]))
        self.assertEqual(formatting.fmt_spread(1.0, 3.0), "1.00-3.00")


class Helpers(unittest.TestCase):
    def test_architecture_families(self):
        # Accuracy results cross between GPUs of one architecture, never to another.
        self.assertTrue(rundata.same_architecture("NVIDIA H200", "NVIDIA H100 80GB HBM3"))
        self.assertFalse(rundata.same_architecture("NVIDIA H200", "NVIDIA A100-SXM4-80GB"))
        self.assertFalse(rundata.same_architecture("NVIDIA H20", "NVIDIA H200"))  # not listed: no family
        self.assertTrue(rundata.same_architecture("NVIDIA L4", "NVIDIA L4"))  # one model, listed or not

    def test_weights_phrase(self):
        # A caption says which weights a whole-ViT sitting ran: timm's init only where every row says so.
        tagged, plain = "[round: 1] [weights: timm init, seed 1234]", "[round: 1]"
        rows = lambda notes: pandas.DataFrame({"version": ["e19_exact_gelu", "pytorch_timm_graph"], "note": notes})
        self.assertEqual(rundata.weights_phrase(rows([tagged, tagged])),
                         "Steps and anchors on the same weights, timm's init for seed 1234.")
        self.assertEqual(rundata.weights_phrase(rows([plain, tagged])),
                         "The steps on the study's own weight draw, the anchors on timm's init.")
        self.assertEqual(rundata.weights_phrase(rows([tagged, tagged]).iloc[:1]), "On timm's init for seed 1234.")
        self.assertEqual(rundata.weights_phrase(rows([plain, plain]).iloc[:1]), "On the study's own weight draw.")

    def test_flush_scratch(self):
        # What a flushed row's device_bytes counts beside the version's own: twice the L2 (the
        # committed H200 rows: v10_round_tiles 126,162,432 bytes against cpu_baseline's 333,312).
        self.assertEqual(rundata.flush_scratch_bytes("NVIDIA H200"), 126162432 - 333312)
        self.assertEqual(rundata.flush_scratch_bytes("NVIDIA H100 80GB HBM3"), 2 * 52428800)
        self.assertIsNone(rundata.flush_scratch_bytes("NVIDIA L4"))

    def test_markdown_table_escapes_and_formats(self):
        df = pandas.DataFrame({"version": ["a|b"], "us": [1234.5], "n": [float("nan")]})
        md = formatting.markdown_table(df, {"us": formatting.fmt_us})
        self.assertIn("| a\\|b | 1,234 | - |", md)
        self.assertIn("|---|---:|---:|", md)

    def test_one_setting_keeps_majority(self):
        df = pandas.DataFrame({"flush_l2": [0.0, 0.0, 1.0]})
        kept, value, dropped = rundata.one_setting(df)
        self.assertEqual((len(kept), value, dropped), (2, 0.0, 1))

    def test_csv_before_appended_columns_loads(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic.write_run(Path(d) / "r", configs=[(224, 1)])
            path = run / "layernorm.csv"
            old = schema.COLUMNS[:schema.COLUMNS.index("note") + 1]   # the schema before them
            rows = read_rows(path)
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=old, extrasaction="ignore")
                w.writeheader()
                w.writerows(rows)
            self.assertEqual(path.read_text().splitlines()[0], ",".join(old))
            df = rundata.read_csv(path)
            self.assertEqual(len(df), len(rows))
            self.assertTrue(df["rows"].isna().all())
            self.assertTrue(df["h2d_us"].isna().all())

    def test_load_run_leaves_the_timeline_to_the_notebook(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic_patch_embed.write_patch_embed_run(Path(d) / "r", images=(224,), batches=(1,))
            self.assertTrue((run / "patch_embed_timeline.csv").is_file())
            r = rundata.load_run(run)
            self.assertEqual(set(r.df["source"].map(lambda p: Path(p).name)),
                             {"patch_embed.csv", "patch_embed_anchors.csv", "ceilings.csv"})
            tl = rundata.side_table(run, "patch_embed_timeline.csv", ["stream", "start_us"],
                               ["stream", "start_us"])
            self.assertGreater(len(tl), 0)
            self.assertIsNone(rundata.side_table(run, "nope_timeline.csv", [], []))

    def test_short_commit_keeps_dirty_flag(self):
        self.assertEqual(rundata.short_commit("0123456789abcdef0123456789abcdef01234567-dirty"),
                         "0123456789ab-dirty")


class Parity(unittest.TestCase):
    def test_parity_table_from_the_run_folder(self):
        with tempfile.TemporaryDirectory() as d:
            run = hand_made_encoder(Path(d) / "r")
            (run / "timm_parity_384").mkdir()
            (run / "timm_parity_384" / "parity.json").write_text(json.dumps({
                "image_size": 384, "images": 256, "version": "e6_best",
                "logits_rel_l2_vs_timm_fp16": 0.00165, "timm_fp16_vs_fp32_rel_l2": 0.00152,
                "max_abs_logit_difference": 0.00406, "decisive_images": 205,
                "top1_agreement_decisive": 1.0, "top1_agreement_all": 0.996, "passed": True,
                "gpu": "NVIDIA H200 (synthetic)", "timm": "1.0.29",
                "criteria": {"rel_l2_max": 0.01, "agreement_min": 0.99, "margin_factor": 10.0}}))
            # A failing file is listed as such; a custom mix's file vouches for no step.
            base = json.loads((run / "timm_parity_384" / "parity.json").read_text())
            for name, extra in (("timm_parity_e14_224", {"passed": False}),
                                ("timm_parity_e14_erf_224", {"compose": "mlp=cutlass_epilogue_erf"})):
                (run / name).mkdir()
                (run / name / "parity.json").write_text(json.dumps(
                    {**base, "image_size": 224, "version": "e14_l2_prefetch", "weight_set": "random", **extra}))
            out = Path(d) / "out"
            res = build("--run", run, "--out", out)
            self.assertEqual(res.returncode, 0, res.stderr)
            table = (out / "tables" / "encoder_parity.md").read_text()
            self.assertIn("| 384 | 256 | e6_best | 1.65e-03 | 1.52e-03 | 0.0041 | 100.0% of 205 | "
                          "99.6% | passed |", table)
            self.assertIn("| 224 | 256 | e14_l2_prefetch + mlp=cutlass_epilogue_erf |", table)
            # Each step of the table marked with its passing parity files, or none.
            by_step = (out / "tables" / "encoder_parity_by_step.md").read_text()
            self.assertIn("| e6_best | no | 384 px, timm weights (r) |", by_step)
            self.assertIn("| e14_l2_prefetch | no | **none** | 224 px, random weights (r) |", by_step)
            self.assertIn("| e15_fp8_attention_e4m3 | - (FP8) | **none** |", by_step)
            (run / "timm_parity_384" / "parity.json").write_text("{}")
            res = build("--run", run, "--out", out)
            self.assertEqual(res.returncode, 2)
            self.assertIn("timm_parity_384/parity.json: not a parity result", res.stderr)


if __name__ == "__main__":
    unittest.main()
