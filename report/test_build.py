"""report/build.py's own helpers, without a build: the ceilings sentences of the Method section,
a step's measured line; and, on the committed report, every step's measured numbers against the
ladder its section draws."""
import re
import unittest

from report.build import ceilings_sentences, measured_line, what_gains_buy
from studylib.notebook import Headline, Rung
from studylib.paths import REPO

REPORT = REPO / "report"
# "25.0 us at 197 tokens", "0.446 ms at batch 1", "13.0 us at vit_b, 224 px, batch 1"
MEASURED = re.compile(r"([\d,]+(?:\.\d+)?) (us|ms) at ((?:vit_\w+, \d+ px, )?(?:batch \d+|\d+ rows|\d+ tokens))")


def table_rows(name: str) -> list[dict]:
    """A committed markdown table of report/tables as {column: cell} rows."""
    lines = [x for x in (REPORT / "tables" / f"{name}.md").read_text().splitlines() if x.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in x.strip("|").split("|")))) for x in lines[2:]]


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def ladder_values(family: str) -> dict:
    """(version, where) -> the time (us) the family's ladder table gives, where its ladder figure
    draws the same lookups (the encoder: its ladder sitting's table, in ms)."""
    out = {}
    if family in ("layernorm", "mlp", "attention"):
        name = {"layernorm": "layernorm_ladder", "mlp": "mlp_ladder", "attention": "attention_summary"}[family]
        for row in table_rows(name):
            for col, cell in row.items():
                m = re.fullmatch(r"(\d+)( rows)?: us", col)
                if m and cell != "-":
                    out[row["version"], f"{m.group(1)} {'rows' if m.group(2) else 'tokens'}"] = number(cell)
    elif family == "patch_embed":
        for row in table_rows("patch_embed_ladder"):
            out[row["version"], row["shape"]] = number(row["median us"])
    else:
        for row in table_rows("encoder_ladder_gains"):
            out[row["step"], f"batch {row['batch']}"] = 1000 * number(row["ms"])
    return out


class CeilingsSentences(unittest.TestCase):
    def test_one_sentence_per_gpu_with_the_range(self):
        got = ceilings_sentences({"a": ("NVIDIA H200", 4200.0, 760.0), "b": ("NVIDIA H200", 4242.0, 798.0),
                                  "c": ("NVIDIA H200", None, None), "d": ("NVIDIA L4", 250.0, 120.0)})
        self.assertEqual(got, [
            "On NVIDIA H200 the 2 section runs above measured a device-to-device copy bandwidth (bytes read "
            "+ written) of 4,200-4,242 GB/s (1.0% apart) and an fp16 tensor-core GEMM rate of 760-798 "
            "TFLOP/s (5.0% apart); each share in the report is of its own run's (the runs table).",
            "Run `c` has no ceilings rows, so its bandwidth and throughput are shown without a measured limit.",
            "On NVIDIA L4 the section run above measured a device-to-device copy bandwidth (bytes read + "
            "written) of 250 GB/s and an fp16 tensor-core GEMM rate of 120 TFLOP/s; each share in the "
            "report is of its own run's (the runs table)."])

    def test_a_gpu_without_any_ceilings(self):
        self.assertEqual(ceilings_sentences({"x": ("NVIDIA L4", None, None)}),
                         ["Run `x` has no ceilings rows, so its bandwidth and throughput are shown without "
                          "a measured limit."])


class MeasuredLine(unittest.TestCase):
    def test_the_drawn_rows_else_the_notes_said_to_be_theirs(self):
        self.assertEqual(measured_line([Rung("v2", "6304 rows", "10.4 us", 1.493, "v1"),
                                        Rung("v2", "50432 rows", "45.8 us")], "NOTES words."),
                         "*Measured:* 10.4 us at 6304 rows (1.49x the speed of v1); 45.8 us at 50432 rows.")
        self.assertIn("in the sitting its NOTES name", measured_line([], "NOTES words."))
        self.assertTrue(measured_line([], "NOTES words.").endswith(": NOTES words."))


class WhatGainsBuy(unittest.TestCase):
    def test_each_gain_weighed_by_its_share(self):
        heads = [("mlp", Headline("MLP", "s1", "m", 100.0, anchors=[("slow", 200.0), ("fast", 150.0)])),
                 ("layernorm", Headline("LayerNorm", "s2", "l", 10.0, anchors=[("eager", 30.0)])),
                 ("encoder", Headline("Whole ViT", "s3", "e", 1.0, anchors=[("compile", 2.0)])),
                 ("attention", Headline("Attention", "s4", "a", 5.0))]   # no anchor: no line
        got = what_gains_buy(heads, ("e19", 256, {"mlp": 0.5, "layernorm": 0.1, "qkv": 0.4}, 17000.0))
        lines = [x for x in got.splitlines() if x.startswith("- ")]
        # The faster anchor: 1.5x over 50% of the forward buys 1.25x; 3x over 10% buys 1.20x.
        self.assertEqual(len(lines), 2, got)
        self.assertIn("MLP: 50% of the forward; 1.50x fast at s1: buys 1.25x", lines[0])
        self.assertIn("LayerNorm: 10% of the forward; 3.00x eager at s2: buys 1.20x", lines[1])
        self.assertIn("e19 at batch 256 spends 17.0 ms", got)
        self.assertEqual(what_gains_buy(heads, None), "")


class CommittedLadders(unittest.TestCase):
    """Each step's "Measured" in the committed report is what its section's ladder draws: every
    time a ladder line states equals that step's cell of the family's ladder table (both read the
    lookups the ladder figure draws), and a section with a ladder says at least one step that way."""

    def test_every_measured_time_is_the_ladders(self):
        for family in ("patch_embed", "layernorm", "attention", "mlp", "encoder"):
            table = ladder_values(family)
            said = 0
            for line in (REPORT / "text" / f"ladder_{family}.md").read_text().splitlines():
                m = re.match(r"- \*\*`(\w+)`\*\*", line)
                if not m or "*Measured:*" not in line:
                    continue
                part = line.split("*Measured:*", 1)[1].split("*Why:*", 1)[0]
                for value, unit, where in MEASURED.findall(part):
                    us = number(value) * (1000 if unit == "ms" else 1)
                    key = (m.group(1), where)
                    self.assertIn(key, table, f"{family}: {key} is not in its ladder table")
                    self.assertAlmostEqual(us / table[key], 1, delta=0.006, msg=f"{family}: {key}")
                    said += 1
            self.assertGreater(said, 0, f"{family}: no step's measured line reads its ladder")


if __name__ == "__main__":
    unittest.main()
