"""studylib.claims: sentence files parsed (continuations, comments, refusals), records rendered
through named and Python formats, nested claims, and clear errors for a kind without a sentence or
a slot its record lacks. Also: every kind a committed sentence file holds is well formed.

  python3 -m studylib.test_claims
"""
import tempfile
import unittest
from pathlib import Path

from studylib import claims
from studylib.claims import claim


def sentences(text):
    d = tempfile.mkdtemp()
    p = Path(d) / "family.md"
    p.write_text(text)
    return claims.load(p)


class Load(unittest.TestCase):
    def test_continuations_and_comments(self):
        t = sentences("# a comment\nfast: The fastest is\n  {version}.\n\nslow: {us:us} us\n")
        self.assertEqual(t, {"fast": "The fastest is {version}.", "slow": "{us:us} us"})

    def test_refusals(self):
        for text, words in (("  orphan continuation\n", "continuation"), ("no colon here\n", "expected"),
                            ("a b: x\n", "expected"), ("k: one\nk: two\n", "twice")):
            with self.subTest(text=text), self.assertRaisesRegex(claims.TemplateError, words):
                sentences(text)

    def test_committed_sentence_files_parse(self):
        files = sorted(claims.SENTENCES.glob("*.md"))
        self.assertTrue(files)
        for f in files:
            with self.subTest(file=f.name):
                self.assertTrue(claims.load(f))


class Render(unittest.TestCase):
    T = {"share": "{version} reaches {share:share} at {rows} x {hidden} ({us:us} us, {ratio:faster}{band:band}).",
         "target": "The target is {verdict} ({target:share}).",
         "parts": "{items:parts}", "part": "{rows} rows: {ratio:.2f}x", "sizes": "at {sizes:and} rows",
         "who": "{first:either:the fastest|our fastest, {version},} takes"}

    def test_named_and_python_formats(self):
        c = claim("share", version="v5", share=0.8449, rows=50432, hidden=768, us=43.51, ratio=0.5,
                  band=(0.98, 1.02))
        self.assertEqual(claims.render([c], self.T),
                         ["v5 reaches 84% at 50432 x 768 (43.5 us, 2.00x slower; rounds 0.98-1.02x)."])
        self.assertEqual(claims.render([claim("sizes", sizes=[6304, 50432])], self.T), ["at 6304 and 50432 rows"])

    def test_times_joins_and_bands(self):
        t = {"ms": "{us:ms} ms", "both": "at {xs:both}", "said": "{xs:sentences}", "band": "x{band:sittings_band}"}
        self.assertEqual(claims.render([claim("ms", us=448.2), claim("ms", us=18234.0)], t), ["0.448 ms", "18.2 ms"])
        self.assertEqual(claims.render([claim("both", xs=["batch 1", "batch 32"])], t), ["at batch 1 and batch 32"])
        self.assertEqual(claims.render([claim("said", xs=["One.", "Two."])], t), ["One. Two."])
        self.assertEqual(claims.render([claim("band", band=(1.25, 1.32))], t), ["x; rounds and sittings span 1.25-1.32x"])

    def test_committed_templates_nest_at_most_two_deep(self):
        # Python's formatter expands a slot inside a format spec, but not a slot inside that one's
        # spec: '{a:either:{b:either:{c}|}|}' fails only when rendered, so every template is read here.
        import string

        def depth(text):
            return max([1 + depth(spec) for _, name, spec, _ in string.Formatter().parse(text)
                        if name is not None] + [0])
        for f in sorted(claims.SENTENCES.glob("*.md")):
            for kind, text in claims.load(f).items():
                with self.subTest(file=f.name, kind=kind):
                    self.assertLessEqual(depth(text), 2)

    def test_record_fields_fill_slots(self):
        c = claim("target", target=0.8, value=0.84, verdict="met")
        self.assertEqual(claims.render([c], self.T), ["The target is met (80%)."])

    def test_either_wording_by_a_flag(self):
        self.assertEqual(claims.render([claim("who", first=True, version="v5")], self.T), ["the fastest takes"])
        self.assertEqual(claims.render([claim("who", first=False, version="v5")], self.T), ["our fastest, v5, takes"])
        with self.assertRaisesRegex(claims.TemplateError, "two wordings"):
            claims.render([claim("who2", first=True)], {"who2": "{first:either:only one}"})

    def test_nested_claims(self):
        c = claim("parts", items=[claim("part", rows=1, ratio=1.5), claim("part", rows=2, ratio=2)])
        self.assertEqual(claims.render([c], self.T), ["1 rows: 1.50x; 2 rows: 2.00x"])

    def test_errors_name_the_kind_and_the_slot(self):
        with self.assertRaisesRegex(claims.TemplateError, "no sentence for claim kind 'nope'"):
            claims.render([claim("nope")], self.T)
        with self.assertRaisesRegex(claims.TemplateError, "'share' names 'us'"):
            claims.render([claim("share", version="v", share=1, rows=1, hidden=1, ratio=1, band=(1, 1))], self.T)


if __name__ == "__main__":
    unittest.main()
