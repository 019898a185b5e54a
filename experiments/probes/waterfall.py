"""The speed-of-light waterfall of a forward: from the floor to the time one replay takes.

    python3 -m experiments.probes.waterfall RUN_DIR [--batch B] [--predicted CSV] [--out-csv CSV]

For each encoder step measured in RUN_DIR (vit_b at 224 px, batch B: 1 unless told; the kernel
tables must be of that batch, kernel_table.sh's KT_BATCH), five bars that add up to one traced
replay, each what the bound before it leaves out:
- floor: max(every weight read once at the copy rate, the forward's FLOPs at the tensor-core
  ceiling of their precision), from the model's shape and the run's ceilings.csv;
- clock: the same floor at the SM clock the step's bench rows ran at (their median), beyond the
  floor at the clock the ceilings ran at: the power limit's share (FLOPs scale with the SM clock,
  the copy rate does not, so a floor held by the weights keeps this bar at zero);
- L2 traffic: the bytes the SMs moved to and from L2 (Nsight Compute, summed over the replay's
  kernels: kernels/STEP.csv from kernel_table.sh) at the L2 read rate (l2_read.csv: the largest
  buffer inside L2, median over rounds), beyond the floor at the bench's clock;
- chain: the forward's dependent work beyond that: for a graph of kernels every kernel's duration
  (each waits for the one before); for a tile-scheduled step the other kernels plus the
  persistent kernel's critical path as its tasks ran it (tasks/path_STEP.csv from task_clock.sh)
  and its start and end around the path;
- hand-offs: the gaps between kernels (one replay to the next included), and the tile-scheduled
  path's hand-offs and queued time; where kernels overlap their predecessors (programmatic
  dependent launch) by more than the gaps add up to, no bar, and the overlap comes off the chain.
The five add up to the traced replay (kernels plus gaps). Beside it, the step's median over the
run's rounds of the untraced bench at that batch, and its range. A predicted step (a row of
--predicted: its L2 traffic, chain and hand-offs as its design predicts them, the bar it removes;
no clock bar) comes after the measured ones with its predicted range. Writes the bars as CSV into
RUN_DIR/waterfall/ (waterfall.csv at batch 1, waterfall_bB.csv at batch B) unless told otherwise
(a sub-folder: the report reads every CSV directly in a run folder as rows of the study's schema),
and prints them; the report draws the figure (analysis/encoder_waterfall.py). Exit 2 with one
line on stderr for a missing or malformed input. Standard library only.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

# vit_b at 224 px (the only shape the batch-1 work targets): 16 x 16 patches, 197 tokens.
VIT_B = dict(hidden=768, blocks=12, heads=12, mlp=3072, tokens=197, patches=196, patch_in=3 * 16 * 16,
             classes=1000)
FP8_PRECISIONS = ("fp8_e4m3",)
BARS = ("floor", "clock", "l2", "chain", "handoffs")
PREDICTED_COLUMNS = ("step", "precision", "l2_mb", "chain_us", "handoffs_us", "low_us", "high_us", "removes")
CSV_COLUMNS = ("step", "kind", "precision", "weights_us", "math_us", "floor_us", "clock_ratio", "floor_at_clock_us",
               "l2_mb", "l2_us", "chain_us", "handoffs_us", "floor_bar_us", "clock_bar_us", "l2_bar_us",
               "chain_bar_us", "handoffs_bar_us", "total_us", "bench_us", "bench_low_us", "bench_high_us", "low_us",
               "high_us", "removes")


def die(msg):
    print(f"waterfall.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        die(f"cannot read {path}: {e}")


def number(row: dict, column: str, where) -> float:
    try:
        return float(row[column])
    except (KeyError, TypeError, ValueError):
        die(f"{where}: column {column} missing or not a number")


def is_fp8(precision: str) -> bool:
    return precision in FP8_PRECISIONS or precision == "fp8"


def model_floor(precision: str, copy_gbps: float, fp16_tflops: float, fp8_tflops: float, shape=VIT_B,
                batch: int = 1):
    """(weights_us, math_us): every parameter read once at the copy rate (the blocks' GEMM weights
    one byte each in FP8, everything else fp16), and the FLOPs of a forward of `batch` images at the
    tensor-core ceiling of the precision that runs them (FP8: the blocks' GEMMs; attention, the
    patch embedding and the head stay fp16)."""
    d, b, t = shape["hidden"], shape["blocks"], shape["tokens"]
    gemm_params = b * (3 * d * d + d * d + 2 * d * shape["mlp"])
    other_params = (b * (3 * d + d + shape["mlp"] + d + 4 * d)  # biases and the two LayerNorms
                    + shape["patch_in"] * d + d + t * d + d  # patch embedding, position embedding, class token
                    + 2 * d + d * shape["classes"] + shape["classes"])  # final LayerNorm, head
    weight_bytes = gemm_params * (1 if is_fp8(precision) else 2) + other_params * 2
    gemm_flops = 2 * t * gemm_params
    other_flops = (b * 2 * 2 * t * t * d  # attention: scores and their product with the values
                   + 2 * shape["patches"] * shape["patch_in"] * d + 2 * d * shape["classes"])
    if is_fp8(precision):
        math_s = gemm_flops / (fp8_tflops * 1e12) + other_flops / (fp16_tflops * 1e12)
    else:
        math_s = (gemm_flops + other_flops) / (fp16_tflops * 1e12)
    return weight_bytes / (copy_gbps * 1e9) * 1e6, batch * math_s * 1e6


@dataclass
class Bars:
    step: str
    kind: str  # measured | predicted
    precision: str
    weights_us: float
    math_us: float
    l2_mb: float
    l2_us: float
    chain_us: float
    handoffs_us: float
    bench_us: float | None = None
    bench_range: tuple[float, float] | None = None
    low_us: float | None = None
    high_us: float | None = None
    removes: str = ""
    notes: list[str] = field(default_factory=list)
    clock_ratio: float = 1.0  # the ceilings' SM clock over the bench's (above 1: the bench ran slower)

    @property
    def floor_us(self) -> float:
        return max(self.weights_us, self.math_us)

    @property
    def floor_at_clock_us(self) -> float:
        """The floor with the FLOPs at the bench's clock (never faster than at the ceilings')."""
        return max(self.weights_us, self.math_us * max(1.0, self.clock_ratio))

    def bar(self, name: str) -> float:
        """The waterfall's segments: each bound beyond the one before (never below zero: a chain
        shorter than the traffic bound would mean the L2 rate was beaten, and is noted)."""
        traffic = max(self.floor_at_clock_us, self.l2_us)
        return {"floor": self.floor_us, "clock": self.floor_at_clock_us - self.floor_us,
                "l2": traffic - self.floor_at_clock_us, "chain": max(0.0, self.chain_us - traffic),
                "handoffs": self.handoffs_us}[name]

    @property
    def total_us(self) -> float:
        return sum(self.bar(b) for b in BARS)

    def row(self) -> dict:
        r = dict(step=self.step, kind=self.kind, precision=self.precision, weights_us=self.weights_us,
                 math_us=self.math_us, floor_us=self.floor_us, clock_ratio=self.clock_ratio,
                 floor_at_clock_us=self.floor_at_clock_us, l2_mb=self.l2_mb, l2_us=self.l2_us,
                 chain_us=self.chain_us, handoffs_us=self.handoffs_us, total_us=self.total_us,
                 bench_us=self.bench_us, bench_low_us=self.bench_range[0] if self.bench_range else None,
                 bench_high_us=self.bench_range[1] if self.bench_range else None, low_us=self.low_us,
                 high_us=self.high_us, removes=self.removes)
        r.update({f"{b}_bar_us": self.bar(b) for b in BARS})
        return {k: "" if v is None else (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}


def ceilings(run: Path) -> tuple[float, float, float, str, str, dict[str, float]]:
    """(copy GB/s, fp16 TFLOP/s, FP8 TFLOP/s, GPU, commit, {"fp16"|"fp8": the SM clock its GEMM
    ceiling ran at, MHz, where the row has it}) from the run's ceilings.csv."""
    path = run / "ceilings.csv"
    rows = {r["version"]: r for r in read_csv(path) if r.get("status") == "ok"}
    if not all(v in rows for v in ("copy", "gemm_fp16", "gemm_fp8")):
        die(f"{path}: needs ok rows copy, gemm_fp16 and gemm_fp8")
    clocks = {p: number(rows[f"gemm_{p}"], "sm_clock_mhz", path) for p in ("fp16", "fp8")
              if rows[f"gemm_{p}"].get("sm_clock_mhz")}
    return (number(rows["copy"], "gbps", path), number(rows["gemm_fp16"], "tflops", path),
            number(rows["gemm_fp8"], "tflops", path), rows["copy"].get("gpu", "?"), rows["copy"].get("commit", "?"),
            clocks)


def l2_rate_gbps(run: Path) -> float:
    """The L2 read rate: every SM reading the largest buffer that stays in L2 (l2_read.csv's rows
    without --sms, below 64 MiB), the median over rounds."""
    path = run / "l2_read.csv"
    rows = [r for r in read_csv(path) if r.get("status") == "ok" and r.get("version") == "l2_read"
            and "on SMs below" not in r.get("note", "")]  # the rows of a few SMs reading alone
    sizes = {}
    for r in rows:
        mib = number(r, "device_bytes", path) / 2**20
        if mib < 64:
            sizes.setdefault(round(mib), []).append(number(r, "gbps", path))
    if not sizes:
        die(f"{path}: no l2_read row of a buffer inside L2")
    return statistics.median(sizes[max(sizes)])


def bench_times(run: Path, batch: int = 1) -> dict[str, tuple[str, list[float], list[float]]]:
    """step -> (precision, the medians of its rounds at `batch`, the SM clocks its rows report)
    from every CSV in the run folder and its first-level sub-folders (a sweep writes its spec's
    folder)."""
    out: dict[str, tuple[str, list[float], list[float]]] = {}
    for path in sorted(list(run.glob("*.csv")) + list(run.glob("*/*.csv"))):
        rows = read_csv(path)
        if not rows or "family" not in rows[0] or "median_us" not in rows[0]:
            continue
        for r in rows:
            if r["family"] == "encoder" and r["status"] == "ok" and r["batch"] == str(batch) and r["model"] == "vit_b" \
                    and r["image_size"] == "224":
                entry = out.setdefault(r["version"], (r["precision"], [], []))
                entry[1].append(number(r, "median_us", path))
                if r.get("sm_clock_mhz"):
                    entry[2].append(number(r, "sm_clock_mhz", path))
    return out


def measured(run: Path, step: str, precision: str, rates, l2_gbps: float, batch: int = 1) -> Bars:
    copy, fp16, fp8 = rates
    table_path = run / "kernels" / f"{step}.csv"
    kernels = read_csv(table_path)
    if not kernels:
        die(f"{table_path}: no kernels")
    if any(k.get("l2_bytes", "") == "" for k in kernels):
        die(f"{table_path}: no l2_bytes (a table from before kernel_table.sh measured L2 traffic)")
    durations = [number(k, "duration_us", table_path) for k in kernels]
    gaps = sum(number(k, "gap_before_us", table_path) for k in kernels)
    l2_bytes = sum(number(k, "l2_bytes", table_path) for k in kernels)
    chain, handoffs = sum(durations), gaps
    notes = []
    if gaps < 0:
        # Kernels that overlap their predecessor's tail (programmatic dependent launch) make the
        # replay shorter than the sum of their durations: the overlap comes off the chain.
        chain, handoffs = chain + gaps, 0.0
        notes.append(f"kernels overlapped by {-gaps:.1f} us in all, taken off the chain")
    path_file = run / "tasks" / f"path_{step}.csv"
    if path_file.exists():
        # The persistent kernel (the longest node) splits into its path's run, hand-off and queued
        # time; what it spends outside the path (starting, ending) stays in the chain.
        path = [r for r in read_csv(path_file) if r["kind"].startswith("path")]
        if len(path) != 1:
            die(f"{path_file}: no single path row")
        p = path[0]
        moved = number(p, "handoff_us", path_file) + number(p, "queued_us", path_file)
        chain -= moved
        handoffs += moved
        notes.append(f"the persistent kernel's path from {path_file.name}")
    weights, math = model_floor(precision, copy, fp16, fp8, batch=batch)
    return Bars(step, "measured", precision, weights, math, l2_bytes / 1e6, l2_bytes / (l2_gbps * 1e3), chain,
                handoffs, notes=notes)


def predicted(path: Path, rates, l2_gbps: float, batch: int = 1) -> list[Bars]:
    rows = read_csv(path)
    if rows and any(c not in rows[0] for c in PREDICTED_COLUMNS):
        die(f"{path}: needs columns {', '.join(PREDICTED_COLUMNS)}")
    out = []
    for r in rows:
        weights, math = model_floor(r["precision"], *rates, batch=batch)
        l2_mb = number(r, "l2_mb", path)
        out.append(Bars(r["step"], "predicted", r["precision"], weights, math, l2_mb, l2_mb * 1e6 / (l2_gbps * 1e9) * 1e6,
                        number(r, "chain_us", path), number(r, "handoffs_us", path), low_us=number(r, "low_us", path),
                        high_us=number(r, "high_us", path), removes=r["removes"]))
    return out


def waterfall(run: Path, predicted_csv: Path | None = None, batch: int = 1) -> tuple[list[Bars], dict]:
    """Every step with a kernel table in RUN_DIR/kernels, then the predicted ones, at `batch`."""
    copy, fp16, fp8, gpu, commit, ceiling_clocks = ceilings(run)
    l2 = l2_rate_gbps(run)
    rates = (copy, fp16, fp8)
    benches = bench_times(run, batch)
    tables = sorted((run / "kernels").glob("*.csv")) if (run / "kernels").is_dir() else []
    # STEP.csv; not the ceilings, nor kernel_table.sh's STEP.trace.csv and STEP.ncu.csv
    steps = [t.stem for t in tables if "." not in t.stem and t.stem != "ceilings"]
    if not steps:
        die(f"{run}/kernels: no kernel table (experiments/probes/kernel_table.sh)")
    bars = []
    for step in steps:
        if step not in benches:
            die(f"{run}: no batch-{batch} bench row of {step} (vit_b, 224 px) beside its kernel table")
        precision, times, clocks = benches[step]
        b = measured(run, step, precision, rates, l2, batch)
        b.bench_us, b.bench_range = statistics.median(times), (min(times), max(times))
        ceiling_clock = ceiling_clocks.get("fp8" if is_fp8(precision) else "fp16")
        if clocks and ceiling_clock:
            b.clock_ratio = ceiling_clock / statistics.median(clocks)
        bars.append(b)
    if predicted_csv is not None:
        bars += predicted(predicted_csv, rates, l2, batch)
    return bars, dict(gpu=gpu, commit=commit, l2_gbps=l2, copy_gbps=copy, run=run.name, batch=batch)


def write_csv(bars: list[Bars], path: Path):
    try:
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
            w.writeheader()
            for b in bars:
                w.writerow(b.row())
    except OSError as e:
        die(f"cannot write {path}: {e.strerror}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a run folder with ceilings.csv, l2_read.csv, kernels/ and the bench rows")
    ap.add_argument("--batch", type=int, default=1, help="the batch of the kernel tables and bench rows (default 1)")
    ap.add_argument("--predicted", type=Path, help="CSV of predicted steps (" + ", ".join(PREDICTED_COLUMNS) + ")")
    ap.add_argument("--out-csv", type=Path, help="default RUN/waterfall/waterfall.csv")
    a = ap.parse_args(argv)
    if not a.run.is_dir():
        die(f"{a.run}: no such run folder")
    if a.batch < 1:
        die(f"--batch must be positive, got {a.batch}")
    bars, _ = waterfall(a.run, a.predicted, a.batch)
    if a.out_csv is None:
        (a.run / "waterfall").mkdir(exist_ok=True)
    name = "waterfall" if a.batch == 1 else f"waterfall_b{a.batch}"
    write_csv(bars, a.out_csv or a.run / "waterfall" / f"{name}.csv")
    for b in bars:
        parts = ", ".join(f"{n} {b.bar(n):.1f}" for n in BARS)
        tail = (f"; bench {b.bench_us:.1f} us" if b.bench_us is not None
                else f"; predicted {b.low_us:.0f}-{b.high_us:.0f} us, removes {b.removes}")
        print(f"{b.step}: {parts} -> {b.total_us:.1f} us{tail}")


if __name__ == "__main__":
    main()
