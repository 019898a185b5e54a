"""The step table as the analysis reads it (standard library only; CPU suite):

- every step of stages/encoder/steps.tsv has the composition it had before the table existed
  (stages/encoder/steps_before_redesign.txt, Composition::describe() at 6c88e19), pruned steps
  excepted, and the file names what it prunes;
- this module's parser and writer agree with the C++ text form on every row;
- every alias names the step that its run folder shows fastest of its precision (median of
  rounds, vit_b 224 px) at two of the batches 1, 32 and 256, and the run has all three; a step
  takes a batch from its parent only beyond the rounds' spread (steps.fastest_at, the rule the
  answer is named by); of the fp16 steps only those that pass timm parity with every parameter
  drawn (steps.models_timm) compete, and the alias's own step must be one;
- once a final sitting is committed (a run folder with final.csv), every alias is re-derived
  from one: README's answer, the report and the aliases then name the same steps.
"""
from __future__ import annotations

import csv
import re
import statistics
import unittest
from collections import defaultdict
from pathlib import Path

from studylib import steps

REPO = steps.REPO
BEFORE = REPO / "stages" / "encoder" / "steps_before_redesign.txt"
TRIED = REPO / "stages" / "encoder" / "TRIED.md"
RESULTS = REPO / "experiments" / "results"
KEY_BATCHES = (1, 32, 256)
# Family versions the old form named for a step whose blocks compute that part themselves.
NEVER_RAN = {"e9_ln_folded": ("mlp",), "e13_persistent": ("attn", "mlp")}


def before() -> dict[str, str]:
    out = {}
    for line in BEFORE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, text = line.split("\t")
            out[name] = text
    return out


def step_rows(run: Path) -> dict[tuple[str, int], list[float]]:
    """(version, batch) -> median_us of each of its rows (a round each), for the ok encoder step
    rows of vit_b at 224 px in every CSV of the run folder."""
    rows = defaultdict(list)
    names = set(steps.ladder())
    for path in run.rglob("*.csv"):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if (r.get("family") == "encoder" and r.get("status") == "ok" and r.get("version") in names
                        and r.get("model") == "vit_b" and r.get("image_size") == "224"
                        and "layers=" not in r.get("note", "")):
                    rows[(r["version"], int(r["batch"]))].append(float(r["median_us"]))
    return rows


class StepTable(unittest.TestCase):
    def test_alias_field_reads_the_alias_composition(self):
        # The fp16 answer's MLP: what the MLP section judges its 1.05x target on as well.
        rows = {r["name"]: r for r in steps.read_table()}
        alias = rows["fastest_fp16"]
        self.assertEqual(steps.alias_field("fastest_fp16", "mlp"), steps.parse(alias["composition"])["mlp"])
        self.assertEqual(steps.alias_field("fastest_fp16", "mlp"),
                         steps.parse(rows[alias["parent"]]["composition"])["mlp"])
        with self.assertRaises(KeyError):
            steps.alias_field("e19_exact_gelu", "mlp")   # a step, not an alias

    def test_steps_keep_the_compositions_they_were_measured_with(self):
        table = {r["name"]: r for r in steps.steps()}
        old = before()
        for name, text in old.items():
            with self.subTest(step=name):
                if name not in table:
                    self.assertIn(name, TRIED.read_text(), f"{name} left the table but not for TRIED.md")
                    continue
                measured = steps.parse(text)
                # The old form named every family version; the table leaves out those the
                # step's blocks never ran (its runner does not read them: composition.hpp).
                for field in NEVER_RAN.get(name, ()):
                    measured[field] = ""
                self.assertEqual(steps.parse(table[name]["composition"]), measured)
        for name in table:
            if name not in old:  # a step added with the table: its parent's plus its delta
                self.assertIn(table[name]["parent"], table)

    def test_python_and_cpp_text_forms_agree(self):
        for r in steps.read_table():
            with self.subTest(row=r["name"]):
                c = steps.parse(r["composition"])
                self.assertEqual(steps.to_string(c), r["composition"])
                if r["kind"] == "step" and r["parent"]:
                    parent = next(p for p in steps.steps() if p["name"] == r["parent"])
                    merged = dict(steps.parse(parent["composition"]))
                    delta = steps.parse("pe=_ ln=_ attn=_ mlp=_ " + r["delta"])
                    for key in r["delta"].split():
                        field = key.partition("=")[0]
                        merged[field] = delta[field]
                    self.assertEqual(merged, c)

    def test_legacy_forms_parse(self):
        old = steps.parse("custom:pe=a,ln=b,attn=c,mlp=d,reuse,graph,fused,cutlass,pdl,cublaslt,prefetch")
        self.assertEqual(old["buffers"], "arena")
        self.assertEqual(old["gemms"], "cutlass+cublaslt")
        self.assertTrue(old["l2_prefetch"] and old["graph"])
        self.assertEqual(steps.parse("custom:pe=a,ln=b,attn=c,mlp=d")["buffers"], "per_layer")
        mix = steps.parse("pe=a ln=b attn=c mlp=fp8_tensor fp8 attn_e4m3")
        self.assertEqual(mix["blocks"], "fp8")
        self.assertIsNone(mix["graph"])  # an old note does not say
        self.assertEqual(steps.note_mix("pe=a ln=b attn=c mlp=d graph pdl; logits checked"),
                         "pe=a ln=b attn=c mlp=d graph pdl")
        self.assertEqual(steps.note_mix("pe=a ln=b attn=c mlp=d gemms=cutlass (best: x=y) layers=2; z"),
                         "pe=a ln=b attn=c mlp=d gemms=cutlass")
        self.assertEqual(steps.note_mix("pe=a ln=b blocks=persistent residual=epilogue graph; logits checked"),
                         "pe=a ln=b blocks=persistent residual=epilogue graph")
        self.assertEqual(steps.parse("pe=a ln=b attn=c mlp=d attn=none")["attn"], "")
        # The tiled forms as their rows wrote them, one blocks= value each, read as the tile_ fields.
        table = {r["name"]: r["composition"] for r in steps.steps()}
        for name, old in (("e24_tiled", "tiled"), ("e25_ln_tasks", "tiled_ln"), ("e26_two_ctas", "tiled_2cta"),
                          ("e27_wgmma_tiles", "tiled_wgmma"), ("e28_folded_ln", "tiled_folded"),
                          ("e29_loads_first", "tiled_loads_first"), ("e30_row_stats", "tiled_row_stats")):
            self.assertEqual(steps.parse(f"pe=v10_round_tiles ln=v5_unrolled blocks={old} residual=epilogue graph"),
                             steps.parse(table[name]), name)
        self.assertEqual(steps.parse("pe=a ln=b gemms=cublaslt+cutlass")["gemms"], "cutlass+cublaslt")
        with self.assertRaises(steps.FormError):
            steps.parse("pe=a ln=b attn=c mlp=d sparkle")

    def test_aliases_name_the_fastest_step_of_their_run(self):
        table = {r["name"]: r for r in steps.steps()}
        verdicts = steps.parity_verdicts(RESULTS)
        competes = lambda v, prec: prec != "fp16" or steps.models_timm(v, verdicts)
        for alias, a in steps.aliases().items():
            with self.subTest(alias=alias):
                run = RESULTS / a["measured"]
                self.assertTrue(run.is_dir(), f"{alias}: no run folder {run}")
                rounds = step_rows(run)
                median = lambda v, b: statistics.median(rounds[(v, b)]) if (v, b) in rounds else None
                spread = lambda v, b: (min(rounds[(v, b)]), max(rounds[(v, b)]))
                prec = steps.precision(steps.parse(table[a["step"]]["composition"]))
                self.assertTrue(competes(a["step"], prec),
                                f"{alias}: {a['step']} has no passing timm parity with every parameter drawn "
                                f"at {steps.PARITY_SIZES} px")
                wins = 0
                for b in KEY_BATCHES:
                    timed = [v for (v, batch) in rounds if batch == b and
                             steps.precision(steps.parse(table[v]["composition"])) == prec and competes(v, prec)]
                    self.assertIn(a["step"], timed, f"{alias}: {a['step']} has no row at batch {b}")
                    wins += steps.fastest_at(timed, b, median, spread) == a["step"]
                self.assertGreaterEqual(wins, 2, f"{alias}: {a['step']} is the fastest {prec} step at {wins} "
                                                 f"of the batches {KEY_BATCHES} in {a['measured']}")


    def test_a_step_takes_the_title_from_its_parent_only_beyond_the_rounds_spread(self):
        parent_of = {"child": "parent", "grandchild": "child"}
        rounds = {("parent", 1): (440, 450), ("child", 1): (430, 445), ("grandchild", 1): (400, 405),
                  ("other", 1): (420, 460),
                  ("parent", 256): (18100, 18300), ("child", 256): (17600, 17700)}
        median = lambda v, b: sum(rounds[(v, b)]) / 2 if (v, b) in rounds else None
        spread = lambda v, b: rounds[(v, b)]
        at = lambda cands, b: steps.fastest_at(cands, b, median, spread, parent_of)
        # child's slowest round (445) is not under parent's fastest (440): the draw is the parent's.
        self.assertEqual(at(["parent", "child"], 1), "parent")
        # Beyond the spread: 17700 < 18100.
        self.assertEqual(at(["parent", "child"], 256), "child")
        # grandchild beats child beyond its spread; a step whose parent is not competing wins alone.
        self.assertEqual(at(["parent", "child", "grandchild"], 1), "grandchild")
        self.assertEqual(at(["child"], 1), "child")
        # Not a parent: the medians alone (other 440 against parent 445).
        self.assertEqual(at(["parent", "other"], 1), "other")
        self.assertIsNone(at(["parent"], 32))
        # Over the batches: one win each, the tie to the faster at the largest batch.
        self.assertEqual(steps.fastest(["parent", "child"], (1, 256), median, spread, parent_of), "child")
        self.assertEqual(steps.fastest(["parent", "child"], (1,), median, spread, parent_of), "parent")
        self.assertIsNone(steps.fastest(["parent"], (32,), median, spread, parent_of))

    def test_aliases_come_from_a_final_sitting(self):
        finals = {p.parent.name for p in RESULTS.glob("*/final.csv")}
        if not finals:
            self.skipTest("no final sitting committed yet (./study run final)")
        for alias, a in steps.aliases().items():
            with self.subTest(alias=alias):
                self.assertIn(Path(a["measured"]).parts[0], finals,
                              f"{alias} is measured in {a['measured']}, not in a final sitting")

    def test_readme_report_and_aliases_name_the_same_fastest_steps(self):
        """README's answer and the report's (both generated from the final sitting) name as the
        fastest fp16 and FP8 forwards the steps the aliases name."""
        if not any(RESULTS.glob("*/final.csv")):
            self.skipTest("no final sitting committed yet (./study run final)")
        aliases = {a: v["step"] for a, v in steps.aliases().items()}
        for doc in (REPO / "README.md", REPO / "report" / "README.md"):
            text = doc.read_text()
            # ... and the aliases are measured in the sitting the answer comes from.
            sitting = re.findall(r"All from one sitting: run folder `([^`]+)`", text)
            for alias, a in steps.aliases().items():
                with self.subTest(doc=doc.name, alias=alias, what="sitting"):
                    self.assertEqual(set(sitting), {Path(a["measured"]).parts[0]},
                                     f"{doc} answers from {sitting}, {alias} is measured in {a['measured']}")
            for prec, alias in (("fp16", "fastest_fp16"), ("FP8", "fastest_fp8")):
                with self.subTest(doc=doc.name, alias=alias):
                    named = re.findall(rf"The fastest {prec} forward, `([^`]+)`", text)
                    self.assertTrue(named, f"{doc}: no 'The fastest {prec} forward' line")
                    self.assertEqual(set(named), {aliases[alias]},
                                     f"{doc} names {named} as the fastest {prec} forward, {alias} {aliases[alias]}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
