"""report/build.py's own helpers, without a build: the ceilings sentences of the Method section."""
import unittest

from report.build import ceilings_sentences


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


if __name__ == "__main__":
    unittest.main()
