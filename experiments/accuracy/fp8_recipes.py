#!/usr/bin/env python3
"""FP8 quantization recipes simulated inside timm's ViT forward: could any E4M3 recipe agree with
timm fp32 on >= 99% of the images where the FP8 step (e12_fp8) does not?

    .venv/bin/python experiments/accuracy/fp8_recipes.py --threads 2 --out out/fp8_recipes
    .venv/bin/python experiments/accuracy/fp8_recipes.py --recipes fp32,tensor_static --weight-sets timm_init \\
        --images 8 --out out/fp8_smoke

Same weight sets (timm_init, randomized, outliers), model, N(0, 1) images, calibration images and
seeds as experiments/accuracy/fp8_accuracy.py (its functions are imported, not copied). In every block the
selected GEMMs of attn.qkv, attn.proj, mlp.fc1 and mlp.fc2 are replaced by
    y = dequant(q(x)) @ dequant(q(W))^T + b
in fp32, where q rounds x / scale to the format (E4M3: torch.float8_e4m3fn after clamping to
+-448, as the FP8 step's saturating conversions do: whether PyTorch's cast alone saturates depends
on its version, device and format) and dequant multiplies back by the scale. Everything
else (patch embedding, LayerNorms, attention, GELU, residual stream, head) stays timm fp32.

Recipes (weight scale / activation scale / GEMMs in the format):
  fp32                        no rounding at all (the wrappers multiply the fp32 tensors): the
                              harness control, agreement 100% and rel L2 0
  fp16_inputs                 both operands rounded to fp16 (no scale): rounding-only scale mark
  tensor_static               the project's e12_fp8: per tensor amax/448 / per tensor static,
                              2 x amax over a forward of 32 calibration images / 448; all four
  tensor_dynamic              per tensor / per tensor amax of the batch being run (--batch images
                              at a time), margin 1; all four
  channel_token               per output channel / per token (row) dynamic amax: the finest
                              practical scaling; all four
  channel_token_mlp_only      as channel_token, fc1 and fc2 only
  tensor_static_mlp_only      as tensor_static, fc1 and fc2 only
  tensor_static_qkv_proj_only as tensor_static, QKV and projection only
  e5m2_tensor_static          as tensor_static in E5M2 (torch.float8_e5m2, +-57344)

For each weight set x recipe: logits rel L2 against timm fp32, top-1 agreement, and the images
fp8_accuracy.py calls decisive (top-1/top-2 margin > 4x the forward's RMS logit error on that
image) with the agreement on them; also how many distinct top-1 classes the reference and the
forward give over the images (untrained weights give nearly the same class for every image),
the share of the logit error that is the same for every image, and the agreement with that
shared part removed (an oracle constant correction of the logits: the least-squares shift,
fitted on the compared images themselves). Writes recipes.csv (rewritten after every row, so a
stopped run keeps what it measured) and recipes.txt into --out; one progress line per weight set
x recipe on stderr. Exit 0 when it ran (it reports, it does not judge), 2 on bad use or a missing torch /
timm.
"""
import argparse
import csv
import math
import os
import platform
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from experiments.accuracy import fp8_accuracy as fa  # standard library at import; torch only inside its functions

PROG = "fp8_recipes.py"
INSTALL = ("install them, e.g. /usr/bin/python3 -m venv .venv && .venv/bin/pip install torch timm numpy, "
           "and run this script with .venv/bin/python")

# format -> (torch dtype name, largest finite value)
FORMATS = {"e4m3": ("float8_e4m3fn", 448.0), "e5m2": ("float8_e5m2", 57344.0), "fp16": ("float16", 65504.0)}
STATIC_MARGIN = 2.0  # e12_fp8's: the calibration amax times 2 maps to the format's largest value
# GEMM -> (module of the block, attribute): timm's Block.
GEMMS = {"qkv": ("attn", "qkv"), "proj": ("attn", "proj"), "fc1": ("mlp", "fc1"), "fc2": ("mlp", "fc2")}
ALL = tuple(GEMMS)
MLP = ("fc1", "fc2")
ATTN = ("qkv", "proj")


@dataclass(frozen=True)
class Recipe:
    name: str
    fmt: str | None      # None: no rounding (fp32 control)
    weight: str          # "none" (scale 1), "tensor", "channel"
    act: str             # "none" (scale 1), "static", "dynamic" (per tensor of the batch run), "token"
    gemms: tuple
    about: str


RECIPES = {r.name: r for r in (
    Recipe("fp32", None, "none", "none", ALL, "no rounding: the harness control"),
    Recipe("fp16_inputs", "fp16", "none", "none", ALL, "operands rounded to fp16"),
    Recipe("tensor_static", "e4m3", "tensor", "static", ALL, "e12_fp8's recipe"),
    Recipe("tensor_dynamic", "e4m3", "tensor", "dynamic", ALL, "per-tensor scale of the batch run"),
    Recipe("channel_token", "e4m3", "channel", "token", ALL, "per-channel weights, per-token activations"),
    Recipe("channel_token_mlp_only", "e4m3", "channel", "token", MLP, "channel_token on fc1/fc2 only"),
    Recipe("tensor_static_mlp_only", "e4m3", "tensor", "static", MLP, "tensor_static on fc1/fc2 only"),
    Recipe("tensor_static_qkv_proj_only", "e4m3", "tensor", "static", ATTN, "tensor_static on QKV/proj only"),
    Recipe("e5m2_tensor_static", "e5m2", "tensor", "static", ALL, "tensor_static in E5M2"),
)}

CSV_COLUMNS = [
    "run_id", "utc", "commit", "host", "device", "torch", "timm", "threads",
    "model", "image_size", "images", "calibration_images", "seed", "batch",
    "weights", "recipe", "format", "weight_scale", "activation_scale", "gemms",
    "finite", "logits_rel_l2", "max_abs_logit_difference", "top1_agreement", "disagreements",
    "decisive_images", "top1_agreement_decisive", "disagreements_decisive",
    "median_margin_over_rms_error", "reference_classes", "reference_majority_share", "forward_classes",
    "error_common_fraction", "top1_agreement_common_error_removed", "saturated_fraction", "seconds"]


class UsageError(Exception):
    """Bad command line or environment: one line on stderr, exit 2."""


# ---- the rounding -------------------------------------------------------------------------------

def fake_quant(x, scale, fmt):
    """x / scale rounded to `fmt` (nearest, ties to even), saturating at the format's largest
    finite value (clamped before the cast: depending on the torch version, device and format the
    cast alone gives NaN or inf beyond it), times scale, in fp32. `scale` broadcasts."""
    import torch
    if fmt is None:
        return x
    dtype, top = FORMATS[fmt]
    y = (x / scale).clamp_(-top, top)
    return y.to(getattr(torch, dtype)).float().mul_(scale)


def saturated(x, scale, fmt):
    """How many elements of x / scale (a scalar scale) lie beyond the format's largest value,
    where fake_quant clamps them; a single min/max pass over x where none does."""
    import torch
    lo, hi = torch.aminmax(x)
    top = FORMATS[fmt][1]
    if max(-float(lo), float(hi)) / scale <= top:
        return 0
    return int(((x / scale).abs() > top).sum())


def scale_of(amax, fmt, margin=1.0):
    """amax x margin / the format's largest value; 1 where amax is 0 (an all-zero tensor)."""
    import torch
    top = FORMATS[fmt][1]
    if isinstance(amax, torch.Tensor):
        return torch.where(amax > 0, amax * margin / top, torch.ones_like(amax))
    return amax * margin / top if amax > 0 else 1.0


_LINEAR = None


def fake_quant_linear(linear, recipe, static_amax=None, stats=None):
    """A module standing in for a block's nn.Linear: both operands through fake_quant, an fp32
    matmul, the bias. The weight is rounded once here; `stats` counts saturated inputs."""
    global _LINEAR
    if _LINEAR is None:
        import torch
        import torch.nn.functional as F

        class FakeQuantLinear(torch.nn.Module):
            def __init__(self, linear, recipe, static_amax, stats):
                super().__init__()
                self.recipe, self.stats, fmt = recipe, stats, recipe.fmt
                w = linear.weight.detach().float()
                if fmt is None or recipe.weight == "none":
                    ws = 1.0
                elif recipe.weight == "tensor":
                    ws = scale_of(w.abs().amax().item(), fmt)
                else:  # per output channel: one scale per row of W [out, in]
                    ws = scale_of(w.abs().amax(dim=1, keepdim=True), fmt)
                self.register_buffer("weight", fake_quant(w, ws, fmt))
                self.bias = linear.bias
                self.static_scale = (scale_of(static_amax, fmt, STATIC_MARGIN)
                                     if fmt is not None and recipe.act == "static" else None)

            def forward(self, x):
                fmt, act = self.recipe.fmt, self.recipe.act
                if fmt is not None:
                    if act == "none":
                        s = 1.0
                    elif act == "static":
                        s = self.static_scale
                    elif act == "dynamic":  # one scale for the whole batch being run
                        s = scale_of(x.abs().amax().item(), fmt)
                    else:  # per token: one scale per row (image x token)
                        s = scale_of(x.abs().amax(dim=-1, keepdim=True), fmt)
                    if self.stats is not None:
                        self.stats["saturated"] += saturated(x, s, fmt) if act == "static" else 0
                        self.stats["elements"] += x.numel()
                    x = fake_quant(x, s, fmt)
                return F.linear(x, self.weight, self.bias)

        _LINEAR = FakeQuantLinear
    return _LINEAR(linear, recipe, static_amax, stats)


def gemm_modules(model, gemms):
    """(block index, gemm, parent module, attribute) of every selected GEMM."""
    for i, blk in enumerate(model.blocks):
        for g in gemms:
            parent_name, attr = GEMMS[g]
            yield i, g, getattr(blk, parent_name), attr


@contextmanager
def recipe_applied(model, recipe, static_amax, stats=None):
    """The model with the recipe's GEMMs replaced; the original modules are back afterwards."""
    originals = []
    try:
        for i, g, parent, attr in gemm_modules(model, recipe.gemms):
            lin = getattr(parent, attr)
            originals.append((parent, attr, lin))
            setattr(parent, attr, fake_quant_linear(lin, recipe, static_amax.get((i, g)), stats))
        yield model
    finally:
        for parent, attr, lin in originals:
            setattr(parent, attr, lin)


def forward(model, images, batch, device):
    import torch
    with torch.inference_mode():
        return torch.cat([model(c.to(device)).float().cpu() for c in images.split(batch)])


def calibrate(model, images, batch, device):
    """Per block and GEMM, the amax of the GEMM's input over a fp32 forward of `images` (as
    encoder::calibrate_fp8 does over the calibration batch, there in fp16)."""
    amax, hooks = {}, []

    def hook(key):
        def record(_module, inputs):
            amax[key] = max(amax.get(key, 0.0), float(inputs[0].detach().abs().amax()))
        return record

    for i, g, parent, attr in gemm_modules(model, ALL):
        hooks.append(getattr(parent, attr).register_forward_pre_hook(hook((i, g))))
    try:
        forward(model, images, batch, device)
    finally:
        for h in hooks:
            h.remove()
    return amax


def evaluate(logits, ref):
    """fp8_accuracy.metrics, plus the disagreement counts and how decisive a typical image is."""
    import torch
    m = fa.metrics(logits, ref)
    diff = logits.double() - ref.double()
    err = diff.pow(2).mean(1).sqrt()
    top2 = ref.double().topk(2, dim=1).values
    margin = top2[:, 0] - top2[:, 1]
    ratio = torch.where(err > 0, margin / err, torch.full_like(err, math.inf)).median().item()
    agree = logits.argmax(1) == ref.argmax(1)
    decisive = margin > fa.DECISIVE * err
    m["disagreements"] = int((~agree).sum())
    m["disagreements_decisive"] = int((~agree & decisive).sum())
    m["median_margin_over_rms_error"] = ratio
    # How much the images matter: untrained weights give nearly the same top-1 for every image.
    ref_top, top = ref.argmax(1), logits.argmax(1)
    m["reference_classes"] = int(ref_top.unique().numel())
    m["reference_majority_share"] = float(ref_top.unique(return_counts=True)[1].max()) / len(ref_top)
    m["forward_classes"] = int(top.unique().numel())
    # The part of the error every image shares (its mean over the images), and the agreement
    # with that part taken away: an oracle constant correction of the logits (the least-squares
    # shift, fitted on these very images).
    common = diff.mean(0, keepdim=True)
    total = diff.norm().item()
    m["error_common_fraction"] = common.norm().item() * math.sqrt(len(diff)) / total if total else 0.0
    m["top1_agreement_common_error_removed"] = float(((logits.double() - common).argmax(1) == ref_top).double().mean())
    return m


# ---- command line ---------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="vit_b", choices=["vit_ti", "vit_s", "vit_b", "vit_l"])
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--images", type=int, default=256, help="images per weight set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated subset of "
                    + ", ".join(RECIPES))
    ap.add_argument("--weight-sets", default=",".join(fa.WEIGHT_SETS), help="comma-separated subset of "
                    + ", ".join(fa.WEIGHT_SETS))
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--batch", type=int, default=32, help="images per forward (memory; also the batch "
                    "whose amax tensor_dynamic scales by)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--out", type=Path, required=True, help="folder for recipes.csv and recipes.txt")
    args = ap.parse_args(argv)
    args.recipe_list = [r for r in args.recipes.split(",") if r]
    args.set_list = [s for s in args.weight_sets.split(",") if s]
    bad_r = [r for r in args.recipe_list if r not in RECIPES]
    bad_s = [s for s in args.set_list if s not in fa.WEIGHT_SETS]
    if bad_r or not args.recipe_list:
        raise UsageError(f"unknown recipe {', '.join(bad_r) or '(none given)'}; recipes: {', '.join(RECIPES)}")
    if bad_s or not args.set_list:
        raise UsageError(f"unknown weight set {', '.join(bad_s) or '(none given)'}; weight sets: "
                         f"{', '.join(fa.WEIGHT_SETS)}")
    if args.images <= 0:
        raise UsageError(f"--images must be positive (got {args.images})")
    if args.image_size <= 0 or args.image_size % 16:
        raise UsageError(f"--image-size must be a positive multiple of 16 (got {args.image_size})")
    if args.batch <= 0:
        raise UsageError(f"--batch must be positive (got {args.batch})")
    if args.threads < 0:
        raise UsageError(f"--threads must be 0 or positive (got {args.threads})")
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        raise UsageError(f"--device must be cpu or cuda (got {args.device})")
    return args


def check_out(out):
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write_test"):
            pass
    except OSError as e:
        raise UsageError(f"cannot write to --out {out}: {e.strerror or e}") from None


def import_torch():
    try:
        import torch
        import timm
    except ImportError as e:
        raise UsageError(f"needs torch and timm ({e}); {INSTALL}") from None
    return torch, timm


def device_name(torch, device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return f"CPU {line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"CPU {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def write_outputs(out, rows, header):
    tmp = out / "recipes.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    tmp.replace(out / "recipes.csv")
    lines = header + ["", f"{'weights':11s} {'recipe':28s} {'rel L2':>9s} {'top-1 agree':>11s} "
                      f"{'decisive':>8s} {'agree there':>11s} {'margin/err':>10s} {'classes':>9s} "
                      f"{'common err':>10s} {'agree -common':>13s} {'saturated':>9s}"]
    last = None
    for r in rows:
        if last is not None and r["weights"] != last:
            lines.append("")
        last = r["weights"]
        dec = r["top1_agreement_decisive"]
        lines.append(f"{r['weights']:11s} {r['recipe']:28s} {r['logits_rel_l2']:9.3e} "
                     f"{r['top1_agreement']:11.2%} {r['decisive_images']:8d} "
                     f"{'-' if dec != dec else f'{dec:.2%}':>11s} {r['median_margin_over_rms_error']:10.3g} "
                     f"{str(r['reference_classes']) + '/' + str(r['forward_classes']):>9s} "
                     f"{r['error_common_fraction']:10.2f} {r['top1_agreement_common_error_removed']:13.2%} "
                     f"{r['saturated_fraction']:9.2e}")
    (out / "recipes.txt").write_text("\n".join(lines) + "\n")


def main(argv=None):
    try:
        args = parse_args(argv)
        check_out(args.out)
        torch, timm = import_torch()
        from reference import export_timm_fixture as fx
        if args.threads:
            torch.set_num_threads(args.threads)
        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise UsageError("--device cuda but torch sees no CUDA device")
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2

    from experiments.anchors import harness as anchor_common  # the study's provenance
    prov = anchor_common.provenance()
    # fp32 matmuls and convolutions must be fp32 on a GPU too (no TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    fixed = {"run_id": prov["run_id"], "commit": prov["commit"], "host": prov["host"],
             "device": device_name(torch, device), "torch": torch.__version__, "timm": timm.__version__,
             "threads": torch.get_num_threads(), "model": fx.TIMM_NAMES[args.model],
             "image_size": args.image_size, "images": args.images, "calibration_images": fa.CALIBRATION_IMAGES,
             "seed": args.seed, "batch": args.batch}
    header = [f"{fixed['model']} {args.image_size} px, {args.images} N(0,1) images per weight set (seed "
              f"{args.seed}), against timm {fixed['timm']} fp32; torch {fixed['torch']} on {fixed['device']}, "
              f"{fixed['threads']} threads, {args.batch} images per forward.",
              f"Static scales: {STATIC_MARGIN:g} x amax over a fp32 forward of {fa.CALIBRATION_IMAGES} calibration "
              f"images / the format's largest value. Decisive: reference top-1/top-2 margin > {fa.DECISIVE:g}x the "
              "forward's RMS logit error on that image.",
              "margin/err: median over images of that margin / RMS error; classes: distinct top-1 classes over "
              "the images, reference/forward; common err: the share of the error norm that every image shares (its "
              "mean over the images); agree -common: top-1 agreement with that shared part taken away (an oracle "
              "constant correction of the logits); saturated: fraction of GEMM-input elements clamped at the format's "
              "largest value.",
              f"commit {prov['commit']}, run {prov['run_id']}"]

    images, calibration = fa.make_images(args.images, args.image_size, args.seed)
    rows, t_all = [], time.monotonic()
    total, k = len(args.set_list) * len(args.recipe_list), 0
    for kind in args.set_list:
        t0 = time.monotonic()
        model = fa.build_weights(kind, args.model, args.image_size, args.seed).float().eval().to(device)
        ref = forward(model, images, args.batch, device)
        needs_static = any(RECIPES[r].act == "static" for r in args.recipe_list)
        amax = calibrate(model, calibration, args.batch, device) if needs_static else {}
        print(f"{PROG}: {kind}: timm fp32 reference{' and calibration' if needs_static else ''} "
              f"({time.monotonic() - t0:.1f} s)", file=sys.stderr, flush=True)
        for name in args.recipe_list:
            k += 1
            recipe, t1 = RECIPES[name], time.monotonic()
            stats = {"saturated": 0, "elements": 0}
            with recipe_applied(model, recipe, amax, stats):
                logits = forward(model, images, args.batch, device)
            m = evaluate(logits, ref)
            seconds = time.monotonic() - t1
            rows.append({**fixed, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "weights": kind, "recipe": name, "format": recipe.fmt or "fp32",
                         "weight_scale": recipe.weight if recipe.fmt else "none",
                         "activation_scale": recipe.act if recipe.fmt else "none",
                         "gemms": "+".join(recipe.gemms), "finite": bool(torch.isfinite(logits).all()),
                         **m, "saturated_fraction": stats["saturated"] / max(stats["elements"], 1),
                         "seconds": round(seconds, 1)})
            write_outputs(args.out, rows, header)
            dec = m["top1_agreement_decisive"]
            print(f"{PROG}: [{k}/{total}] {kind} {name}: rel L2 {m['logits_rel_l2']:.3e}, top-1 agreement "
                  f"{m['top1_agreement']:.2%}, {'-' if dec != dec else f'{dec:.2%}'} over {m['decisive_images']} "
                  f"decisive images ({seconds:.1f} s; {(time.monotonic() - t_all) / 60:.1f} min in all)",
                  file=sys.stderr, flush=True)
        del model
    print((args.out / "recipes.txt").read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
