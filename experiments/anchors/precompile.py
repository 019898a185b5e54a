#!/usr/bin/env python3
"""Compile the specs' torch.compile anchors before their sittings, each shape in a fresh process.

torch.compile (max-autotune) compiles every shape for minutes (docs/method.md, Timing). Inductor
keeps what it compiles in an on-disk cache (TORCHINDUCTOR_CACHE_DIR, by default
/tmp/torchinductor_$USER) that a later process on the node loads instead of compiling. This
script runs each torch.compile anchor of the specs once per shape (no warm-up, one timed call, no
logits check, no energy loop), each in its own process, one process per GPU at a time over the
GPUs given, so that the sitting that follows (experiments.sweep --spec SPEC, on one GPU) loads every
shape. That is also what makes the compile a fair anchor: autotuning times its candidates, and a
compile in the sitting's kept anchor process (after the other anchors ran there) or beside other
work on the GPU and CPU picks a slower forward. On an H200 at batch 1: 0.63 ms compiled here
alone, 0.84 ms compiled in the kept process, 0.74 ms compiled four at once beside the build, in
three sittings where timm in a graph took 0.69 ms each
(experiments/results/20261127_NVIDIA_H200_anchors_b1). Its rows go to a scratch CSV that is
deleted: nothing it times is a result.
torchao's anchors are left out: the cache does not serve them (on an H100 at c589c59, batch 1:
the compile anchor's first call took 86 s here and 8 s in the sitting after it; torchao's took
101 s here and about as long again in the sitting).

  python3 -m experiments.anchors.precompile --spec final --spec final_384 --gpus 1,2,3 \
      --kernels RUN/compile_kernels.txt
  python3 -m experiments.sweep --spec final --run-dir RUN --device 0
"""
from __future__ import annotations

import argparse
import getpass
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from studylib import run_folder
from studylib.paths import with_checkout_on_path
from studylib.specs import SpecError, UsageError, command_for, expand, find_spec, load_spec
from studylib.progress import hms

# Anchors whose compile the cache serves: torch.compile's (their names say so).
COMPILED_WORD = "compile"


def compiled_anchor(name: str) -> bool:
    return COMPILED_WORD in name


def jobs(specs) -> list:
    """(spec, configuration) per compiled anchor and shape of the specs (the first round's), the
    largest batch first: it compiles longest, so the pool ends with the short jobs."""
    todo = [(spec, c) for spec in specs for c in expand(spec, rounds=1)
            if c.kind == "anchor" and compiled_anchor(c.label)]
    for _, c in todo:  # one call, nothing else: the compile is the point
        c.warmup, c.iters, c.check, c.energy_s = 0, 1, False, 0
    return sorted(todo, key=lambda sc: (-sc[1].batch * sc[1].image_size ** 2, sc[1].label))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True, action="append",
                    help="spec file, or a name in experiments/specs/ (repeat it for several specs)")
    ap.add_argument("--gpus", default="0", help="comma list of CUDA device indices to compile on (default: 0)")
    ap.add_argument("--python", default=os.environ.get("STUDY_PYTHON", sys.executable),
                    help="python that runs the anchors (default: $STUDY_PYTHON, else this one)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per compile (default: the spec's timeout_s)")
    ap.add_argument("--kernels", type=Path, default=None,
                    help="write here the kernels each forward compiled now calls (from the cache's generated code)")
    args = ap.parse_args(argv)
    try:
        args.gpus = [int(g) for g in args.gpus.split(",") if g.strip() != ""]
    except ValueError:
        ap.error(f"--gpus must be a comma list of device indices, got '{args.gpus}'")
    if not args.gpus or min(args.gpus) < 0 or len(set(args.gpus)) != len(args.gpus):
        ap.error(f"--gpus must name distinct device indices >= 0, got '{args.gpus}'")
    return args


def inductor_cache() -> Path:
    """Where Inductor keeps its cache (its own default where TORCHINDUCTOR_CACHE_DIR is unset)."""
    return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR")
                or Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}")


KERNEL_CALL = re.compile(r"extern_kernels\.\w+|triton_(?:tem|per|red|poi)_\w+(?=\.run\()")
INPUT_SHAPE = re.compile(r"\((\d+), 3, (\d+), (\d+)\)")  # the images: (batch, 3, H, W)


def kernel_report(cache: Path, since: float) -> str:
    """Per generated forward written into the cache since `since` (a module with a call()): its
    input images' shape and each kernel it calls, with how often (Triton kernels without their
    numeric suffix). Which kernels autotuning picked is what a reader compares across compiles."""
    out = []
    modules = sorted(f for f in cache.rglob("*.py") if f.stat().st_mtime >= since) if cache.is_dir() else []
    for f in modules:
        code = f.read_text(errors="replace")
        if "def call(" not in code:
            continue
        calls = [re.sub(r"_\d+$", "", k) for k in KERNEL_CALL.findall(code)]
        shape = INPUT_SHAPE.search(code)
        out.append(run_folder.forward_header(f.relative_to(cache), shape.groups() if shape else None))
        out += [f"{n:7d} {k}" for k, n in sorted(Counter(calls).items(), key=lambda kn: (-kn[1], kn[0]))]
    if not out:
        return "no generated forward was written: every shape was already in the cache\n"
    return "\n".join(out) + "\n"


def visible_device(index: int) -> str:
    """The CUDA_VISIBLE_DEVICES a compile on GPU `index` runs with: that entry of the caller's own
    CUDA_VISIBLE_DEVICES where it has one (a Slurm job's GPU 0 is the node's GPU it was given)."""
    outer = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not outer:
        return str(index)
    if index >= len(outer):
        raise UsageError(f"GPU {index} is not among CUDA_VISIBLE_DEVICES={','.join(outer)}")
    return outer[index]


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        specs = [load_spec(find_spec(name)) for name in args.spec]
    except (SpecError, UsageError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    names = ", ".join(args.spec)
    todo = jobs(specs)
    if not todo:
        print(f"{names}: no torch.compile anchor (a name with '{COMPILED_WORD}'): nothing to compile")
        return 0
    try:
        devices = {g: visible_device(g) for g in args.gpus}
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.kernels:
        try:
            args.kernels.parent.mkdir(parents=True, exist_ok=True)
            args.kernels.touch()
        except OSError as e:
            print(f"error: cannot write --kernels {args.kernels}: {e.strerror}", file=sys.stderr)
            return 2
    print(f"compiling {len(todo)} anchor shapes of {names} on GPU {', '.join(map(str, args.gpus))} "
          f"(Inductor cache: {os.environ.get('TORCHINDUCTOR_CACHE_DIR', 'its default')})", flush=True)
    lock, failed, start, started_at = threading.Lock(), [], time.monotonic(), time.time()

    def worker(gpu, scratch):
        while True:
            with lock:
                if not todo:
                    return
                spec, cfg = todo.pop(0)
            timeout = args.timeout or spec["timeout_s"]
            cmd, _ = command_for(cfg, spec, "", args.python)
            cmd += cfg.args(str(Path(scratch) / f"gpu{gpu}.csv"), 0)
            env = with_checkout_on_path({**os.environ, "CUDA_VISIBLE_DEVICES": devices[gpu]})
            t0 = time.monotonic()
            try:
                res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
                ok, why = res.returncode == 0, (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
            except subprocess.TimeoutExpired:
                ok, why = False, f"still compiling after {timeout:g} s"
            with lock:
                took = time.monotonic() - t0
                print(f"  GPU {gpu}: {cfg.label} {cfg.model} batch={cfg.batch} image={cfg.image_size}: "
                      f"{'compiled' if ok else 'FAILED'} in {took:.0f} s"
                      f"{'' if ok else ': ' + why} ({hms(time.monotonic() - start)} elapsed)", flush=True)
                if not ok:
                    failed.append(cfg)

    with tempfile.TemporaryDirectory(prefix="study_precompile_") as scratch:
        threads = [threading.Thread(target=worker, args=(g, scratch)) for g in args.gpus]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if args.kernels:
        args.kernels.write_text(f"# Kernels each torch.compile forward compiled by experiments/anchors/precompile.py ({names}) "
                                f"calls, with how often\n" + kernel_report(inductor_cache(), started_at))
        print(f"kernels of the compiled forwards: {args.kernels}")
    if failed:
        print(f"error: {len(failed)} anchor shapes did not compile; the sitting would compile them itself",
              file=sys.stderr)
        return 1
    print(f"done in {hms(time.monotonic() - start)}: the sitting's compiled anchors load from the cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
