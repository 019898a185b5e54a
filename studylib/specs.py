"""Sweep specs (experiments/specs/*.toml): loading and checking a spec, expanding it into
configurations, the key that identifies a configuration's rows in a CSV (its extra arguments, a
stream count of "sm" and its round recorded in the row's note), and what each configuration runs
(a stage bench of the build, or a PyTorch anchor script). Read by the sweep runner, the Slurm
merge and the analysis alike. Standard library only; experiments/README.md has the spec format.
"""
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path

from studylib import steps as step_table
from studylib.paths import REPO

EXPERIMENTS = REPO / "experiments"
from studylib.schema import MODELS, PATCH

EXIT_OK, EXIT_FAILED_ROWS, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 4

STATUSES = ("ok", "skipped", "failed")

NO_DEVICE = "no CUDA device"  # the benches' and anchors' note when there is no GPU

# The CSV schema has no column for a configuration's extra arguments, yet they are part of its
# identity; the runner records them at the end of the row's note, in this form.
EXTRA_RE = re.compile(r"\s*\[extra: (.*)\]$")

# `streams = ["sm"]`: the bench writes the resolved count in the streams column; the runner
# tags the row's note so that the row keeps the configuration's identity ("sm").
STREAMS_SM = "sm"

STREAMS_SM_TAG = "[streams: sm]"

# Interleaved rounds (`--rounds N`, spec key `rounds`): every configuration runs N times, all
# versions of a shape once, then all again. Each row of a multi-round sweep is tagged with its
# round in the note; a row without the tag is round 1 (a single-round sweep writes no tag).
ROUND_RE = re.compile(r"\[round: (\d+)\]")


def round_tag(k):
    return f"[round: {k}]"


# timm_weights: each row's note says which weights it ran (the file's path is the machine's own).
def weights_tag(seed):
    return f"[weights: timm init, seed {seed}]"


WEIGHTS_RE = re.compile(r"\[weights: timm init, seed (\d+)\]")


class SpecError(Exception):
    pass


class UsageError(Exception):
    pass


SPEC_KEYS = {
    "description": str, "family": str, "versions": list, "anchors": list, "anchor_script": str,
    "binary": str, "row_versions": list, "models": list, "batches": list, "image_sizes": list,
    "streams": list, "warmup": int, "iters": int, "seed": int, "flush_l2": (bool, list),
    "check": bool, "timeout_s": (int, float), "extra_args": list, "max_device_gib": (int, float),
    "shapeless": bool, "side_experiment": bool, "rounds": int, "energy_s": (int, float),
    "keep_anchors": bool, "comparison": dict, "timm_weights": bool, "shapes": list,
}
# A side experiment's comparison (spec table [comparison]): what its table, and with figure = true
# its figure, set against what; `clocks` the versions whose SM clock it shows, `tflops` each
# version's throughput and share of its precision's ceiling (the MLP's tables). The family's
# notebook draws every declared comparison with one function, so a new measured comparison needs
# a spec and no code.
COMPARISON_KEYS = {"step": str, "against": list, "clocks": list, "caption": str, "title": str, "figure": bool,
                   "tflops": bool, "ratios": list}
# STUDY_SPECS_DIR: another folder of specs (a test's).
SPECS_DIR = Path(os.environ.get("STUDY_SPECS_DIR") or EXPERIMENTS / "specs")

DEFAULT_BINARY = "stages/{family}/{family}_{version}"


def _need_list_of(spec, key, kind, positive=False, allow_empty=False):
    value = spec[key]
    if not isinstance(value, list) or (not value and not allow_empty):
        raise SpecError(f"'{key}' must be a non-empty list")
    for v in value:
        if not isinstance(v, kind) or isinstance(v, bool) is not (kind is bool):
            raise SpecError(f"'{key}' must hold only {kind.__name__} values, got {v!r}")
        if positive and v <= 0:
            raise SpecError(f"'{key}' values must be positive, got {v!r}")
    if len(set(map(repr, value))) != len(value):
        raise SpecError(f"'{key}' lists a value twice")
    return value


def load_spec(path):
    """Reads and validates a spec; SpecError names the offending key."""
    try:
        with open(path, "rb") as f:
            spec = tomllib.load(f)
    except OSError as e:
        raise SpecError(f"cannot read spec: {e.strerror}")
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"not valid TOML: {e}")
    for key, value in spec.items():
        if key not in SPEC_KEYS:
            raise SpecError(f"unknown key '{key}' (known: {', '.join(sorted(SPEC_KEYS))})")
        kinds = SPEC_KEYS[key] if isinstance(SPEC_KEYS[key], tuple) else (SPEC_KEYS[key],)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise SpecError(f"'{key}' has the wrong type ({type(value).__name__})")
    s = dict(spec)
    # shapeless: the rows leave model, batch and image_size empty (ceilings measures the GPU,
    # not a ViT shape), so those columns are not part of a row's identity.
    s.setdefault("shapeless", False)
    # side_experiment: its rows go into their own sub-folder of a run folder (--run-dir), so
    # they never merge into the family's main sweep when the run is read.
    s.setdefault("side_experiment", False)
    if s["shapeless"]:
        for key, default in (("models", ["vit_b"]), ("batches", [1]), ("image_sizes", [224])):
            if len(s.setdefault(key, default)) != 1:
                raise SpecError(f"'{key}' takes one value at most with shapeless = true")
    if "shapes" in s:
        _shapes_instead_of_axes(s)
    for key in ("family", "models", "batches", "image_sizes"):
        if key not in s:
            raise SpecError(f"missing required key '{key}'")
    s.setdefault("versions", [])
    s.setdefault("anchors", [])
    s.setdefault("streams", [1])
    s.setdefault("warmup", 5)
    s.setdefault("iters", 10)
    s.setdefault("seed", 1234)
    s.setdefault("flush_l2", False)
    s.setdefault("check", True)
    s.setdefault("timeout_s", 600)
    s.setdefault("extra_args", [[]])
    s.setdefault("max_device_gib", 0)
    s.setdefault("binary", DEFAULT_BINARY)
    s.setdefault("row_versions", [])
    s.setdefault("rounds", 1)
    # energy_s: each row's energy loop after its timing (--energy; docs/method.md, "Energy").
    s.setdefault("energy_s", 0)
    # keep_anchors: the anchor script answers every row in one process (--serve, AnchorWorker),
    # so what it compiles for a shape serves every later round of that shape.
    s.setdefault("keep_anchors", False)
    # timm_weights: every row (the steps' benches and the anchors alike) runs timm's own init for
    # the spec's seed, exported once to a safetensors file and passed as --weights (the encoder's
    # benches and torch_vit take it): the weight values move power-bound times by several percent.
    s.setdefault("timm_weights", False)
    if not 0 <= s["energy_s"] <= 600:
        raise SpecError("'energy_s' must be seconds between 0 and 600")
    if s["rounds"] < 1:
        raise SpecError(f"'rounds' must be >= 1, got {s['rounds']}")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", s["family"]):
        raise SpecError(f"'family' must be a plain lower-case name, got {s['family']!r}")
    for m in _need_list_of(s, "models", str):
        if m not in MODELS:
            raise SpecError(f"'models' has unknown model '{m}' (known: {', '.join(MODELS)})")
    _need_list_of(s, "batches", int, positive=True)
    for size in _need_list_of(s, "image_sizes", int, positive=True):
        if size % PATCH:
            raise SpecError(f"'image_sizes' value {size} is not a multiple of the patch size 16")
    # The shapes run, in order: the spec's own list, else every model x image size x batch.
    s.setdefault("shapes", [(m, i, b) for m in s["models"] for i in s["image_sizes"] for b in s["batches"]])
    # "sm": one stream per SM of the GPU, which the bench resolves and records as a number.
    streams = s["streams"]
    if not isinstance(streams, list) or not streams:
        raise SpecError("'streams' must be a non-empty list")
    for v in streams:
        if v != STREAMS_SM and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
            raise SpecError(f"'streams' values must be positive integers or \"sm\", got {v!r}")
    if len(set(map(repr, streams))) != len(streams):
        raise SpecError("'streams' lists a value twice")
    if s["warmup"] < 0 or s["iters"] < 1 or s["seed"] < 0:
        raise SpecError("'warmup' must be >= 0, 'iters' >= 1 and 'seed' >= 0")
    if s["timeout_s"] <= 0:
        raise SpecError("'timeout_s' must be positive")
    if s["max_device_gib"] < 0:
        raise SpecError("'max_device_gib' must be >= 0 (0: no memory budget)")
    s["flush_l2"] = s["flush_l2"] if isinstance(s["flush_l2"], list) else [s["flush_l2"]]
    _need_list_of(s, "flush_l2", bool)
    if not isinstance(s["extra_args"], list) or not s["extra_args"] or not all(
            isinstance(a, list) and all(isinstance(x, str) for x in a) for a in s["extra_args"]):
        raise SpecError("'extra_args' must be a list of argument lists, e.g. [[], [\"--rows\", \"64\"]]")
    if len({tuple(a) for a in s["extra_args"]}) != len(s["extra_args"]):
        raise SpecError("'extra_args' lists an argument list twice")
    versioned = "{version}" in s["binary"]
    if versioned:
        if s["row_versions"]:
            raise SpecError("'row_versions' is only for a 'binary' without {version}")
    else:
        if s["versions"]:
            raise SpecError("'binary' has no {version} placeholder, so 'versions' cannot be used: "
                            "list the rows one invocation writes in 'row_versions'")
        _need_list_of(s, "row_versions", str)
    for key in ("versions", "anchors"):
        if s[key]:
            _need_list_of(s, key, str)
    if s["anchors"] and "anchor_script" not in s:
        raise SpecError("'anchors' needs 'anchor_script' (a script in experiments/anchors/, or a "
                        "path ending in .py)")
    if s["keep_anchors"] and not s["anchors"]:
        raise SpecError("'keep_anchors' needs 'anchors'")
    if not s["versions"] and not s["anchors"] and not s["row_versions"]:
        raise SpecError("nothing to run: give 'versions', 'anchors' or 'row_versions'")
    s["versions"] = resolve_versions(s["family"], s["versions"])
    clash = set(s["versions"]) & set(s["anchors"])
    if clash:
        raise SpecError(f"'versions' and 'anchors' both list {sorted(clash)}")
    if "comparison" in s:
        s["comparison"] = check_comparison(s)
    return s


def _shapes_instead_of_axes(s):
    """A spec's `shapes`: the (model, image size, batch) triples it runs, where the product of
    models, image_sizes and batches would run shapes it does not want (a ladder sitting at a
    small shape for the slow versions and the target shapes for the rest). Fills those three
    keys with the values the shapes use, so every reader of them sees what runs."""
    if s["shapeless"] or any(k in s for k in ("models", "batches", "image_sizes")):
        raise SpecError("'shapes' replaces 'models', 'batches' and 'image_sizes' (and 'shapeless'): give one or "
                        "the other")
    shapes = s["shapes"]
    if not shapes or not all(isinstance(x, list) and len(x) == 3 and isinstance(x[0], str)
                              and all(isinstance(n, int) and not isinstance(n, bool) for n in x[1:])
                              for x in shapes):
        raise SpecError("'shapes' must be a non-empty list of [model, image_size, batch], e.g. "
                        "[[\"vit_b\", 224, 32]]")
    s["shapes"] = [tuple(x) for x in shapes]
    if len(set(s["shapes"])) != len(s["shapes"]):
        raise SpecError("'shapes' lists a shape twice")
    for key, at in (("models", 0), ("image_sizes", 1), ("batches", 2)):
        s[key] = list(dict.fromkeys(x[at] for x in s["shapes"]))


def check_comparison(s):
    """The spec's [comparison] with its defaults; SpecError names what is wrong."""
    c = dict(s["comparison"])
    if not s["side_experiment"]:
        raise SpecError("'comparison' is for a side experiment (side_experiment = true)")
    for key, value in c.items():
        if key not in COMPARISON_KEYS:
            raise SpecError(f"'comparison' has unknown key '{key}' (known: {', '.join(COMPARISON_KEYS)})")
        if not isinstance(value, COMPARISON_KEYS[key]):
            raise SpecError(f"'comparison.{key}' has the wrong type ({type(value).__name__})")
    for key in ("step", "against", "caption"):
        if key not in c:
            raise SpecError(f"'comparison' needs '{key}'")
    c.setdefault("clocks", [])
    c.setdefault("figure", False)
    c.setdefault("tflops", False)
    c.setdefault("title", f"{c['step']} against {', '.join(c['against'])}")
    c.setdefault("ratios", [])
    for r in c["ratios"]:
        if not (isinstance(r, list) and len(r) == 3 and all(isinstance(x, str) for x in r)):
            raise SpecError(f"'comparison.ratios' holds [column, version, over version] triples, got {r!r}")
    timed = set(s["versions"]) | set(s["anchors"])
    for v in [c["step"]] + c["against"] + c["clocks"] + [v for r in c["ratios"] for v in r[1:]]:
        if not isinstance(v, str) or v not in timed:
            raise SpecError(f"'comparison' names {v!r}, which the spec does not time")
    if c["step"] not in s["versions"]:
        raise SpecError(f"'comparison.step' must be one of the spec's 'versions', got {c['step']!r}")
    return c


def comparisons(family, specs_dir=None):
    """[(spec name, its comparison)] of every spec of `family` that declares one, by name."""
    out = []
    for path in sorted(Path(specs_dir or SPECS_DIR).glob("*.toml")):
        spec = load_spec(path)
        if spec["family"] == family and "comparison" in spec:
            out.append((path.stem, spec["comparison"]))
    return out


def resolve_versions(family, names):
    """A spec's versions with the version lists' words resolved: "@versions" is every version of
    the family in its list's order (stages/<family>/versions.def; the encoder's step table); for
    the encoder an alias (fastest_fp16, fastest_fp8) is the step it names. A version named twice
    runs once."""
    aliases = step_table.aliases() if family == "encoder" else {}
    out = []
    for name in names:
        if name == "@versions":
            out += family_versions(family)
        else:
            out.append(aliases[name]["step"] if name in aliases else name)
    return list(dict.fromkeys(out))


def family_versions(family):
    if family == "encoder":
        return step_table.ladder()
    path = EXPERIMENTS.parent / "stages" / family / "versions.def"
    if not path.is_file():
        raise SpecError(f"'@versions': family '{family}' has no version list ({path})")
    return re.findall(r"^STUDY_VERSION\((\w+)\)", path.read_text(), flags=re.M)


def output_name(spec_path, spec):
    """Where a spec's rows go inside a run folder: <name>.csv, or <name>/<name>.csv for a side
    experiment; <name> is the spec's file name without `.toml` and without `_quick` (a quick
    sweep lands where its full sweep would)."""
    name = Path(spec_path).stem
    name = name[:-len("_quick")] if name.endswith("_quick") else name
    return Path(name, name + ".csv") if spec["side_experiment"] else Path(name + ".csv")


def find_spec(name):
    """A path as given, else experiments/specs/<name>[.toml] (or $STUDY_SPECS_DIR's)."""
    p = Path(name)
    if p.is_file():
        return p
    for cand in (SPECS_DIR / name, SPECS_DIR / (name + ".toml")):
        if cand.is_file():
            return cand
    raise UsageError(f"spec '{name}' not found (neither a file nor in {SPECS_DIR})")


def extra_text(extra):
    return " ".join(shlex.quote(a) for a in extra)


def make_key(family, version, model, batch, image_size, streams, flush_l2, extra="", round_=1):
    """A configuration's identity in one round; rows with equal keys are the same
    measurement."""
    return (str(family).strip(), str(version).strip(), str(model).strip(),
            _norm_int(batch), _norm_int(image_size), _norm_int(streams),
            "1" if str(flush_l2).strip().lower() in ("1", "true") else "0", str(extra).strip(),
            str(int(round_)))


def _norm_int(v):
    text = str(v).strip()
    return str(int(text)) if re.fullmatch(r"[+-]?\d+", text) else text


def row_key(row):
    note = row.get("note", "") or ""
    m = EXTRA_RE.search(note)
    streams = STREAMS_SM if STREAMS_SM_TAG in note else row.get("streams", "")
    return make_key(row.get("family", ""), row.get("version", ""), row.get("model", ""),
                    row.get("batch", ""), row.get("image_size", ""), streams,
                    row.get("flush_l2", ""), m.group(1) if m else "", row_round(row))


def row_round(row):
    """The round a row was measured in: its note's `[round: k]`, else 1."""
    m = ROUND_RE.search(row.get("note", "") or "")
    return int(m.group(1)) if m else 1


class Config:
    """One subprocess invocation; `expect` are the versions of the rows it must write."""

    def __init__(self, index, spec, kind, label, expect, model, batch, image_size, streams,
                 flush_l2, extra, round_=1, rounds=1):
        self.index, self.kind, self.label, self.expect = index, kind, label, tuple(expect)
        # Round round_ of rounds; every round of a configuration shares its index (and shard).
        self.round, self.rounds = round_, rounds
        self.family = spec["family"]
        self.model, self.batch, self.image_size = model, batch, image_size
        self.streams, self.flush_l2, self.extra = streams, flush_l2, tuple(extra)
        self.warmup, self.iters, self.seed = spec["warmup"], spec["iters"], spec["seed"]
        self.check, self.timeout_s = spec["check"], spec["timeout_s"]
        self.shapeless, self.energy_s = spec["shapeless"], spec["energy_s"]
        self.weights = None  # a safetensors file passed as --weights (spec key timm_weights)

    def keys(self):
        shape = ("", "", "") if self.shapeless else (self.model, self.batch, self.image_size)
        return [make_key(self.family, v, *shape, self.streams, "1" if self.flush_l2 else "0",
                         extra_text(self.extra), self.round)
                for v in self.expect]

    def describe(self):
        s = (f"#{self.index} {self.label} model={self.model} batch={self.batch} "
             f"image_size={self.image_size} streams={self.streams} flush_l2={int(self.flush_l2)}")
        s += f" extra={extra_text(self.extra)}" if self.extra else ""
        return s + (f" round={self.round}/{self.rounds}" if self.rounds > 1 else "")

    def args(self, csv_path, device):
        a = ["--batch", str(self.batch), "--image-size", str(self.image_size),
             "--model", self.model, "--streams", str(self.streams),
             "--warmup", str(self.warmup), "--iters", str(self.iters),
             "--seed", str(self.seed), "--csv", csv_path, "--device", str(device)]
        if self.flush_l2:
            a.append("--flush-l2")
        if not self.check:
            a.append("--no-check")
        if self.energy_s:
            a += ["--energy", f"{self.energy_s:g}"]
        if self.weights:
            a += ["--weights", str(self.weights)]
        return a + list(self.extra)


def expand(spec, rounds=None):
    """All configurations in a fixed order: shapes outside, versions inside, so the versions
    of one shape run close together in time (fairer comparisons), and index i is stable for
    a given spec (sharding takes i % n). With rounds > 1 (default: the spec's `rounds`) the
    versions of a shape run once, then again, `rounds` times (interleaved rounds: a slow
    moment of the machine lands on one round of every version, not on every round of one),
    and round k starts k - 1 places further down the list (a, b, c; b, c, a; c, a, b): no
    version always runs first after a pause or last after its neighbours have heated the GPU.
    The rounds of a configuration share its index, so they stay in one shard."""
    rounds = spec.get("rounds", 1) if rounds is None else rounds
    runs = [("bench", v, [v]) for v in spec["versions"]]
    if spec["row_versions"]:
        runs.append(("bench", "+".join(spec["row_versions"]), spec["row_versions"]))
    runs += [("anchor", a, [a]) for a in spec["anchors"]]
    out, index = [], 0
    for model, image, batch in spec["shapes"]:
        for streams in spec["streams"]:
            for flush in spec["flush_l2"]:
                for extra in spec["extra_args"]:
                    first = index
                    for k in range(1, rounds + 1):
                        shift = (k - 1) % len(runs) if runs else 0
                        for i in list(range(shift, len(runs))) + list(range(shift)):
                            kind, label, expect = runs[i]
                            out.append(Config(first + i, spec, kind, label, expect, model,
                                              batch, image, streams, flush, extra, k, rounds))
                    index = first + len(runs)
    return out


def extra_value(extra, flag):
    for i, a in enumerate(extra):
        if a == flag and i + 1 < len(extra):
            return int(extra[i + 1])
        if a.startswith(flag + "="):
            return int(a.split("=", 1)[1])
    return None


def estimate_device_bytes(cfg):
    """Rough device memory a configuration needs, or None when the family has no estimate.
    Only used to skip configurations above the spec's max_device_gib with a clear reason."""
    hidden, heads, _ = MODELS[cfg.model]
    tokens = (cfg.image_size // PATCH) ** 2 + 1
    try:
        rows = extra_value(cfg.extra, "--rows") or cfg.batch * tokens
        hidden = extra_value(cfg.extra, "--hidden") or hidden
    except ValueError:
        return None
    h = 2  # fp16 bytes
    if cfg.family == "layernorm":
        return 2 * rows * hidden * h + 2 * hidden * h
    if cfg.family == "attention":  # packed QKV + output, plus a materialized fp32 score matrix
        return rows * 4 * hidden * h + cfg.batch * heads * tokens * tokens * 4
    if cfg.family == "patch_embed":  # images, their patch-major copy, GEMM product, token rows
        images = cfg.batch * 3 * cfg.image_size ** 2 * h
        return 2 * images + 2 * rows * hidden * h + hidden * 768 * h
    if cfg.family == "mlp":  # x, 4x intermediate, y, residual and both weight matrices
        return rows * hidden * h * 7 + 8 * hidden * hidden * h
    if cfg.family == "patch_embed":  # images twice (v4's second copy), token rows, weights
        return (2 * cfg.batch * 3 * cfg.image_size ** 2 * h + rows * hidden * h
                + (3 * PATCH * PATCH + 1 + tokens) * hidden * h)
    return None


def command_for(cfg, spec, build_dir, python):
    if cfg.kind == "anchor":
        name = spec["anchor_script"]   # a script of experiments/anchors/, or a path to one
        script = Path(name) if name.endswith(".py") else EXPERIMENTS / "anchors" / (name + ".py")
        return [python, str(script), "--version", cfg.label], script
    rel = spec["binary"].format(family=spec["family"], version=cfg.label)
    binary = Path(build_dir) / rel
    return [str(binary)], binary


# The module's anchors (experiments/anchors/torch_vit.py: vitstudy_fp16, ...) import the compiled
# module from the build folder; meson builds it with the target below.
MODULE_ANCHOR_PREFIX, MODULE_TARGET = "vitstudy_", "python_module"


def build_targets(spec):
    """(ninja targets, meson test names) that the spec's rows need: each bench it runs and, for a
    stage version, that version's GPU test (as the families' meson.build name them: executable
    stages/<family>/test_<family>_<version>, test <family>_<version>), and the Python module
    where an anchor is the study's own forward from Python. A sitting then builds and checks
    exactly what it times."""
    targets, tests = [], []
    if spec["versions"]:
        for v in spec["versions"]:
            targets.append(spec["binary"].format(family=spec["family"], version=v))
            if spec["binary"] == DEFAULT_BINARY:
                targets.append(f"stages/{spec['family']}/test_{spec['family']}_{v}")
                tests.append(f"{spec['family']}_{v}")
    elif spec["row_versions"]:
        targets.append(spec["binary"])
    if any(a.startswith(MODULE_ANCHOR_PREFIX) for a in spec["anchors"]):
        targets.append(MODULE_TARGET)
    return targets, tests


def select_configs(spec, build_dir, python, shard=0, num_shards=1, skip_unbuilt=False,
                   dry_run=False, rounds=None):
    """This shard's configurations and their commands. Every binary must exist before anything
    runs (a sweep that dies an hour in on a missing version wastes the allocation), unless
    skip_unbuilt leaves those versions out, or dry_run only warns."""
    configs = [c for c in expand(spec, rounds) if c.index % num_shards == shard]
    commands, missing = {}, {}
    for c in configs:
        cmd, path = command_for(c, spec, build_dir, python)
        commands[c.index] = cmd
        if not path.is_file():
            missing.setdefault(path, []).append(c)
    if missing:
        anchors = [p for p, cs in missing.items() if cs[0].kind == "anchor"]
        if anchors:
            raise UsageError(f"anchor script {anchors[0]} not found (spec key 'anchor_script')")
        names = ", ".join(str(p) for p in missing)
        if skip_unbuilt:
            print(f"warning: not built, left out: {names}", file=sys.stderr)
            left_out = {c.index for cs in missing.values() for c in cs}
            configs = [c for c in configs if c.index not in left_out]
        elif dry_run:
            print(f"warning: not built yet: {names}", file=sys.stderr)
        elif not Path(build_dir).is_dir():
            raise UsageError(f"build dir {build_dir} does not exist: run `meson setup "
                             f"{build_dir}` and `ninja -C {build_dir}` first")
        else:
            raise UsageError(f"bench binaries not found: {names}; run `ninja -C {build_dir}` "
                             "first (or --skip-unbuilt to leave those versions out)")
    return configs, commands
