"""Synthetic run folders in the study CSV schema, for the analysis tests and for developing a
notebook before a GPU run exists. Never write these under experiments/results/: the GPU name
says "(synthetic)" so a figure made from them can not pass for a measurement.

The numbers follow a simple model with realistic H100 magnitudes: time = fixed cost + bytes /
(efficiency x copy bandwidth), with efficiency per version (v1 about 40% of copy, v5 about 85%)
and eager PyTorch bounded below by its host launch cost.

    /usr/bin/python3 analysis/synthetic.py /tmp/synthetic/run1   # writes three CSVs there
"""
from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from study_data import COLUMNS  # noqa: E402

HIDDEN = 768
TOKENS = {224: 197, 384: 577, 512: 1025}
# (image size, batch) pairs; rows = batch * tokens. Batch 32/256 at 224 are the 6304/50432
# rows of TARGETS.md.
CONFIGS = [(224, b) for b in (1, 8, 32, 64, 128, 256)] + [(384, 1), (384, 32),
                                                         (512, 1), (512, 32), (512, 256)]
SMALL_CONFIGS = [(224, 1), (224, 32), (224, 256), (512, 1), (512, 256)]  # with the status rows

# Fraction of the copy bandwidth each version sustains on large problems, and its fixed cost
# per call in microseconds (launch and tail). Eager PyTorch instead has a floor: the host-side
# dispatch (about 22 us) that small problems cannot hide and large ones overlap.
MODEL = {
    "v1_shared": (0.40, 2.5), "v2_cub": (0.46, 2.5), "v3_seq_tiling": (0.55, 2.6),
    "v4_vectorized": (0.78, 2.2), "v5_unrolled": (0.85, 2.0), "cudnn": (0.62, 3.5),
    "pytorch_layer_norm_graph": (0.37, 3.0), "pytorch_layer_norm": (0.37, 3.0),
}
EAGER_FLOOR_US = {"pytorch_layer_norm": 22.0}
COPY_GBPS = 3000.0
GEMM_TFLOPS = 720.0


def layernorm_bytes(rows: int, hidden: int = HIDDEN) -> float:
    """Same count as stages/layernorm: read x, write y (fp16), gamma and beta once."""
    return 2.0 * rows * hidden * 2 + 2.0 * hidden * 2


def _base(run_id, commit, gpu, utc):
    return {"run_id": run_id, "utc": utc, "commit": commit, "gpu": gpu, "sm_count": 132,
            "driver": "580.95.05", "cuda": "13.0", "cudnn": "9.14.0", "cublas": "13.0.0",
            "host": "synthetic-host", "model": "vit_b", "streams": 1, "warmup": 5,
            "iters": 10, "flush_l2": 0}


def _timing(median, rng):
    spread = median * 0.02
    return {"mean_us": median * (1 + rng.uniform(0, 0.01)), "std_us": spread,
            "median_us": median, "min_us": median * 0.98, "max_us": median * 1.06}


def write_run(folder, *, run_id="synthetic-run-1", commit="0123456789abcdef0123456789abcdef01234567",
              gpu="NVIDIA H100 80GB HBM3 (synthetic)", utc="2025-11-21T12:00:00Z",
              configs=CONFIGS, model=MODEL, copy_gbps=COPY_GBPS, seed=1,
              with_status_rows=True) -> Path:
    """Write layernorm.csv, anchors.csv and ceilings.csv into `folder` and return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    base = _base(run_id, commit, gpu, utc)
    ours, anchors = [], []
    for image, batch in configs:
        tokens = TOKENS[image]
        rows = batch * tokens
        nbytes = layernorm_bytes(rows)
        for version, (eff, fixed) in model.items():
            r = dict(base, family="layernorm", version=version, batch=batch, image_size=image,
                     tokens=tokens, hidden=HIDDEN, launches=1, host_syncs=0,
                     device_bytes=int(nbytes), host_bytes=0, status="ok", note="")
            if with_status_rows and version == "cudnn" and rows > 200000:
                r.update(status="skipped", note="cuDNN layernorm: no engine for rows > 2^17")
            elif with_status_rows and version == "v2_cub" and rows == 1025:
                r.update(status="failed", max_abs_err=0.06, rel_l2_err=0.012,
                         note="rel_l2_err 1.2e-02 > tolerance 5e-03")
            else:
                median = fixed + nbytes / (eff * copy_gbps * 1e9) * 1e6
                median = max(median, EAGER_FLOOR_US.get(version, 0.0))
                median *= 1 + rng.uniform(-0.01, 0.01)
                r.update(_timing(median, rng), gbps=nbytes / (median * 1e-6) / 1e9,
                         tflops=8.0 * rows * HIDDEN / (median * 1e-6) / 1e12,
                         max_abs_err=0.0039, rel_l2_err=4.1e-4)
            (anchors if version.startswith("pytorch_") else ours).append(r)
    copy_bytes = 2.0 * (1 << 30)
    ceilings = [
        dict(base, family="ceilings", version="copy", batch=0, status="ok",
             gbps=copy_gbps, **_timing(copy_bytes / (copy_gbps * 1e9) * 1e6, rng),
             note="cudaMemcpyAsync device to device, 1 GiB, bytes read + written"),
        dict(base, family="ceilings", version="gemm_fp16", batch=0, status="ok",
             tflops=GEMM_TFLOPS, **_timing(2 * 8192**3 / (GEMM_TFLOPS * 1e12) * 1e6, rng),
             note="cublasLt fp16 GEMM 8192^3, fp32 accumulate"),
    ]
    for name, rows_ in (("layernorm.csv", ours), ("anchors.csv", anchors),
                        ("ceilings.csv", ceilings)):
        with open(folder / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, restval="")
            w.writeheader()
            for r in rows_:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: synthetic.py OUTPUT_RUN_FOLDER")
    print(write_run(sys.argv[1]))
