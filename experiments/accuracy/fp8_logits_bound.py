#!/usr/bin/env python3
"""How far an FP8 forward's logits may lie from the reference on random weights: the FP8 recipe of
the encoder's FP8 steps (stages/encoder/blocks_fp8.cpp) simulated in numpy, against the fp32 forward
with the exact GELU, over many weight draws, at the shape of the encoder test's twelve-block case
(vit_ti, 12 blocks, 32 px images: 5 tokens). Standard library and numpy only, CPU.

    /usr/bin/python3 experiments/accuracy/fp8_logits_bound.py --draws 100 --classes 1000 --batch 2

Per draw: weights as reference/weights.cpp draws them (timm-scale: std 0.02, LayerNorm gains
around 1), N(0, 1) images rounded to fp16, static activation scales from the amax of 32 other
images in the fp32 forward (tanh GELU, margin 2), per-tensor E4M3 weights, every GEMM input
rounded to E4M3 (saturating), fp16 QKV, residual stream and attention output. Prints the
distribution of the logits' rel L2 and the share of draws above --bound. The simulation's numpy
generator is not the C++ one: it reproduces the distribution, not a test's particular seed.
"""
import argparse

import numpy as np

HIDDEN, HEADS, MLP, PATCH = 192, 3, 768, 16


def e4m3(x):
    """Round to the nearest E4M3 value, saturating at +-448 (3 mantissa bits, subnormals from 2^-9)."""
    x = np.clip(x, -448, 448)
    a = np.abs(x)
    e = np.maximum(np.floor(np.log2(np.maximum(a, 2.0**-9))), -6)
    step = 2.0 ** (e - 3)
    return np.sign(x) * np.round(a / step) * step


def fp16(x):
    return x.astype(np.float16).astype(np.float64)


def per_tensor(w):
    s = np.abs(w).max() / 448
    return e4m3(w / s) * s


def weights(rng, image, layers, classes):
    def tn(n, std, mean=0.0):
        return fp16(mean + np.clip(rng.normal(0, std, n), -2 * std, 2 * std))
    tokens = (image // PATCH) ** 2 + 1
    w = dict(patch_w=tn(HIDDEN * 3 * PATCH * PATCH, .02).reshape(HIDDEN, -1), patch_b=tn(HIDDEN, .02),
             cls=tn(HIDDEN, .02), pos=tn(tokens * HIDDEN, .02).reshape(tokens, HIDDEN), blocks=[])
    for _ in range(layers):
        w["blocks"].append(dict(
            g1=tn(HIDDEN, .1, 1), b1=tn(HIDDEN, .02), qw=tn(3 * HIDDEN * HIDDEN, .02).reshape(3 * HIDDEN, HIDDEN),
            qb=tn(3 * HIDDEN, .02), pw=tn(HIDDEN * HIDDEN, .02).reshape(HIDDEN, HIDDEN), pb=tn(HIDDEN, .02),
            g2=tn(HIDDEN, .1, 1), b2=tn(HIDDEN, .02), f1w=tn(MLP * HIDDEN, .02).reshape(MLP, HIDDEN), f1b=tn(MLP, .02),
            f2w=tn(HIDDEN * MLP, .02).reshape(HIDDEN, MLP), f2b=tn(HIDDEN, .02)))
    w.update(ng=tn(HIDDEN, .1, 1), nb=tn(HIDDEN, .02), hw=tn(classes * HIDDEN, .02).reshape(classes, HIDDEN),
             hb=tn(classes, .02))
    return w


def layernorm(x, g, b):
    m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-6) * g + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def gelu_erf(x):
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def attention(qkv, batch, tokens):
    q, k, v = np.split(qkv.reshape(batch, tokens, 3 * HIDDEN), 3, axis=-1)
    d, out = HIDDEN // HEADS, np.zeros((batch, tokens, HIDDEN))
    for h in range(HEADS):
        cols = slice(h * d, (h + 1) * d)
        s = q[..., cols] @ k[..., cols].transpose(0, 2, 1) / np.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        out[..., cols] = (s / s.sum(-1, keepdims=True)) @ v[..., cols]
    return out.reshape(batch * tokens, HIDDEN)


def forward(w, images, scales=None, amax=None):
    """Logits in fp32 (exact GELU), or with amax given its calibration (tanh GELU, amax of the
    four GEMM inputs per block gathered), or with scales given the FP8 recipe."""
    batch, _, size, _ = images.shape
    g = size // PATCH
    patches = images.reshape(batch, 3, g, PATCH, g, PATCH).transpose(0, 2, 4, 1, 3, 5).reshape(batch, g * g, -1)
    x = np.concatenate([np.broadcast_to(w["cls"], (batch, 1, HIDDEN)), patches @ w["patch_w"].T + w["patch_b"]], 1)
    tokens = g * g + 1
    x = (x + w["pos"]).reshape(-1, HIDDEN)
    if scales is not None:
        x = fp16(x)
    for i, b in enumerate(w["blocks"]):
        a = layernorm(x, b["g1"], b["b1"])
        if scales is not None:
            s = scales[i]
            qkv = fp16(e4m3(a / s[0]) * s[0] @ per_tensor(b["qw"]).T + b["qb"])
            o = e4m3(fp16(attention(qkv, batch, tokens) / s[1])) * s[1]
            x = fp16(x + o @ per_tensor(b["pw"]).T + b["pb"])
            a = e4m3(layernorm(x, b["g2"], b["b2"]) / s[2]) * s[2]
            hid = e4m3(gelu_tanh(a @ per_tensor(b["f1w"]).T + b["f1b"]) / s[3]) * s[3]
            x = fp16(x + hid @ per_tensor(b["f2w"]).T + b["f2b"])
            continue
        o = attention(a @ b["qw"].T + b["qb"], batch, tokens)
        x = x + o @ b["pw"].T + b["pb"]
        a2 = layernorm(x, b["g2"], b["b2"])
        hid = (gelu_tanh if amax is not None else gelu_erf)(a2 @ b["f1w"].T + b["f1b"])
        if amax is not None:
            amax[i] = np.maximum(amax[i], [np.abs(t).max() for t in (a, o, a2, hid)])
        x = x + hid @ b["f2w"].T + b["f2b"]
    cls = x.reshape(batch, tokens, HIDDEN)[:, 0]
    return layernorm(cls, w["ng"], w["nb"]) @ w["hw"].T + w["hb"]


def draw(seed, args):
    rng = np.random.default_rng(seed)
    w = weights(rng, args.image_size, args.layers, args.classes)
    images = fp16(rng.normal(size=(args.batch, 3, args.image_size, args.image_size)))
    calibration = fp16(rng.normal(size=(32, 3, args.image_size, args.image_size)))
    amax = np.zeros((args.layers, 4))
    forward(w, calibration, amax=amax)
    want, got = forward(w, images), forward(w, images, scales=2 * amax / 448)
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--bound", type=float, default=0.15)
    args = ap.parse_args()
    if min(args.draws, args.classes, args.batch, args.layers) < 1 or args.image_size % PATCH:
        ap.error("draws, classes, batch and layers must be positive and the image size a multiple of 16")
    r = np.array([draw(s, args) for s in range(args.draws)])
    print(f"{args.draws} draws, {args.batch} images x {args.classes} classes: logits rel L2 median {np.median(r):.3f}, "
          f"p90 {np.percentile(r, 90):.3f}, p99 {np.percentile(r, 99):.3f}, max {r.max():.3f}; "
          f"above {args.bound}: {(r > args.bound).mean() * 100:.1f}%")


if __name__ == "__main__":
    main()
