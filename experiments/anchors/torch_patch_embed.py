#!/usr/bin/env python3
"""PyTorch patch-embedding anchors, in the study's CSV schema and with the benches' timing method.

  pytorch_conv2d           F.conv2d(x, W, b, stride=16) then .flatten(2).transpose(1, 2): what
                           timm's PatchEmbed runs (PyTorch's cuDNN convolution); the token
                           view [B, P, hidden] is returned as timm returns it, without a copy.
  pytorch_patchify_linear  the image cut into patches by reshape + permute (one copy kernel,
                           since stride = kernel the patches do not overlap), then F.linear
                           with W viewed as [hidden, 3 x 16 x 16] and the bias.

Problem as stages/patch_embed: images [B, 3, S, S] (NCHW, as PyTorch holds them), weight
[hidden, 3, 16, 16] and bias [hidden], fp16, P = (S/16)^2 patch tokens. Unlike the stage
versions, neither anchor adds the cls token or the position embedding (the encoder's next step
in timm); their output has P rows per image, not 1 + P.

Each row is the faster of two ways to run the same expression, both timed by the same method
(harness.time_events): eager (one Python call chain per repeat, PyTorch's host overhead
included) and one CUDA-graph replay per repeat. The note says which was kept and gives both
medians. PyTorch's settings stay at their defaults (what users get); the note records
cudnn.benchmark and allow_fp16_reduced_precision_reduction. Example:
  python3 -m experiments.anchors.torch_patch_embed --version pytorch_conv2d --batch 256 \
      --image-size 224 --model vit_b --csv out.csv
"""

import sys

from experiments.anchors import harness  # standard library only; torch is imported inside harness.run_anchor
from studylib import schema

FAMILY = "patch_embed"
VERSIONS = ("pytorch_conv2d", "pytorch_patchify_linear")
CHANNELS = 3
CHECK_CHUNK = 1 << 24  # elements of a float64 chunk (patches or output): bounds the check's memory


def add_args(p):
    pass  # the benches' common flags only: hidden comes from --model


def shape(args):
    """(batch, side, patches, hidden, k) with side = S/16 patches per row and k = 3 x 16 x 16."""
    side = args.image_size // schema.PATCH
    hidden = schema.MODELS[args.model][0]
    return args.batch, side, side * side, hidden, CHANNELS * schema.PATCH * schema.PATCH


def identity(args):
    # tokens as every row of the study (1 + P); rows = output rows of the anchor (B x P).
    batch, _, patches, hidden, _ = shape(args)
    return {"tokens": args.tokens, "hidden": hidden, "host_syncs": 0, "rows": batch * patches}


def bytes_moved(batch, patches, hidden, k):
    # images in, weight and bias once, patch tokens out (fp16)
    return (batch * patches * k + hidden * k + hidden + batch * patches * hidden) * 2


def flops(batch, patches, hidden, k):
    # the convolution as a GEMM [B*P, k] x [k, hidden]
    return 2 * batch * patches * hidden * k


def build(torch, args):
    if args.streams != 1:
        raise harness.Skip("PyTorch anchors run on one stream (streams=1 only)")
    batch, side, patches, hidden, k = shape(args)
    size, p = args.image_size, schema.PATCH
    dev = torch.device("cuda", args.device)
    F = torch.nn.functional
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)

    def normal(*dims, std):
        return (std * torch.randn(*dims, generator=gen, device=dev, dtype=torch.float32)).half()

    # Normalized images and timm-scale weights, as the stage harness draws them (not the same
    # numbers: the generators differ); a non-zero bias so that a dropped bias fails the check.
    x = normal(batch, CHANNELS, size, size, std=1.0)
    w = normal(hidden, CHANNELS, p, p, std=0.02)
    b = normal(hidden, std=0.1)
    w2d = w.reshape(hidden, k)  # a view: (channel, row, column) order, as the patches below

    if args.version == "pytorch_conv2d":
        def forward():
            return F.conv2d(x, w, b, stride=p).flatten(2).transpose(1, 2)
        what = "F.conv2d + flatten/transpose view"
    else:
        def forward():
            patches_ = (x.reshape(batch, CHANNELS, side, p, side, p)
                        .permute(0, 2, 4, 1, 3, 5).reshape(batch, patches, k))
            return F.linear(patches_, w2d, b)
        what = "reshape/permute patchify + F.linear"

    launches, launch_note = harness.count_kernels(torch, forward, dev)
    eager_run, eager_result, _ = harness.eager_or_graph(torch, forward, dev, False)
    graph_run, graph_result, _ = harness.eager_or_graph(torch, forward, dev, True)

    def check():
        # Both ways of running are checked (they must agree with the reference); the graph's
        # static output is poisoned before its replay. The reference is a third formulation:
        # patches cut by unfold, a float64 GEMM with the float64 weight and bias.
        got = [eager_result(), graph_result()]
        torch.cuda.synchronize(dev)
        nonfinite = sum(int((~torch.isfinite(g)).sum().item()) for g in got)
        wd, bd = w2d.double(), b.double()
        errs = [harness.ErrorSum(torch) for _ in got]
        step = max(1, CHECK_CHUNK // (patches * max(k, hidden)))
        for i0 in range(0, batch, step):
            xd = x[i0:i0 + step].double()
            n = xd.shape[0]
            cols = (xd.unfold(2, p, p).unfold(3, p, p)          # [n, C, side, side, p, p]
                    .permute(0, 2, 3, 1, 4, 5).reshape(n, patches, k))
            ref = cols @ wd.t() + bd
            for e, g in zip(errs, got):
                e.add(g[i0:i0 + n], ref)
            del xd, cols, ref
        results = [e.result() for e in errs]
        return (max(r[0] for r in results), max(r[1] for r in results), nonfinite)

    reduced = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    return harness.Problem(
        run=None, check=check, bytes_moved=bytes_moved(batch, patches, hidden, k),
        flops=flops(batch, patches, hidden, k), launches=launches, host_syncs=0,
        variants=[("eager", eager_run), ("cuda-graph replay", graph_run)],
        note=(f"{what}; output [B, P={patches}, {hidden}] without cls/position; {{check}}; "
              f"{{timing}}; cudnn.benchmark={torch.backends.cudnn.benchmark}; "
              f"allow_fp16_reduced_precision_reduction={reduced}{launch_note}"))


def main(argv=None):
    return harness.run_anchor(FAMILY, VERSIONS, __doc__.splitlines()[0], add_args, identity,
                             build, argv)


if __name__ == "__main__":
    sys.exit(main())
