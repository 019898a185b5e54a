"""Tests of the PyTorch anchors' scripts and harness that run without torch or a GPU (each then
writes its `skipped` row) and use them where the interpreter has them.

  python3 -m experiments.anchors.test_anchors      (from the repository root)
"""
import json
import subprocess
import unittest

from experiments.sweep.fakes import PY, SweepCase


class AnchorTest(SweepCase):
    def test_layernorm_anchor_writes_one_schema_row(self):
        csv_path = self.dir / "anchor.csv"
        r = subprocess.run([PY, "-m", "experiments.anchors.torch_layernorm", "--version",
                            "pytorch_layer_norm", "--batch", "2", "--image-size", "64",
                            "--iters", "3", "--warmup", "1", "--csv", str(csv_path)],
                           capture_output=True, text=True, env=self.env, timeout=300)
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
        r = subprocess.run([PY, "-m", "experiments.anchors.torch_vit", "--serve"],
                           input="\n".join(lines + ["not json", json.dumps(["--version", "nope"])]) + "\n",
                           capture_output=True, text=True, env=self.env, timeout=600)
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
        from experiments.anchors import harness
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
            return harness.eager_or_graph(fake_torch, lambda: model(), "cuda:0", True), weakref.ref(model)
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
        from experiments.anchors import harness
        made = []
        self.assertEqual(harness.keep(("k",), lambda: made.append(1) or len(made)), 1)  # one-row run
        self.assertEqual(harness.keep(("k",), lambda: made.append(1) or len(made)), 2)  # makes again
        rows = [json.dumps(["--row", k]) for k in ("a", "b", "a")]
        seen = []

        def run_one(argv):
            seen.append(harness.keep((argv[1],), lambda: made.append(argv[1]) or len(made)))
            return 0
        import io
        out = io.StringIO()
        try:
            harness.serve(run_one, io.StringIO("\n".join(rows) + "\n"), out)
        finally:
            harness._kept = None
        self.assertEqual(seen, [3, 4, 3])   # the third row reuses the first row's object
        self.assertEqual(out.getvalue().splitlines(), ["STUDY_ANCHOR_DONE 0"] * 3)
        self.assertEqual(harness.kept_by_other_rows(), 0)   # nothing on a GPU here

    def test_patch_embed_anchors_write_one_schema_row_each(self):
        for version in ("pytorch_conv2d", "pytorch_patchify_linear"):
            csv_path = self.dir / f"{version}.csv"
            r = subprocess.run([PY, "-m", "experiments.anchors.torch_patch_embed", "--version",
                                version, "--batch", "2", "--image-size", "64", "--model",
                                "vit_ti", "--iters", "3", "--warmup", "1", "--csv",
                                str(csv_path)], capture_output=True, text=True, env=self.env, timeout=300)
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
        subprocess.run([PY, "-m", "experiments.anchors.torch_patch_embed", "--version",
                        "pytorch_conv2d", "--streams", "4", "--csv", str(csv_path)],
                       capture_output=True, text=True, env=self.env, timeout=300)
        row = self.rows(csv_path)[0]
        self.assertEqual(row["status"], "skipped")
        self.assertIn(row["note"], ("torch not installed", "no CUDA device",
                                    "PyTorch anchors run on one stream (streams=1 only)"))


if __name__ == "__main__":
    unittest.main()
