#!/usr/bin/env python3
"""PyTorch attention anchors, in the study's CSV schema and with the benches' timing method.

  pytorch_sdpa_<backend>        F.scaled_dot_product_attention restricted to one backend with
                                torch.nn.attention.sdpa_kernel, eager (PyTorch's host overhead
                                included); backend: cudnn, flash, efficient, math.
  pytorch_sdpa_<backend>_graph  the same call captured once in a CUDA graph; each repeat is one
                                graph replay.

Problem as stages/attention (attention.hpp): a packed qkv tensor [batch*tokens, 3*heads*64]
viewed as q, k, v [B, H, T, D] exactly as timm does (qkv.reshape(B, T, 3, H, D).permute(2, 0,
3, 1, 4)), no copies; scale 1/sqrt(D); fp16. The output stays [B, H, T, D]: the transpose back
to [B*T, H*D] that timm does next is a separate copy and is not timed. Example:
  python3 -m experiments.anchors.torch_attention --version pytorch_sdpa_cudnn_graph --batch 32 \
      --image-size 224 --model vit_b --csv out.csv
"""

import sys

from experiments.anchors import harness  # standard library only; torch is imported inside harness.run_anchor
from studylib import schema

FAMILY = "attention"
BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION",
            "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}
VERSIONS = tuple(f"pytorch_sdpa_{b}{g}" for b in BACKENDS for g in ("", "_graph"))


def add_args(p):
    # Not dest "tokens": harness.parse_args sets args.tokens to the image's token count.
    p.add_argument("--tokens", dest="tokens_override", type=harness._positive("--tokens"), default=None,
                   help="tokens per image (default (image/16)^2 + 1)")
    p.add_argument("--heads", type=harness._positive("--heads"), default=None,
                   help="attention heads (default: the model's)")
    p.add_argument("--head-dim", type=harness._positive("--head-dim"), default=None,
                   help="features per head (default: the model's, 64)")


def shape(args):
    hidden, model_heads, _ = schema.MODELS[args.model]
    tokens = args.tokens_override if args.tokens_override is not None else args.tokens
    heads = args.heads if args.heads is not None else model_heads
    head_dim = args.head_dim if args.head_dim is not None else hidden // model_heads
    return args.batch, tokens, heads, head_dim


def identity(args):
    # As stages/attention/bench.cpp: the problem's tokens, heads and head_dim; hidden = H * D.
    b, t, h, d = shape(args)
    return {"tokens": t, "heads": h, "head_dim": d, "hidden": h * d, "rows": b * t,
            "host_syncs": 0}


def bytes_moved(b, t, h, d):
    # attention::bytes(): read the packed QKV once, write the output once (fp16)
    return 4 * b * t * h * d * 2


def flops(b, t, h, d):
    # attention::flops(): Q K^T and P V
    return 4 * b * h * t * t * d


def build(torch, args):
    if args.streams != 1:
        raise harness.Skip("PyTorch anchors run on one stream (streams=1 only)")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, T, H, D = shape(args)
    dev = torch.device("cuda", args.device)
    F = torch.nn.functional
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    # Same distribution as stages/attention/harness.cpp make_inputs (Normal), not the same numbers.
    qkv = torch.randn(B * T, 3 * H * D, generator=gen, device=dev, dtype=torch.float32).half()
    q, k, v = qkv.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
    scale = D ** -0.5
    name = args.version.removeprefix("pytorch_sdpa_")
    graphed = name.endswith("_graph")
    backend = getattr(SDPBackend, BACKENDS[name.removesuffix("_graph")])

    def attend():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, scale=scale)

    try:
        attend()
        torch.cuda.synchronize(dev)
    except RuntimeError as e:  # this backend has no kernel for the shape or the GPU
        raise harness.Skip(f"{backend.name} refuses B={B} T={T} H={H} D={D}: "
                          f"{str(e).splitlines()[0]}") from None
    launches, launch_note = harness.count_kernels(torch, attend, dev)

    run, result, note = harness.eager_or_graph(torch, attend, dev, graphed)

    def check():
        # Every (batch, head) in float64, one batch at a time (bounds the T x T scores).
        got = result()
        torch.cuda.synchronize(dev)
        nonfinite = int((~torch.isfinite(got)).sum().item())
        err = harness.ErrorSum(torch)
        for b in range(B):
            qd, kd, vd = q[b].double(), k[b].double(), v[b].double()
            ref = torch.softmax(qd @ kd.transpose(-1, -2) * scale, dim=-1) @ vd
            err.add(got[b], ref)
            del qd, kd, vd, ref
        max_abs, rel = err.result()
        return max_abs, rel, nonfinite

    return harness.Problem(run=run, check=check, bytes_moved=bytes_moved(B, T, H, D),
                          flops=flops(B, T, H, D), launches=launches, host_syncs=0,
                          note=f"B={B} T={T} H={H} D={D}; {{check}}; {note}; "
                               f"q/k/v strided views of packed qkv{launch_note}")


def main(argv=None):
    return harness.run_anchor(FAMILY, VERSIONS, __doc__.splitlines()[0], add_args, identity,
                             build, argv)


if __name__ == "__main__":
    sys.exit(main())
