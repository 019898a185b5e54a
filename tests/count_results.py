#!/usr/bin/env python3
"""The closing line of ./study test, "N passed, N failed, N skipped", from meson's JSON test log
(meson's own summary differs across versions). A cpu-suite test that skipped and is not listed
in the allow-list file counts as failed: on a machine ./study has set up, those checks must run.

  tests/count_results.py TESTLOG.json ALLOWED.txt   exit 1 when a skip was refused, else 0
"""
import json
import sys

PASS = ("OK", "EXPECTEDFAIL")
FAIL = ("FAIL", "UNEXPECTEDPASS", "TIMEOUT", "ERROR")


def allowed_skips(path):
    """The test names of the allow-list: the first word of each line, # comments left out."""
    with open(path, encoding="utf-8") as f:
        return {line.split()[0] for line in f if line.strip() and not line.lstrip().startswith("#")}


def count(testlog_lines, allowed):
    """(passed, failed, skipped, refused names) over the JSON lines of a meson test log."""
    passed = failed = skipped = 0
    refused = []
    for line in testlog_lines:
        if not line.strip():
            continue
        t = json.loads(line)
        result = t.get("result", "ERROR")
        # "cpu+setup - vit-cuda-study:setup_no_root": the test's suites, then project:name.
        suites, _, full = t.get("name", "?").rpartition(" - ")
        name = full.split(":")[-1]
        cpu = "cpu" in suites.split("+")
        if result == "SKIP" and cpu and name not in allowed:
            refused.append(name)
            result = "FAIL"
        if result in PASS:
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
    return passed, failed, skipped, refused


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    with open(argv[1], encoding="utf-8") as f:
        passed, failed, skipped, refused = count(f, allowed_skips(argv[2]))
    for name in refused:
        print(f"study: the cpu-suite test {name} skipped, and {argv[2]} does not allow it: counted as failed",
              file=sys.stderr)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
