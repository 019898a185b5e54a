#!/usr/bin/env python3
"""PyTorch MLP anchors, in the study's CSV schema and with the benches' timing method.

  pytorch_mlp        x + F.linear(F.gelu(F.linear(x, W1, b1)), W2, b2), eager: one Python
                     call chain per repeat, so the row includes PyTorch's host overhead.
  pytorch_mlp_graph  the same expression captured once in a CUDA graph; each repeat is one
                     graph replay.

Problem as stages/mlp (mlp.hpp): rows = batch * tokens (or --rows), hidden from the model (or
--hidden), mlp_hidden = 4 * hidden, fp16 tensors, exact (erf) GELU as timm's nn.GELU().
PyTorch's own GEMM settings are left at their defaults (what users get); the note records
allow_fp16_reduced_precision_reduction. Example:
  python3 -m experiments.anchors.torch_mlp --version pytorch_mlp --batch 32 \
      --image-size 224 --model vit_b --csv out.csv
"""

import sys

from experiments.anchors import harness  # standard library only; torch is imported inside harness.run_anchor

FAMILY = "mlp"
VERSIONS = ("pytorch_mlp", "pytorch_mlp_graph")
CHECK_CHUNK = 1 << 24  # elements of the float64 intermediate per chunk: bounds the check's memory


def add_args(p):
    harness.add_rows_hidden_args(p, "features per row (default: the model's hidden size); mlp = 4x")


def shape(args):
    rows, hidden = harness.rows_hidden(args)
    return rows, hidden, 4 * hidden


def identity(args):
    # As stages/mlp/bench.cpp: tokens of the image, hidden of the problem, no heads.
    rows, hidden, _ = shape(args)
    return {"tokens": args.tokens, "hidden": hidden, "rows": rows, "host_syncs": 0}


def bytes_moved(rows, hidden, mlp):
    # mlp::bytes(): x in, y out, both weights and biases once (fp16)
    return (2 * rows * hidden + 2 * hidden * mlp + mlp + hidden) * 2


def flops(rows, hidden, mlp):
    # mlp::flops(): the two GEMMs
    return 4 * rows * hidden * mlp


def build(torch, args):
    if args.streams != 1:
        raise harness.Skip("PyTorch anchors run on one stream (streams=1 only)")
    rows, hidden, mlp = shape(args)
    dev = torch.device("cuda", args.device)
    F = torch.nn.functional
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)

    def normal(*size, std):
        return (std * torch.randn(*size, generator=gen, device=dev, dtype=torch.float32)).half()

    # Same distributions as stages/mlp/harness.cpp make_inputs with timm-scale weights (not the
    # same numbers: the generators differ).
    x = normal(rows, hidden, std=1.0)
    w1, b1 = normal(mlp, hidden, std=0.02), normal(mlp, std=0.1)
    w2, b2 = normal(hidden, mlp, std=0.02), normal(hidden, std=0.1)

    def mlp_forward():
        return x + F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)

    launches, launch_note = harness.count_kernels(torch, mlp_forward, dev)
    run, result, note = harness.eager_or_graph(torch, mlp_forward, dev, args.version == "pytorch_mlp_graph")

    def check():
        got = result()
        torch.cuda.synchronize(dev)
        nonfinite = int((~torch.isfinite(got)).sum().item())
        w1d, b1d, w2d, b2d = w1.double(), b1.double(), w2.double(), b2.double()
        err = harness.ErrorSum(torch)
        step = max(1, CHECK_CHUNK // mlp)
        for r0 in range(0, rows, step):
            xd = x[r0:r0 + step].double()
            ref = xd + F.linear(F.gelu(F.linear(xd, w1d, b1d)), w2d, b2d)
            err.add(got[r0:r0 + step], ref)
            del xd, ref
        max_abs, rel = err.result()
        return max_abs, rel, nonfinite

    reduced = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    return harness.Problem(run=run, check=check, bytes_moved=bytes_moved(rows, hidden, mlp),
                          flops=flops(rows, hidden, mlp), launches=launches, host_syncs=0,
                          note=f"rows={rows} mlp_hidden={mlp}; {{check}}; {note}; "
                               f"allow_fp16_reduced_precision_reduction={reduced}{launch_note}")


def main(argv=None):
    return harness.run_anchor(FAMILY, VERSIONS, __doc__.splitlines()[0], add_args, identity,
                             build, argv)


if __name__ == "__main__":
    sys.exit(main())
