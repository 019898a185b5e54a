"""The MLP section of the report on synthetic runs: tables, side experiments' headline, the
targets sitting (and each part of the section from its run) and a missed target.

    python3 -m analysis.test_mlp_report      (from the repository root)
"""
import csv
import tempfile
import unittest
from pathlib import Path

from analysis.testing import BuiltReport, skip_without_pandas, read_report

skip_without_pandas(__name__)

from analysis import synthetic  # noqa: E402
from analysis.testing import build, headline_line, read_rows, us  # noqa: E402
from studylib import formatting  # noqa: E402


def mlp_timings(run_dir, hidden=768):
    """MLP sweep timings {(version, rows): row} straight from mlp.csv with the csv module
    (the sweep's rows: no extra arguments, L2 flushed), independent of the pandas code."""
    return {(r["version"], int(r["batch"]) * int(r["tokens"])): r
            for r in read_rows(run_dir / "mlp.csv")
            if r["status"] == "ok" and r["hidden"] == str(hidden) and r["flush_l2"] == "1"
            and "[extra:" not in r["note"]}


class MlpReport(BuiltReport):
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
        cls.readme = read_report(cls.out) if cls.res.returncode == 0 else ""
        cls.text = ((cls.out / "text" / "mlp_findings.md").read_text()
                    if cls.res.returncode == 0 else "")

    def test_build_succeeds(self):
        self.assert_built("mlp", "layernorm")

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
            self.assertIn(f"{formatting.faster_or_slower(g / f)} than the PyTorch MLP replayed as a CUDA "
                          f"graph ({us(g)} us)", self.text)
            self.assertIn(f"{f / go:.2f}x the time of gemm_only ({us(go)} us", self.text)
        met = "met" if all(faster for faster, _ in ratios) else "not met"
        self.assertIn("replayed as a CUDA graph (the stricter anchor) at 6304 and 50432 rows is "
                      + met + ".", self.text)
        met = "met" if all(r <= 1.05 for _, r in ratios) else "missed"
        self.assertIn(f"The target of the fastest fused version (fused_epilogue) costing at most "
                      f"1.05x gemm_only (the two plain GEMMs) at 6304 and 50432 rows is {met} "
                      f"(6304 rows: {ratios[0][1]:.2f}x (fused_epilogue); 50432 rows: "
                      f"{ratios[1][1]:.2f}x (fused_epilogue))", self.text)
        # The answer's MLP (erf_fit_epilogue) is not in this synthetic run: said, not judged.
        self.assertIn("This run has no timing of erf_fit_epilogue, the MLP of the fp16 answer", self.text)
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


class MlpParents(unittest.TestCase):
    def test_every_parent_is_a_version_listed_before_its_child(self):
        # The ladder figure labels each version's gain over its parent: a parent that is no
        # version, or comes after its child in the list, would label a gain over nothing real.
        from analysis.mlp_data import FUSED, GEMM, PARENTS, UNFUSED
        from studylib import catalog
        versions = catalog.family_versions("mlp")
        for child, parent in PARENTS.items():
            self.assertIn(child, versions)
            self.assertLess(versions.index(parent), versions.index(child), child)
        # Siblings are not parents: handwritten_epilogue changes the unfused MLP, not fused_epilogue.
        self.assertNotEqual(PARENTS["handwritten_epilogue"], FUSED)
        self.assertNotIn(UNFUSED, PARENTS)
        self.assertNotIn(GEMM, PARENTS)


class MlpSideHeadline(unittest.TestCase):
    """README's MLP line comes from the sitting whose fastest fp16 version is fastest relative to
    its own gemm_only: here a side experiment (mlp_cutlass) beside the run's sweep."""

    def test_side_experiment_wins_the_headline(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            run = synthetic.write_mlp_run(results / "b_mlp")
            rows = [r for r in read_rows(run / "mlp.csv") if r["status"] == "ok" and r["hidden"] == "768"
                    and int(r["batch"]) * int(r["tokens"]) == 50432 and r["version"] == "gemm_only"]
            self.assertTrue(rows)
            side = run / "mlp_cutlass"
            side.mkdir()
            gemm = rows[0]
            fast = dict(gemm, version="half_gelu_epilogue", median_us=str(float(gemm["median_us"]) * 1.001))
            slow = dict(gemm, version="fp8_tensor", median_us=str(float(gemm["median_us"]) * 0.6))
            with open(side / "mlp_cutlass.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(gemm))
                w.writeheader()
                w.writerows([gemm, fast, slow])
            line = headline_line(self, results, Path(d) / "out", "MLP")
            # fp8_tensor (faster still) is not an fp16 MLP: the line names half_gelu_epilogue.
            self.assertIn("| half_gelu_epilogue:", line)
            self.assertIn("[`b_mlp/mlp_cutlass`](experiments/results/b_mlp/mlp_cutlass/) (side experiment)", line)


class MlpSideComparison(unittest.TestCase):
    """A side experiment's table comes from its spec's [comparison]: every version against the
    step, the step's own row at 1x, and the versions the sitting skipped named with why."""

    def test_fp8_side_table_from_its_spec(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            run = synthetic.write_mlp_run(results / "b_mlp")
            gemm = next(r for r in read_rows(run / "mlp.csv") if r["status"] == "ok" and r["hidden"] == "768"
                        and int(r["batch"]) * int(r["tokens"]) == 50432 and r["version"] == "gemm_only")
            side = run / "mlp_fp8"
            side.mkdir()
            fp8 = dict(gemm, version="fp8_tensor", median_us=str(float(gemm["median_us"]) * 0.6))
            skipped = dict(gemm, version="fp8_channel", status="skipped", median_us="",
                           note="no per-channel scales on this cuBLASLt [extra: ]")
            with open(side / "mlp_fp8.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(gemm))
                w.writeheader()
                w.writerows([gemm, fp8, skipped])
            out = Path(d) / "out"
            res = build("--results", results, "--out", out)
            self.assertEqual(res.returncode, 0, res.stderr)
            table = (out / "tables" / "mlp_fp8.md").read_text()
            self.assertIn("fp8_channel skipped: no per-channel scales on this cuBLASLt.", table)
            rows = {l.split("|")[2].strip(): l for l in table.splitlines() if l.startswith("| 50432")}
            self.assertEqual(list(rows), ["fp8_tensor", "gemm_only"])
            self.assertIn("| 0.60x |", rows["fp8_tensor"])
            self.assertIn("| 1.00x |", rows["gemm_only"])

    def test_named_ratios_from_its_spec(self):
        """mlp_pingpong.toml names ratios of two versions: each is its column, numerator over
        denominator, beside every version's time at each size."""
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            run = synthetic.write_mlp_run(results / "b_mlp")
            gemm = next(r for r in read_rows(run / "mlp.csv") if r["status"] == "ok" and r["hidden"] == "768"
                        and int(r["batch"]) * int(r["tokens"]) == 50432 and r["version"] == "gemm_only")
            us = float(gemm["median_us"])
            side = run / "mlp_pingpong"  # the synthetic run's own rows of it, replaced
            side.mkdir(exist_ok=True)
            times = {"gemm_only": 1.0, "pingpong_gemm_only": 1.2, "pingpong_epilogue": 1.32, "fused_epilogue": 1.05}
            with open(side / "mlp_pingpong.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(gemm))
                w.writeheader()
                w.writerows([dict(gemm, version=v, median_us=str(us * x)) for v, x in times.items()])
            out = Path(d) / "out"
            res = build("--results", results, "--out", out)
            self.assertEqual(res.returncode, 0, res.stderr)
            table = (out / "tables" / "mlp_pingpong.md").read_text()
            head = next(l for l in table.splitlines() if l.startswith("| rows"))
            columns = [c.strip() for c in head.strip("|").split("|")]
            self.assertEqual(columns, ["rows", "pingpong_epilogue us", "pingpong_gemm_only us", "fused_epilogue us",
                                       "gemm_only us", "own epilogue cost", "cuBLASLt epilogue cost",
                                       "own GEMM / cuBLASLt"])
            row = next(l for l in table.splitlines() if l.startswith("| 50432"))
            self.assertEqual([c.strip() for c in row.strip("|").split("|")][-3:], ["1.10x", "1.05x", "1.20x"])
            self.assertIn("own epilogue cost = pingpong_epilogue / pingpong_gemm_only", table)

class MlpTargetsSitting(unittest.TestCase):
    """A newer MLP run that times only the target rows (every version, FP8 included) beside an
    older full sweep on the same GPU: the section's tables, targets and README line come from
    the newer run, its figures over batch and width from the older one, named in the captions;
    the fp16 targets are judged on the fp16 versions, not on a faster FP8 one."""

    def test_targets_run_beside_an_older_sweep(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            synthetic.write_mlp_run(results / "a_sweep", utc="2025-11-20T12:00:00Z")
            model = dict(synthetic.MLP_MODEL, half_gelu_epilogue=(3.0, 1.01, 0.0, 2),
                         fp8_cutlass=(3.0, 0.6, 0.0, 3))
            synthetic.write_mlp_run(results / "b_targets", utc="2025-11-27T12:00:00Z", model=model,
                                    batches=(32, 256), image_sizes=(224,), widths=(), cublaslt=False,
                                    autotune=False, pingpong=False, with_status_rows=False)
            # A luckier side sitting of a version the newer run timed: not the README's line.
            side = results / "a_sweep" / "mlp_cutlass"
            side.mkdir()
            gemm = next(r for r in read_rows(results / "a_sweep" / "mlp.csv")
                        if r["version"] == "gemm_only" and r["hidden"] == "768" and r["status"] == "ok"
                        and int(r["batch"]) * int(r["tokens"]) == 50432)
            with open(side / "mlp_cutlass.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(gemm))
                w.writeheader()
                w.writerows([gemm, dict(gemm, version="half_gelu_epilogue", median_us=gemm["median_us"])])
            out = Path(d) / "out"
            line = headline_line(self, results, out, "MLP")
            self.assertIn("| half_gelu_epilogue:", line)
            self.assertIn("[`b_targets`](experiments/results/b_targets/)", line)
            readme = read_report(out)
            caption = next(l for l in readme.splitlines() if l.startswith("*Figure: MLP (hidden 768, mlp 3072) median time"))
            self.assertIn("From the sweep of run folder a_sweep (b_targets times only the target rows)", caption)
            self.assertNotIn("Table `mlp_widths` not produced", readme)
            self.assertIn("a_sweep/mlp_pingpong", readme)
            # The index names the figures each folder draws beside its family's run, and only those.
            index = {l.split("]")[0][3:]: l for l in (out / "results_index.md").read_text().splitlines()
                     if l.startswith("| [")}
            # mlp_versions too: its mlp_cutlass panel is a_sweep's, named in its caption.
            self.assertIn("| figures mlp_time, mlp_tflops, mlp_speedup and mlp_versions, tables ", index["a_sweep"])
            for table in ("mlp_sweep", "mlp_widths", "mlp_cublaslt", "mlp_algorithms", "mlp_pingpong"):
                self.assertIn(table, index["a_sweep"])
            self.assertNotIn("mlp_time", index["b_targets"])
            runs = readme.split("## Runs")[1].split("## Method")[0]
            self.assertRegex(runs, r"\| a_sweep \|.*\| figures mlp_time, mlp_tflops, mlp_speedup and mlp_versions, tables [^|]*mlp_widths")
            self.assertRegex(runs, r"\| b_targets \|.*\| mlp \|")
            text = (out / "text" / "mlp_findings.md").read_text()
            self.assertIn("The target of the fastest fused version (half_gelu_epilogue) costing at most 1.05x", text)
            self.assertIn("the fastest MLP version is fp8_cutlass", text)
            self.assertIn("fp8_cutlass runs 1 kernel beyond gemm_only's 2: the pass that quantizes x", text)


class MlpSweepNewerThanItsSection(unittest.TestCase):
    """Three MLP folders on one GPU: an old sweep with the widths, cuBLASLt settings, autotune and
    ping-pong experiments; a targets sitting (mlp_targets.csv); a newest plain sweep. The section
    is the targets sitting, the figures over batch come from the newest sweep, and each experiment
    from the old sweep that timed it, named in its caption."""

    def test_each_part_from_its_run(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            synthetic.write_mlp_run(results / "a_sweep", utc="2025-11-20T12:00:00Z", run_id="old-sweep")
            targets = synthetic.write_mlp_run(results / "b_targets", utc="2025-11-27T12:00:00Z", run_id="targets",
                                              batches=(32, 256), image_sizes=(224,), widths=(), cublaslt=False,
                                              autotune=False, pingpong=False, with_status_rows=False)
            (targets / "mlp.csv").rename(targets / "mlp_targets.csv")
            synthetic.write_mlp_run(results / "c_sweep", utc="2025-12-03T12:00:00Z", run_id="new-sweep",
                                    widths=(), cublaslt=False, autotune=False, pingpong=False,
                                    with_status_rows=False)
            out = Path(d) / "out"
            res = build("--results", results, "--out", out)
            self.assertEqual(res.returncode, 0, res.stderr)
            readme = read_report(out)
            runs = readme.split("## Runs")[1].split("## Method")[0]
            self.assertRegex(runs, r"\| b_targets \|.*\| mlp \|")
            caption = next(l for l in readme.splitlines() if l.startswith("*Figure: MLP (hidden 768, mlp 3072) median time"))
            self.assertIn("From the sweep of run folder c_sweep", caption)
            tables = out / "tables"
            self.assertIn("From run folder a_sweep, the newest on this GPU that timed the ViT widths",
                          (tables / "mlp_widths.md").read_text())
            self.assertIn("From run folder a_sweep, the newest on this GPU that timed the cuBLASLt settings",
                          (tables / "mlp_cublaslt.md").read_text())
            for name in ("mlp_algorithms", "mlp_pingpong"):
                text = (tables / f"{name}.md").read_text()
                self.assertIn("run old-sweep", text, name)
                self.assertNotIn("new-sweep", text, name)
            findings = (out / "text" / "mlp_findings.md").read_text()
            self.assertIn("Across the ViT widths at batch 32, 224 px (run folder a_sweep)", findings)


class MlpSweepOfEveryVersion(unittest.TestCase):
    """A sweep of more versions than a figure can tell apart: the figures over batch and rows
    draw the ladder's story (at most SWEEP_MAX series: the fastest fused version and the fp16
    answer's MLP among them) and their captions name the versions left to the tables."""

    def test_series_chosen(self):
        from analysis.mlp_data import SWEEP_MAX, sweep_series
        every = ["unfused", "unfused_graph", "fused_epilogue", "handwritten_epilogue", "gemm_only",
                 "pingpong_epilogue", "cutlass_epilogue", "half_gelu_epilogue", "l2_panels",
                 "erf_fit_epilogue", "pytorch_mlp_graph", "pytorch_mlp"]
        drawn = sweep_series(every, "half_gelu_epilogue", "erf_fit_epilogue")
        self.assertLessEqual(len(drawn), SWEEP_MAX)
        for v in ("unfused", "fused_epilogue", "gemm_only", "half_gelu_epilogue", "erf_fit_epilogue",
                  "pytorch_mlp_graph"):
            self.assertIn(v, drawn)
        self.assertEqual(sweep_series(every[:SWEEP_MAX], None, None), every[:SWEEP_MAX])

    def test_report_of_a_wide_sweep(self):
        extra = {v: (3.1, f, 0.0, 2) for v, f in (("pingpong_epilogue", 1.08), ("cutlass_epilogue", 1.05),
                 ("half_gelu_epilogue", 0.99), ("l2_panels", 1.04), ("erf_fit_epilogue", 1.03))}
        with tempfile.TemporaryDirectory() as d:
            results = Path(d) / "results"
            synthetic.write_mlp_run(results / "wide", model=dict(synthetic.MLP_MODEL, **extra), widths=(),
                                    cublaslt=False, autotune=False, pingpong=False, with_status_rows=False)
            out = Path(d) / "out"
            res = build("--results", results, "--out", out)
            self.assertEqual(res.returncode, 0, res.stderr)
            readme = read_report(out)
            for fig in ("MLP (hidden 768, mlp 3072) median time", "MLP throughput", "MLP speedup per rows"):
                caption = next(l for l in readme.splitlines() if l.startswith(f"*Figure: {fig}"))
                self.assertIn("pingpong_epilogue, cutlass_epilogue, l2_panels and pytorch_mlp (4 versions) "
                              "are left to the tables.", caption)


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
            self.assertIn(f"{formatting.faster_or_slower(g / f)} than the PyTorch MLP replayed", text)
            self.assertIn("(the stricter anchor) at 6304 and 50432 rows is not met.", text)
            r = [float(t[("fused_epilogue", n)]["median_us"]) / float(t[("gemm_only", n)]
                                                                   ["median_us"])
                 for n in (6304, 50432)]
            self.assertIn(f"at 6304 and 50432 rows is missed (6304 rows: {r[0]:.2f}x (fused_epilogue); "
                          f"50432 rows: {r[1]:.2f}x (fused_epilogue))", text)
            self.assertIn("fused_epilogue runs 1 kernel beyond gemm_only's 2: cuBLASLt ran at "
                          "least one extra kernel", text)
            self.assertIn("Every configuration passed the correctness check", text)
            readme = read_report(out)
            self.assertIn("*Table `mlp_widths` not produced: this run times only hidden 768", readme)
            self.assertIn("*Table `mlp_cublaslt` not produced: this run has no rows", readme)
            self.assertRegex(readme, r"No committed run yet: .* family `layernorm`")


if __name__ == "__main__":
    unittest.main()
