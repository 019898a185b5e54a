"""The PyTorch anchors' harness: CLI, provenance, the CSV row, event timing, statistics.

The anchors must produce rows that compare one-to-one with the C++ benches, so everything
here mirrors common/ (cli.cpp, csv.cpp, provenance.cpp, timing.cpp, stats.cpp, compare.cpp).
Only the standard library is imported at module level: on a machine without torch (or without
a GPU) an anchor still parses its arguments and writes a `skipped` row saying why.

An anchor script calls run_anchor(family, versions, add_args, build); see torch_layernorm.py.
Run with the single argument `--serve`, it answers many rows in one process (serve(), for the
sweep runner's kept anchors): what a build keeps with keep() - a model compiled for its shape -
is then made once and reused by every later row of that shape.
"""

import argparse
import contextlib
import ctypes
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys

from studylib.schema import MODELS, PATCH, UTC_FORMAT, append_row, format_cell

FP16_REL_TOL = 5e-3  # compare.hpp kFp16RelTol
# FP8 anchors (torchao): every GEMM input and weight rounded to E4M3, as the FP8 encoder steps'
# logits bound has it (stages/encoder/harness.hpp, kFp8LogitsRelTol).
FP8_REL_TOL = 0.15

# Exit codes, as the benches (common/harness/cli.cpp run_main).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_OOM = 0, 1, 2, 3


class UsageError(Exception):
    """Bad command line: one line on stderr, exit 2, no row."""


class Skip(Exception):
    """This anchor does not support the configuration: a `skipped` row, exit 0."""


def tokens_for_image(image_size):
    if image_size <= 0 or image_size % PATCH:
        raise UsageError(f"image size {image_size} must be a positive multiple of the patch size 16")
    side = image_size // PATCH
    return side * side + 1


# ---- command line -----------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _positive(name, minimum=1):
    def parse(text):
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects an integer, got '{text}'")
        if v < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {text}")
        return v
    return parse


def count_kernels(torch, fn, dev):
    """Kernels one eager call launches, from the profiler's device activities (the graph
    replays the same kernels). None, with the reason, when the profiler is unavailable."""
    try:
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize(dev)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize(dev)
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA), ""
    except Exception as e:  # CUPTI missing or busy: the row says so instead of guessing
        return None, f"; launches not counted ({type(e).__name__})"


def eager_or_graph(torch, forward, dev, graphed):
    """(run, result, note) for one anchor: run() is what gets timed; result() returns a freshly
    computed output for the check. graphed: one call captured into a CUDA graph and replayed."""
    if not graphed:
        out = {}

        def run():
            out["y"] = forward()

        def result():
            out.pop("y", None)
            run()
            return out.pop("y")
        return run, result, "eager"
    # Capture on a side stream after warm-up calls there, as PyTorch requires; the graph's
    # output is static, so poisoning it before the checked replay proves the replay wrote it.
    side = torch.cuda.Stream(device=dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        for _ in range(3):
            forward()
    torch.cuda.current_stream(dev).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_static = forward()

    # The graph reads the weights and inputs at the addresses they had at its capture, and a
    # graph does not own them: whatever forward() reaches must live as long as the replays, or
    # the caching allocator hands that memory to the next allocation (the check's float64
    # reference, say) and every timed replay computes on what is left there. run and result hold
    # forward, and through it the model.
    def run():
        graph.replay()

    def result():
        y_static.fill_(float("nan"))
        graph.replay()
        return y_static
    run.keeps_alive = result.keeps_alive = forward
    return run, result, "cuda-graph replay"


def add_rows_hidden_args(p, hidden_help="features per row (default: the model's hidden size)"):
    """The --rows/--hidden overrides of the row-wise benches (layernorm, mlp)."""
    p.add_argument("--rows", type=_positive("--rows"), default=None,
                   help="rows (default batch * tokens)")
    p.add_argument("--hidden", type=_positive("--hidden"), default=None, help=hidden_help)


def rows_hidden(args):
    """(rows, hidden) with the overrides applied, as the C++ benches compute them."""
    rows = args.rows if args.rows is not None else args.batch * args.tokens
    hidden = args.hidden if args.hidden is not None else MODELS[args.model][0]
    return rows, hidden


def make_parser(prog, summary, versions):
    p = _Parser(prog=prog, description=summary)
    p.add_argument("--version", required=True, choices=sorted(versions),
                   help="which anchor to run")
    p.add_argument("--batch", type=_positive("--batch"), default=1)
    p.add_argument("--image-size", type=_positive("--image-size"), default=224)
    p.add_argument("--model", default="vit_b", help="vit_ti | vit_s | vit_b | vit_l")
    p.add_argument("--streams", type=_positive("--streams"), default=1)
    p.add_argument("--warmup", type=_positive("--warmup", 0), default=5)
    p.add_argument("--iters", type=_positive("--iters"), default=10)
    p.add_argument("--seed", type=_positive("--seed", 0), default=1234)
    p.add_argument("--csv", default="", help="append the result row to this CSV file")
    p.add_argument("--device", type=_positive("--device", 0), default=0)
    p.add_argument("--check", dest="check", action="store_true", default=True)
    p.add_argument("--no-check", dest="check", action="store_false")
    p.add_argument("--flush-l2", action="store_true", help="flush L2 before each timed run")
    p.add_argument("--energy", type=_seconds, default=0.0,
                   help="after timing, seconds of back-to-back calls for the energy columns (default 0: none)")
    return p


def _seconds(value):
    try:
        x = float(value)
    except ValueError:
        x = -1.0
    if not 0 <= x <= 600:
        raise argparse.ArgumentTypeError(f"--energy must be seconds between 0 and 600, got '{value}'")
    return x


def parse_args(parser, argv):
    args = parser.parse_args(argv)
    if args.model not in MODELS:
        raise UsageError(f"unknown model '{args.model}' (known: {', '.join(MODELS)})")
    args.tokens = tokens_for_image(args.image_size)
    if args.csv:
        d = os.path.dirname(os.path.abspath(args.csv))
        if not os.path.isdir(d) or not os.access(d, os.W_OK) or (
                os.path.exists(args.csv) and not os.access(args.csv, os.W_OK)):
            raise UsageError(f"cannot write CSV file '{args.csv}'")
    return args


# ---- provenance -------------------------------------------------------------------------------

def _git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"],
                             cwd=here, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def checkout_commit():
    """The commit every row names: the sweep runner's (STUDY_COMMIT), else this checkout's."""
    return os.environ.get("STUDY_COMMIT") or _git_commit()


def _driver_version():
    # The C++ harness records cudaDriverGetVersion() ("13.0"); read the same number from
    # libcuda so both kinds of rows mean the same thing. nvidia-smi's driver release is the
    # fallback only when libcuda cannot be asked.
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value:
            return f"{v.value // 1000}.{(v.value // 10) % 100}"
    except (OSError, AttributeError):
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return "none"


def _cublaslt_version():
    """cuBLASLt's version number (as cublasLtGetVersion() in the C++ provenance) of the
    library torch loaded, else of one the loader finds; None when there is none."""
    candidates = []
    try:
        with open("/proc/self/maps") as f:
            candidates += sorted({line.split()[-1] for line in f if "libcublasLt.so" in line})
    except OSError:
        pass
    candidates += ["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"]
    for name in candidates:
        try:
            fn = ctypes.CDLL(name).cublasLtGetVersion
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_size_t
        return str(fn())
    return None


def _package_versions(torch):
    """'torch X (CUDA Y), timm Z' for the note: which framework produced the anchor row."""
    parts = [f"torch {torch.__version__} (CUDA {torch.version.cuda or 'none'})"]
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            parts.append(f"timm {version('timm')}")
        except PackageNotFoundError:
            parts.append("timm not installed")
    except ImportError:
        pass
    return ", ".join(parts)


def provenance(torch=None, device=0):
    now = datetime.datetime.now(datetime.timezone.utc)
    host = socket.gethostname()
    p = {
        "run_id": os.environ.get("STUDY_RUN_ID") or now.strftime("%Y%m%dT%H%M%SZ") + "-" + host,
        "utc": now.strftime(UTC_FORMAT),
        "commit": checkout_commit(),
        "gpu": "none", "sm_count": "0", "driver": _driver_version(),
        "cuda": "none", "cudnn": "none", "cublas": "none", "host": host,
    }
    if torch is not None:
        p["cuda"] = torch.version.cuda or "none"
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        p["cudnn"] = str(cudnn) if cudnn else "none"
        p["cublas"] = _cublaslt_version() or "unknown"
        if torch.cuda.is_available() and device < torch.cuda.device_count():
            prop = torch.cuda.get_device_properties(device)
            p["gpu"] = prop.name
            p["sm_count"] = str(prop.multi_processor_count)
            p.update(_clocks(device))
    return p


def _clocks(device):
    """Current SM and memory clocks (MHz) and the enforced power limit (W), as the C++
    provenance reads them through NVML; empty where nvidia-smi cannot tell."""
    out = {"sm_clock_mhz": "", "mem_clock_mhz": "", "power_limit_w": ""}
    try:
        r = subprocess.run(["nvidia-smi", "-i", str(device),
                            "--query-gpu=clocks.sm,clocks.mem,enforced.power.limit",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return out
    fields = [f.strip() for f in r.stdout.strip().splitlines()[0].split(",")] if (
        r.returncode == 0 and r.stdout.strip()) else []
    for key, value in zip(out, fields):
        try:
            out[key] = str(int(float(value)))
        except ValueError:
            pass
    return out


# ---- torchao ------------------------------------------------------------------------------------

def import_torchao(repo=None):
    """torchao, from this interpreter or from the wheel `./study setup` keeps in <repo>/.deps/wheels/
    (a GPU node may have no network): installed once with pip --no-index into .deps/torchao/<wheel>/
    and put on sys.path. Returns (module, "") or (None, why)."""
    try:
        import torchao
        return torchao, ""
    except ImportError:
        pass
    repo = repo or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    wheels = sorted(f for f in os.listdir(os.path.join(repo, ".deps", "wheels"))
                    if f.startswith("torchao-") and f.endswith(".whl")) if os.path.isdir(
        os.path.join(repo, ".deps", "wheels")) else []
    if not wheels:
        return None, "torchao is not installed and .deps/wheels/ holds no torchao wheel (./study setup fetches it)"
    wheel = os.path.join(repo, ".deps", "wheels", wheels[-1])
    target = os.path.join(repo, ".deps", "torchao", wheels[-1][:-len(".whl")])
    if not os.path.isdir(target):
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                            target, wheel], capture_output=True, text=True)
        if r.returncode != 0:
            last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"pip could not install {wheels[-1]}: {last[0]}"
    sys.path.insert(0, target)
    try:
        import torchao
        return torchao, ""
    except Exception as e:  # a wheel for another torch: an import error of its own kind
        return None, f"torchao from {wheels[-1]} does not import: {type(e).__name__}: {e}".splitlines()[0]


# ---- checking -----------------------------------------------------------------------------------

class ErrorSum:
    """Max abs and relative L2 error of an output against its float64 reference, accumulated
    chunk by chunk (a whole float64 reference would not fit). Only finite outputs enter the
    sums; the caller counts the non-finite ones apart, so a NaN fails the check instead of
    vanishing from it."""

    def __init__(self, torch):
        self.torch = torch
        self.diff2 = self.ref2 = self.max_abs = 0.0

    def add(self, got, ref):
        t = self.torch
        g = got.double()
        finite = t.isfinite(g)
        d = t.where(finite, g - ref, t.zeros_like(ref))
        self.diff2 += float((d * d).sum())
        self.ref2 += float((t.where(finite, ref, t.zeros_like(ref)) ** 2).sum())
        self.max_abs = max(self.max_abs, float(d.abs().max()))

    def result(self):
        """(max_abs, rel_l2); rel_l2 is the absolute L2 error when the reference is all zero."""
        rel = (self.diff2 / self.ref2) ** 0.5 if self.ref2 > 0 else self.diff2 ** 0.5
        return self.max_abs, rel


# ---- statistics and timing --------------------------------------------------------------------

def summarize(samples_us):
    """mean, sample std, median, min, max as common/stats.cpp."""
    s = sorted(samples_us)
    return {"mean_us": statistics.fmean(s),
            "std_us": statistics.stdev(s) if len(s) > 1 else 0.0,
            "median_us": statistics.median(s), "min_us": s[0], "max_us": s[-1]}


def time_events(torch, fn, warmup, iters, flush_l2, device):
    """Timing as common/harness/timing.cpp time_region: `warmup` untimed calls, then one event pair
    per repeat queued back to back with no host sync in between; the optional L2 flush is a
    write of a buffer twice the L2 size before each repeat, outside the events."""
    stream = torch.cuda.current_stream(device)
    flush = None
    if flush_l2:
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20)
        flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)
    for _ in range(warmup):
        fn()
    stream.synchronize()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    stop = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        if flush is not None:
            flush.fill_(i & 0xFF)
        start[i].record(stream)
        fn()
        stop[i].record(stream)
    stream.synchronize()
    stats = summarize([1000.0 * a.elapsed_time(b) for a, b in zip(start, stop)])
    # Measured while the flush buffer is alive, as the C++ harness (its buffer is static); in a
    # serving process without what other shapes' rows keep, so that it is this row's alone.
    stats["device_bytes"] = torch.cuda.memory_allocated(device) - kept_by_other_rows()
    return stats


# ---- the driver every anchor shares -----------------------------------------------------------

class Problem:
    """What an anchor's build() returns. run: the callable to time. check(): runs the anchor
    once on poisoned outputs and returns (max_abs_err, rel_l2_err, nonfinite_count) vs a
    float64 computation. bytes/flops: the family's counts (flops None when not meaningful).
    note: the row's note for an ok row, with "{check}" where "checked" / "not checked" goes.

    variants: instead of one `run`, a list of (name, callable) timed one after the other by
    the same method; the row keeps the faster (lower median) and "{timing}" in the note says
    which, with every variant's median (e.g. eager vs CUDA-graph replay of one expression)."""

    def __init__(self, run, check, bytes_moved, flops=None, launches=None, host_syncs=0,
                 note="", columns=None, variants=None, rel_tol=FP16_REL_TOL):
        self.run, self.check, self.bytes, self.flops = run, check, bytes_moved, flops
        self.launches, self.host_syncs, self.note = launches, host_syncs, note
        self.rel_tol = rel_tol  # the check's bound on rel_l2_err
        self.columns = columns or {}
        self.variants = list(variants or [])


def time_faster(torch, variants, warmup, iters, flush_l2, device):
    """Times every (name, fn) of `variants` with time_events and returns (stats of the one
    with the lowest median, note text naming it and every variant's median, its fn)."""
    timed = [(name, fn, time_events(torch, fn, warmup, iters, flush_l2, device))
             for name, fn in variants]
    name, fn, stats = min(timed, key=lambda t: t[2]["median_us"])
    medians = ", ".join(f"{n} {format_cell(s['median_us'])} us" for n, _, s in timed)
    return stats, f"timed: {name} (the faster; medians {medians})", fn


# ---- energy: NVML's counter over a loop of back-to-back calls, as common/harness/energy.cpp ----

CHUNK_SECONDS = 0.2
MAX_ENERGY_CALL_SECONDS = 0.5


class _Nvml:
    """The few NVML calls the energy loop needs, through ctypes (NVML comes with the driver)."""

    def __init__(self, torch, device):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit_v2 failed")
        self.handle = ctypes.c_void_p()
        prop = torch.cuda.get_device_properties(device)
        bus = getattr(prop, "pci_bus_id", None)
        if bus is not None:  # NVML numbers devices its own way: the PCI address names this one
            pci = f"{getattr(prop, 'pci_domain_id', 0):08X}:{bus:02X}:{getattr(prop, 'pci_device_id', 0):02X}.0"
            rc = self.lib.nvmlDeviceGetHandleByPciBusId_v2(pci.encode(), ctypes.byref(self.handle))
        else:
            rc = self.lib.nvmlDeviceGetHandleByIndex_v2(device, ctypes.byref(self.handle))
        if rc != 0:
            raise OSError(f"no NVML handle for CUDA device {device}")

    def energy_mj(self):
        v = ctypes.c_ulonglong(0)
        if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(v)) != 0:
            raise OSError("no NVML energy counter (nvmlDeviceGetTotalEnergyConsumption)")
        return v.value

    def sm_mhz(self):
        v = ctypes.c_uint(0)
        return v.value if self.lib.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(v)) == 0 else None


def measure_energy(torch, fn, median_us, images, seconds, device):
    """The energy columns of a row: `fn` called back to back for at least `seconds` in chunks of
    ~CHUNK_SECONDS (the host waits for each chunk), NVML's energy counter read before and after,
    the SM clock sampled every 100 ms by a thread. {"energy_why_not": reason} when not measured."""
    import threading
    import time
    if not median_us or median_us <= 0:
        return {"energy_why_not": "no timed call to size the loop"}
    if median_us > MAX_ENERGY_CALL_SECONDS * 1e6:
        return {"energy_why_not": "a call takes longer than the loop can hold enough of (MAX_ENERGY_CALL_SECONDS)"}
    try:
        nvml = _Nvml(torch, device)
        nvml.energy_mj()
    except (OSError, AttributeError) as e:
        return {"energy_why_not": f"no NVML energy counter on this machine ({e})"}
    chunk = max(1, int(CHUNK_SECONDS * 1e6 / median_us))
    clocks, done = [], threading.Event()

    def sample():
        while not done.is_set():
            mhz = nvml.sm_mhz()
            if mhz:
                clocks.append(mhz)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    stream = torch.cuda.current_stream(device)
    stream.synchronize()
    sampler.start()
    try:
        t0, e0, calls, elapsed = time.monotonic(), nvml.energy_mj(), 0, 0.0
        while elapsed < seconds:
            for _ in range(chunk):
                fn()
            stream.synchronize()
            calls += chunk
            elapsed = time.monotonic() - t0
        e1 = nvml.energy_mj()
    finally:
        done.set()
        sampler.join()
    if e1 <= e0:
        return {"energy_why_not": "the NVML energy counter did not advance over the loop"}
    joules = (e1 - e0) / 1000.0
    out = {"energy_j": joules / calls, "images_per_j": images * calls / joules, "power_w": joules / elapsed,
           "energy_s": elapsed, "energy_calls": calls}
    if clocks:
        out["energy_sm_clock_mhz"] = statistics.median(clocks)
    return out


def _emit(args, row):
    print(f"{row['family']:<8} {row['version']:<24} {row.get('model', ''):<8} "
          f"batch={row.get('batch', '')!s:<4} image={row.get('image_size', '')!s:<4} "
          f"median_us={format_cell(row.get('median_us')):<10} gbps={format_cell(row.get('gbps')):<8} "
          f"{row['status']} {row.get('note', '')}", flush=True)
    if args.csv:
        append_row(args.csv, row)


# Serving (--serve): the objects builds keep across rows, oldest first; None in a one-row run.
_kept = None
_kept_bytes = {}         # key -> device bytes its make() allocated
_row_keys = set()        # the keys the current row used
KEEP_MAX = 16            # entries kept at once (a vit_b entry with its float64 twin: ~1 GB)
SERVE_DONE = "STUDY_ANCHOR_DONE"   # stdout line that ends each served row: "<SERVE_DONE> <exit code>"


def _allocated():
    torch = sys.modules.get("torch")
    return torch.cuda.memory_allocated() if torch is not None and torch.cuda.is_available() else 0


def keep(key, make):
    """make(); in a serving process the object an earlier row made under `key` (a hashable
    tuple naming everything make() depends on), made once. This is how a compiled model is
    compiled once per shape and reused by the later rounds of that shape."""
    if _kept is None:
        return make()
    _row_keys.add(key)
    if key not in _kept:
        if len(_kept) >= KEEP_MAX:
            old = next(iter(_kept))
            _kept.pop(old)
            _kept_bytes.pop(old, None)
        before = _allocated()
        _kept[key] = make()
        _kept_bytes[key] = max(0, _allocated() - before)
    return _kept[key]


@contextlib.contextmanager
def inductor_options_kept(torch):
    """Puts Inductor's process-wide options back as they were once the block ends. torchao's
    quantize_ (its set_inductor_config, on by default) turns on coordinate-descent tuning and
    other options for the compile that follows; in a process that keeps anchors every later row's
    compile would inherit them, and the fp16 torch.compile would compile in its row with them
    instead of loading what precompile_anchors.py compiled ahead with Inductor's defaults."""
    config = torch._inductor.config
    before = config.get_config_copy()
    try:
        yield
    finally:
        config.load_config(before)


def kept_by_other_rows():
    """Device bytes held for shapes other than the current row's (0 outside --serve)."""
    return sum(b for k, b in _kept_bytes.items() if k not in _row_keys)


def serve(run_one, stdin=None, stdout=None):
    """One row per line of stdin, a JSON list of the arguments a one-row run takes; after each,
    the line '<SERVE_DONE> <exit code>' on stdout. Ends at the end of stdin. What the rows'
    builds keep() stays in this process between rows."""
    global _kept
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    _kept = {}
    for line in stdin:
        if not line.strip():
            continue
        try:
            argv = json.loads(line)
            if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                raise ValueError("not a JSON list of strings")
        except ValueError as e:
            print(f"--serve: error: bad request line ({e}): {line.strip()[:200]}", file=sys.stderr)
            code = EXIT_USAGE
        else:
            _row_keys.clear()
            try:
                code = run_one(argv)
            except SystemExit as e:   # argparse's --help or a usage error
                code = e.code if isinstance(e.code, int) else EXIT_USAGE
        sys.stderr.flush()
        print(f"{SERVE_DONE} {code}", file=stdout, flush=True)
    return EXIT_OK


def run_anchor(family, versions, summary, add_args, identity, build, argv=None):
    """versions: names this script answers to. add_args(parser): family flags.
    identity(args) -> dict of tokens/hidden/heads/head_dim columns (no torch needed).
    build(torch, args) -> Problem, or raises Skip(reason). With the single argument --serve,
    many rows in one process (serve())."""
    if argv is None and sys.argv[1:] == ["--serve"]:
        return serve(lambda a: run_anchor(family, versions, summary, add_args, identity, build, a))
    prog = os.path.basename(sys.argv[0])
    try:
        parser = make_parser(prog, summary, versions)
        add_args(parser)
        args = parse_args(parser, sys.argv[1:] if argv is None else argv)
        ident = identity(args)
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE

    row = {"family": family, "version": args.version, "model": args.model,
           "batch": args.batch, "image_size": args.image_size, "streams": args.streams,
           "warmup": args.warmup, "iters": args.iters, "flush_l2": bool(args.flush_l2),
           "host_bytes": 0, "precision": "fp16"}
    row.update(ident)

    def finish(torch, status, note, code):
        row.update(provenance(torch, args.device))
        if torch is not None:  # the framework's own version, which "cudnn"/"cublas" cannot say
            note = f"{note}; {_package_versions(torch)}" if note else _package_versions(torch)
        row["status"], row["note"] = status, note
        _emit(args, row)
        if code not in (EXIT_OK,):
            print(f"{prog}: {'error' if status == 'failed' else 'skipped'}: {note}", file=sys.stderr)
        return code

    try:
        import torch  # noqa: deliberately late, see the module docstring
    except ImportError:
        return finish(None, "skipped", "torch not installed", EXIT_USAGE)
    except Exception as e:  # a broken install (missing CUDA libraries...) is not a crash either
        return finish(None, "skipped", f"torch import failed: {e}".splitlines()[0], EXIT_USAGE)
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return finish(torch, "skipped", "no CUDA device", EXIT_USAGE)
    if args.device >= torch.cuda.device_count():
        print(f"{prog}: error: --device {args.device} does not exist "
              f"({torch.cuda.device_count()} CUDA device(s))", file=sys.stderr)
        return EXIT_USAGE

    torch.cuda.set_device(args.device)
    try:
        problem = build(torch, args)
        row.update(problem.columns)
        # The benches' note: "rows=N; checked; <timing method>"; {check} marks the spot.
        check_note = "not checked (--no-check)"
        if args.check:
            max_abs, rel_l2, nonfinite = problem.check()
            row["max_abs_err"], row["rel_l2_err"] = max_abs, rel_l2
            if nonfinite or not rel_l2 <= problem.rel_tol:
                row["device_bytes"] = torch.cuda.memory_allocated(args.device)
                prefix = problem.note.split("{check}")[0]
                return finish(torch, "failed",
                              f"{prefix}reference check failed: rel_l2={rel_l2:.3g} "
                              f"max_abs={max_abs:.3g} nonfinite={nonfinite}", EXIT_FAILED)
            check_note = "checked"
        timing_note = ""
        if problem.variants:
            stats, timing_note, timed_fn = time_faster(torch, problem.variants, args.warmup, args.iters,
                                                       args.flush_l2, args.device)
        else:
            timed_fn = problem.run
            stats = time_events(torch, timed_fn, args.warmup, args.iters, args.flush_l2, args.device)
        row.update(stats)
        if args.energy > 0:
            row.update(measure_energy(torch, timed_fn, stats["median_us"], args.batch, args.energy, args.device))
        if stats["median_us"] > 0:
            row["gbps"] = problem.bytes / (stats["median_us"] * 1e-6) / 1e9
            if problem.flops is not None:
                row["tflops"] = problem.flops / (stats["median_us"] * 1e-6) / 1e12
        row["launches"], row["host_syncs"] = problem.launches, problem.host_syncs
        return finish(torch, "ok", problem.note.replace("{check}", check_note)
                      .replace("{timing}", timing_note), EXIT_OK)
    except Skip as e:
        return finish(torch, "skipped", str(e), EXIT_OK)
    except torch.cuda.OutOfMemoryError as e:
        first = str(e).splitlines()[0] if str(e) else "out of memory"
        return finish(torch, "failed", f"out of GPU memory: {first}", EXIT_OOM)
    except Exception as e:  # any other error is a failed row, never a crash without a row
        msg = f"{type(e).__name__}: {e}".splitlines()[0]
        return finish(torch, "failed", msg, EXIT_FAILED)
