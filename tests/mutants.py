#!/usr/bin/env python3
"""The mutation suite: plant each bug of common/harness/test_hooks.cpp in turn and require the test
named for it to fail; run the same tests without a bug first, which must pass (else a failure
proves nothing). Needs a build configured with -Dtest_hooks=true (the bugs exist only there) and
a GPU.

  tests/mutants.py --build-dir DIR [--out FOLDER] [--only NAME ...] [--jobs N]

Writes FOLDER/mutants.md (a table: each bug, the test that should catch it, caught or not, the
test's first failing check) and FOLDER/mutants.log (every run's output); exits 0 only when every
control passed and every bug was caught. A bug only two GPUs can show (TWO_GPUS) is listed as not
run on a node with fewer, and said so in the record's last line.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ENCODER = "stages/encoder/test_encoder_{}"
E14, E15, E13 = ENCODER.format("e14_l2_prefetch"), ENCODER.format("e15_fp8_attention_e4m3"), ENCODER.format(
    "e13_persistent")
E20, E24, E28 = ENCODER.format("e20_e4m3_qkv"), ENCODER.format("e24_tiled"), ENCODER.format("e28_folded_ln")
E30, E32 = ENCODER.format("e30_row_stats"), ENCODER.format("e32_read_once")
SESSION = "stages/encoder/test_encoder_session"
EVERY_BLOCK = "every block's residual stream*"
FP8_STAGES = "FP8: each stage*"
# (bug, test executable under the build folder, doctest test case, why that test catches it)
MUTANTS = [
    ("mlp_skips_last_row_tile", E14, EVERY_BLOCK, "the residual stream, every row, after each block"),
    ("attention_zeroes_last_query_tile", E14, "the last block's QKV*", "the attention output, every row"),
    ("attention_drops_last_key_tile", E14, EVERY_BLOCK, "the logits and the stream, at tokens past one key tile"),
    ("wrong_non_cls_row", E14, EVERY_BLOCK, "the residual stream, every row (the logits see only the cls row)"),
    ("softmax_scale_off", "stages/attention/test_attention_v9_softmax_overlap", "every width of the last key tile*",
     "the attention family's test, at fp16 tolerance"),
    ("layernorm_gamma_beta_swapped", E14, EVERY_BLOCK, "random LayerNorm gains and shifts"),
    ("fp8_fc1_bias_dropped", E15, FP8_STAGES, "fc1 + GELU against the recipe on the GPU's own inputs"),
    ("fp8_scale_off", E15, FP8_STAGES, "fc2's branch against the recipe on the GPU's own inputs"),
    ("attention_mean", E15, FP8_STAGES, "the attention output in E4M3 against the recipe"),
    ("e4m3_scores_unscaled", E20, FP8_STAGES, "the attention output in E4M3, from E4M3 Q, K and V, against the recipe"),
    ("key_split_unweighted", "stages/attention/test_attention_v12_key_split", "matches the CPU reference*",
     "the attention family's test at batch 1, where the keys are split"),
    ("prefetch_noop", E14, "the L2 prefetch leaves every bit*", "the device count of the bytes requested"),
    ("persistent_no_barrier", E13, EVERY_BLOCK, "the residual stream of the persistent kernel, arena poisoned"),
    ("tiled_signal_dropped", E24, EVERY_BLOCK, "the dependency counters read back after each forward"),
    ("folded_stats_short", E28, EVERY_BLOCK, "the residual stream, every row, after each block"),
    ("row_stats_short", E30, EVERY_BLOCK, "the residual stream, every row, after each block"),
    ("read_once_slice_dropped", E32, EVERY_BLOCK, "the residual stream, every row, after each block"),
    ("read_once_no_meeting", E32, EVERY_BLOCK, "the stream after each block, partial sums poisoned first"),
    ("read_once_first_stats_skipped", E32, EVERY_BLOCK, "block 0's stream, the statistics buffer poisoned first"),
    ("small_m_slice_dropped", "common/gemm/test_cutlass_gemm", "every few-rows split-K kernel*",
     "each kernel of two or more K slices against ref::linear"),
    ("session_legacy_stream", SESSION, "a call runs on the caller's stream*",
     "the input written on a non-blocking stream after a 50 ms hold, read by the call"),
    ("session_graph_per_output", SESSION, "logits and features alternate*",
     "the call graph the two outputs launch, one executable"),
    ("session_device_not_restored", SESSION, "a session on another device*",
     "the caller's device after the session's birth and a call on device 1"),
    ("e4m3_no_saturation", E15, "FP8: every E4M3 stage saturating*",
     "LN1 and LN2 in E4M3 against the recipe, calibrated amax an eighth of the data's"),
    ("e4m3_clamp_low", E15, "FP8: every E4M3 stage saturating*",
     "the share of each E4M3 stage's values at 448, the recipe's against the GPU's"),
]


# Bugs that only a node with two GPUs can show (the device a call leaves current).
TWO_GPUS = {"session_device_not_restored"}


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def has_test_hooks(build):
    info = Path(build) / "meson-info" / "intro-buildoptions.json"
    if not info.is_file():
        return None
    for opt in json.loads(info.read_text()):
        if opt.get("name") == "test_hooks":
            return bool(opt.get("value"))
    return False


def provenance(build):
    """The commit the build's executables were compiled from (common/build_info.cpp, written by
    the build) and the GPU the suite runs on: a record names both, like a CSV row."""
    info = Path(build) / "common" / "build_info.cpp"
    m = re.search(r'kBuildCommit = "([^"]*)"', info.read_text()) if info.is_file() else None
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.splitlines()[0].strip()
    except (OSError, subprocess.CalledProcessError, IndexError):
        gpu = "unknown"
    return (m.group(1) if m else "unknown"), gpu


def run(build, exe, case, plant, timeout):
    env = dict(os.environ)
    env.pop("STUDY_PLANT", None)
    if plant:
        env["STUDY_PLANT"] = plant
    env["STUDY_REQUIRE_GPU"] = "1"  # a skip is not a pass, and not a catch either
    start = time.monotonic()
    try:
        p = subprocess.run([str(Path(build) / exe), f"--test-case={case}"], env=env, capture_output=True,
                           text=True, timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = 124, f"timed out after {timeout} s\n{e.stdout or ''}"
    return rc, out, time.monotonic() - start


def first_failure(out):
    """The first line doctest prints for a failed check (or the last line of output)."""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    for i, line in enumerate(lines):
        if "ERROR:" in line or "FATAL" in line or "error:" in line:
            detail = lines[i + 1] if i + 1 < len(lines) else ""
            return (line + " " + detail).strip()[:200]
    return lines[-1][:200] if lines else ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--only", nargs="*", help="run these bugs alone")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args(argv)

    hooks = has_test_hooks(a.build_dir)
    if hooks is None:
        sys.exit(f"error: {a.build_dir} is not a configured meson build folder")
    if not hooks:
        sys.exit(f"error: {a.build_dir} was configured without test hooks: meson configure {a.build_dir} "
                 "-Dtest_hooks=true (a separate build folder: never time one with hooks)")
    mutants = [m for m in MUTANTS if not a.only or m[0] in a.only]
    unknown = set(a.only or []) - {m[0] for m in MUTANTS}
    if unknown:
        sys.exit(f"error: no such bug: {', '.join(sorted(unknown))} (known: {', '.join(m[0] for m in MUTANTS)})")
    for _, exe, _, _ in mutants:
        if not (Path(a.build_dir) / exe).is_file():
            sys.exit(f"error: {a.build_dir}/{exe} is not built (ninja -C {a.build_dir} {exe})")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = gpu_count()
    not_run = [m for m in mutants if m[0] in TWO_GPUS and gpus < 2]
    mutants = [m for m in mutants if m not in not_run]

    controls = sorted({(exe, case) for _, exe, case, _ in mutants})
    jobs = [(None, exe, case) for exe, case in controls] + [(m[0], m[1], m[2]) for m in mutants]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {pool.submit(run, a.build_dir, exe, case, plant, a.timeout): (plant, exe, case)
                   for plant, exe, case in jobs}
        for f in concurrent.futures.as_completed(futures):
            plant, exe, case = futures[f]
            results[(plant, exe, case)] = f.result()
            rc, _, secs = results[(plant, exe, case)]
            what = plant or "control (no bug)"
            print(f"  {what:34s} {Path(exe).name} -tc='{case}': exit {rc} in {secs:.0f} s", flush=True)

    ok = True
    commit, gpu = provenance(a.build_dir)
    lines = ["# Mutation suite", "", f"Build: `{a.build_dir}` (test hooks) of commit `{commit}`, on {gpu}. "
             "Each bug planted alone (`STUDY_PLANT=<bug>`), its test run with `STUDY_REQUIRE_GPU=1`.", "",
             "| control: test without a bug | exit | passed |", "|---|---:|---|"]
    for exe, case in controls:
        rc, _, _ = results[(None, exe, case)]
        ok &= rc == 0
        lines.append(f"| `{Path(exe).name} -tc='{case}'` | {rc} | {'yes' if rc == 0 else '**no**'} |")
    lines += ["", "| bug | test that must fail | why it sees the bug | exit | caught | first failed check |",
              "|---|---|---|---:|---|---|"]
    with open(out / "mutants.log", "w", encoding="utf-8") as log:
        for plant, exe, case, why in mutants:
            rc, text, _ = results[(plant, exe, case)]
            caught = rc not in (0, 77)  # a failure, not a pass or a skip
            ok &= caught
            detail = first_failure(text).replace("|", "\\|") if caught else ""
            lines.append(f"| `{plant}` | `{Path(exe).name} -tc='{case}'` | {why} | {rc} | "
                         f"{'yes' if caught else '**no**'} | {detail} |")
        for plant, exe, case, why in not_run:
            lines.append(f"| `{plant}` | `{Path(exe).name} -tc='{case}'` | {why} | - | not run | needs two GPUs, "
                         f"this node has {gpus} |")
        for (plant, exe, case), (rc, text, secs) in sorted(results.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
            log.write(f"===== {plant or 'control'}: {exe} --test-case='{case}' (exit {rc}, {secs:.0f} s)\n{text}\n")
    verdict = 'Every bug caught, every control passed.' if ok else 'NOT every bug was caught (or a control failed).'
    if not_run:
        verdict += f" Not run here: {', '.join(m[0] for m in not_run)} (two GPUs needed)."
    lines += ["", f"**{verdict}**", ""]
    (out / "mutants.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
