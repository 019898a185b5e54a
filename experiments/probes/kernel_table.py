"""The per-kernel table of one CUDA-graph replay: where a forward's time goes.

Joins the kernel tracer's timestamps (common/profile/kernel_trace.cpp; every node of every replay
of the timed graph) with Nsight Compute's counters of the same graph's nodes (DRAM bytes, tensor-core
operations) and the GPU's measured ceilings (common/ceilings), and writes one row per kernel node:

  index, name, grid, block, cluster, waves (CTAs over SMs), median duration, the median gap before it
  (its start minus the previous node's end in the same replay; the first node's: after the previous
  replay's last kernel), DRAM bytes, tensor FLOPs by type, its floor max(bytes / copy rate,
  FLOPs / tensor-core rate of their type) and duration over floor, and the bytes its SMs read from
  and wrote to L2 (empty where the profiler has no such counter).

The summary says where the replay's time goes: kernels near their floor (within 2x), the time kernels
spend above their floor, and the gaps. experiments/probes/kernel_table.sh makes the inputs.
Standard library only.
"""
import argparse
import csv
import re
import statistics
import sys
from collections import defaultdict

NEAR_FLOOR = 2.0  # a kernel within this factor of its floor counts as "at its floor"
SECTOR_BYTES = 32  # an L2 sector


def die(msg):
    print(f"kernel_table.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")


def replays(trace_rows):
    """The timed graph's replays: lists of kernel records (start-ordered), one list per replay,
    the graph with the most kernel records being the timed one."""
    by_graph = defaultdict(list)
    for r in trace_rows:
        if r["graph_id"] != "0":
            by_graph[r["graph_id"]].append(r)
    if not by_graph:
        die("the trace holds no kernel launched from a CUDA graph")
    rows = max(by_graph.values(), key=len)
    rows.sort(key=lambda r: int(r["start_ns"]))
    nodes = len({r["graph_node_id"] for r in rows})
    if len(rows) % nodes:
        die(f"{len(rows)} kernel records are not whole replays of {nodes} nodes")
    out = [rows[i:i + nodes] for i in range(0, len(rows), nodes)]
    order = [r["graph_node_id"] for r in out[0]]
    for k, rep in enumerate(out):
        if sorted(r["graph_node_id"] for r in rep) != sorted(order):
            die(f"replay {k} does not run each node once")
    return out


def ncu_nodes(path, count):
    """The last `count` kernels Nsight Compute profiled (the graph's nodes; earlier ones are the
    eager forward and, for the FP8 steps, the calibration), in launch order."""
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    if len(table) < 2:
        die(f"{path}: no Nsight Compute rows")
    header = table[0]
    rows = [dict(zip(header, r)) for r in table[1:] if r and r[0].strip()]  # the units row has no ID
    if len(rows) < count:
        die(f"{path}: {len(rows)} profiled kernels, fewer than the graph's {count} nodes")
    return rows[-count:]


def number(s):
    s = (s or "").replace(",", "").strip()
    return float(s) if s and s.lower() != "n/a" else 0.0


def ceilings(path):
    rows = {r["version"]: r for r in read_csv(path) if r["status"] == "ok"}
    try:
        return (float(rows["copy"]["gbps"]) * 1e9, float(rows["gemm_fp16"]["tflops"]) * 1e12,
                float(rows["gemm_fp8"]["tflops"]) * 1e12, int(rows["copy"]["sm_count"]))
    except (KeyError, ValueError):
        die(f"{path}: needs ok rows copy (gbps), gemm_fp16 and gemm_fp8 (tflops)")


def short_name(mangled):
    """A readable kernel name: the identifier after the last namespace of a mangled name."""
    if not mangled.startswith("_Z"):
        return mangled[:48]  # a C name (cuBLASLt's kernels)
    words, i = [], 0
    while (m := re.compile(r"(\d+)([A-Za-z_])").search(mangled, i)):
        n = int(m.group(1))
        words.append(mangled[m.start(2):m.start(2) + n])
        i = m.start(2) + n
    skip = {"cutlass", "cute", "study", "device", "device_kernel", "kernel", "detail", "gemm"}
    useful = [w for w in words if w not in skip and not w.startswith("_")]
    useful.sort(key=lambda w: "kernel" not in w.lower())  # a function named *kernel* first
    return (useful[0] if useful else words[-1] if words else mangled)[:48]


def table(trace_path, ncu_path, ceilings_path):
    reps = replays(read_csv(trace_path))
    copy_rate, fp16_rate, fp8_rate, sms = ceilings(ceilings_path)
    first = reps[0]
    prof = ncu_nodes(ncu_path, len(first))
    rows = []
    for i, rec in enumerate(first):
        node = rec["graph_node_id"]
        durs, gaps = [], []
        for k, rep in enumerate(reps):
            j = next(j for j, r in enumerate(rep) if r["graph_node_id"] == node)
            r = rep[j]
            durs.append((int(r["end_ns"]) - int(r["start_ns"])) / 1e3)
            prev_end = rep[j - 1]["end_ns"] if j else (reps[k - 1][-1]["end_ns"] if k else None)
            if prev_end is not None:
                gaps.append((int(r["start_ns"]) - int(prev_end)) / 1e3)
        p = prof[i]
        # cuBLASLt may pick another kernel of the same GEMM in the profiled process: kept, and named.
        other = "" if p.get("Kernel Name") == rec["name"] else short_name(p.get("Kernel Name", "?"))
        dram = number(p.get("dram__bytes_read.sum")) + number(p.get("dram__bytes_write.sum"))
        fp16_ops = number(p.get("sm__ops_path_tensor_src_fp16.sum"))
        fp8_ops = number(p.get("sm__ops_path_tensor_src_fp8.sum"))
        floor_us = max(dram / copy_rate, fp16_ops / fp16_rate + fp8_ops / fp8_rate) * 1e6
        l2_read, l2_write = (p.get(f"lts__t_sectors_srcunit_tex_op_{op}.sum") for op in ("read", "write"))
        l2 = "" if l2_read is None else int(SECTOR_BYTES * (number(l2_read) + number(l2_write)))
        dur = statistics.median(durs)
        grid = int(rec["grid"])
        rows.append({
            "index": i, "kernel": short_name(rec["name"]), "grid": grid, "block": rec["block"],
            "cluster": rec["cluster"], "waves": round(grid / sms, 3), "duration_us": round(dur, 3),
            "gap_before_us": round(statistics.median(gaps), 3) if gaps else "",
            "dram_bytes": int(dram), "fp16_tensor_flops": int(fp16_ops), "fp8_tensor_flops": int(fp8_ops),
            "floor_us": round(floor_us, 3), "x_floor": round(dur / floor_us, 2) if floor_us > 0 else "",
            "ncu_duration_us": round(number(p.get("gpu__time_duration.sum")) / 1e3, 3),
            "l2_bytes": l2,
            "ncu_kernel": other,
            "mangled": rec["name"],
        })
    spans = [(int(rep[-1]["end_ns"]) - int(rep[0]["start_ns"])) / 1e3 for rep in reps]
    period = [(int(reps[k][0]["start_ns"]) - int(reps[k - 1][0]["start_ns"])) / 1e3 for k in range(1, len(reps))]
    return rows, {"replays": len(reps), "span_us": statistics.median(spans),
                  "period_us": statistics.median(period) if period else float("nan")}


def summary(step, batch, rows, times):
    kernels = sum(r["duration_us"] for r in rows)
    gaps = sum(r["gap_before_us"] or 0 for r in rows)
    floor = sum(r["floor_us"] for r in rows)
    near = [r for r in rows if r["x_floor"] != "" and r["x_floor"] <= NEAR_FLOOR]
    above = sum(r["duration_us"] - r["floor_us"] for r in rows)
    flops = sum(r["fp16_tensor_flops"] + r["fp8_tensor_flops"] for r in rows)
    dram = sum(r["dram_bytes"] for r in rows)
    l2 = [r["l2_bytes"] for r in rows if r["l2_bytes"] != ""]
    full = sum(1 for r in rows if r["grid"] >= 132)
    other = sum(1 for r in rows if r["ncu_kernel"])
    lines = [
        f"{step}, batch {batch}: {len(rows)} kernels per replay, {times['replays']} replays traced;"
        f" one replay every {times['period_us']:.1f} us (first kernel start to last end {times['span_us']:.1f} us)",
        f"  kernels {kernels:.1f} us + gaps {gaps:.1f} us; their floors add to {floor:.1f} us"
        f" ({dram / 1e6:.1f} MB from DRAM, {flops / 1e9:.2f} G tensor FLOPs"
        + (f", {sum(l2) / 1e6:.1f} MB between the SMs and L2)" if l2 else ")"),
        f"  {len(near)} kernels within {NEAR_FLOOR:g}x of their floor ({sum(r['duration_us'] for r in near):.1f} us);"
        f" time above the floors {above:.1f} us; {full} of {len(rows)} kernels launch at least one CTA per SM (132)",
    ]
    if other:
        lines.append(f"  {other} nodes ran another kernel of the same GEMM under Nsight Compute (cuBLASLt's pick"
                     " per process): their bytes and FLOPs are that kernel's")
    worst = sorted(rows, key=lambda r: r["floor_us"] - r["duration_us"])[:5]
    lines.append("  most time above its floor: " + "; ".join(
        f"#{r['index']} {r['kernel']} {r['duration_us']:.1f} us (floor {r['floor_us']:.1f}, grid {r['grid']})" for r in worst))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True, help="the kernel tracer's CSV")
    ap.add_argument("--ncu", required=True, help="Nsight Compute's raw CSV of the same program")
    ap.add_argument("--ceilings", required=True, help="CSV rows of common/ceilings on the same GPU")
    ap.add_argument("--step", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--out", required=True, help="the table, as CSV")
    a = ap.parse_args(argv)
    rows, times = table(a.trace, a.ncu, a.ceilings)
    try:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    except OSError as e:
        die(f"cannot write {a.out}: {e.strerror}")
    print(summary(a.step, a.batch, rows, times))


if __name__ == "__main__":
    main()
