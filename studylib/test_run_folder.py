"""The run folder's generated summary (studylib/run_folder.py): the test and sanitizer summaries
the GPU job leaves, and the GEMM choices a sitting made (standard library only; CPU suite).

    python3 -m studylib.test_run_folder      (from the repository root)
"""
import tempfile
import unittest
from pathlib import Path

from studylib import run_folder


class Summaries(unittest.TestCase):
    def test_run_folder_test_summaries(self):
        # meson's summary lines and doctest binaries' own outputs, added up; a failure shows.
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "tests.txt"
            path.write_text("### a\n[doctest] test cases:  12 |  12 passed | 0 failed | 0 skipped\n"
                            "### b\n[doctest] test cases:   3 |   2 passed | 1 failed | 0 skipped\n")
            self.assertEqual(run_folder.test_summary(path),
                             "2 doctest runs: 15 test cases, 14 passed, 1 failed, 0 skipped")
            path.write_text("Ok:                 20\nFail:               0\n")
            self.assertEqual(run_folder.test_summary(path), "Ok 20, Fail 0")
            path.write_text(" 1/3 gpu - s:a   OK   6.55s\n 2/3 gpu - s:b   SKIP   5.19s   exit status 77\n"
                            " 3/3 gpu - s:c   OK   7.00s\n")
            self.assertEqual(run_folder.test_summary(path), "tests OK 2, SKIP 1")
            path.write_text("nothing here\n")
            self.assertIsNone(run_folder.test_summary(path))
            # The GEMM choices a sitting made: one per key, the later line of a key winning.
            choices = Path(d) / "cutlass_gemm.tsv"
            key = "NVIDIA H200/132\t197\t768\t768\tnone+cublaslt\t1\t"
            choices.write_text(key + "128x128x64_c1x1_coop\t0\t1\t9.5\tabcd0123\n"
                               + key + "cublaslt\t0\t1\t7.2\tabcd0123\n"
                               + key.replace("\t1\t", "\t0\t", 1).replace("197", "6304") + "192x128x64_c1x2_pingpong\t1\t1\t35.7\tabcd0123\n"
                               + "not a line\n")
            self.assertEqual(run_folder.gemm_choices_summary(choices),
                             "2 shapes searched in this sitting (1 on CUTLASS kernels, 1 on cuBLASLt)")
            choices.write_text("nothing\n")
            self.assertIsNone(run_folder.gemm_choices_summary(choices))


if __name__ == "__main__":
    unittest.main()
