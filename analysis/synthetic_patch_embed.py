"""Synthetic patch-embedding run folders (every version, the stream sweep and its per-launch
timeline) in the study CSV schema; analysis/synthetic.py says what synthetic runs are for.
"""
from __future__ import annotations

import csv
import random
from pathlib import Path

from analysis.synthetic import COPY_GBPS, GEMM_TFLOPS, base_fields, ceiling_rows, timing
from studylib.schema import COLUMNS

# ---- patch embedding ---------------------------------------------------------------------------
# Conv 3 -> hidden, kernel = stride = 16, as a GEMM [B*P, 768] x [768, hidden]. The launch-bound
# versions (v1-v3) cost a fixed time per launch: v1 and v2 a launch plus a host sync each; v3
# is bound by the host issuing launches (PE_ISSUE_US) or by the kernels themselves spread over
# the streams (PE_KERNEL_US / streams), so more streams stop helping near kernel / issue = 7.5;
# v3_streams_graph issues from the device (PE_GRAPH_ISSUE_US), so its knee lies near 15.
# The GEMM versions: fixed cost + flops at a share of the GEMM ceiling + bytes at a share of
# the copy bandwidth. The anchors follow measured H200 magnitudes (F.conv2d about 123 / 358 /
# 2143 us at batch 1 / 32 / 256, 224 px). Small sizes on vit_ti (hidden 192) for v1-v3.
PE_PATCH, PE_CHANNELS = 16, 3
PE_SMALL_IMAGES, PE_SMALL_BATCHES = (16, 32, 48, 64), (1, 2, 4, 8)
PE_IMAGES, PE_BATCHES = (224, 384, 512), (1, 2, 4, 8, 16, 32, 64, 128, 256)
PE_STREAMS = (1, 2, 4, 8, 16, 32, 132)        # 132: one stream per SM of the synthetic GPU
PE_SM_COUNT = 132
PE_LAUNCH_BUDGET = 1_000_000                  # v1-v3 above it: skipped, as the bench does
PE_CPU_MAX_BATCH = 8                          # cpu_baseline beyond it: skipped (seconds per call)
PE_V1_US, PE_V2_US = 9.0, 7.0                 # per launch, host sync included
PE_ISSUE_US, PE_KERNEL_US, PE_GRAPH_ISSUE_US = 1.6, 12.0, 0.8
PE_CPU_GFLOPS = 1.5
PE_PCIE_GBPS = 25.0
# version: (fixed us, share of the GEMM ceiling, share of the copy bandwidth, launches)
PE_GEMM_MODEL = {"v4_one_copy": (8.0, 0.028, 0.30, 3), "v5_im2col_gemm": (10.0, 0.55, 0.70, 3),
                 "v6_implicit_gemm": (5.0, 0.60, 0.80, 1), "cudnn": (12.0, 0.45, 0.60, 2)}
# anchor: (fixed us, us per image of 196 patches)
PE_ANCHOR_MODEL = {"pytorch_conv2d": (115.0, 7.9), "pytorch_patchify_linear": (38.0, 0.78)}
PE_TIMELINE_COLUMNS = ["version", "batch", "image_size", "hidden", "streams", "stream", "launch",
                       "start_us", "end_us"]
PE_TIMELINE = {"v3_streams": (1, 8, 32), "v3_streams_graph": (1, 32)}   # at 32 px, batch 1


def pe_shape(image, batch, hidden):
    """(patches, tokens, flops, bytes): bytes = images + weights + token rows (1 + P, fp16)."""
    patches = (image // PE_PATCH) ** 2
    k = PE_CHANNELS * PE_PATCH * PE_PATCH
    flops = 2.0 * batch * patches * hidden * k
    nbytes = 2.0 * (batch * PE_CHANNELS * image * image + (k + 1 + patches + 1) * hidden
                    + batch * (patches + 1) * hidden)
    return patches, patches + 1, flops, nbytes


def pe_launches(version, image, batch, hidden):
    patches = (image // PE_PATCH) ** 2
    if version == "v1_single_channel":
        return batch * hidden * patches * PE_CHANNELS * PE_PATCH
    if version in ("v2_unified_channel", "v3_streams", "v3_streams_graph"):
        return batch * hidden * patches
    if version in PE_GEMM_MODEL:
        return PE_GEMM_MODEL[version][3]
    return 0


def pe_median_us(version, image, batch, hidden, streams=1, gemm_model=PE_GEMM_MODEL,
                 anchor_model=PE_ANCHOR_MODEL):
    patches, _, flops, nbytes = pe_shape(image, batch, hidden)
    n = pe_launches(version, image, batch, hidden)
    if version == "cpu_baseline":
        return flops / (PE_CPU_GFLOPS * 1e9) * 1e6
    if version == "v1_single_channel":
        return n * PE_V1_US
    if version == "v2_unified_channel":
        return n * PE_V2_US
    if version in ("v3_streams", "v3_streams_graph"):
        issue = PE_ISSUE_US if version == "v3_streams" else PE_GRAPH_ISSUE_US
        # a few per cent lost to stream scheduling with one stream per SM
        return n * max(issue, PE_KERNEL_US / streams) * (1.03 if streams > 32 else 1.0)
    if version in gemm_model:
        fixed, gemm_share, copy_share, _ = gemm_model[version]
        return (fixed + flops / (gemm_share * GEMM_TFLOPS * 1e12) * 1e6
                + nbytes / (copy_share * COPY_GBPS * 1e9) * 1e6)
    fixed, per_image = anchor_model[version]
    return fixed + per_image * batch * patches / 196


def pe_timeline(version, image, batch, hidden, streams):
    """Per-launch start/end of a v3 run: launch i goes to stream i % streams, is issued at
    i x issue cost, and starts when issued and when its stream's previous launch has ended."""
    n = pe_launches(version, image, batch, hidden)
    issue = PE_ISSUE_US if version == "v3_streams" else PE_GRAPH_ISSUE_US
    free = [0.0] * streams
    out = []
    for i in range(n):
        s = i % streams
        start = max(i * issue, free[s])
        free[s] = start + PE_KERNEL_US
        out.append({"version": version, "batch": batch, "image_size": image, "hidden": hidden,
                    "streams": streams, "stream": s, "launch": i, "start_us": round(start, 3),
                    "end_us": round(free[s], 3)})
    return out


def write_patch_embed_run(folder, *, run_id="synthetic-pe-run", commit="00112233445566778899aabbccddeeff00112233",
                          gpu="NVIDIA H200 (synthetic)", utc="2025-11-23T12:00:00Z",
                          gemm_model=PE_GEMM_MODEL, anchor_model=PE_ANCHOR_MODEL,
                          images=PE_IMAGES, batches=PE_BATCHES, small=True, anchors=True,
                          timeline=True, with_status_rows=True, appended_columns=True,
                          seed=5) -> Path:
    """A patch-embedding run as the family's sweeps write it: patch_embed.csv (cpu_baseline,
    v4 onward and cudnn on vit_b at `images` x `batches`; with `small`, cpu_baseline and v1-v3
    on vit_ti at 16-64 px and batch 1-8, v3 at every stream count), patch_embed_anchors.csv,
    patch_embed_timeline.csv (v3 at 32 px, batch 1, vit_ti) and ceilings.csv.
    appended_columns=False writes the schema before rows/h2d_us/preprocess_us/d2h_us."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    base = dict(base_fields(run_id, commit, gpu, utc), flush_l2=1, sm_count=PE_SM_COUNT)
    columns = COLUMNS if appended_columns else COLUMNS[:COLUMNS.index("note") + 1]

    def row(version, model, hidden, image, batch, streams=1):
        patches, tokens, flops, nbytes = pe_shape(image, batch, hidden)
        n = pe_launches(version, image, batch, hidden)
        img_bytes = 2 * batch * PE_CHANNELS * image * image
        out_bytes = 2 * batch * tokens * hidden
        r = dict(base, family="patch_embed", version=version, model=model, batch=batch,
                 image_size=image, tokens=tokens, hidden=hidden, streams=streams,
                 rows=batch * (patches if version.startswith("pytorch_") else tokens),
                 launches=n, host_syncs=0, host_bytes=0, device_bytes=int(nbytes))
        if version == "cpu_baseline":
            r.update(device_bytes=0, host_bytes=int(2 * nbytes), launches="")
            if batch > PE_CPU_MAX_BATCH and with_status_rows:
                sec = pe_median_us(version, image, batch, hidden) / 1e6
                return dict(r, status="skipped", note=f"estimated {sec:.1f} s per call is above "
                                                      f"the time budget (--force to run)")
        if version in ("v1_single_channel", "v2_unified_channel", "v3_streams",
                       "v3_streams_graph") and n > PE_LAUNCH_BUDGET:
            return dict(r, status="skipped", note=f"estimated {n} launches exceed the work "
                                                  f"budget of {PE_LAUNCH_BUDGET} (--force to run)")
        if with_status_rows and (version, image, batch) == ("v6_implicit_gemm", 512, 256):
            return dict(r, status="failed", max_abs_err=0.9, rel_l2_err=0.011,
                        note="reference check failed: rel_l2=0.011 max_abs=0.9 nonfinite=0")
        median = pe_median_us(version, image, batch, hidden, streams, gemm_model, anchor_model)
        median *= 1 + rng.uniform(-0.01, 0.01)
        r.update(timing(median, rng), gbps=nbytes / (median * 1e-6) / 1e9,
                 tflops=flops / (median * 1e-6) / 1e12, max_abs_err=0.0039, rel_l2_err=4.1e-4,
                 status="ok", note="checked; cuda events per call")
        if version in ("v1_single_channel", "v2_unified_channel"):
            r["host_syncs"] = n
        elif version in ("v3_streams", "v3_streams_graph", "v4_one_copy"):
            r["host_syncs"] = 1
        if version == "v4_one_copy":
            r["device_bytes"] = int(nbytes + img_bytes)   # the batch held twice on the device
        if version in ("v1_single_channel", "v2_unified_channel", "v3_streams",
                       "v3_streams_graph", "v4_one_copy"):
            h2d = 10.0 + img_bytes / (PE_PCIE_GBPS * 1e3)
            d2h = 10.0 + out_bytes / (PE_PCIE_GBPS * 1e3)
            pre = 0.0 if version == "v1_single_channel" else 5.0 + img_bytes / 5e5
            r.update(h2d_us=h2d, d2h_us=d2h, preprocess_us=pre,
                     routine_us=h2d + pre + median + d2h + 4.0,
                     host_bytes=int(img_bytes + out_bytes),
                     note="timed as a routine (host-driven, not capturable); checked")
        if version.startswith("pytorch_"):
            mode = "eager" if batch >= 32 else "cuda-graph replay"
            other = median * 1.2
            e, g = (median, other) if mode == "eager" else (other, median)
            r.update(host_bytes=0, note=f"{'F.conv2d' if 'conv' in version else 'patchify'}; "
                                        f"checked; timed: {mode} (the faster; medians eager "
                                        f"{e:.6g} us, cuda-graph replay {g:.6g} us)")
        return r

    ours, anc = pe_rows(row, small, images, batches, gemm_model, anchor_model if anchors else ())
    write_pe_csv(folder / "patch_embed.csv", ours, columns)
    if anc:
        write_pe_csv(folder / "patch_embed_anchors.csv", anc, columns)
    write_pe_csv(folder / "ceilings.csv", ceiling_rows(base, rng), columns)
    if timeline and small:
        write_pe_timeline(folder / "patch_embed_timeline.csv")
    return folder


def write_pe_timeline(path):
    """patch_embed_timeline.csv: v3's per-stream timeline at 32 px, batch 1, vit_ti."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=PE_TIMELINE_COLUMNS)
        w.writeheader()
        for v, counts in PE_TIMELINE.items():
            for st in counts:
                w.writerows(pe_timeline(v, 32, 1, 192, st))


def pe_rows(row, small, images, batches, gemm_model, anchor_model):
    """(our rows, the anchors' rows) of write_patch_embed_run (row: its row maker): with `small`,
    vit_ti at the small sizes (v3 at every stream count); vit_b at `images` x `batches`."""
    ours, anc = [], []
    if small:
        for image in PE_SMALL_IMAGES:
            for batch in PE_SMALL_BATCHES:
                for v in ("cpu_baseline", "v1_single_channel", "v2_unified_channel"):
                    ours.append(row(v, "vit_ti", 192, image, batch))
                for v in ("v3_streams", "v3_streams_graph"):
                    for st in PE_STREAMS:
                        ours.append(row(v, "vit_ti", 192, image, batch, st))
    for image in images:
        for batch in batches:
            for v in ("cpu_baseline", *gemm_model):
                ours.append(row(v, "vit_b", 768, image, batch))
            for v in anchor_model:
                anc.append(row(v, "vit_b", 768, image, batch))
    return ours, anc


def write_pe_csv(path, rows, columns):
    """rows as the family's CSVs write them (floats to 6 significant digits)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, restval="", extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
