#!/usr/bin/env python3
"""tests/count_results.py on hand-made meson test logs: the counts, and a cpu-suite skip outside
the allow-list counted as failed (a GPU-suite skip never is)."""
import json
import os
import tempfile
import unittest

import count_results as cr  # beside this script, which runs by path


def entry(name, suite, result):
    return json.dumps({"name": f"{suite} - vit-cuda-study:{name}", "result": result})


class CountResults(unittest.TestCase):
    def test_counts_and_refusals(self):
        log = [entry("common", "cpu", "OK"), entry("slurm", "cpu", "SKIP"), entry("analysis", "cpu", "SKIP"),
               entry("mlp_unfused", "gpu", "SKIP"), entry("reference", "cpu", "FAIL"),
               entry("setup_no_root", "cpu+setup", "SKIP"),
               entry("cli_errors", "cpu", "TIMEOUT"), ""]
        passed, failed, skipped, refused = cr.count(log, {"slurm"})
        self.assertEqual((passed, failed, skipped), (1, 4, 2))
        self.assertEqual(refused, ["analysis", "setup_no_root"])

    def test_the_committed_allow_list_names_known_tests(self):
        here = os.path.dirname(os.path.abspath(__file__))
        allowed = cr.allowed_skips(os.path.join(here, "cpu_skips_allowed.txt"))
        self.assertTrue(allowed)
        meson = open(os.path.join(here, "meson.build"), encoding="utf-8").read()
        for name in allowed:
            self.assertIn(f"test('{name}'", meson, f"{name} is allowed to skip but is no test of tests/meson.build")

    def test_exit_code_and_line(self):
        with tempfile.TemporaryDirectory() as d:
            log, allow = os.path.join(d, "log.json"), os.path.join(d, "allow.txt")
            with open(allow, "w") as f:
                f.write("# why\nslurm   needs Slurm\n")
            with open(log, "w") as f:
                f.write("\n".join([entry("slurm", "cpu", "SKIP"), entry("common", "cpu", "OK")]) + "\n")
            self.assertEqual(cr.main(["x", log, allow]), 0)
            with open(log, "a") as f:
                f.write(entry("analysis", "cpu", "SKIP") + "\n")
            self.assertEqual(cr.main(["x", log, allow]), 1)


if __name__ == "__main__":
    unittest.main()
