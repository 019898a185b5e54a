#!/usr/bin/env python3
"""How far the flash kernels' E4M3 output may lie from a direct rounding of the exact attention:
the kernels stage O times the output scale in fp16 and convert that to E4M3 (stages/attention/
flash.cuh, store_rows), which parts from rounding the exact value by one E4M3 step wherever fp16
lands it on an E4M3 midpoint. Simulated in numpy at the E4M3-input test's shapes and inputs
(stages/attention/test.cpp: QKV quantized to E4M3 in one scale, the output scale 448 / (amax /
sqrt 2)); prints, per shape, the rel L2 between the two roundings over many draws. Standard library
and numpy only, CPU.

    /usr/bin/python3 experiments/accuracy/e4m3_double_rounding.py --draws 200

With large q and k (the harness's Inputs::LargeQK: Q and K uniform in [8, 16], V normal) the
softmax is one-hot and each output row of a head is one V row, so a value that rounds the other way
repeats down its column: at 3 heads the rel L2 exceeds 1e-2 in about a fifth of the draws, which is
why the test rounds its reference through fp16 as the kernel does.
"""
import argparse

import numpy as np

from experiments.accuracy.fp8_logits_bound import e4m3, fp16

HEAD_DIM = 64
SHAPES = [(3, 17, 3), (3, 40, 3), (3, 50, 3), (3, 90, 3), (3, 197, 12)]  # batch, tokens, heads


def attention(qkv, batch, tokens, heads):
    x = qkv.reshape(batch, tokens, 3, heads, HEAD_DIM)
    q, k, v = x[:, :, 0], x[:, :, 1], x[:, :, 2]
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(HEAD_DIM)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(batch * tokens, heads * HEAD_DIM)


def draw(rng, batch, tokens, heads, large_qk):
    qkv = rng.standard_normal((batch * tokens, 3, heads * HEAD_DIM))
    if large_qk:
        qkv[:, :2] = rng.uniform(8, 16, (batch * tokens, 2, heads * HEAD_DIM))
    qkv = fp16(qkv).reshape(batch * tokens, -1)
    scale = np.abs(qkv).max() / 448
    y = attention(e4m3(qkv / scale) * scale, batch, tokens, heads).astype(np.float32)
    inv = np.float32(448 / (0.7071068 * np.abs(y).max()))
    direct, staged = e4m3(y * inv), e4m3(fp16(y * inv))
    return np.linalg.norm(staged - direct) / np.linalg.norm(direct)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bound", type=float, default=1e-2)
    args = ap.parse_args()
    if args.draws < 1:
        ap.error("--draws must be positive")
    rng = np.random.default_rng(args.seed)
    for large_qk in (False, True):
        for batch, tokens, heads in SHAPES:
            r = np.array([draw(rng, batch, tokens, heads, large_qk) for _ in range(args.draws)])
            print(f"{'large q, k' if large_qk else 'normal    '} batch {batch}, tokens {tokens:3d}, heads {heads:2d}: "
                  f"rel L2 median {np.median(r):.4f}, p90 {np.percentile(r, 90):.4f}, max {r.max():.4f}; "
                  f"above {args.bound:g}: {(r > args.bound).mean() * 100:.1f}%")


if __name__ == "__main__":
    main()
