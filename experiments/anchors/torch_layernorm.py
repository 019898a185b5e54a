#!/usr/bin/env python3
"""PyTorch LayerNorm anchors, in the study's CSV schema and with the benches' timing method.

  pytorch_layer_norm        torch.nn.functional.layer_norm, eager: one Python call per repeat,
                            so the row includes PyTorch's per-call host overhead.
  pytorch_layer_norm_graph  the same call captured once in a CUDA graph; each repeat is one
                            graph replay, which removes most of that overhead.

Problem: rows = batch * tokens (or --rows), hidden from the model (or --hidden), eps 1e-6,
fp16 input/output/gamma/beta. Example:
  python3 -m experiments.anchors.torch_layernorm --version pytorch_layer_norm --batch 32 \
      --image-size 224 --model vit_b --csv out.csv
"""

import sys

from experiments.anchors import harness  # standard library only; torch is imported inside harness.run_anchor

FAMILY = "layernorm"
VERSIONS = ("pytorch_layer_norm", "pytorch_layer_norm_graph")
EPS = 1e-6
CHECK_CHUNK = 1 << 24  # elements per float64 reference chunk: bounds the check's extra memory


def add_args(p):
    harness.add_rows_hidden_args(p)


def shape(args):
    return harness.rows_hidden(args)


def identity(args):
    # As stages/layernorm/bench.cpp: tokens of the image, hidden of the problem, no heads.
    rows, hidden = shape(args)
    return {"tokens": args.tokens, "hidden": hidden, "rows": rows, "host_syncs": 0}


def bytes_moved(rows, hidden):
    # layernorm::bytes(): read x, write y (fp16), read gamma and beta (fp16) once
    return 2 * rows * hidden * 2 + 2 * hidden * 2


def flops(rows, hidden):
    # layernorm::flops(): mean 1, variance 3, normalize + affine 4 per element
    return 8 * rows * hidden


def build(torch, args):
    if args.streams != 1:
        raise harness.Skip("PyTorch anchors run on one stream (streams=1 only)")
    rows, hidden = shape(args)
    dev = torch.device("cuda", args.device)
    F = torch.nn.functional
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    x = (0.5 + torch.randn(rows, hidden, generator=gen, device=dev, dtype=torch.float32)).half()
    # Same distributions as stages/layernorm/harness.cpp make_inputs (not the same numbers:
    # the generators differ).
    gamma = (1 + 0.2 * torch.randn(hidden, generator=gen, device=dev)).half()
    beta = (0.2 * torch.randn(hidden, generator=gen, device=dev)).half()

    def layer_norm():
        return F.layer_norm(x, (hidden,), gamma, beta, EPS)

    run, result, note = harness.eager_or_graph(torch, layer_norm, dev,
                                              args.version == "pytorch_layer_norm_graph")

    def check():
        got = result()
        torch.cuda.synchronize(dev)
        g64, b64 = gamma.double(), beta.double()
        nonfinite = int((~torch.isfinite(got)).sum().item())
        err = harness.ErrorSum(torch)
        step = max(1, CHECK_CHUNK // hidden)
        for r0 in range(0, rows, step):
            xd = x[r0:r0 + step].double()
            mu = xd.mean(dim=1, keepdim=True)
            var = ((xd - mu) ** 2).mean(dim=1, keepdim=True)  # biased, as LayerNorm
            ref = (xd - mu) / torch.sqrt(var + EPS) * g64 + b64
            err.add(got[r0:r0 + step], ref)
            del xd, mu, var, ref
        max_abs, rel = err.result()
        return max_abs, rel, nonfinite

    return harness.Problem(run=run, check=check, bytes_moved=bytes_moved(rows, hidden),
                          flops=flops(rows, hidden), launches=1, host_syncs=0,
                          note=f"rows={rows}; {{check}}; {note}")


def main(argv=None):
    return harness.run_anchor(FAMILY, VERSIONS, __doc__.splitlines()[0], add_args, identity,
                             build, argv)


if __name__ == "__main__":
    sys.exit(main())
