#!/usr/bin/env python3
"""Bad command lines must give exactly one clear stderr line and exit code 2, for every bench
given on the command line. Without a GPU, a valid command line must say 'no CUDA device'.
--list-versions prints the family's one list (stages/<family>/versions.def, the encoder's step
table), which names the bench's own version.

A family's benches are one compiled bench.cpp linked under each version's name, and the name
enters only the version list and the rows written: so the bad command lines and the older CSV
schema run on the first bench of each family (and on every bench that belongs to no family);
the others get --list-versions, the no-GPU row and the timeline option (which only the stream
versions take): what could differ between two names of the same code. (Each run loads cuBLASLt
and cuDNN, ~0.2 s of CPU: the full list on every bench was a minute of CI.)"""
import os
import re
import subprocess
import sys
import tempfile

BAD = [
    (["--batch", "0"], "--batch must be >= 1"),
    (["--batch", "-3"], "--batch must be >= 1"),
    (["--image-size", "200"], "multiple of the patch size 16"),
    (["--image-size", "0"], "--image-size must be >= 1"),
    (["--model", "vit_huge"], "unknown model 'vit_huge'"),
    (["--iters", "ten"], "expects an integer"),
    (["--iters", "5x"], "expects an integer"),
    (["--warmup", "-1"], "--warmup must be >= 0"),
    (["--batch", "99999999999999999999"], "out of range"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["--batch"], "--batch needs a value"),
    (["--csv", "/nonexistent-dir/out.csv"], "cannot write CSV file"),
    (["--streams", "0"], "--streams must be >= 1 or 'sm'"),
    (["--streams", "many"], "expects an integer"),
    (["--energy", "-1"], "--energy must be seconds between 0 and 600"),
    (["--energy", "5s"], "--energy must be seconds between 0 and 600"),
]

# The header of CSVs written before the `rows` column and the ones after it were appended.
OLD_HEADER = ("run_id,utc,commit,gpu,sm_count,driver,cuda,cudnn,cublas,host,family,version,model,"
              "batch,image_size,tokens,hidden,heads,head_dim,streams,warmup,iters,flush_l2,"
              "mean_us,std_us,median_us,min_us,max_us,routine_us,gbps,tflops,launches,"
              "host_syncs,device_bytes,host_bytes,max_abs_err,rel_l2_err,status,note")


def run(exe, args):
    return subprocess.run([exe] + args, capture_output=True, text=True, timeout=120)


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


STAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stages")


def family_list(family):
    """The family's versions as its list in the source tree names them."""
    if family == "encoder":
        rows = [l.split("\t") for l in open(os.path.join(STAGES, "encoder", "steps.tsv")).read().splitlines()]
        return [r[0] for r in rows if len(r) > 1 and r[1] == "step"]
    text = open(os.path.join(STAGES, family, "versions.def")).read()
    return re.findall(r"^STUDY_VERSION\((\w+)\)", text, flags=re.M)


def tiled_steps():
    """The encoder steps whose blocks run as tasks (blocks=tiled): --task-times is theirs."""
    rows = [l.split("\t") for l in open(os.path.join(STAGES, "encoder", "steps.tsv")).read().splitlines()]
    return {r[0] for r in rows if len(r) > 4 and r[1] == "step" and re.search(r"\bblocks=tiled\b", r[4])}


def main(exes):
    failures = []
    seen = set()
    for exe in exes:
        name = os.path.basename(exe)
        family = next((f for f in ("layernorm", "mlp", "attention", "patch_embed", "encoder")
                       if name.startswith(f + "_")), None)
        whole = family is None or family not in seen
        seen.add(family)
        if family:
            r = run(exe, ["--list-versions"])
            names = r.stdout.split()
            ok = (r.returncode == 0 and names == family_list(family)
                  and name[len(family) + 1:] in names)
            print(f"{'ok  ' if ok else 'FAIL'} {name} --list-versions -> rc={r.returncode} {len(names)} names")
            if not ok:
                failures.append((name, ["--list-versions"]))
        extra = []
        if name.startswith(("layernorm_", "mlp_")):
            extra = [(["--rows", "0"], "--rows must be >= 1"), (["--hidden", "-1"], "--hidden must be >= 1")]
        if name.startswith("patch_embed_"):
            extra = [(["--hidden", "0"], "--hidden must be >= 1"),
                     (["--timeline", "/nonexistent-dir/t.csv"],
                      "cannot write timeline file" if name.startswith("patch_embed_v3_")
                      else "--timeline is for the stream versions")]
        if name == "flag_handoff":
            extra = [(["--ctas", "1"], "--ctas must be >= 2"), (["--tile-kib", "2048"], "--tile-kib must be <= 1024")]
        if name == "l2_read":
            extra = [(["--mib", "5000"], "--mib must be <= 4096"), (["--ctas-per-sm", "9"], "--ctas-per-sm must be <= 8"),
                     (["--flush-l2"], "--flush-l2: l2_read times a buffer left in L2"),
                     (["--sms", "-1"], "--sms must be >= 0")]
        if name.startswith("encoder_") and name[len("encoder_"):] not in tiled_steps():
            extra = [(["--task-times", "/tmp/tasks.csv"], "--task-times: only the tile-scheduled blocks (blocks=tiled) run tasks")]
        if name.startswith("attention_"):
            extra = [(["--tokens", "0"], "--tokens must be >= 1"), (["--heads", "-1"], "--heads must be >= 1"),
                     (["--head-dim", "0"], "--head-dim must be >= 1")]
        # The others: the cases whose answer depends on the version (the stream versions' timeline).
        cases = BAD + extra if whole else [c for c in extra if c[0][0] == "--timeline"]
        for args, expect in cases:
            r = run(exe, args)
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            ok = r.returncode == 2 and len(lines) == 1 and expect in lines[0] and "error:" in lines[0]
            print(f"{'ok  ' if ok else 'FAIL'} {name} {' '.join(args)} -> rc={r.returncode} {lines}")
            if not ok:
                failures.append((name, args))
        if whole:
            with tempfile.TemporaryDirectory() as d:
                # A CSV of the schema before `rows` was appended: refused before anything runs.
                old = os.path.join(d, "old.csv")
                header = OLD_HEADER + "\n"
                open(old, "w").write(header)
                r = run(exe, ["--csv", old])
                lines = [l for l in r.stderr.splitlines() if l.strip()]
                ok = (r.returncode == 2 and len(lines) == 1 and old in lines[0]
                      and "lacks column(s) rows" in lines[0] and open(old).read() == header)
                print(f"{'ok  ' if ok else 'FAIL'} {name} --csv <older schema> -> rc={r.returncode} {lines}")
                if not ok:
                    failures.append((name, ["--csv", "older schema"]))
        if not has_gpu():
            with tempfile.TemporaryDirectory() as d:
                csv = os.path.join(d, "rows.csv")
                r = run(exe, ["--csv", csv])
                rows = open(csv).read().splitlines() if os.path.exists(csv) else []
                ok = (r.returncode == 2 and "no CUDA device" in r.stderr and len(rows) == 2
                      and ",skipped," in rows[1])
                print(f"{'ok  ' if ok else 'FAIL'} {name} without a GPU -> rc={r.returncode} skipped row: {len(rows) == 2}")
                if not ok:
                    failures.append((name, ["no gpu"]))
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
