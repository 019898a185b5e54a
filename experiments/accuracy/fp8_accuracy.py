#!/usr/bin/env python3
"""Accuracy of the FP8 forward against timm fp32, on the same weights and images, where FP8 is
easy and where it is hard.

    STUDY_PYTHON=/path/to/python-with-torch-and-timm \\
    $STUDY_PYTHON experiments/accuracy/fp8_accuracy.py --model vit_b --images 256 --build-dir build \\
        --out experiments/results/<run>/fp8_accuracy

Three weight sets of timm's vit_*_patch16 (no pretrained download on this machine):
  timm_init   timm's own seeded init (small weights, near-uniform attention);
  randomized  every parameter redrawn (reference/export_timm_fixture.py's randomize: O(1)
              activations, peaked attention, GELU over its whole curve);
  outliers    timm_init plus what trained ViTs are known for: a few LayerNorm gamma channels
              20-50x larger than the rest, and a few residual-stream channels of large magnitude
              (cls token and position embedding offset there), so one per-tensor scale must
              cover values 1-2 orders of magnitude above the typical one.
For each, N(0, 1) images (rounded to fp16) are run through timm in fp32 and fp16 (GPU), through
the encoder benches of the fp16 step and the FP8 step (--weights, --images,
--calibration-images: 32 other images, --logits-out), and through the PyTorch user's FP8 (torchao's
Float8DynamicActivationFloat8WeightConfig, per tensor on the fp16 model and per row on a bf16 one,
eager) where torchao imports (or installs from .deps/wheels/). Each forward is compared with timm fp32:
logits rel L2 and top-1 agreement over all images. Writes accuracy.csv (one row per weight set x
forward; also the agreement over "decisive" images, whose margin exceeds 4x that forward's RMS
logit error on them), accuracy.json and accuracy.txt into --out. Exit 0 when the FP8 step agrees with timm
fp32 on >= 99% of the images for timm_init and randomized (outliers are reported, not judged),
1 when not, 2 on bad use.
"""
import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

from studylib.paths import REPO

AGREEMENT_MIN = 0.99
DECISIVE = 4.0
JUDGED = ("timm_init", "randomized")
WEIGHT_SETS = ("timm_init", "randomized", "outliers")
CALIBRATION_IMAGES = 32
# outliers: which channels, and how large (the ranges seen in trained ViTs' LayerNorms and
# residual streams); fixed so that every run builds the same weights.
GAMMA_CHANNELS = {7: 20.0, 101: 35.0, 300: 50.0}
STREAM_CHANNELS = {42: 25.0, 500: 40.0}


def add_outliers(model):
    import torch
    with torch.no_grad():
        d = model.cls_token.shape[-1]
        for name, p in model.named_parameters():
            if name.endswith(("norm1.weight", "norm2.weight")):
                for c, f in GAMMA_CHANNELS.items():
                    p[c % d] *= f
        for c, v in STREAM_CHANNELS.items():
            model.cls_token[..., c % d] += v
            model.pos_embed[..., c % d] += v


def build_weights(kind, model_name, image_size, seed):
    import torch
    from reference import export_timm_fixture as fx
    model = fx.timm_vit(model_name, image_size, seed)
    if kind == "randomized":
        fx.randomize(model, torch.Generator().manual_seed(seed + 7))
    elif kind == "outliers":
        add_outliers(model)
    return model


def make_images(count, image_size, seed):
    """The compared N(0, 1) images (rounded to fp16) and, drawn after them from the same
    generator, CALIBRATION_IMAGES other ones for the FP8 step's static scales."""
    import torch
    gen = torch.Generator().manual_seed(seed + 1)
    shape = (3, image_size, image_size)
    images = torch.randn(count, *shape, generator=gen).half().float()
    calibration = torch.randn(CALIBRATION_IMAGES, *shape, generator=gen).half().float()
    return images, calibration


def metrics(logits, ref):
    """rel L2 and top-1 agreement over all images, and the agreement over the images whose
    top-1/top-2 margin (in the reference) exceeds DECISIVE x the forward's own RMS logit error
    on that image: with independent errors of that RMS on each logit, such an image flips with
    probability < 0.2%, so a disagreement there is a fault, not rounding."""
    diff = logits.double() - ref.double()
    err = diff.pow(2).mean(1).sqrt()
    top2 = ref.double().topk(2, dim=1).values
    decisive = (top2[:, 0] - top2[:, 1]) > DECISIVE * err
    agree = logits.argmax(1) == ref.argmax(1)
    return {"logits_rel_l2": (diff.norm() / ref.double().norm()).item(),
            "max_abs_logit_difference": diff.abs().max().item(),
            "top1_agreement": float(agree.float().mean()),
            "decisive_images": int(decisive.sum()),
            "top1_agreement_decisive": float(agree[decisive].float().mean()) if int(decisive.sum()) else float("nan")}


def run_bench(bench, args, weights, images, calibration, logits_path, csv_path):
    cmd = [str(bench), "--model", args.model, "--image-size", str(args.image_size), "--batch", str(args.images),
           "--weights", str(weights), "--images", str(images), "--calibration-images", str(calibration),
           "--logits-out", str(logits_path), "--no-check", "--warmup", "1", "--iters", "3", "--csv", str(csv_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not logits_path.is_file():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {last}")
    from safetensors.torch import load_file
    return load_file(str(logits_path))["logits"].float(), " ".join(cmd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="vit_b", choices=["vit_ti", "vit_s", "vit_b", "vit_l"])
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--images", type=int, default=256, help="images per weight set (>= 256 for the verdict)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fp16-version", default="e6_best", help="the fp16 encoder step compared beside FP8")
    ap.add_argument("--fp8-version", default="e12_fp8")
    ap.add_argument("--weight-sets", default=",".join(WEIGHT_SETS), help="comma-separated subset of "
                    + ", ".join(WEIGHT_SETS))
    ap.add_argument("--build-dir", type=Path, default=REPO / "build")
    ap.add_argument("--out", type=Path, required=True, help="folder for accuracy.csv / .json / .txt")
    args = ap.parse_args(argv)
    sets = [s for s in args.weight_sets.split(",") if s]
    bad = [s for s in sets if s not in WEIGHT_SETS]
    if args.image_size <= 0 or args.image_size % 16 or args.images <= 0 or bad or not sets:
        print("fp8_accuracy.py: error: image size must be a positive multiple of 16, images positive and weight "
              f"sets among {', '.join(WEIGHT_SETS)}" + (f" (unknown: {', '.join(bad)})" if bad else ""),
              file=sys.stderr)
        return 2
    benches = {v: args.build_dir / "stages" / "encoder" / f"encoder_{v}" for v in (args.fp16_version, args.fp8_version)}
    for v, b in benches.items():
        if not b.is_file():
            print(f"fp8_accuracy.py: error: {b} not built (ninja -C {args.build_dir})", file=sys.stderr)
            return 2

    import torch
    from reference import export_timm_fixture as fx
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    dev = torch.device("cuda")
    images, calibration = make_images(args.images, args.image_size, args.seed)
    images_path, calibration_path = work / "images.safetensors", work / "calibration.safetensors"
    fx.save_safetensors({"images": images}, images_path, {})
    fx.save_safetensors({"images": calibration}, calibration_path, {})

    from experiments.anchors import harness  # the anchors' torchao import (the wheel of .deps/wheels/ on an offline node)
    torchao, torchao_why = harness.import_torchao()
    rows, commands = [], []
    for kind in sets:
        print(f"fp8_accuracy.py: {kind}: timm fp32 and fp16, then {', '.join(benches)}", flush=True)
        model = build_weights(kind, args.model, args.image_size, args.seed)
        weights = work / f"{kind}.safetensors"
        fx.save_safetensors(model.state_dict(), weights, {"model": fx.TIMM_NAMES[args.model], "weights": kind})
        with torch.inference_mode():
            model = model.to(dev)
            fp32 = torch.cat([model(c.to(dev)).float().cpu() for c in images.split(32)])
            half = model.half()
            fp16 = torch.cat([half(c.to(dev).half()).float().cpu() for c in images.split(32)])
        del model, half
        forwards = {"timm fp16": ("fp16", fp16)}
        for v, bench in benches.items():
            logits, cmd = run_bench(bench, args, weights, images_path, calibration_path, work / f"{kind}_{v}.safetensors",
                                    args.out / "accuracy_rows.csv")
            commands.append(cmd)
            precision = "fp8_e4m3" if v == args.fp8_version else "fp16"
            forwards[f"encoder {v}"] = (precision, logits)
        if torchao is not None:  # the PyTorch user's FP8 on the same weights and images (eager)
            from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor, quantize_
            for name, granularity, dtype in (("torchao per tensor", PerTensor(), torch.float16),
                                             ("torchao per row (bf16)", PerRow(), torch.bfloat16)):
                q = build_weights(kind, args.model, args.image_size, args.seed).to(dev).to(dtype)
                quantize_(q, Float8DynamicActivationFloat8WeightConfig(granularity=granularity))
                with torch.inference_mode():
                    forwards[name] = ("fp8_e4m3", torch.cat([q(c.to(dev).to(dtype)).float().cpu()
                                                             for c in images.split(32)]))
                del q
        for name, (precision, logits) in forwards.items():
            m = metrics(logits, fp32)
            finite = bool(torch.isfinite(logits).all())
            rows.append({"weights": kind, "forward": name, "precision": precision, "images": args.images,
                         "finite": finite, **m})
            print(f"  {name:24s} rel L2 {m['logits_rel_l2']:.3e}  top-1 agreement {m['top1_agreement']:.2%}, "
                  f"{m['top1_agreement_decisive']:.2%} over {m['decisive_images']} decisive images"
                  + ("" if finite else "  NON-FINITE LOGITS"), flush=True)

    fp8_name = f"encoder {args.fp8_version}"
    verdicts = {r["weights"]: r["top1_agreement"] >= AGREEMENT_MIN and r["finite"]
                for r in rows if r["forward"] == fp8_name and r["weights"] in JUDGED}
    ok = args.images >= 256 and bool(verdicts) and all(verdicts.values())
    with open(args.out / "accuracy.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    import timm
    result = {"model": fx.TIMM_NAMES[args.model], "image_size": args.image_size, "images": args.images,
              "calibration_images": CALIBRATION_IMAGES, "seed": args.seed, "timm": timm.__version__,
              "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "reference": "timm fp32",
              "rows": rows, "criteria": {"agreement_min": AGREEMENT_MIN, "judged": list(JUDGED), "images_min": 256,
                                         "decisive_margin_over_rms_error": DECISIVE},
              "outliers": {"gamma_channels": GAMMA_CHANNELS, "stream_channels": STREAM_CHANNELS},
              "torchao": torchao.__version__ if torchao is not None else f"not run: {torchao_why}",
              "passed": ok, "commands": commands}
    (args.out / "accuracy.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"{result['model']} {args.image_size} px, {args.images} N(0,1) images per weight set, against timm "
             f"{result['timm']} fp32 on {result['gpu']}; FP8 calibrated on {CALIBRATION_IMAGES} other images."]
    for r in rows:
        lines.append(f"{r['weights']:11s} {r['forward']:24s} {r['precision']:9s} rel L2 {r['logits_rel_l2']:.3e} "
                     f"top-1 agreement {r['top1_agreement']:.2%} ({r['top1_agreement_decisive']:.2%} over "
                     f"{r['decisive_images']} images with a margin > {DECISIVE:g}x its RMS error)")
    if torchao is None:
        lines.append(f"torchao not run: {torchao_why}")
    lines.append(f"FP8 agreement >= {AGREEMENT_MIN:.0%} on {', '.join(JUDGED)}: {'PASSED' if ok else 'FAILED'}")
    (args.out / "accuracy.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for f in work.iterdir():  # hundreds of MB of inputs: not for the results folder
        f.unlink()
    work.rmdir()
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"fp8_accuracy.py: error: {e}", file=sys.stderr)
        sys.exit(1)
