"""The patch-embedding section of the report on synthetic and hand-made runs.

    python3 -m analysis.test_patch_embed_report      (from the repository root)
"""
import csv
import re
import tempfile
import unittest
from pathlib import Path

from analysis.testing import BuiltReport, skip_without_pandas, read_report

skip_without_pandas(__name__)

from analysis import synthetic, synthetic_patch_embed  # noqa: E402
from analysis.testing import REPO, build, read_rows, us  # noqa: E402
from studylib import formatting  # noqa: E402


def pe_timings(run_dir):
    """Patch-embedding timings {(version, model, image, batch, streams): median_us} straight
    from the run's CSVs with the csv module, independent of the pandas code."""
    out = {}
    for name in ("patch_embed.csv", "patch_embed_anchors.csv"):
        path = run_dir / name
        if path.is_file():
            for r in read_rows(path):
                if r["status"] == "ok":
                    out[(r["version"], r["model"], int(r["image_size"]), int(r["batch"]),
                         int(r["streams"]))] = float(r["median_us"])
    return out


def pe_template_markers():
    """(kind, name) of every marker in report/template.md's patch_embed block."""
    text = (REPO / "report" / "template.md").read_text()
    block = text[text.index("<!-- family:patch_embed -->"):text.index("<!-- end:patch_embed -->")]
    return re.findall(r"<!--\s*(figure|table|text):(patch_embed_\w+)\s*-->", block)


class PatchEmbedReport(BuiltReport):
    """A full synthetic patch-embedding run (every version, the anchors, the stream sweep and
    the timeline): every output the template names is produced and the sentences follow the
    CSV."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        cls.run_dir = synthetic_patch_embed.write_patch_embed_run(root / "results" / "pe")
        cls.out = root / "out"
        cls.res = build("--results", root / "results", "--out", cls.out)
        cls.readme = read_report(cls.out) if cls.res.returncode == 0 else ""
        cls.text = ((cls.out / "text" / "patch_embed_findings.md").read_text()
                    if cls.res.returncode == 0 else "")
        cls.t = pe_timings(cls.run_dir)

    def test_build_succeeds(self):
        self.assert_built("patch_embed")
        section = self.readme.split("## 1. Patch embedding")[1].split("\n## 2.")[0]
        self.assertNotIn("not produced", section)

    def test_every_template_artifact_produced(self):
        markers = pe_template_markers()
        self.assertGreaterEqual(len(markers), 10)
        for kind, name in markers:
            if kind == "figure":
                p = self.out / "figures" / f"{name}.png"
                self.assertEqual(p.read_bytes()[:8], b"\x89PNG\r\n\x1a\n", name)
                self.assertIn(f"](figures/{name}.png)", self.readme)
            else:
                p = self.out / ("tables" if kind == "table" else "text") / f"{name}.md"
                self.assertTrue(p.is_file(), p)
                self.assertIn(p.read_text().strip().splitlines()[-1], self.readme)
        self.assertIn("GPU NVIDIA H200 (synthetic), run synthetic-pe-run, commit 001122334455",
                      self.readme)

    def test_target_sentences_match_data(self):
        t = self.t
        own = ["v4_one_copy", "v5_im2col_gemm", "v6_implicit_gemm", "cudnn", "cpu_baseline"]
        for b in (32, 256):
            shown = {v: t[(v, "vit_b", 224, b, 1)] for v in own if (v, "vit_b", 224, b, 1) in t}
            best = min(shown, key=shown.get)
            lin = t[("pytorch_patchify_linear", "vit_b", 224, b, 1)]
            self.assertIn(f"At batch {b}, 224 px, the fastest version, {best} ({us(shown[best])} "
                          f"us), is {formatting.faster_or_slower(lin / shown[best])} than patchify + "
                          f"F.linear ({us(lin)} us, eager).", self.text)
            if b == 256:
                conv = t[("pytorch_conv2d", "vit_b", 224, b, 1)]
                met = "met" if conv / shown[best] >= 10 else "not met"
                self.assertIn(f"is {formatting.faster_or_slower(conv / shown[best])} than F.conv2d "
                              f"({us(conv)} us, eager): the target of at least 10x faster than "
                              f"F.conv2d is {met}.", self.text)

    def test_streams_knee_sentence(self):
        for v in ("v3_streams", "v3_streams_graph"):
            times = {s: self.t[(v, "vit_ti", 64, 8, s)] for s in synthetic_patch_embed.PE_STREAMS}
            fastest = min(times.values())
            knee = min(s for s, x in times.items() if x <= 1.1 * fastest)
            self.assertIn(f"More streams stop helping {v} at {knee} streams (vit_ti, 64 px, "
                          f"batch 8): on 1 stream it takes {us(times[1])} us, "
                          f"{us(times[knee])} us on {knee} streams", self.text)
        # the model behind the synthetic numbers: kernel time / issue cost
        self.assertIn("More streams stop helping v3_streams at 8 streams", self.text)
        self.assertIn("More streams stop helping v3_streams_graph at 16 streams", self.text)

    def test_timeline_and_tables(self):
        self.assertIn("The timeline of v3_streams at batch 1, 32 px, hidden 192: on 1 stream its "
                      "768 launches take", self.text)
        self.assertIn("with up to 8 running at once", self.text)
        # More streams can lengthen the span (the host's issue pace): said so, never "0.9x shorter".
        from analysis.patch_embed_timeline import span_change
        from studylib.claims import say
        self.assertEqual(say(span_change(100.0, 50.0), "patch_embed"), "2.0x shorter")
        self.assertEqual(say(span_change(23301.0, 26659.0), "patch_embed"), "1.14x longer")
        ladder = (self.out / "tables" / "patch_embed_ladder.md").read_text()
        for v in ("cpu_baseline", "v1_single_channel", "v2_unified_channel", "v3_streams",
                  "v3_streams_graph"):
            self.assertIn(f"| vit_ti, 64 px, batch 4 | {v} |", ladder)
        for v in ("v4_one_copy", "v5_im2col_gemm", "v6_implicit_gemm", "cudnn", "pytorch_conv2d",
                  "pytorch_patchify_linear"):
            self.assertIn(f"| vit_b, 224 px, batch 256 | {v} |", ladder)
        status = (self.out / "tables" / "patch_embed_status.md").read_text()
        self.assertIn("| v1_single_channel | 15 | 1 | 0 |", status)
        self.assertIn("exceed the work budget", status)
        self.assertIn("| v6_implicit_gemm | 26 | 0 | 1 |", status)


def pe_row(version, batch, median, model="vit_b", image=224, streams=1, note="checked"):
    """One hand-made patch_embed row of the schema before the appended columns."""
    hidden = {"vit_b": 768, "vit_ti": 192}[model]
    return dict(synthetic.base_fields("hand-made", "ab" * 20, "NVIDIA H200 (synthetic)",
                                "2025-11-24T00:00:00Z"),
                family="patch_embed", version=version, model=model, batch=batch,
                image_size=image, tokens=(image // 16) ** 2 + 1, hidden=hidden, streams=streams,
                median_us=median, mean_us=median, min_us=median, max_us=median, std_us=0.0,
                status="ok", note=note)


class PatchEmbedLadderSitting(unittest.TestCase):
    """A targets sitting measured after the sweep that holds every key shape (a ladder sitting:
    every step, 3 rounds) is what the ladder table and each step's measured line read; one
    missing a key shape leaves the ladder on the sweep's rows."""

    def build_with_targets(self, root, keep):
        results = root / "results"
        sweep = synthetic_patch_embed.write_patch_embed_run(results / "a_sweep")
        rows = [dict(r, run_id="ladder-sitting", utc="2025-12-01T00:00:00Z",
                     median_us=f"{0.8 * float(r['median_us']):.6g}" if r["status"] == "ok" else r["median_us"])
                for name in ("patch_embed.csv", "patch_embed_anchors.csv") for r in read_rows(sweep / name)
                if keep(r)]
        (results / "b_ladder").mkdir()
        (results / "b_ladder" / "ceilings.csv").write_bytes((sweep / "ceilings.csv").read_bytes())
        with open(results / "b_ladder" / "patch_embed_targets.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        res = build("--results", results, "--out", root / "out")
        self.assertEqual(res.returncode, 0, res.stderr)
        return ((root / "out" / "tables" / "patch_embed_ladder.md").read_text(),
                (root / "out" / "text" / "ladder_patch_embed.md").read_text())

    def test_the_ladder_reads_a_sitting_of_every_key_shape(self):
        with tempfile.TemporaryDirectory() as d:
            table, lines = self.build_with_targets(Path(d), lambda r: True)
            self.assertIn("run ladder-sitting,", table)
            self.assertNotIn("synthetic-pe-run", table.split("\n")[0])
            # 0.8x the sweep's times: each time a step's line says is the sitting's.
            sweep, checked = pe_timings(Path(d) / "results" / "a_sweep"), 0
            for line in lines.splitlines():
                v = re.match(r"- \*\*`(\w+)`\*\*", line)
                for t, model, image, batch in re.findall(r"([\d,.]+) us at (vit_\w+), (\d+) px, batch (\d+)", line):
                    want = 0.8 * min(us for (name, *shape, _), us in sweep.items()   # v3: its fastest streams
                                     if name == v.group(1) and shape == [model, int(image), int(batch)])
                    self.assertAlmostEqual(float(t.replace(",", "")) / want, 1, delta=0.01, msg=line[:40])
                    checked += 1
            self.assertGreater(checked, 10)
        with tempfile.TemporaryDirectory() as d:
            table, _ = self.build_with_targets(Path(d), lambda r: r["model"] == "vit_b")
            self.assertIn("run synthetic-pe-run", table.split("\n")[0])
            self.assertNotIn("ladder-sitting", table.split("\n")[0])


class PatchEmbedHandMade(unittest.TestCase):
    """Exact numbers written by hand, an old-schema CSV, no v1-v3 and no timeline: the ratio
    sentences are exact and every missing piece becomes a sentence, not a crash."""

    def test_ratio_sentences_and_missing_pieces(self):
        graph = "timed: cuda-graph replay (the faster; medians eager 1 us, cuda-graph replay 1 us)"
        rows = [pe_row("v6_implicit_gemm", 32, 40.0), pe_row("cudnn", 32, 50.0),
                pe_row("pytorch_patchify_linear", 32, 60.0, note="checked; " + graph),
                pe_row("v6_implicit_gemm", 256, 100.0), pe_row("cudnn", 256, 150.0),
                pe_row("pytorch_conv2d", 256, 1200.0,
                       note="checked; timed: eager (the faster; medians eager 1200 us, ...)"),
                pe_row("pytorch_patchify_linear", 256, 90.0)]
        with tempfile.TemporaryDirectory() as d:
            run = Path(d) / "r"
            run.mkdir()
            old = synthetic.COLUMNS[:synthetic.COLUMNS.index("note") + 1]
            with open(run / "patch_embed.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=old, restval="")
                w.writeheader()
                w.writerows(rows)
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            out = Path(d) / "out"
            text = (out / "text" / "patch_embed_findings.md").read_text()
            self.assertIn("At batch 256, 224 px (vit_b), the fastest version, v6_implicit_gemm "
                          "(100 us), is 12.00x faster than F.conv2d (1,200 us, eager): the target "
                          "of at least 10x faster than F.conv2d is met.", text)
            self.assertIn("At batch 32, 224 px, the fastest version, v6_implicit_gemm (40.0 us), "
                          "is 1.50x faster than patchify + F.linear (60.0 us, CUDA graph).", text)
            self.assertIn("At batch 256, 224 px, the fastest version, v6_implicit_gemm (100 us), "
                          "is 1.11x slower than patchify + F.linear (90.0 us).", text)
            self.assertIn("The target of beating patchify + F.linear at batch 32 and 256 (224 px) "
                          "is missed.", text)
            self.assertIn("No streams timeline: this run has no patch_embed_timeline.csv", text)
            self.assertIn("This run has no timed v3_streams or v3_streams_graph rows", text)
            self.assertIn("This run has no rows of cpu_baseline, v1_single_channel", text)
            readme = read_report(out)
            self.assertIn("*Figure `patch_embed_timeline` not produced: this run has no "
                          "patch_embed_timeline.csv", readme)
            self.assertIn("*Figure `patch_embed_streams` not produced:", readme)
            self.assertIn("*Figure `patch_embed_routine` not produced:", readme)
            ladder = (out / "tables" / "patch_embed_ladder.md").read_text()
            # no cpu_baseline and a single own version: those columns are left out
            self.assertIn("| shape | version | median us | previous step | time / cudnn | "
                          "time / faster anchor | faster anchor |", ladder)
            self.assertIn("| vit_b, 224 px, batch 256 | v6_implicit_gemm | 100 | - | 0.67x | "
                          "1.11x | patchify + F.linear |", ladder)

    def test_old_schema_without_timeline(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic_patch_embed.write_patch_embed_run(Path(d) / "r", images=(224,),
                                                  batches=(1, 32, 256), timeline=False,
                                                  appended_columns=False)
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            readme = read_report(Path(d) / "out")
            self.assertIn("](figures/patch_embed_routine.png)", readme)   # total routine only
            self.assertIn("*Figure `patch_embed_timeline` not produced:", readme)
            self.assertIn("](figures/patch_embed_streams_count.png)", readme)

    def test_broken_timeline_is_an_error_naming_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            run = synthetic_patch_embed.write_patch_embed_run(Path(d) / "r", images=(224,), batches=(1,))
            (run / "patch_embed_timeline.csv").write_text("version,stream\nv3_streams,0\n")
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 2, res.stdout + res.stderr)
            self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
            self.assertIn("patch_embed_timeline.csv: missing columns", res.stderr)


if __name__ == "__main__":
    unittest.main()

    def test_timeline_from_the_newest_folder_beside_that_has_one(self):
        with tempfile.TemporaryDirectory() as d:
            write = synthetic_patch_embed.write_patch_embed_run
            write(Path(d) / "20260101_probe", run_id="probe-run", images=(224,), batches=(1,))
            write(Path(d) / "20260102_other_gpu", run_id="other", images=(224,), batches=(1,), gpu="NVIDIA H100")
            run = write(Path(d) / "20260103_sweep", images=(224,), batches=(1, 32), timeline=False)
            res = build("--run", run, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            text = (Path(d) / "out" / "text" / "patch_embed_findings.md").read_text()
            self.assertIn("(from `20260101_probe`: this run has no timeline): on 1 stream", text)
            readme = read_report(Path(d) / "out")
            self.assertIn("](figures/patch_embed_timeline.png)", readme)
            self.assertIn("(patch_embed_timeline.csv of `20260101_probe` (this run has none))", readme)
            self.assertIn("run probe-run", readme)
