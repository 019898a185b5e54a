"""The start the module's GPU tests share (test_gpu.py, test_readme.py): torch, timm and a CUDA
device the module sees, else exit 77 (skipped), unless STUDY_REQUIRE_GPU=1 turns any of them
missing into a failure. A plain file beside the tests, not part of the package, so that the
wheel's check can copy it beside them."""
import os
import sys


def torch_timm_vitstudy():
    """(torch, timm, vitstudy), or the process exits."""
    required = os.environ.get("STUDY_REQUIRE_GPU") == "1"
    try:
        import timm
        import torch
    except ImportError as e:  # pragma: no cover - the CPU machines
        if required:
            raise
        print(f"SKIP: {e}")
        sys.exit(77)
    import vitstudy
    if not torch.cuda.is_available() or vitstudy.gpu_count() == 0:
        if required:
            sys.exit("FAIL: STUDY_REQUIRE_GPU=1 but no CUDA device")
        print("SKIP: no CUDA device")
        sys.exit(77)
    return torch, timm, vitstudy
