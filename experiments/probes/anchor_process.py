#!/usr/bin/env python3
"""Does timm in a CUDA graph keep its speed through a process's history, and what it replays.

In the spec anchors_kept (one process answering every anchor row, keep_anchors) timm in a CUDA
graph took 25.7 ms at batch 256 on an H100, as eager timm did; in a process of its own, on the
same machine, 22.9 ms. This probe runs the steps below in one process, vit_b fp16 (timm's init,
seed 1234), and for each the median of 20 timed calls (CUDA events, the anchors' timing), the
GPU's temperature, SM clock and power just before and just after them (nvidia-smi), and the
kernels one call launches (torch.profiler: name, count, total device time). Each graph holds
its model; the probe's first version, which did not, reproduced the 22.9 ms and so found the
cause: the anchors' one-row runs replayed graphs whose model had been freed
(experiments/results/20261127_NVIDIA_H200_anchor_process).

  graph_first         a model captured in a CUDA graph before anything else ran
  eager               a second model, eager forwards
  graph_first_again   the first graph replayed again, after the eager forwards
  graph_second        the second model captured now and replayed
  graph_first_rested  the first graph again after 30 s with the GPU idle
  graph_first_hot     the first graph again after 10 s of back-to-back replays

Writes OUT/probe.csv and OUT/kernels.txt. Exit 2 on bad arguments.

  python3 -m experiments.probes.anchor_process --out OUT [--batch 256]
"""
import argparse
import csv
import os
import subprocess
import sys
import time

from experiments.anchors import harness  # standard library only: the anchors' timing, torch handed in


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args(argv)
    if args.batch < 1:
        print(f"error: --batch must be positive, got {args.batch}", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        print(f"error: cannot create {args.out}: {e}", file=sys.stderr)
        return 2
    import torch
    import timm
    if not torch.cuda.is_available():
        print("error: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")

    def model():
        torch.manual_seed(1234)
        return timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=1000).eval().to(dev).half()

    images = torch.randn(args.batch, 3, 224, 224, device=dev).half()

    def graphed(net):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                net(images)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            out = net(images)

        def replay():  # holds the model, the graph and its output: the graph reads and writes them
            g.replay()
            return net, out
        return replay

    def eager(net):
        def call():
            with torch.no_grad():
                net(images)
        return call

    def median_ms(call):  # the anchors' timing: 5 warm-up calls, 20 event pairs
        return harness.time_events(torch, call, 5, 20, False, torch.cuda.current_device())["median_us"] / 1000

    def kernels(call):
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
            if us > 0:
                rows.append((us, e.count, e.key))
        return sorted(rows, reverse=True)

    def gpu_state():
        q = "temperature.gpu,clocks.sm,power.draw"
        r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-i",
                            str(torch.cuda.current_device())], capture_output=True, text=True)
        return [v.strip() for v in r.stdout.strip().split(",")] if r.returncode == 0 else ["", "", ""]

    def busy(call, seconds):
        end = time.time() + seconds
        while time.time() < end:
            for _ in range(10):
                call()
            torch.cuda.synchronize()

    first = graphed(model())
    second_model = model()
    results, listing = [], []

    def step(name, call, before=None):
        if before:
            before()
        state = gpu_state()
        ms = median_ms(call)
        after = gpu_state()  # right after the timed calls: the clock they ran at, about
        results.append((name, ms, *state, *after))
        listing.append((name, kernels(call)))
        print(f"{name:<20} {ms:.3f} ms  (before: {state[0]} C, {state[1]} MHz, {state[2]} W; "
              f"after: {after[0]} C, {after[1]} MHz, {after[2]} W)", flush=True)

    step("graph_first", first)
    step("eager", eager(second_model))
    step("graph_first_again", first)
    step("graph_second", graphed(second_model))
    step("graph_first_rested", first, lambda: time.sleep(30))
    step("graph_first_hot", first, lambda: busy(first, 10))

    with open(os.path.join(args.out, "probe.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "median_ms", "temperature_c", "sm_clock_mhz", "power_w", "temperature_c_after",
                    "sm_clock_mhz_after", "power_w_after", "batch", "gpu", "torch", "timm"])
        for name, ms, *state in results:
            w.writerow([name, f"{ms:.4f}", *state, args.batch, torch.cuda.get_device_name(), torch.__version__,
                        timm.__version__])
    with open(os.path.join(args.out, "kernels.txt"), "w") as f:
        for name, rows in listing:
            f.write(f"== {name}: device us, count, kernel\n")
            for us, n, key in rows[:25]:
                f.write(f"{us:10.1f} {n:5d}  {key[:150]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
