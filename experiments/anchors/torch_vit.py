#!/usr/bin/env python3
"""PyTorch whole-ViT anchors (timm), in the study's CSV schema and with the benches' timing method.

  pytorch_timm                 timm's VisionTransformer in fp16, eager: one Python forward per
                               repeat, so the row includes PyTorch's host overhead.
  pytorch_timm_graph           the same forward captured once in a CUDA graph and replayed.
  pytorch_timm_compile_graph   torch.compile(mode="max-autotune-no-cudagraphs"), then captured
                               in a CUDA graph and replayed (compiling takes minutes).
  pytorch_torchao_fp8_tensor_graph
                               the PyTorch user's FP8: torchao's
                               Float8DynamicActivationFloat8WeightConfig (E4M3 weights, activations
                               quantized per call with a dynamic scale) with one scale per tensor,
                               on the fp16 model, compiled in torch.compile's default mode (as
                               torchao's own examples compile; max-autotune takes more than 5.5
                               minutes a shape, docs/method.md) and replayed in a CUDA graph.
  pytorch_torchao_fp8_row_graph
                               the same with one scale per row (activations) and per output
                               channel (weights), which torchao 0.18 runs only on bf16 weights:
                               the model is bf16 there, not fp16 as every other row.
  vitstudy_fp16, vitstudy_fp8  the study's own forward from Python: vitstudy.Model.from_timm on
                               the same timm model (the default step of that precision; FP8
                               calibrated on 32 other images), called on a CUDA tensor: the
                               binding's cost included (its two copies in the call's graph).
  vitstudy_fp16_unbound, vitstudy_fp8_unbound
                               the same Model's forward on its own buffers, as the C++ bench
                               replays it: what the binding's cost is measured against, on the
                               same weights in the same process. Needs the module built from this
                               checkout (build/ on PYTHONPATH, as the sweep runner puts it).

Problem as stages/encoder: `batch` images of `image_size` px through timm's
vit_{tiny,small,base,large}_patch16 (the study's vit_ti/s/b/l) with seeded random weights
(timm's own init; no pretrained download) and 1000 classes, logits out. The check compares
the fp16 logits of the first and the last image with the same model run in float64.
Example:
  python3 -m experiments.anchors.torch_vit --version pytorch_timm_graph --batch 32 --csv out.csv
"""

import contextlib
import sys
import time

from experiments.anchors import harness  # standard library only; torch is imported inside harness.run_anchor
from studylib import schema

FAMILY = "encoder"
TORCHAO = ("pytorch_torchao_fp8_tensor_graph", "pytorch_torchao_fp8_row_graph")
VITSTUDY = ("vitstudy_fp16", "vitstudy_fp16_unbound", "vitstudy_fp8", "vitstudy_fp8_unbound")
VERSIONS = ("pytorch_timm", "pytorch_timm_graph", "pytorch_timm_compile_graph") + TORCHAO + VITSTUDY
TIMM_NAMES = {"vit_ti": "vit_tiny_patch16_224", "vit_s": "vit_small_patch16_224",
              "vit_b": "vit_base_patch16_224", "vit_l": "vit_large_patch16_224"}
NUM_CLASSES = 1000
CONV_K = 3 * schema.PATCH * schema.PATCH


def add_args(p):
    p.add_argument("--weights", help="timm state dict as safetensors, the file the steps' benches get "
                                     "(default: timm's own init for --seed)")


def timm_model(timm, torch, args):
    """timm's model with this seed's init, or with the state dict of --weights (the sweep's
    timm_weights exports that init once and gives both the anchors and the steps the file)."""
    torch.manual_seed(args.seed)
    vit = timm.create_model(TIMM_NAMES[args.model], pretrained=False, img_size=args.image_size,
                            num_classes=NUM_CLASSES)
    if args.weights:
        from safetensors.torch import load_file
        vit.load_state_dict(load_file(args.weights))
    return vit.eval()


def identity(args):
    hidden, heads, _ = schema.MODELS[args.model]
    return {"tokens": args.tokens, "hidden": hidden, "heads": heads, "head_dim": hidden // heads,
            "rows": args.batch * args.tokens, "host_syncs": 0}


def weight_count(model, tokens):
    """Parameters of a timm ViT with 1000 classes: what stages/encoder's bytes() counts."""
    d, _, depth = schema.MODELS[model]
    per_block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return (CONV_K * d + d) + d + tokens * d + depth * per_block + 2 * d + (d * NUM_CLASSES + NUM_CLASSES)


def bytes_moved(model, batch, image_size, tokens):
    # Weights once, images in, logits out (fp16): the floor of one forward.
    return 2 * (weight_count(model, tokens) + batch * 3 * image_size * image_size + batch * NUM_CLASSES)


def flops(model, batch, tokens):
    # Per block 24 T d^2 (QKV, projection, fc1, fc2) + 4 T^2 d (Q K^T and P V); patch
    # embedding 2 P 768 d; head on the cls row 2 d classes. ViT-B/16 at 224: 35.1 GFLOP/image.
    d, _, depth = schema.MODELS[model]
    per_block = 24 * tokens * d * d + 4 * tokens * tokens * d
    return batch * (depth * per_block + 2 * (tokens - 1) * CONV_K * d + 2 * d * NUM_CLASSES)


def check_logits(torch, got, reference, images, dev):
    """(max_abs, rel_l2, nonfinite) of the logits `got` of the first and the last image against
    the float64 model `reference`."""
    torch.cuda.synchronize(dev)
    nonfinite = int((~torch.isfinite(got)).sum().item())
    picks = sorted({0, images.shape[0] - 1})
    with torch.no_grad():
        ref = reference(images[picks].double())
    err = harness.ErrorSum(torch)
    err.add(got[picks], ref)
    max_abs, rel = err.result()
    return max_abs, rel, nonfinite


def build(torch, args):
    if args.streams != 1:
        raise harness.Skip("PyTorch anchors run on one stream (streams=1 only)")
    if args.version in VITSTUDY:
        return build_vitstudy(torch, args)
    import timm
    dev = torch.device("cuda", args.device)
    fp8 = args.version in TORCHAO
    row_scales = args.version == "pytorch_torchao_fp8_row_graph"
    if fp8:
        if torch.cuda.get_device_capability(dev) < (8, 9):
            raise harness.Skip("FP8 GEMMs need compute capability 8.9 or newer")
        torchao, why = harness.import_torchao()
        if torchao is None:
            raise harness.Skip(why)
    dtype = torch.bfloat16 if row_scales else torch.float16

    def make():
        """The model in its dtype (quantized and compiled where the version says), and its float64
        twin for the check; kept across the rows of one shape when the runner keeps anchors."""
        model = timm_model(timm, torch, args).to(dev)
        reference = None
        if args.check:  # float64 twin with the same weights, before the fp16 cast
            import copy
            reference = copy.deepcopy(model).double()
        model = model.to(dtype)
        net = model
        if fp8:
            from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor, quantize_
            quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow() if row_scales else PerTensor()))
        if fp8 or args.version == "pytorch_timm_compile_graph":
            # Static shapes (dynamic=False: one compiled graph per batch size, never a dynamic-batch
            # one), and a process serving many shapes fails loudly rather than falling back to
            # eager when the compiled graphs of one code object pass dynamo's limit.
            cfg = torch._dynamo.config
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(cfg, name):
                    setattr(cfg, name, max(getattr(cfg, name), 64))
            for name in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"):
                if hasattr(cfg, name):
                    setattr(cfg, name, True)
            # torchao in the default mode, as its own examples compile it (max-autotune: more than
            # 5.5 minutes a shape); the fp16 model with max-autotune, the strongest fp16 anchor.
            mode = None if fp8 else "max-autotune-no-cudagraphs"
            net = torch.compile(model, mode=mode, dynamic=False)
        return net, reference

    made = []  # whether this row made (and so compiles) the model, or a serving process kept it

    def make_here():
        made.append(True)
        return make()

    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed + 1)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=gen,
                         device=dev, dtype=torch.float32).to(dtype)

    # no_grad, not inference_mode: the graph's static output is poisoned in place before the
    # checked replay, which inference tensors forbid.
    def forward():
        with torch.no_grad():
            return net(images)

    # A compiled model compiles on its first call, autotuning with thousands of benchmark kernels:
    # that call runs before the kernel count (which would take them in) and its seconds go into
    # the note, never into a timing. torchao's Inductor options hold for its own compile only.
    compile_note = ""
    with harness.inductor_options_kept(torch) if fp8 else contextlib.nullcontext():
        net, reference = harness.keep(
            ("vit", args.version, args.model, args.image_size, args.batch, args.seed, args.weights, args.check,
             args.device),
            make_here)
        if fp8 or args.version == "pytorch_timm_compile_graph":
            if made:
                first = time.perf_counter()
                forward()
                torch.cuda.synchronize(dev)
                compile_note = f"; compiled in this row ({time.perf_counter() - first:.0f} s to its first call)"
            else:
                compile_note = "; compiled model kept from an earlier row of this shape"
    launches, launch_note = harness.count_kernels(torch, forward, dev)
    run, result, note = harness.eager_or_graph(torch, forward, dev, args.version != "pytorch_timm")

    def check():
        return check_logits(torch, result().clone(), reference, images, dev)

    what = ""
    if fp8:
        scales = "PerRow), bf16 model (per-row needs it)" if row_scales else "PerTensor)"
        what = f"torchao {torchao.__version__} Float8DynamicActivationFloat8WeightConfig({scales}; "
    return harness.Problem(run=run, check=check, rel_tol=harness.FP8_REL_TOL if fp8 else harness.FP16_REL_TOL,
                          columns={"precision": "fp8_e4m3"} if fp8 else None,
                          bytes_moved=bytes_moved(args.model, args.batch, args.image_size, args.tokens),
                          flops=flops(args.model, args.batch, args.tokens), launches=launches,
                          host_syncs=0,
                          note=f"{what}timm {timm.__version__} {TIMM_NAMES[args.model]} "
                               f"img_size={args.image_size}; {{check}} (logits of images "
                               f"0 and {args.batch - 1} vs float64); {note}{launch_note}{compile_note}")


def build_vitstudy(torch, args):
    import timm
    try:
        import vitstudy
        from vitstudy import _engine
    except ImportError as e:
        raise harness.Skip(f"vitstudy not importable ({e}): ./study test builds it into build/, which the sweep runner puts on PYTHONPATH")
    commit = harness.checkout_commit()
    if _engine.build_commit != commit:
        raise RuntimeError(f"vitstudy was built from {_engine.build_commit}, and this checkout is at {commit}: "
                           "rebuild it before measuring")
    dev = torch.device("cuda", args.device)
    fp8 = args.version.startswith("vitstudy_fp8")
    unbound = args.version.endswith("_unbound")

    def make():
        """The Model of timm's model with this seed's weights (as the pytorch rows draw them), and
        its float64 twin for the check; one per precision, every batch size kept inside it."""
        vit = timm_model(timm, torch, args)
        calibration = None
        if fp8:  # other images than the timed ones
            gen = torch.Generator(device=dev)
            gen.manual_seed(args.seed + 2)
            calibration = torch.randn(32, 3, args.image_size, args.image_size, generator=gen, device=dev)
        model = vitstudy.Model.from_timm(vit, precision="fp8" if fp8 else "fp16", device=args.device,
                                         calibration=calibration)
        reference = vit.to(dev).double() if args.check else None
        return model, reference

    model, reference = harness.keep(("vitstudy", fp8, args.model, args.image_size, args.seed, args.weights,
                                     args.check, args.device), make)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed + 1)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=gen,
                         device=dev, dtype=torch.float32).half()
    out = {}
    model(images)  # the first call of this batch size builds its forward and captures its graph
    session = model._session
    stream = torch.cuda.current_stream(dev).cuda_stream

    def run():
        if unbound:
            session.run_unbound(args.batch, args.image_size, stream)
        else:
            out["y"] = model(images)

    run()  # the unbound forward captures its own graph on its first call
    torch.cuda.synchronize(dev)
    launches, launch_note = harness.count_kernels(torch, run, dev)

    def check():
        return check_logits(torch, model(images), reference, images, dev)

    what = ("its forward on its own buffers, as the C++ bench replays it; {check} by a module call"
            if unbound else "a module call on a CUDA tensor; {check}")
    return harness.Problem(run=run, check=check, rel_tol=harness.FP8_REL_TOL if fp8 else harness.FP16_REL_TOL,
                           columns={"precision": "fp8_e4m3"} if fp8 else None,
                           bytes_moved=bytes_moved(args.model, args.batch, args.image_size, args.tokens),
                           flops=flops(args.model, args.batch, args.tokens), launches=launches, host_syncs=0,
                           note=f"vitstudy {model.step} ({_engine.build_commit}) on timm {timm.__version__} "
                                f"{TIMM_NAMES[args.model]} img_size={args.image_size}: {what} (logits of images "
                                f"0 and {args.batch - 1} vs float64){launch_note}")


def main(argv=None):
    return harness.run_anchor(FAMILY, VERSIONS, __doc__.splitlines()[0], add_args, identity,
                             build, argv)


if __name__ == "__main__":
    sys.exit(main())
