"""Figures a reader can use (series drawn apart, widths, titles) and the across-GPUs section.

    python3 -m analysis.test_figures      (from the repository root)
"""
import tempfile
import unittest
from pathlib import Path

from analysis.testing import BuiltReport, skip_without_pandas, read_report

skip_without_pandas(__name__)

import studylib  # noqa: E402
from analysis import plots, synthetic, synthetic_encoder, synthetic_patch_embed  # noqa: E402
from analysis.testing import REPO, build, hand_made_encoder, read_rows  # noqa: E402
from studylib import catalog, figure_checks, formatting, notebook, notes, rundata  # noqa: E402


def readable(ax):
    """Name both axes with units and start the value axis at zero: a figure the reader's
    checklist passes, for the tests of the other checks."""
    ax.set_xlabel("rows (count)")
    ax.set_ylabel("time (us)")
    ax.set_ylim(0, None)


class Figures(BuiltReport):
    """Anchors told apart, ticks at the measured sizes, labelled reference lines, legends off
    the data, the per-step ladder tables and the rooflines."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        results = root / "results"
        cls.ln = synthetic.write_run(results / "ln")
        synthetic.write_mlp_run(results / "mlp")
        synthetic.write_attention_run(results / "attn")
        synthetic_patch_embed.write_patch_embed_run(results / "pe")
        cls.out = root / "out"
        cls.res = build("--results", results, "--out", cls.out)
        cls.readme = read_report(cls.out) if cls.res.returncode == 0 else ""

    def test_every_anchor_its_own_colour_and_marker(self):
        order = catalog.version_order(list(synthetic.ATTN_MODEL), [])
        st = plots.styles(order)
        anchors = [v for v in order if catalog.is_anchor(v)]
        colours = {plots.anchor_base(v): st[v]["color"] for v in anchors}
        self.assertEqual(len(colours), 4)
        self.assertEqual(len(set(colours.values())), 4)
        pairs = [(st[v]["color"], st[v]["marker"]) for v in order]
        self.assertEqual(len(set(pairs)), len(order), pairs)
        for v in anchors:  # eager and graph: one colour, their own markers and line styles
            self.assertEqual(st[v]["color"], colours[plots.anchor_base(v)])
            self.assertEqual(st[v]["linestyle"], ":" if v.endswith("_graph") else "--")

    def test_own_versions_of_a_ladder_each_their_own_colour(self):
        # The longest ladder (attention, 14 versions) repeats no colour, and no own version
        # takes a library's or an anchor's colour.
        order = ([f"v{i}_x" for i in range(14)] + ["cudnn"]
                 + [v for v in synthetic.ATTN_MODEL if catalog.is_anchor(v)])
        st = plots.styles(order)
        own = [st[f"v{i}_x"]["color"] for i in range(14)]
        self.assertEqual(len(set(own)), 14, own)
        others = {st[v]["color"] for v in order if not v.startswith("v")}
        self.assertFalse(set(own) & others, set(own) & others)

    def test_no_two_series_drawn_alike(self):
        # More own versions than colours and markers, several libraries, every anchor: each
        # series keeps a colour x marker pair of its own.
        order = ([f"v{i}_x" for i in range(30)] + ["cudnn", "cudnn_graph", "cublaslt_x", "library_y"]
                 + [v for v in synthetic.ATTN_MODEL if catalog.is_anchor(v)])
        st = plots.styles(order, fastest="v12_x")
        pairs = [(st[v]["color"], st[v]["marker"]) for v in order]
        self.assertEqual(len(set(pairs)), len(order))
        self.assertGreater(st["v12_x"]["linewidth"], st["v11_x"].get("linewidth", 1.4))
        self.assertEqual(plots.styles(order, fastest="nope")["v12_x"], plots.styles(order)["v12_x"])

    def test_figure_checks_series_and_width(self):
        import matplotlib.pyplot as plt
        with tempfile.TemporaryDirectory() as d:
            ctx = notebook.Context("layernorm", None, Path(d))
            fig, ax = plt.subplots()   # the planted clash: two versions, one colour and marker
            ax.plot([1, 2], [1, 2], color="#1f77b4", marker="o", label="v1")
            ax.plot([1, 2], [2, 3], color="#1f77b4", marker="o", label="v10")
            ax.legend()
            with self.assertRaisesRegex(studylib.FigureError, "'v1' and 'v10' are drawn alike"):
                ctx.figure("layernorm_clash", fig, "c")
            fig, ax = plt.subplots()   # hollow and filled markers of one colour are told apart
            ax.plot([1], [1], color="#444444", marker="o", linestyle="none", label="filled")
            ax.plot([1], [1], color="#444444", marker="o", markerfacecolor="none",
                    linestyle="none", label="hollow")
            ax.legend()
            readable(ax)
            ctx.figure("layernorm_fill", fig, "c")
            fig, ax = plt.subplots(figsize=(14, 3))   # 14 in x 150 dpi: 2,100 px
            ax.plot([1, 2], [1, 2])
            readable(ax)
            with self.assertRaisesRegex(studylib.FigureError, "layernorm_wide is 2[0-9]{3} px wide"):
                ctx.figure("layernorm_wide", fig, "c")

    def test_figure_checks_legend_and_text(self):
        # What a reader of the report's ~900 px column sees: a legend of at most MAX_LEGEND
        # entries (a second legend kept as an artist counts too), and no text under MIN_TEXT_PX
        # once a wide PNG is scaled to the column.
        import matplotlib.pyplot as plt
        n = notebook.MAX_LEGEND + 1
        with tempfile.TemporaryDirectory() as d:
            ctx = notebook.Context("layernorm", None, Path(d))
            fig, ax = plt.subplots()
            for i in range(n):
                ax.plot([1, 2], [i, i + 1], color=plt.cm.viridis(i / n), label=f"v{i}")
            ax.add_artist(ax.legend(loc="upper left"))
            ax.legend(handles=[plt.Line2D([], [], color="k", label="key")], loc="lower right")
            with self.assertRaisesRegex(studylib.FigureError, f"layernorm_long: a legend of {n} entries"):
                ctx.figure("layernorm_long", fig, "c")
            fig, ax = plt.subplots(figsize=(12, 3))   # 1,800 px: scaled by half in the column
            ax.plot([1, 2], [1, 2])
            readable(ax)
            ax.text(1, 1, "tiny", fontsize=7)
            with self.assertRaisesRegex(studylib.FigureError, r"layernorm_tiny: its smallest text \(7 pt, 'tiny'\)"):
                ctx.figure("layernorm_tiny", fig, "c")
            fig, ax = plt.subplots(figsize=(6, 3))   # 900 px: not scaled, 7 pt is 14.6 px
            ax.plot([1, 2], [1, 2])
            readable(ax)
            ax.text(1, 1, "small but readable", fontsize=7)
            ctx.figure("layernorm_narrow", fig, "c")

    def test_figure_checks_the_readers_checklist(self):
        # Each rule of studylib/figure_checks.py against a planted figure that breaks it, and the
        # same figure mended.
        import matplotlib.pyplot as plt
        with tempfile.TemporaryDirectory() as d:
            ctx = notebook.Context("layernorm", None, Path(d))

            def fails(fig, says):
                with self.assertRaisesRegex(studylib.FigureError, says):
                    ctx.figure("layernorm_planted", fig, "c")

            fig, ax = plt.subplots()
            ax.plot([1, 2], [1, 2])
            readable(ax)
            fig.suptitle("one\ntwo\nthree")
            fails(fig, "a title of 3 lines")
            fig, ax = plt.subplots()
            ax.plot([1, 2], [1, 2])
            readable(ax)
            ax.set_ylabel("")
            fails(fig, "numeric y axis without a label")
            fig, axes = plt.subplots(1, 2, sharey=True)   # one row: the left panel names the shared y
            for a in axes:
                a.plot([1, 2], [1, 2])
                readable(a)
            axes[1].set_ylabel("")
            ctx.figure("layernorm_row", fig, "c")
            fig, ax = plt.subplots()
            ax.plot([1, 2], [0.9, 1.1])
            readable(ax)
            ax.set_ylim(0.8, 1.2)
            fails(fig, "linear y axis from 0.8, not 0, and does not say so")
            fig, ax = plt.subplots()
            ax.plot([1, 2], [0.9, 1.1])
            readable(ax)
            ax.set_ylim(0.8, 1.2)
            plots.not_from_zero(ax)
            ctx.figure("layernorm_said", fig, "c")
            fig, ax = plt.subplots()
            ax.barh(["a", "b"], [5, 6])
            ax.set_xlabel("time (us)")
            ax.set_xlim(4, 7)
            fails(fig, "linear x axis from 4, not 0")
            fig, ax = plt.subplots()
            n = figure_checks.MAX_SERIES + 1
            for i in range(n):
                ax.plot([1, 2], [i, i + 1], color=plt.cm.viridis(i / n), label=f"v{i}")
            readable(ax)
            fails(fig, f"panel 1 draws {n} series")

    def test_committed_figures_at_most_2000_px(self):
        figures = sorted((REPO / "report" / "figures").glob("*.png"))
        self.assertTrue(figures)
        for f in figures:
            self.assertLessEqual(notebook.png_width(f), notebook.MAX_FIGURE_PX, f.name)

    def test_title_provenance_is_short(self):
        run = rundata.load_run(self.ln)
        t = run.title_provenance("layernorm")
        self.assertIn(run.name, t)
        self.assertNotIn("run ", t)   # the run ids stay in the caption
        self.assertLessEqual(len(t), 100)

    def test_peak_share_bars(self):
        # Each version's share of the ceiling as a bar per shape, labelled, the best of each shape
        # in bold, on an axis from 0 to 100%; versions outside the order are not drawn.
        import matplotlib.pyplot as plt
        import pandas as pd
        pts = pd.DataFrame({"version": ["v1", "v2", "v1", "v2", "x"], "shape": ["s1", "s1", "s2", "s2", "s1"],
                            "tflops": [70.0, 350.0, 140.0, 70.0, 700.0]})
        fig = plots.peak_share_figure(pts, ["v1", "v2"], plots.styles(["v1", "v2"]), str, 700.0, "ceiling",
                                      "shares", "prov")
        ax = fig.axes[0]
        self.assertEqual(ax.get_xlim(), (0.0, 100.0))
        texts = {t.get_text().strip(): t.get_fontweight() for t in ax.texts}
        self.assertEqual(texts, {"10.0%": "normal", "50.0%": "bold", "20.0%": "bold"})
        self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["v1", "v2"])
        plt.close(fig)

    def test_ticks_reference_line_and_legend_helpers(self):
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        ax.plot([197, 577, 1025], [1, 2, 3], label="a")
        plots.measured_ticks(ax, [197, 577, 1025, 577])
        line = plots.reference_line(ax, 1.0, "1x: same time")
        leg = plots.legend_outside(ax)
        fig.canvas.draw()
        self.assertEqual(list(ax.get_xticks()), [197, 577, 1025])
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["197", "577", "1,025"])
        self.assertEqual(line.get_label(), "1x: same time")
        self.assertIn("1x: same time", [t.get_text() for t in leg.get_texts()])
        r = fig.canvas.get_renderer()
        self.assertGreaterEqual(leg.get_window_extent(r).x0, ax.get_window_extent(r).x1)
        plt.close(fig)

    def test_attention_figures_and_withdrawn_target(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        self.assertIn("ticks at the measured token counts; whiskers from the version's fastest round over "
                      "the best cuDNN result's slowest to the other way; the line at 1x is the best cuDNN "
                      "result, the dashed line at 0.9x the target of the fastest version",
                      self.readme)
        self.assertNotIn("target of v6_coalesced_k", self.readme)  # the withdrawn 4x line
        findings = (self.out / "text" / "attention_findings.md").read_text()
        self.assertNotIn("within 4x", findings)
        self.assertIn("v6_coalesced_k takes", findings)
        # The target is judged on the best cuDNN result: the lower of our cuDNN build and
        # PyTorch's cuDNN SDPA replayed from a graph, at each token count.
        rows = read_rows(self.out.parent / "results" / "attn" / "attention.csv")
        for n in ("197", "577", "1025"):
            t = {r["version"]: float(r["median_us"]) for r in rows
                 if r["batch"] == "32" and r["tokens"] == n and r["status"] == "ok"}
            best = min(t["cudnn_sdpa"], t["pytorch_sdpa_cudnn_graph"])
            source = ("cudnn_sdpa" if t["cudnn_sdpa"] <= t["pytorch_sdpa_cudnn_graph"]
                      else "PyTorch SDPA cudnn (CUDA graph)")
            own = min((m, v) for v, m in t.items() if v.startswith("v"))
            self.assertIn(f"At {n} tokens (batch 32), our fastest version, {own[1]}, takes "
                          f"{formatting.fmt_us(own[0])} us", findings)
            self.assertIn(f"{own[0] / best:.2f}x the best cuDNN result ({formatting.fmt_us(best)} us, "
                          f"{source})", findings)
        self.assertIn("The target of our fastest version at most 0.9x the best cuDNN result "
                      "(per token count the lower median of cudnn_sdpa and PyTorch SDPA cudnn "
                      "(CUDA graph)) at 197, 577 and 1025 tokens is", findings)

    def test_ladder_tables(self):
        rows = read_rows(self.ln / "layernorm.csv") + read_rows(self.ln / "anchors.csv")
        t = {r["version"]: float(r["median_us"]) for r in rows
             if r["batch"] == "256" and r["image_size"] == "224" and r["status"] == "ok"}
        ladder = (self.out / "tables" / "layernorm_ladder.md").read_text()
        self.assertIn("| version | 6304 rows: us | 6304 rows: x prev | 6304 rows: / cudnn | 6304 rows: % of floor |",
                      ladder)
        self.assertIn(f"| v2_cub | ", ladder)
        head = next(x for x in ladder.splitlines() if x.startswith("| version |"))
        line = next(x for x in ladder.splitlines() if x.startswith("| v5_unrolled |"))
        cells = dict(zip([c.strip() for c in head.strip("|").split("|")], [c.strip() for c in line.strip("|").split("|")]))
        self.assertEqual([cells[f"50432 rows: {c}"] for c in ("us", "x prev", "/ cudnn")],
                         [formatting.fmt_us(t["v5_unrolled"]), formatting.fmt_ratio(t["v4_vectorized"] / t["v5_unrolled"]),
                          formatting.fmt_ratio(t["v5_unrolled"] / t["cudnn"])])
        # % of floor: the bytes every version moves at the run's copy rate over its time (a
        # LayerNorm's FLOPs are far below the GEMM ceiling); idea: its NOTES.md title.
        c = rundata.load_run(self.ln).ceilings()
        floor_us = (2.0 * 50432 * 768 * 2 + 2.0 * 768 * 2) / c.copy_gbps / 1e3
        self.assertEqual(cells["50432 rows: % of floor"], formatting.fmt_pct(100 * floor_us / t["v5_unrolled"]))
        self.assertEqual(cells["idea"], notes.idea("layernorm", "v5_unrolled"))
        nan = float("nan")
        self.assertNotEqual(c.floor_share(nan, nan), c.floor_share(nan, nan))  # NaN: neither rate known
        self.assertAlmostEqual(rundata.Ceilings(1000.0, 500.0, 1000.0).floor_share(250.0, 600.0, fp8=True), 0.6)
        self.assertAlmostEqual(rundata.Ceilings(1000.0, 500.0, 1000.0).floor_share(400.0, 600.0), 0.8)
        mlp = (self.out / "tables" / "mlp_ladder.md").read_text()
        self.assertIn("6304 rows: / gemm_only", mlp)
        self.assertIn("unfused -> unfused_graph -> fused_epilogue", mlp)
        for name in ("layernorm_ladder", "mlp_ladder"):
            self.assertIn(f"{name}.md", str(list((self.out / "tables").iterdir())))

    def test_rooflines(self):
        # No family draws a roofline: each family's versions share one intensity per shape (the
        # bytes it must move), every point in one column; attention and patch embedding draw
        # their share of the measured GEMM ceiling instead.
        for family in ("mlp", "layernorm", "attention", "patch_embed"):
            self.assertFalse((self.out / "figures" / f"{family}_roofline.png").exists(), family)
        for name in ("patch_embed_peak_share", "attention_peak_share"):
            p = self.out / "figures" / f"{name}.png"
            self.assertEqual(p.read_bytes()[:8], b"\x89PNG\r\n\x1a\n", name)
            self.assertIn(f"](figures/{name}.png)", self.readme)
        self.assertIn("as a share of the fp16 GEMM ceiling measured in the same run (720 TFLOP/s)", self.readme)
        import pandas as pd
        p = plots.roofline_points(pd.DataFrame({"version": ["a"], "tflops": [2.0], "gbps": [4000.0],
                                             "rows": [10]}), lambda r: "s")
        self.assertAlmostEqual(float(p["ai"].iloc[0]), 0.5)


def two_gpu_encoder_runs(root):
    """Two run folders on GPU A (the older, a1, and a2) and a newer one on GPU B, with e6_best
    timm eager / graph and torch.compile at batch 1, 32, 256; A and B clocks recorded at batch 256.
    torch.compile compiled in A's anchor process at batch 1 (90 s to its first call) and loaded a
    compile made ahead on B (6 s)."""
    def rows(times, clock256, compile_s):
        out = []
        for version, ts in times.items():
            for b, t in zip((1, 32, 256), ts):
                compiled = (f"; compiled in this row ({compile_s if b == 1 else 6} s to its first call)"
                            if version == "pytorch_timm_compile_graph" else "")
                out.append(dict(version=version, batch=b, median_us=t, sm_clock_mhz=(
                    clock256[version] if b == 256 else 1980), note=f"checked; cuda-graph replay{compiled}"))
        return out
    a = {"e6_best": (410.0, 2500.0, 18000.0), "pytorch_timm_graph": (690.0, 3310.0, 26000.0),
         "pytorch_timm": (3030.0, 3460.0, 25700.0), "pytorch_timm_compile_graph": (720.0, 3500.0, 19000.0)}
    b = {"e6_best": (800.0, 2600.0, 20000.0), "pytorch_timm_graph": (700.0, 3442.4, 21000.0),
         "pytorch_timm": (3100.0, 3500.0, 26000.0), "pytorch_timm_compile_graph": (600.0, 3400.0, 20000.0)}
    for name, utc in (("a1", "2025-11-20T12:00:00Z"), ("a2", "2025-11-21T12:00:00Z")):
        synthetic_encoder.write_encoder_rows(root / name, rows(a, {"e6_best": 1600, "pytorch_timm_graph": 1900,
                                                            "pytorch_timm": 1700, "pytorch_timm_compile_graph": 1700}, 90),
                                     gpu="GPU A (synthetic)", utc=utc, run_id=f"run-{name}")
    synthetic_encoder.write_encoder_rows(root / "b", rows(b, {"e6_best": 1500, "pytorch_timm_graph": 1750,
                                                      "pytorch_timm": 1650, "pytorch_timm_compile_graph": 1650}, 6),
                                 gpu="GPU B (synthetic)", utc="2025-11-22T12:00:00Z", run_id="run-b")


class AcrossGpus(BuiltReport):
    """Runs on two GPUs: the sections use the GPU with more run folders (its newest run), and
    the across-GPUs section compares speedups computed within each GPU's own run."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        two_gpu_encoder_runs(root / "results")
        cls.out = root / "out"
        cls.res = build("--results", root / "results", "--out", cls.out)

    def test_sections_use_the_primary_gpu(self):
        self.assertEqual(self.res.returncode, 0, self.res.stderr)
        runs = rundata.load_runs(Path(self.tmp.name) / "results")
        self.assertEqual(rundata.primary_gpu(runs), "GPU A (synthetic)")
        self.assertEqual(rundata.pick_run(runs, "encoder", "GPU A (synthetic)").name, "a2")
        self.assertEqual(rundata.pick_run(runs, "encoder").name, "b")  # newest of all
        # A family that the primary GPU never measured still gets its run from elsewhere.
        self.assertEqual(rundata.pick_run(runs, "encoder", "GPU C").name, "b")
        ladder = (self.out / "tables" / "encoder_ladder.md").read_text()
        self.assertIn("run-a2", ladder)
        self.assertNotIn("run-b", ladder)

    def test_encoder_section_comes_from_a_final_sitting(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            two_gpu_encoder_runs(root)
            # An older final sitting on the primary GPU wins over a newer sweep there...
            (root / "a1" / "encoder.csv").rename(root / "a1" / "final.csv")
            runs = rundata.load_runs(root)
            self.assertEqual(rundata.pick_run(runs, "encoder", "GPU A (synthetic)").name, "a1")
            self.assertEqual(rundata.pick_run(runs, "layernorm", "GPU A (synthetic)"), None)
            # ...and with none there, another GPU's final sitting wins over every sweep.
            (root / "a1" / "final.csv").rename(root / "a1" / "encoder.csv")
            (root / "b" / "encoder.csv").rename(root / "b" / "final.csv")
            runs = rundata.load_runs(root)
            self.assertEqual(rundata.pick_run(runs, "encoder", "GPU A (synthetic)").name, "b")

    def report_with_b_edited(self, edit) -> str:
        """The report built over the two GPUs' runs after `edit` changed GPU B's rows (a frame)."""
        import pandas as pd
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            two_gpu_encoder_runs(root / "results")
            f = root / "results" / "b" / "encoder.csv"
            d = pd.read_csv(f)
            edit(d)
            d.to_csv(f, index=False)
            res = build("--results", root / "results", "--out", root / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            return read_report(root / "out")

    def test_encoder_ratios_only_inside_one_sitting(self):
        # GPU B's anchors from another sitting (run id) than its steps: no encoder ratio there.
        def other_sitting(d):
            d.loc[d["version"].str.startswith("pytorch_"), "run_id"] = "another-sitting"
        text = self.report_with_b_edited(other_sitting)
        # The encoder is these runs' only family: no comparison is left at all.
        self.assertIn("`gpus_ratios` not produced: no comparison has rows on both GPU A (synthetic) "
                      "and GPU B (synthetic) at the same shape", text)

    def test_dirty_rows_are_not_compared(self):
        # GPU B's only encoder rows from a tree with uncommitted changes: no comparison rests on them.
        def dirty(d):
            d["commit"] = d["commit"].astype(str) + "-dirty"
        text = self.report_with_b_edited(dirty)
        self.assertIn("`gpus_ratios` not produced: no comparison has rows on both GPU A (synthetic) "
                      "and GPU B (synthetic) at the same shape", text)
        self.assertIn("The encoder comparisons between GPU A (synthetic) and GPU B (synthetic) are left out: "
                      "their rows in run folder b were built from a tree with uncommitted changes (-dirty)", text)

    def test_speedups_within_each_run_and_whether_they_hold(self):
        table = (self.out / "tables" / "gpus_ratios.md").read_text()
        lines = [l for l in table.splitlines() if l.startswith("| encoder")]
        # Batch 1 vs the graph: A 690 / 410 = 1.68x, B 700 / 800 = 0.88x: changes sides.
        self.assertIn("| encoder | vit_b, 224 px, batch 1 | timm in a CUDA graph | GPU A (synthetic) | "
                      "e6_best: 410 us | pytorch_timm_graph: 690 us | 1.68x | 1,980 / 1,980 | - |", lines)
        self.assertIn("| encoder | vit_b, 224 px, batch 1 | timm in a CUDA graph | GPU B (synthetic) | "
                      "e6_best: 800 us | pytorch_timm_graph: 700 us | 0.88x | 1,980 / 1,980 | "
                      "no: faster on one GPU only |", lines)
        # Batch 32: 3310 / 2500 = 1.324x on A, 3442.4 / 2600 = 1.324x on B: holds.
        self.assertTrue(any("batch 32" in l and "GPU B (synthetic)" in l and l.endswith("| yes |")
                            for l in lines), lines)
        # Batch 256: 26000 / 18000 = 1.44x on A, 21000 / 20000 = 1.05x on B: direction only.
        self.assertTrue(any("batch 256 | timm in a CUDA graph | GPU B" in l and "1.05x" in l
                            and "1,500 / 1,750" in l and l.endswith("| direction only |")
                            for l in lines), lines)
        text = (self.out / "text" / "gpus_findings.md").read_text()
        self.assertIn("Of 8 comparisons timed on both GPU A (synthetic) and GPU B (synthetic), ", text)
        # Batch 1 against torch.compile: 720 / 410 = 1.76x on A (compiled in its anchor process),
        # 600 / 800 = 0.75x on B (compiled ahead): the findings name the difference; batch 32 and
        # 256 hold (1.40x / 1.31x; 1.06x / 1.00x), so no such line for them.
        self.assertIn("encoder at vit_b, 224 px, batch 1 against torch.compile + CUDA graph: its reference compiled "
                      "inside the sitting's anchor process on GPU A (synthetic) and ahead, in a fresh process, on "
                      "GPU B (synthetic)", text)
        self.assertNotIn("batch 32 against torch.compile + CUDA graph: its reference", text)
        # Where a speedup moved, which side moved (no copy bandwidth in these runs' ceilings).
        self.assertIn("encoder at vit_b, 224 px, batch 256 against timm in a CUDA graph, what moved: the fastest "
                      "version takes 18.00 ms on GPU A (synthetic) and 20.00 ms on GPU B (synthetic) (1.11x as "
                      "long), the reference 26.00 ms and 21.00 ms (0.81x).", text)
        self.assertNotIn("batch 32 against timm in a CUDA graph, what moved", text)
        self.assertIn("recorded 1,600 MHz for e6_best and 1,900 MHz for timm in a CUDA graph on GPU A "
                      "(synthetic), 1,500 MHz for e6_best and 1,750 MHz for timm in a CUDA graph on GPU B (synthetic)", text)
        # Without both GPUs' ceilings no sentence says which ceiling the whole ViT's time follows.
        self.assertNotIn("Why the whole ViT moves little", text)
        self.assertTrue((self.out / "figures" / "gpus_speedups.png").is_file())

    def test_one_gpu_only_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            run = hand_made_encoder(Path(d) / "results" / "r")
            res = build("--results", run.parent, "--out", Path(d) / "out")
            self.assertEqual(res.returncode, 0, res.stderr)
            readme = read_report(Path(d) / "out")
            self.assertIn("*Table `gpus_ratios` not produced: every committed run was measured on "
                          "one GPU (NVIDIA H200 (synthetic)).*", readme)


if __name__ == "__main__":
    unittest.main()
