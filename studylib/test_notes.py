"""studylib/notes.py on planted NOTES.md texts: a sound "In short" section parses to its three
lines, and each fault (no section, a missing, unknown, repeated or overlong field, a line that is
not a bullet) is refused with a message naming it (standard library only; CPU suite)."""
import unittest

from studylib import notes

GOOD = """# v9_thing: the thing, done better

## In short

- **Predicted**: 10% faster.
- **Measured**: 8% faster.
- **Why**: The tail was longer than assumed.

## Technique
Words.
"""


def planted(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


class InShort(unittest.TestCase):
    def test_sound(self):
        self.assertEqual(notes.in_short(GOOD), {"Predicted": "10% faster.", "Measured": "8% faster.",
                                                "Why": "The tail was longer than assumed."})
        self.assertEqual(notes.title(GOOD, "v9_thing"), "the thing, done better")
        self.assertEqual(notes.title("# v9_thing \u2014 the thing\n", "v9_thing"), "the thing")

    def test_at_the_end_of_the_file(self):
        text = GOOD[:GOOD.index("## Technique")]
        self.assertEqual(notes.in_short(text)["Why"], "The tail was longer than assumed.")

    def test_faults(self):
        cases = {
            "no '## In short' section": planted("## In short", "## Briefly"),
            "no Why": planted("- **Why**: The tail was longer than assumed.\n", ""),
            "unknown field 'Because'": planted("**Why**", "**Because**"),
            "'Measured' twice": planted("- **Why**", "- **Measured**: again.\n- **Why**"),
            "'Predicted' is 230 characters": planted("10% faster.", "x" * 230),
            "not '- **Field**: text'": planted("- **Measured**: 8% faster.", "Measured: 8% faster."),
        }
        for why, text in cases.items():
            with self.subTest(why), self.assertRaises(notes.NotesError) as e:
                notes.in_short(text)
            self.assertIn(why, str(e.exception))


if __name__ == "__main__":
    unittest.main()
