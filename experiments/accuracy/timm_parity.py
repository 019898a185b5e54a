#!/usr/bin/env python3
"""Parity of the study's whole-ViT forward with timm's, on the same weights and images.

    STUDY_PYTHON=/path/to/python-with-torch-and-timm \\
    $STUDY_PYTHON experiments/accuracy/timm_parity.py --model vit_b --image-size 224 --images 256 \\
        --version e6_best --build-dir build --out experiments/results/<run>/timm_parity

It exports timm's vit_*_patch16 (reference/export_timm_fixture.py --model) with one of two weight
sets: `timm`, timm's own seeded init (zero biases, unit LayerNorm gains, nearly uniform attention,
which hide bias, gain/shift and most attention bugs), or `random` (the default), where every
parameter is drawn (reference/export_timm_fixture.py's randomize: LayerNorm gains and shifts,
every bias, cls and position embeddings, the head; weights of 1/sqrt(fan-in), so activations are
O(1), attention is peaked and GELU works over its whole curve). It draws N(0, 1) images (rounded
to fp16, so both sides see the same input), runs timm in fp32 and fp16 and the encoder bench with
--weights/--images/--logits-out, and passes when
  - logits rel L2, ours vs timm fp16, <= 1e-2;
  - with `random` weights, ours vs timm fp32 <= 1.5x timm's own fp16 vs fp32 (the study's fp16
    forward is as close to the exact one as timm's fp16 forward is);
  - top-1 agreement >= 99% over the images whose top-1/top-2 margin (in timm's fp32 logits)
    exceeds 10x the max-abs logit difference (images with a smaller margin could flip on
    rounding alone, so they are counted apart).
Writes parity.json and parity.txt into --out; exit 0 when all hold, 1 when not, 2 on bad use.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

from studylib.paths import REPO

REL_L2_MAX = 1e-2
AGREEMENT_MIN = 0.99
MARGIN_FACTOR = 10.0
FP32_RATIO_MAX = 1.5  # ours vs fp32, over timm fp16 vs fp32 (random weights)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="vit_b", choices=["vit_ti", "vit_s", "vit_b", "vit_l"])
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--images", type=int, default=256, help="number of images (>= 256 for the verdict)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--version", default="e6_best", help="encoder step whose bench runs the forward")
    ap.add_argument("--compose", default="",
                    help="fields applied on top of the step (the bench's --compose), e.g. \"mlp=cutlass_epilogue_erf\"")
    ap.add_argument("--build-dir", type=Path, default=REPO / "build")
    ap.add_argument("--out", type=Path, required=True, help="folder for parity.json / parity.txt")
    ap.add_argument("--weight-set", choices=["random", "timm"], default="random",
                    help="random: every parameter drawn (default); timm: timm's own init")
    ap.add_argument("--device", default="cuda", help="where timm runs (cuda; cpu for the unit test)")
    args = ap.parse_args(argv)
    if args.image_size <= 0 or args.image_size % 16 or args.images <= 0:
        print("timm_parity.py: error: image size must be a positive multiple of 16 and images positive",
              file=sys.stderr)
        return 2
    bench = args.build_dir / "stages" / "encoder" / f"encoder_{args.version}"
    if not bench.is_file():
        print(f"timm_parity.py: error: {bench} not built (ninja -C {args.build_dir})", file=sys.stderr)
        return 2

    import torch
    from reference import export_timm_fixture as fx
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    model = fx.timm_vit(args.model, args.image_size, args.seed)
    if args.weight_set == "random":  # the same draw as fp8_accuracy.py's "randomized" weight set
        fx.randomize(model, torch.Generator().manual_seed(args.seed + 7))
    weights = work / "weights.safetensors"
    fx.save_safetensors(model.state_dict(), weights, {"model": fx.TIMM_NAMES[args.model]})

    gen = torch.Generator().manual_seed(args.seed + 1)
    images = torch.randn(args.images, 3, args.image_size, args.image_size, generator=gen).half().float()
    images_path = work / "images.safetensors"
    fx.save_safetensors({"images": images}, images_path, {})

    dev = torch.device(args.device)
    with torch.inference_mode():
        fp32 = torch.cat([model.to(dev)(c.to(dev)).float().cpu() for c in images.split(32)])
        half = model.half()
        fp16 = torch.cat([half(c.to(dev).half()).float().cpu() for c in images.split(32)])

    logits_path = work / "ours.safetensors"
    cmd = [str(bench), "--model", args.model, "--image-size", str(args.image_size), "--batch", str(args.images),
           "--weights", str(weights), "--images", str(images_path), "--logits-out", str(logits_path),
           "--warmup", "1", "--iters", "3", "--csv", str(args.out / "parity_rows.csv")]
    if args.compose:
        cmd += ["--compose", args.compose]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not logits_path.is_file():
        print(f"timm_parity.py: error: {' '.join(cmd)} exited {proc.returncode}: "
              f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}", file=sys.stderr)
        return 1
    from safetensors.torch import load_file
    ours = load_file(str(logits_path))["logits"].float()

    diff = (ours.double() - fp16.double())
    rel = (diff.norm() / fp16.double().norm()).item()
    max_abs = diff.abs().max().item()
    top2 = fp32.topk(2, dim=1).values
    margin = top2[:, 0] - top2[:, 1]
    decisive = margin > MARGIN_FACTOR * max_abs
    agree = (ours.argmax(1) == fp16.argmax(1))
    n_decisive = int(decisive.sum())
    agreement = float(agree[decisive].float().mean()) if n_decisive else float("nan")
    timm_fp16_vs_fp32 = ((fp16.double() - fp32.double()).norm() / fp32.double().norm()).item()
    ours_vs_fp32 = ((ours.double() - fp32.double()).norm() / fp32.double().norm()).item()
    ratio = ours_vs_fp32 / timm_fp16_vs_fp32 if timm_fp16_vs_fp32 > 0 else float("inf")
    close_to_fp32 = args.weight_set != "random" or ratio <= FP32_RATIO_MAX
    ok = (rel <= REL_L2_MAX and close_to_fp32 and n_decisive > 0 and agreement >= AGREEMENT_MIN
          and args.images >= 256)
    result = {
        "model": fx.TIMM_NAMES[args.model], "image_size": args.image_size, "images": args.images,
        "seed": args.seed, "version": args.version, "compose": args.compose, "timm": fx.timm.__version__, "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else str(dev), "logits_rel_l2_vs_timm_fp16": rel,
        "weight_set": args.weight_set, "max_abs_logit_difference": max_abs,
        "timm_fp16_vs_fp32_rel_l2": timm_fp16_vs_fp32, "logits_rel_l2_vs_timm_fp32": ours_vs_fp32,
        "fp32_ratio_to_timm_fp16": ratio,
        "decisive_images": n_decisive, "top1_agreement_decisive": agreement,
        "top1_agreement_all": float(agree.float().mean()),
        "criteria": {"rel_l2_max": REL_L2_MAX, "agreement_min": AGREEMENT_MIN, "margin_factor": MARGIN_FACTOR,
                     "images_min": 256, "fp32_ratio_max": FP32_RATIO_MAX if args.weight_set == "random" else None},
        "passed": ok, "command": " ".join(cmd),
    }
    (args.out / "parity.json").write_text(json.dumps(result, indent=2) + "\n")
    text = (f"{result['model']} {args.image_size} px, {args.images} images, {args.weight_set} weights, encoder "
            f"{args.version}{f' + {args.compose}' if args.compose else ''} vs timm {result['timm']} fp16 on {result['gpu']}: logits rel L2 {rel:.2e} "
            f"(<= {REL_L2_MAX:g}); against timm fp32 {ours_vs_fp32:.2e}, {ratio:.2f}x timm fp16's"
            f"{f' (<= {FP32_RATIO_MAX:g}x)' if args.weight_set == 'random' else ''}, "
            f"max abs diff {max_abs:.3g}; top-1 agreement {agreement:.1%} over {n_decisive} images with a "
            f"margin > {MARGIN_FACTOR:g}x that ({float(agree.float().mean()):.1%} over all); timm's own fp16 "
            f"vs fp32: rel L2 {timm_fp16_vs_fp32:.2e}. {'PASSED' if ok else 'FAILED'}\n")
    (args.out / "parity.txt").write_text(text)
    print(text, end="")
    for f in work.iterdir():  # hundreds of MB of inputs: not for the results folder
        f.unlink()
    work.rmdir()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
