"""The sweep tests' fakes: a bench with the shared CLI (one row per call, its behaviour named by
its version), a kept anchor script in serving mode, and a test case that builds a fake build
folder and runs the sweep runner and the shard merge as subprocesses. No GPU, no build.
"""
import collections
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

from studylib import row_file, specs
from studylib.paths import REPO

PY = sys.executable
# The runner and the merge run as a user runs them, by module name from the checkout.
RUNNER = [PY, "-m", "experiments.sweep"]
MERGE = [PY, "-m", "sbatch.merge"]
CHECKOUT_ENV = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}

# A fake bench: the shared CLI, one row per call. Its behaviour comes from its version name
# (the part after "fake_"): crash, hang, norow, two (writes copy + gemm rows), slow; and from
# FAKE_KILL_PARENT_AT=N: the N-th call (counted in FAKE_COUNTER) SIGKILLs the runner, which
# is how a sweep dies mid-way in these tests.
FAKE = textwrap.dedent('''\
    #!{py}
    import argparse, csv, os, signal, sys, time
    from studylib.schema import COLUMNS
    version = os.path.basename(sys.argv[0]).split("_", 1)[1]
    p = argparse.ArgumentParser()
    for a in ("--batch", "--image-size", "--model", "--streams", "--warmup", "--iters", "--seed",
              "--csv", "--device", "--rows"):
        p.add_argument(a)
    p.add_argument("--flush-l2", action="store_true")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--energy", default="")
    p.add_argument("--weights", default="")
    a = p.parse_args()
    counter = os.environ.get("FAKE_COUNTER")
    if counter:
        n = int(open(counter).read() or 0) + 1 if os.path.exists(counter) else 1
        open(counter, "w").write(str(n))
        if n == int(os.environ.get("FAKE_KILL_PARENT_AT", "0")):
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(5)
    if os.environ.get("FAKE_PIDFILE"):
        open(os.environ["FAKE_PIDFILE"], "w").write(str(os.getpid()))
    if version == "crash":
        print("fake: about to crash", file=sys.stderr)
        print("fake: segfault in kernel", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGSEGV)
    if version == "hang":
        time.sleep(600)
    if version == "norow":
        print("fake: bad usage", file=sys.stderr)
        sys.exit(2)
    def row(v, status="ok", median="12.5"):
        r = dict.fromkeys(COLUMNS, "")
        r.update(run_id=os.environ.get("STUDY_RUN_ID", ""), commit=os.environ.get("FAKE_COMMIT") or os.environ.get("STUDY_COMMIT", ""),
                 family=os.path.basename(os.path.dirname(sys.argv[0])), version=v, model=a.model, batch=a.batch, image_size=a.image_size,
                 streams="132" if a.streams == "sm" else a.streams, warmup=a.warmup, iters=a.iters,
                 flush_l2="1" if a.flush_l2 else "0", median_us=median, status=status,
                 note=("rows=%s" % a.rows if a.rows else "")
                      + ("weights=%s" % open(a.weights).read() if a.weights else "")
                      + ("gemm_cache=%s" % os.environ.get("STUDY_CUTLASS_CACHE", "")
                         if os.environ.get("FAKE_SHOW_CACHE") == "1" else ""))
        if os.environ.get("FAKE_SHAPELESS") == "1":
            r.update(model="", batch="", image_size="")
        if status == "skipped" and os.environ.get("FAKE_NODEV") == "1":
            r["note"] = "no CUDA device"
        return [r[c] for c in COLUMNS]
    new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    with open(a.csv, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\\n")
        if new:
            w.writerow(COLUMNS)
        if version == "two" and os.environ.get("FAKE_NODEV") == "1":
            w.writerow(row("copy", "skipped"))
            f.flush()
            print("fake: no CUDA device", file=sys.stderr)
            sys.exit(2)
        if version == "oom":  # a bench refusing a problem larger than the memory free
            r = row(version, "skipped", median="")
            r[COLUMNS.index("note")] = ("out of host memory: fake_oom needs 1128.6 GiB (1211827200000 bytes) "
                                        "of host memory, 60.0 GiB (64424509440 bytes) free")
            w.writerow(r)
            f.flush()
            print("fake_oom: error: out of host memory: needs 1128.6 GiB, 60.0 GiB free", file=sys.stderr)
            sys.exit(3)
        if version == "two":
            w.writerow(row("copy"))
            if os.environ.get("FAKE_ONLY_ONE") != "1":
                w.writerow(row("gemm"))
        else:
            w.writerow(row(version, "skipped" if a.batch == "3" else "ok"))
    ''')


# A fake anchor script in serving mode (--serve): one row per stdin line, then the sentinel line.
# Its note says which process wrote the row and how many rows of that version and batch the
# process wrote before (what a kept compiled model would serve). p_hang hangs on its first row
# only; p_die exits without answering.
FAKE_SERVER = textwrap.dedent('''\
    #!{py}
    import argparse, json, os, sys, time
    from experiments.anchors.harness import SERVE_DONE
    from studylib.schema import COLUMNS, append_row
    assert sys.argv[1:] == ["--serve"], sys.argv
    built = {{}}
    for line in sys.stdin:
        p = argparse.ArgumentParser()
        for f in ("--version", "--batch", "--image-size", "--model", "--streams", "--warmup",
                  "--iters", "--seed", "--csv", "--device", "--energy"):
            p.add_argument(f)
        p.add_argument("--flush-l2", action="store_true")
        p.add_argument("--no-check", action="store_true")
        a = p.parse_args(json.loads(line))
        if a.version == "p_hang" and not os.path.exists(os.environ["FAKE_HUNG"]):
            open(os.environ["FAKE_HUNG"], "w").close()
            time.sleep(600)
        if a.version == "p_die":
            print("fake server: dying", file=sys.stderr, flush=True)
            os._exit(3)
        built[a.version, a.batch] = built.get((a.version, a.batch), 0) + 1
        r = dict.fromkeys(COLUMNS, "")
        r.update(run_id=os.environ.get("STUDY_RUN_ID", ""), commit=os.environ.get("STUDY_COMMIT", ""),
                 family="fake", version=a.version, model=a.model, batch=a.batch,
                 image_size=a.image_size, streams=a.streams, warmup=a.warmup, iters=a.iters,
                 flush_l2="0", median_us="7.5", status="ok",
                 note="pid=%d row=%d" % (os.getpid(), built[a.version, a.batch]))
        append_row(a.csv, r)
        # A summary line and the answer in one write, as a real anchor's print then sentinel can
        # arrive: the runner must not wait for a line it has already read.
        sys.stdout.write("fake server: row written\\n%s 0\\n" % SERVE_DONE)
        sys.stdout.flush()
''')


class SweepCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_sweep_")
        self.dir = Path(self.tmp.name)
        self.build = self.dir / "build"
        (self.build / "stages" / "fake").mkdir(parents=True)
        for v in ("a", "b", "c", "crash", "hang", "norow", "two", "oom"):
            p = self.build / "stages" / "fake" / f"fake_{v}"
            p.write_text(FAKE.format(py=PY))
            p.chmod(p.stat().st_mode | stat.S_IXUSR)
        self.out = self.dir / "results" / "out.csv"
        # The runner's private temp dirs go here: a SIGKILLed runner cannot remove its own.
        (self.dir / "tmp").mkdir()
        self.env = dict(os.environ, TMPDIR=str(self.dir / "tmp"), **CHECKOUT_ENV)

    def tearDown(self):
        self.tmp.cleanup()

    def spec(self, name="s.toml", **kw):
        base = {"family": '"fake"', "versions": '["a", "b", "c"]', "models": '["vit_ti"]',
                "batches": "[1, 2, 3]", "image_sizes": "[32]", "iters": "2", "warmup": "0"}
        base.update({k: v for k, v in kw.items() if v is not None})
        for k in [k for k, v in kw.items() if v is None]:
            base.pop(k)
        path = self.dir / name
        path.write_text("".join(f"{k} = {v}\n" for k, v in base.items()))
        return path

    def run_sweep(self, spec, *extra, env=None, out=None, check=True, run_id="test"):
        cmd = RUNNER + ["--spec", str(spec), "--build-dir", str(self.build),
               "--out", str(out or self.out)] + (["--run-id", run_id] if run_id else []) + list(extra)
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(self.env, **(env or {})),
                           timeout=120)
        if check and r.returncode != 0:
            self.fail(f"runner exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def rows(self, path=None):
        rows, problems = row_file.read_csv(path or self.out)
        self.assertEqual(problems, [])
        return rows

    def keys(self, rows):
        return collections.Counter(specs.row_key(r) for r in rows)

    def expected_keys(self, spec, **kw):
        configs, _ = specs.select_configs(specs.load_spec(spec), self.build, PY, dry_run=True, **kw)
        return collections.Counter(k for c in configs for k in c.keys())

    # ---- schema --------------------------------------------------------------------------
