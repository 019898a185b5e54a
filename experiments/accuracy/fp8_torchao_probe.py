#!/usr/bin/env python3
"""Where does torchao's per-tensor FP8 forward get its lower logits error?

torchao's Float8DynamicActivationFloat8WeightConfig (per tensor) quantizes the same four GEMMs of
every block as the study's FP8 steps, with the same arithmetic (scale = amax / 448, x / scale
clamped to +-448, cast to E4M3; fp8_recipes.py's tensor_dynamic recipe). Yet on the fp16 model its
logits lie 1.4% (randomized) and 6% (outliers) closer to timm fp32 than e18's do. This probe runs,
on one GPU and fp8_accuracy.py's weights and images:

- torchao itself on fp32, fp16 and bf16 copies of the model, with and without fast accumulation;
- an emulation of its arithmetic (dequantized operands, fp32 matmul) inside an fp32 model, with one
  of torchao's roundings added at a time (GEMM input or output rounded to fp16, the scale computed
  in fp16), and inside an fp16 model with one of its non-GEMM layers (LayerNorm, attention, GELU)
  taken back to fp32.

Each forward's logits rel L2 and top-1 agreement against timm fp32 go to probe.csv (provenance
columns first) and probe.txt. Usage: experiments/accuracy/fp8_torchao_probe.py --out DIR [--images 256]
"""
import argparse
import csv
import sys
from pathlib import Path

from experiments.accuracy import fp8_accuracy as fa  # weights, images, metrics
from experiments.accuracy import fp8_recipes as fr  # E4M3 rounding, the blocks' GEMMs

E4M3_MAX = fr.FORMATS["e4m3"][1]

# (name, model dtype, options) of the emulated forwards; torch dtypes are named, resolved later.
EMULATED = [
    ("emulated, fp32 model", "float32", {}),
    ("emulated, fp32, GEMM input rounded to fp16", "float32", {"round_x": True}),
    ("emulated, fp32, scale computed in fp16", "float32", {"scale_half": True}),
    ("emulated, fp32, GEMM output rounded to fp16", "float32", {"round_out": True}),
    ("emulated, fp16 model", "float16", {}),
    ("emulated, fp16, scale computed in fp16", "float16", {"scale_half": True}),
    ("emulated, fp16, both scales in fp16", "float16", {"scales_in_model_dtype": True}),
    ("emulated, bf16, both scales in bf16", "bfloat16", {"scales_in_model_dtype": True}),
    ("emulated, fp16, LayerNorm in fp32", "float16", {"ln32": True}),
    ("emulated, fp16, attention in fp32", "float16", {"sdpa32": True}),
    ("emulated, fp16, GELU in fp32", "float16", {"gelu32": True}),
    ("emulated, bf16 model", "bfloat16", {}),
]
TORCHAO = [  # (name, model dtype, fast accumulation)
    ("torchao, fp16 model (default: fast accum)", "float16", True),
    ("torchao, fp16 model, exact accum", "float16", False),
    ("torchao, fp32 model", "float32", True),
    ("torchao, fp32 model, exact accum", "float32", False),
    ("torchao, bf16 model", "bfloat16", True),
]
COLUMNS = ["run_id", "utc", "commit", "gpu", "torch", "timm", "torchao", "model", "image_size", "images",
           "seed", "weights", "forward", "logits_rel_l2", "top1_agreement", "decisive_images"]


def fail(message):
    """Bad command line or environment: one line on stderr, exit 2."""
    print(f"fp8_torchao_probe.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_writable(out):
    """Refuses an --out that could not be created, before any GPU work (nothing is created yet)."""
    import os
    if out.exists() and not out.is_dir():
        fail(f"cannot write to --out {out}: not a folder")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        fail(f"cannot write to --out {out}: {parent} is not a writable folder")


def fake_quant(t, scale):
    """E4M3 round trip, as fp8_recipes.py rounds (clamped to +-448, nearest even)."""
    return fr.fake_quant(t, scale, "e4m3")


def emulated_linear(linear, opts):
    """torchao's per-tensor dynamic arithmetic on dequantized operands, an fp32 matmul."""
    import torch
    import torch.nn.functional as F

    class EmulatedFp8Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            w = linear.weight.detach()
            # torchao divides the amax in the weight's own dtype (fp16 in an fp16 model)
            scale = (w.abs().amax() / E4M3_MAX).float() if opts.get("scales_in_model_dtype") else \
                w.abs().amax().float() / E4M3_MAX
            self.weight = fake_quant(w.float(), scale)
            self.bias = linear.bias.detach().float()

        def forward(self, x):
            dtype, xf = x.dtype, x.float()
            if opts.get("round_x"):
                xf = xf.half().float()
            amax = xf.abs().amax()
            if opts.get("scale_half"):
                scale = (amax.half() / E4M3_MAX).float()
            elif opts.get("scales_in_model_dtype"):
                scale = (amax.to(dtype) / E4M3_MAX).float()
            else:
                scale = amax / E4M3_MAX
            y = F.linear(fake_quant(xf, scale), self.weight, self.bias)
            if opts.get("round_out"):
                y = y.half().float()
            return y.to(dtype)
    return EmulatedFp8Linear()


def emulated_model(kind, args, dtype, opts, dev):
    import torch
    import torch.nn.functional as F
    m = fa.build_weights(kind, args.model, args.image_size, args.seed).eval().to(dev).to(dtype)
    for _, _, parent, attr in fr.gemm_modules(m, fr.ALL):
        setattr(parent, attr, emulated_linear(getattr(parent, attr), opts))
    if opts.get("gelu32"):
        for blk in m.blocks:
            blk.mlp.act.forward = lambda x: F.gelu(x.float()).to(x.dtype)
    if opts.get("ln32"):
        for mod in m.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.forward = (lambda ln: lambda x: F.layer_norm(
                    x.float(), ln.normalized_shape, ln.weight.float(), ln.bias.float(), ln.eps).to(x.dtype))(mod)
    return m


def run(model, images, dtype, dev, sdpa32=False):
    """Logits in fp32 on the CPU, 32 images per forward (fp8_accuracy.py's batches, which set
    the dynamic scales); with sdpa32, attention computed in fp32 (timm calls it through
    torch.nn.functional at every forward)."""
    import torch
    import torch.nn.functional as F
    sdpa = F.scaled_dot_product_attention
    if sdpa32:
        F.scaled_dot_product_attention = lambda q, k, v, *a, **kw: sdpa(
            q.float(), k.float(), v.float(), *a, **kw).to(q.dtype)
    try:
        with torch.inference_mode():
            return torch.cat([model(c.to(dev).to(dtype)).float().cpu() for c in images.split(32)])
    finally:
        F.scaled_dot_product_attention = sdpa


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--model", default="vit_b", choices=["vit_ti", "vit_s", "vit_b", "vit_l"])
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.images <= 0:
        fail("--images must be positive")
    if args.image_size <= 0 or args.image_size % 16:
        fail("--image-size must be a positive multiple of 16")
    check_writable(args.out)
    try:
        import torch
        import timm
    except ImportError as e:
        fail(f"needs torch and timm ({e})")
    if not torch.cuda.is_available():
        fail("needs a CUDA GPU (torchao's FP8 GEMMs run there)")
    from experiments.anchors import harness
    torchao, why = harness.import_torchao()
    if torchao is None:
        fail(f"needs torchao ({why})")
    from torchao.float8.inference import Float8MMConfig
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerTensor, quantize_
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"cannot write to --out {args.out}: {e}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    prov = harness.provenance(torch)
    fixed = {"run_id": prov["run_id"], "utc": prov["utc"], "commit": prov["commit"], "gpu": prov["gpu"],
             "torch": torch.__version__, "timm": timm.__version__, "torchao": torchao.__version__,
             "model": args.model, "image_size": args.image_size, "images": args.images, "seed": args.seed}
    images, _ = fa.make_images(args.images, args.image_size, args.seed)
    rows = []
    for kind in fa.WEIGHT_SETS:
        ref = run(fa.build_weights(kind, args.model, args.image_size, args.seed).eval().to(dev), images,
                  torch.float32, dev)
        forwards = []
        for name, dtype, fast in TORCHAO:
            q = fa.build_weights(kind, args.model, args.image_size, args.seed).eval().to(dev).to(getattr(torch, dtype))
            quantize_(q, Float8DynamicActivationFloat8WeightConfig(
                granularity=PerTensor(), mm_config=Float8MMConfig(use_fast_accum=fast)))
            forwards.append((name, run(q, images, getattr(torch, dtype), dev)))
        for name, dtype, opts in EMULATED:
            m = emulated_model(kind, args, getattr(torch, dtype), opts, dev)
            forwards.append((name, run(m, images, getattr(torch, dtype), dev, opts.get("sdpa32", False))))
        for name, logits in forwards:
            m = fa.metrics(logits, ref)
            rows.append({**fixed, "weights": kind, "forward": name, "logits_rel_l2": f"{m['logits_rel_l2']:.5f}",
                         "top1_agreement": f"{m['top1_agreement']:.4f}", "decisive_images": m["decisive_images"]})
            print(f"{kind:10s} {name:45s} rel L2 {m['logits_rel_l2']:.4f}  top-1 {m['top1_agreement']:.2%}", flush=True)
        with open(args.out / "probe.csv", "w", newline="") as f:  # rewritten after every weight set
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
    lines = [f"{args.model} {args.image_size} px, {args.images} N(0,1) images (seed {args.seed}) against timm fp32; "
             f"{prov['gpu']}, torch {torch.__version__}, timm {timm.__version__}, torchao {torchao.__version__}, "
             f"commit {prov['commit']}", ""]
    lines += [f"{r['weights']:10s} {r['forward']:45s} {r['logits_rel_l2']}  {float(r['top1_agreement']):.2%}"
              for r in rows]
    (args.out / "probe.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
