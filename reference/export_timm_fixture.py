#!/usr/bin/env python3
"""Export a tiny timm ViT (weights, an input batch and timm's logits) as the fixture that
checks the C++ reference against code nobody in this project wrote.

Run from anywhere on a machine with torch and timm (no GPU needed; it runs on the CPU in fp32):

    python3 reference/export_timm_fixture.py
    python3 reference/export_timm_fixture.py --model vit_b --image-size 384 --out vit_b_384.safetensors

The second form exports a full-size timm ViT (vit_ti/s/b/l, any image size) with timm's own
seeded random init (no pretrained download) as a state dict the encoder bench loads with
--weights; experiments/accuracy/timm_parity.py uses it.

It writes reference/fixtures/tiny_vit.safetensors (the timm state dict, F32),
reference/fixtures/tiny_vit_io.safetensors (tensors `input` [2,3,32,32] and `logits` [2,10])
and reference/fixtures/tiny_vit.json (config, seed, versions, checksums).
"""
import argparse
import copy
import hashlib
import inspect
import json
import math
import platform
import struct
import sys
from functools import partial
from pathlib import Path

import torch
import torch.nn as nn
import timm
from timm.models.vision_transformer import VisionTransformer

CONFIG = dict(img_size=32, patch_size=16, in_chans=3, num_classes=10, embed_dim=48, depth=2,
              num_heads=3, mlp_ratio=4.0)
BATCH = 2
LN_EPS = 1e-6


def build_model():
    wanted = dict(CONFIG, qkv_bias=True, class_token=True, global_pool="token",
                  norm_layer=partial(nn.LayerNorm, eps=LN_EPS), act_layer=nn.GELU)
    # Options of newer timm releases, pinned to the plain ViT the reference computes. Older
    # releases lack some of them; the checks after construction catch any drift instead.
    optional = dict(no_embed_class=False, pre_norm=False, fc_norm=False, dynamic_img_size=False,
                    reg_tokens=0, qk_norm=False, init_values=None, final_norm=True,
                    pos_embed="learn")
    accepted = inspect.signature(VisionTransformer.__init__).parameters
    wanted.update({k: v for k, v in optional.items() if k in accepted})
    return VisionTransformer(**wanted)


def expected_keys(depth):
    keys = ["patch_embed.proj.weight", "patch_embed.proj.bias", "cls_token", "pos_embed",
            "norm.weight", "norm.bias", "head.weight", "head.bias"]
    for i in range(depth):
        for part in ["norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"]:
            keys += [f"blocks.{i}.{part}.weight", f"blocks.{i}.{part}.bias"]
    return set(keys)


def check_model(model):
    """Fail loudly if timm built anything other than what ref::vit_forward computes."""
    side = CONFIG["img_size"] // CONFIG["patch_size"]
    tokens = side * side + 1
    problems = []
    for name, m in model.named_modules():
        if isinstance(m, nn.LayerNorm) and m.eps != LN_EPS:
            problems.append(f"{name}: LayerNorm eps {m.eps}")
        if isinstance(m, nn.GELU) and m.approximate != "none":
            problems.append(f"{name}: GELU approximate={m.approximate}")
    for i, blk in enumerate(model.blocks):
        if not isinstance(blk.mlp.act, nn.GELU):
            problems.append(f"blocks.{i}.mlp.act is {type(blk.mlp.act).__name__}, not nn.GELU")
    if getattr(model, "num_prefix_tokens", 1) != 1 or model.cls_token is None:
        problems.append("expected exactly one prefix token, the cls token")
    if tuple(model.pos_embed.shape) != (1, tokens, CONFIG["embed_dim"]):
        problems.append(f"pos_embed shape {tuple(model.pos_embed.shape)}")
    if model.global_pool != "token":
        problems.append(f"global_pool {model.global_pool}")
    for attr in ["fc_norm", "norm_pre"]:
        if not isinstance(getattr(model, attr, nn.Identity()), nn.Identity):
            problems.append(f"{attr} is not Identity")
    keys = set(model.state_dict().keys())
    if keys != expected_keys(CONFIG["depth"]):
        problems.append(f"state dict keys differ: extra {sorted(keys - expected_keys(CONFIG['depth']))}, "
                        f"missing {sorted(expected_keys(CONFIG['depth']) - keys)}")
    if problems:
        sys.exit("timm built a different model than the reference computes:\n  " + "\n  ".join(problems))
    return tokens


# Init of the fixture's weights. timm's own init (zero biases, unit gammas, near-zero cls token)
# would leave whole terms invisible in the logits; these scales make each term show:
# - the embedding (conv, cls, pos) is small, ~0.01, so the first LayerNorm sees a row variance
#   near 1e-4 and its eps (1e-6 in timm, 1e-5 PyTorch's default) moves the logits;
# - MLP pre-activations sit around FC1_BIAS, where erf and tanh GELU differ most relative to
#   their value, and fc2 is scaled up to bring that branch back to O(1);
# - other weights are N(0, 1/fan_in), so activations stay O(1) and attention is far from uniform.
INIT = dict(embed=0.01, gamma=0.1, bias=0.1, fc1_bias=-2.5, fc2_gain=4.0)
TOLERANCE = 1e-4  # rel L2 the C++ test allows; every checked mistake must move logits 10x more


def randomize(model, gen, init=INIT):
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.startswith("patch_embed.") or name in ("cls_token", "pos_embed"):
                scale = init["embed"] / (math.sqrt(p[0].numel()) if name.endswith("proj.weight") else 1.0)
                p.copy_(scale * r)
            elif name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight":
                p.copy_(1.0 + init["gamma"] * r)
            elif name.endswith("mlp.fc1.bias"):
                p.copy_(init["fc1_bias"] + init["bias"] * r)
            elif name.endswith(".bias"):
                p.copy_(init["bias"] * r)
            elif name.endswith("mlp.fc2.weight"):
                p.copy_(init["fc2_gain"] * r / math.sqrt(p[0].numel()))
            else:
                p.copy_(r / math.sqrt(p[0].numel()))


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def sensitivity(model, images, logits):
    """How far the logits move under mistakes a reference could make; each must exceed the
    test's tolerance by far, or the fixture could not tell right from wrong."""
    moved = {}
    variants = {
        "layernorm_eps_1e-5": lambda m: [setattr(x, "eps", 1e-5) for x in m.modules() if isinstance(x, nn.LayerNorm)],
        "gelu_tanh": lambda m: [setattr(x, "approximate", "tanh") for x in m.modules() if isinstance(x, nn.GELU)],
        "no_attention_scale": lambda m: [setattr(b.attn, "scale", 1.0) for b in m.blocks],
    }
    for name, change in variants.items():
        m = copy.deepcopy(model)
        change(m)
        if name == "no_attention_scale":
            for b in m.blocks:
                b.attn.fused_attn = False  # the fused path ignores attn.scale
        with torch.no_grad():
            moved[name] = rel_l2(m(images), logits)
    return moved


def save_safetensors(tensors, path, metadata):
    tensors = {k: v.detach().to(torch.float32).contiguous().cpu() for k, v in tensors.items()}
    try:
        from safetensors.torch import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file(tensors, str(path), metadata=metadata)
        return "safetensors " + __import__("safetensors").__version__
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        data = struct.pack(f"<{t.numel()}f", *t.flatten().tolist())
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    return "written by export_timm_fixture.py (safetensors package not installed)"


TIMM_NAMES = {"vit_ti": "vit_tiny_patch16_224", "vit_s": "vit_small_patch16_224",
              "vit_b": "vit_base_patch16_224", "vit_l": "vit_large_patch16_224"}


def timm_vit(model, image_size, seed, num_classes=1000):
    """timm's vit_*_patch16 at `image_size` with its own init for `seed`, checked to hold
    exactly the tensors the C++ loader expects (a plain ViT, nothing else)."""
    torch.manual_seed(seed)
    m = timm.create_model(TIMM_NAMES[model], pretrained=False, img_size=image_size,
                          num_classes=num_classes).eval()
    keys = set(m.state_dict().keys())
    want = expected_keys(len(m.blocks))
    if keys != want:
        sys.exit(f"{TIMM_NAMES[model]}: state dict keys differ: extra {sorted(keys - want)}, "
                 f"missing {sorted(want - keys)}")
    return m


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent / "fixtures")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", choices=sorted(TIMM_NAMES), help="export a full-size timm ViT instead")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--out", type=Path, help="with --model: the safetensors file to write")
    args = ap.parse_args()
    if args.model:
        if not args.out:
            ap.error("--model needs --out")
        m = timm_vit(args.model, args.image_size, args.seed)
        save_safetensors(m.state_dict(), args.out, {"source": "reference/export_timm_fixture.py",
                                                    "timm": timm.__version__, "model": TIMM_NAMES[args.model],
                                                    "img_size": str(args.image_size), "seed": str(args.seed)})
        print(f"wrote {args.out} ({args.out.stat().st_size} B)")
        return
    args.out_dir.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(args.seed)
    model = build_model().eval()
    tokens = check_model(model)
    gen = torch.Generator().manual_seed(args.seed)
    randomize(model, gen)
    images = torch.randn((BATCH, CONFIG["in_chans"], CONFIG["img_size"], CONFIG["img_size"]), generator=gen)

    # fp32 on the CPU: no TF32, no reduced-precision GPU paths in the numbers we commit.
    with torch.no_grad():
        logits = model(images)
        logits64 = copy.deepcopy(model).double()(images.double())
    drift = rel_l2(logits, logits64)
    moved = sensitivity(model, images, logits)
    weak = {k: v for k, v in moved.items() if v < 10 * TOLERANCE}
    if weak:
        sys.exit(f"fixture not discriminating: {weak} move the logits less than 10x the tolerance {TOLERANCE}")

    weights_path = args.out_dir / "tiny_vit.safetensors"
    io_path = args.out_dir / "tiny_vit_io.safetensors"
    meta = {"source": "reference/export_timm_fixture.py", "timm": timm.__version__, "torch": torch.__version__}
    writer = save_safetensors(model.state_dict(), weights_path, meta)
    save_safetensors({"input": images, "logits": logits}, io_path, meta)

    info = {
        "model": dict(CONFIG, qkv_bias=True, class_token=True, global_pool="token", tokens=tokens,
                      layernorm_eps=LN_EPS, gelu="erf", pos_embed="learned"),
        "batch": BATCH,
        "seed": args.seed,
        "init": dict(INIT, other_weights="N(0, 1/fan_in)", input="N(0, 1)"),
        "computed_on": "cpu, float32",
        "timm_fp32_vs_fp64_rel_l2": drift,
        "logits_rel_l2_moved_by": moved,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "timm": timm.__version__, "writer": writer},
        "files": {"tiny_vit.safetensors": sha256(weights_path), "tiny_vit_io.safetensors": sha256(io_path)},
        "command": "python3 reference/export_timm_fixture.py --seed %d" % args.seed,
    }
    (args.out_dir / "tiny_vit.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {weights_path} ({weights_path.stat().st_size} B), {io_path} ({io_path.stat().st_size} B)")
    print(f"logits {logits.flatten()[:4].tolist()}..., timm fp32 vs fp64 rel L2 {drift:.2e}")
    print("logits move by (rel L2): " + ", ".join(f"{k} {v:.2e}" for k, v in moved.items()))


if __name__ == "__main__":
    main()
