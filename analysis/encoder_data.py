"""The whole ViT's rows of one run folder, read once for every section of its report: the ladder
view (one row per version, model, image size and batch, medians across rounds), what each row's
note says (family versions, memory, launches, eager breakdown), the anchors, and the shape the
study's targets are set at. analysis/encoder.py and the modules it calls take one EncoderData.

What a row must hold: family `encoder`; version a ladder step, `custom:...` or `pytorch_*`;
model, batch, image_size, streams, median_us (one forward of the batch), and where measured
routine_us, tflops, launches. The note of an ok bench row carries `pe=.. ln=.. attn=.. mlp=..`
(with `(best: ...)` on e6_best), `activations X MB`, `X launches per layer`, `cuda-graph replay`
or not, `weights X MB` and `eager breakdown us: name=us ...`; anything missing there only leaves
its cell or figure empty.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

import studylib
from analysis import plots
from studylib import catalog, rundata
from studylib.claims import claim, flush_setting, say
from studylib.formatting import fmt_ms, join_and  # the sections import them from here
from studylib import steps as step_table  # the encoder's step table (stages/encoder/steps.tsv)
from studylib.schema import MODELS  # name -> (hidden, heads, depth)

KEY_MODEL, KEY_IMAGE = "vit_b", 224   # the study's targets are set at ViT-B/16, 224 px
KEY_BATCHES = (1, 32, 256)
# The steps in table order (stages/encoder/steps.tsv, with steps that left the build after their
# parent), and the step each one changes: its parent in the table.
LADDER = step_table.analysis_ladder()
PREVIOUS = {v: p for v, p in step_table.analysis_parents().items() if p}
E3, E4, E6 = "e3_graph", "e4_streams", "e6_best"
EAGER, GRAPH, COMPILE = "pytorch_timm", "pytorch_timm_graph", "pytorch_timm_compile_graph"
ANCHORS = [EAGER, GRAPH, COMPILE]
TARGET_COMPILE = 1.3      # 1.3x torch.compile's throughput at batch 256
TARGET_B1_MS = 0.4        # at most 0.4 ms at batch 1
TARGET_FP8_COMPILE = 2.0  # the fastest FP8 step: 2.0x torch.compile's fp16 throughput at batch 256
# Batch 1 near the hardware's floor (weights read once, ~41 us fp16 on an H200): at most 0.20 ms
# for the fastest fp16 step and 0.15 ms for the fastest FP8 step.
TARGET_B1_FLOOR_MS = {"fp16": 0.20, "FP8": 0.15}
# The fp16 targets are judged on the fastest of e6_best and the fp16 steps after it, at each batch;
# a step that left the build (stages/encoder/TRIED.md) answers nothing, though its rows stay.
BEST_STEPS = [v for v in step_table.fp16_steps_from(E6) if v not in step_table.RETIRED]
COMPONENTS = ["patch_embed", "layernorm", "qkv", "attention", "projection", "residual_add",
              "mlp", "head"]
TORCHAO = ["pytorch_torchao_fp8_tensor_graph", "pytorch_torchao_fp8_row_graph"]
LABEL = {EAGER: "timm eager", GRAPH: "timm in a CUDA graph",
         COMPILE: "timm torch.compile + CUDA graph", TORCHAO[0]: "torchao FP8, per tensor (CUDA graph)",
         TORCHAO[1]: "torchao FP8, per row, bf16 (CUDA graph)"}
# Eager vs graph replay is the line style everywhere (the anchors keep the colours and markers
# they have in every family's figures).
EAGER_LINE, GRAPH_LINE = "--", "-"
KEYS = ["version", "model", "image_size", "batch", "streams"]
SHORT_MODEL = r"\blayers=\d+"   # a quick check with fewer blocks (`--layers N`) is not the model


def fmt_rate(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:,.0f}"


def fmt_mb(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def fmt_one(x):
    return "-" if x is None or not np.isfinite(x) else f"{x:.1f}"


def parse_breakdown(note):
    """{component: us} from the text after 'eager breakdown us: ' (a repeated name adds up);
    {} when the row has none."""
    m = re.search(r"eager breakdown us:\s*([^;]*)", note)
    if not m:
        return {}
    out = {}
    for name, value in re.findall(r"([A-Za-z_]\w*)=([-+]?[0-9.]+(?:[eE][-+]?\d+)?|nan)",
                                  m.group(1)):
        v = float(value)
        if np.isfinite(v):
            out[name] = out.get(name, 0.0) + v
    return out


def best_resolved(note):
    """The text inside '(best: ...)', parentheses balanced (passed-over reasons have their
    own); None without one."""
    start = note.find("(best: ")
    if start < 0:
        return None
    depth, i = 0, start
    for i, ch in enumerate(note[start:], start):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            break
    return note[start + len("(best: "):i].strip()


def number(note, pattern):
    m = re.search(pattern, note)
    return float(m.group(1)) if m else np.nan


def is_module(version):
    """Whether a row is the Python module's (vitstudy_*): it replays its step's graph."""
    return str(version).startswith("vitstudy_")


def fastest_across(time, candidates, batches, spread=None):
    """The one of `candidates` fastest at the most of `batches` (time(v, b): us, NaN where v has
    no row), a tie going to the faster at the largest batch that times the tied: "the fastest"
    step of a sitting, as the step table's aliases name it (analysis/test_steps.py), so that one
    batch's draw does not rename it; the targets judge the fastest at each batch. A step wins a
    batch from its parent only beyond the rounds' spread (spread(v, b) -> its fastest and slowest
    round; without it, the medians alone): studylib.steps.fastest. None where none is timed."""
    return step_table.fastest(candidates, batches, time, spread or (lambda v, b: (time(v, b), time(v, b))))


class EncoderData:
    """The encoder rows of `run` (a rundata.Run) and the lookups every section uses."""

    def __init__(self, run):
        self.run = run
        self._read_rows(run)
        self._collapse_rounds()
        self._components()
        self._ladder_views()
        self._key_shape()
        self._floor_and_parity(run)

    def _read_rows(self, run):
        """ok and note: the run's ok encoder rows at one L2 setting (whole models), with the columns
        the sections derive from the notes and the ceilings."""
        self.everything = run.rows("encoder")
        ok = run.ok("encoder")
        # A step that left the build (stages/encoder/TRIED.md, which keeps its numbers) is drawn
        # and judged nowhere, though its rows stay in the sittings that timed it.
        self.retired_rows = int(ok["version"].isin(step_table.RETIRED).sum())
        ok = ok[~ok["version"].isin(step_table.RETIRED)]
        short = ok["note"].astype(str).str.contains(SHORT_MODEL, regex=True)
        self.n_short = int(short.sum())
        ok, flush, self.flush_dropped = rundata.one_setting(ok[~short], "flush_l2")
        self.flush_text = say(flush_setting(flush), "encoder")
        note = ok["note"].astype(str)
        ok["streams"] = ok["streams"].fillna(1)
        ok["act_mb"] = note.map(lambda s: number(s, r"activations ([0-9.]+) MB"))
        depth = ok["model"].map(lambda m: MODELS.get(m, (0, 0, np.nan))[2]).astype(float)
        ok["lpl"] = note.map(lambda s: number(s, r"([0-9.]+) launches per layer"))
        ok["lpl"] = ok["lpl"].fillna(ok["launches"] / depth)
        # A compiled anchor's count is its forward's only where the row says it compiled before
        # counting ("compiled in this row" / "kept"): older rows counted the compile's
        # autotuning kernels too.
        compiled = ok["version"].astype(str).isin([COMPILE]) | ok["version"].astype(str).str.startswith("pytorch_torchao")
        ok.loc[compiled & ~note.str.contains(r"compiled in this row|compiled model kept", regex=True), "lpl"] = np.nan
        # The module's rows (vitstudy_*) always replay the graph its first call of a batch size
        # captured (vitstudy/model.py), though their notes do not say so.
        ok["graph"] = note.str.contains("cuda-graph replay", regex=False) | ok["version"].map(is_module)
        self.gemm_ceiling = run.ceilings().gemm_tflops
        self.fp8_ceiling = rundata.fp8_ceiling_tflops(run)
        # Each step against its own precision's GEMM rate: an FP8 step's against the FP8 ceiling
        # (about twice fp16's), every other row against fp16's.
        fp8 = ok["version"].map(lambda v: step_table.is_fp8_step(str(v)) or str(v).startswith("pytorch_torchao"))
        own = fp8.map(lambda f: self.fp8_ceiling if f else self.gemm_ceiling)
        ok["gemm_pct"] = 100 * ok["tflops"] / pd.to_numeric(own, errors="coerce")
        self.ok, self.note = ok, note

    def _collapse_rounds(self):
        """timed: one row per configuration, the median across rounds and their range."""
        ok = self.ok
        # The sustained time of one forward: the energy loop's (~5 s of back-to-back calls, the GPU
        # at its power limit) seconds over its calls, beside the timed burst's median.
        ok["sustained_us"] = pd.to_numeric(ok["energy_s"], errors="coerce") / pd.to_numeric(
            ok["energy_calls"], errors="coerce") * 1e6
        # Interleaved rounds give one row per round: the median across them is the value, the
        # range of the rounds' medians its spread.
        timed = rundata.collapse_rounds(ok, KEYS, routine_us=("routine_us", "median"),
                                        sustained_us=("sustained_us", "median"),
                                        tflops=("tflops", "median"), gemm_pct=("gemm_pct", "median"),
                                        lpl=("lpl", "median"), act_mb=("act_mb", "median"),
                                        sm_mhz=("sm_clock_mhz", "median"), energy_j=("energy_j", "median"),
                                        power_w=("power_w", "median"), energy_mhz=("energy_sm_clock_mhz", "median"))
        timed["img_s"] = timed["batch"] / timed["median_us"] * 1e6
        timed["spread_pct"] = 100 * (timed["hi_us"] - timed["lo_us"]) / timed["median_us"]
        self.timed = timed

    def _components(self):
        """parts and components: the eager breakdown's per-component times."""
        ok, note = self.ok, self.note
        # Per-component times, median across rounds.
        parts = []
        for (_, r), text in zip(ok.iterrows(), note):
            for comp, us in parse_breakdown(text).items():
                parts.append({**{k: r[k] for k in KEYS}, "component": comp, "us": us})
        parts = pd.DataFrame(parts, columns=KEYS + ["component", "us"])
        if len(parts):
            parts = parts.groupby(KEYS + ["component"], as_index=False, sort=False)["us"].median()
        self.parts = parts
        self.components = [c for c in COMPONENTS if c in set(parts["component"])] + \
            [c for c in dict.fromkeys(parts["component"]) if c not in COMPONENTS]

    def _ladder_views(self):
        """lad, order, labels of custom mixes, steps and the figures' styles."""
        ok, timed = self.ok, self.timed
        # One row per (version, model, image, batch) for the ladder views: e4 at its fastest
        # stream count there (the streams table shows every count), every other version on its
        # one stream.
        self.lad = timed.loc[timed.groupby(["version", "model", "image_size", "batch"])["median_us"].idxmin()]
        self.order = catalog.version_order(timed["version"], LADDER + ANCHORS)
        customs = [v for v in self.order if v.startswith("custom:")]
        self.custom_label = {v: say(claim("custom_label", name=chr(ord("A") + i) if i < 26 else i + 1), "encoder")
                             for i, v in enumerate(customs)}
        self.custom_key = say(claim("custom_key", parts=[
            claim("custom_key_part", label=self.custom_label[v], mix=v.removeprefix("custom:")) for v in customs]),
            "encoder") if customs else ""
        self.steps = [v for v in LADDER if v in self.order]   # the ladder steps this run has
        graphed = ok.groupby("version")["graph"].any().to_dict()
        self.style = plots.styles(self.order, fastest=plots.fastest_at(self.lad, model="vit_b", image_size=224,
                                                                      batch=None))
        for v in self.order:
            is_graph = graphed.get(v, v in (GRAPH, COMPILE) or bool(step_table.is_graph_version(v)))
            self.style[v]["linestyle"] = GRAPH_LINE if is_graph else EAGER_LINE

    def _key_shape(self):
        """The model, image size and batches the targets are judged at, and the rounds there."""
        models = list(dict.fromkeys(self.lad["model"]))
        self.key_model = KEY_MODEL if KEY_MODEL in models else (
            self.lad["model"].value_counts().index[0] if len(self.lad) else KEY_MODEL)
        self.km = self.lad[self.lad["model"] == self.key_model]
        self.images = sorted(int(i) for i in set(self.km["image_size"]))
        self.key_image = KEY_IMAGE if KEY_IMAGE in self.images else (self.images[0] if self.images else KEY_IMAGE)
        self.at_key = self.km[self.km["image_size"] == self.key_image]
        self.targets_apply = self.key_model == KEY_MODEL and self.key_image == KEY_IMAGE
        self.where = say(claim("key_shape", model=self.key_model, image=self.key_image), "encoder")
        self.key_batches = [b for b in KEY_BATCHES if b in set(self.at_key["batch"])] or \
            sorted(int(b) for b in set(self.at_key["batch"]))[:3]
        self.rounds = sorted(int(n) for n in set(self.at_key["n"])) if len(self.at_key) else []

    def _floor_and_parity(self, run):
        """The batch-1 weight-read floor, the parity verdicts and the FP8 steps."""
        note, ok = self.note, self.ok
        # The floor of a batch-1 forward: reading every weight once at the run's measured copy
        # bandwidth (the weights' size from the rows' notes; the copy rate counts bytes read plus
        # written, so a read alone at that rate is a lower bound only in the same sense).
        self.weights_mb = note[ok["model"] == self.key_model].map(
            lambda x: number(x, r"weights ([0-9.]+) MB")).dropna()
        copy_gbps = run.ceilings().copy_gbps
        self.floor_us = (self.weights_mb.median() * 1e6 / (copy_gbps * 1e9) * 1e6
                         if len(self.weights_mb) and copy_gbps else np.nan)
        self.depth = MODELS.get(self.key_model, (0, 0, np.nan))[2]
        # The rule the aliases and the final answer use (steps.models_timm): an fp16 step stands
        # for timm's model when its newest parity file with every parameter drawn passes at 224
        # and 384 px.
        try:
            self.parity_newest = step_table.parity_verdicts(run.path.parent)
        except step_table.ParityFileError as e:
            raise studylib.DataError(f"{rundata.show_path(e.path)}: not a parity result ({e.why})") from None
        self.fp8_steps = [v for v in self.steps if step_table.is_fp8_step(v)]
    def label(self, v):
        return LABEL.get(v, self.custom_label.get(v, v))

    def at(self, version, batch, col="median_us", image=None, model=None):
        """One value of the ladder view, NaN where that version has no timing there."""
        lad = self.lad
        d = lad[(lad["version"] == version) & (lad["batch"] == batch)
                & (lad["model"] == (model or self.key_model))
                & (lad["image_size"] == (image or self.key_image))]
        return float(d[col].iloc[0]) if len(d) else np.nan

    def fp16_anchors(self, batch, image=None):
        """The fp16 PyTorch anchors timed at this batch: torchao's FP8 anchors are the FP8 steps'
        measure, judged apart."""
        return [a for a in self.order if catalog.is_anchor(a) and a not in TORCHAO
                and np.isfinite(self.at(a, batch, image=image))]

    def best_anchor(self, batch, image=None):
        """(anchor, median us) of the fastest fp16 PyTorch anchor at this batch, or (None, nan)."""
        times = {a: self.at(a, batch, image=image) for a in self.fp16_anchors(batch, image)}
        if not times:
            return None, np.nan
        a = min(times, key=times.get)
        return a, times[a]

    def spread(self, v, b):
        """(fastest, slowest) of v's rounds at batch b: its median twice where one round ran."""
        lo, hi = self.at(v, b, "lo_us"), self.at(v, b, "hi_us")
        m = self.at(v, b)
        return (lo if np.isfinite(lo) else m, hi if np.isfinite(hi) else m)

    def fastest_of(self, candidates, b):
        """The fastest of `candidates` timed at batch b, a step beating its parent only beyond the
        rounds' spread (studylib.steps.fastest_at), or None."""
        return step_table.fastest_at(candidates, b, self.at, self.spread)

    def fastest_across(self, candidates):
        """The one of `candidates` fastest across this run's key batches (fastest_across)."""
        return fastest_across(self.at, candidates, self.key_batches, self.spread)

    def answer_fp16(self):
        """The fp16 step the answer names: the fastest across the key batches of e6_best and the
        fp16 steps after it whose newest timm parity passes, else of them all; None where none is
        timed. The findings that describe "the" fp16 step describe this one."""
        timm = [v for v in BEST_STEPS if step_table.models_timm(v, self.parity_newest)]
        return self.fastest_across(timm) or self.fastest_across(BEST_STEPS)
