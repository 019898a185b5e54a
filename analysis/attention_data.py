"""The attention section's rows: a run's timed rows at ViT-B's head shape, one L2 setting,
interleaved rounds counted once (`merged`), and the lookups every section of analysis/attention.py
uses (AttentionData)."""
from __future__ import annotations

import numpy as np

from analysis import plots
from studylib import catalog, formatting, rundata
from studylib.claims import flush_setting

HEADS, HEAD_DIM = 12, 64          # ViT-B; the attention targets' shapes (docs/method.md)
KEY_BATCH = 32                    # the batch of the targets
KEY_TOKENS = (197, 577, 1025)     # 224 / 384 / 512 px
CUDNN = "cudnn_sdpa"
CUDNN_GRAPH = "pytorch_sdpa_cudnn_graph"  # PyTorch's cuDNN SDPA, possibly a newer cuDNN than ours
# "The best cuDNN result" at a token count: the lower median of our cuDNN build and PyTorch's
# cuDNN SDPA replayed from a CUDA graph, in the same run (docs/method.md).
BEST_CUDNN = "the best cuDNN result"
FASTEST_TARGET = 0.9              # target: fastest version <= 0.9x the best cuDNN result
V6 = "v6_coalesced_k"             # the last step before the flash kernels
V9 = "v9_softmax_overlap"
LADDER = catalog.family_versions("attention") + [
          "pytorch_sdpa_cudnn_graph", "pytorch_sdpa_flash_graph", "pytorch_sdpa_efficient_graph",
          "pytorch_sdpa_math_graph", "pytorch_sdpa_cudnn", "pytorch_sdpa_flash",
          "pytorch_sdpa_efficient", "pytorch_sdpa_math"]
# The figures over tokens draw the flash-class versions (v7_flash_mma on), cuDNN and the anchors
# replayed from a CUDA graph: v0-v6 take 4-2,500x cuDNN's time and would crush the result into a
# few pixels of a log axis (the ladder and summary tables give their times), the eager anchors add
# host dispatch, and v10_e4m3_qkv (TWIN_OF_V9) is v9's kernel.
FIGURE_FROM = "v7_flash_mma"
# v10_e4m3_qkv's fp16 launch, this family's contract, is v9's kernel under another name (its
# E4M3 input is the FP8 encoder's): timed and tabled, but neither drawn nor named the fastest.
TWIN_OF_V9 = "v10_e4m3_qkv"
# Around the result: PyTorch's math and memory-efficient backends (2-30x cuDNN's time) would
# stretch the log axis over which the flash versions sit within 20% of each other; the tables
# give them.
SLOW_BACKENDS = ("math", "efficient")


def label(v):
    if catalog.is_anchor(v):
        name = v.removeprefix("pytorch_sdpa_")
        graph = name.endswith("_graph")
        return f"PyTorch SDPA {name.removesuffix('_graph')} ({'CUDA graph' if graph else 'eager'})"
    return v


def merged(r):
    """(timed rows, how many of another head shape, the L2 setting kept, rows of the other one
    dropped) of run r: ViT-B's head shape, one L2 setting, interleaved rounds counted once (their
    median, with the rounds' range as spread)."""
    ok = r.ok("attention")
    other = int(((ok["heads"] != HEADS) | (ok["head_dim"] != HEAD_DIM)).sum())
    ok = ok[(ok["heads"] == HEADS) & (ok["head_dim"] == HEAD_DIM)]
    ok, kept, dropped = rundata.one_setting(ok, "flush_l2")
    # Work every version must do (attention::flops()); fills TFLOP/s for any row without it.
    ok["flops"] = 4.0 * ok["batch"] * HEADS * ok["tokens"] ** 2 * HEAD_DIM
    ok["tflops"] = ok["tflops"].where(np.isfinite(ok["tflops"]), ok["flops"] / ok["median_us"] / 1e6)
    # Bytes it must move (attention::bytes(): packed QKV read, output written, fp16).
    ok["bytes"] = 2.0 * ok["batch"] * ok["tokens"] * HEADS * HEAD_DIM * 4
    ok["gbps"] = ok["gbps"].where(np.isfinite(ok["gbps"]), ok["bytes"] / ok["median_us"] / 1e3)
    t = rundata.collapse_rounds(ok, ["version", "batch", "tokens"], tflops=("tflops", "median"),
                                gbps=("gbps", "median"))
    return t, other, kept, dropped


class AttentionData:
    """The attention rows of the context's run, the rows its targets are judged on (the family's
    targets sitting where the context took one, else the run's), and their lookups."""

    def __init__(self, ctx):
        run = ctx.run
        self.run, self.prov, self.tprov = run, ctx.provenance(), ctx.title_provenance()
        self.everything = run.rows("attention")
        self.timed, self.other_shape, self.flush, self.flush_dropped = merged(run)
        timed = self.timed
        self.rounds, self.rounds_caption, self.rounds_cells = formatting.rounds_wording(timed)
        self.order = catalog.version_order(timed["version"], LADDER)
        family = catalog.family_versions("attention")
        self.figure_order = [v for v in self.order if (catalog.is_anchor(v) and v.endswith("_graph"))
                             or (v in family and family.index(v) >= family.index(FIGURE_FROM) and v != TWIN_OF_V9)]
        self.near_order = [v for v in self.figure_order if not any(b in v for b in SLOW_BACKENDS)]
        self.style = plots.styles(self.order, fastest=plots.fastest_at(
            timed, exclude=(TWIN_OF_V9,), batch=None, tokens=timed["tokens"].min() if len(timed) else None))
        self.flush_said = flush_setting(self.flush)
        self.flush_text = ctx.said(self.flush_said)  # also in figure titles
        self.batches = sorted(int(b) for b in set(timed["batch"]))
        self.key_batch = KEY_BATCH if KEY_BATCH in self.batches else (max(self.batches) if self.batches else KEY_BATCH)
        self.kb = timed[timed["batch"] == self.key_batch]
        self.token_counts = sorted(int(x) for x in set(timed["tokens"]))
        self.key_tokens = [n for n in KEY_TOKENS if n in set(self.kb["tokens"])] or self.token_counts
        # The targets and the headline are judged on the family's targets sitting where one was
        # measured after this run (its own clean sitting of the target shapes), else on this run.
        self.judged = merged(ctx.take_targets_run())[0] if ctx.targets_run is not None else timed
        self.judged_kb = self.judged[self.judged["batch"] == self.key_batch]

    def at(self, version, tokens, batch=None, col="median_us", table=None):
        """One value of the merged table (`table`: another run's), NaN when that version has no
        timing there."""
        batch = self.key_batch if batch is None else batch
        t = self.timed if table is None else table
        s = t[(t["version"] == version) & (t["tokens"] == tokens) & (t["batch"] == batch)][col]
        return float(s.iloc[0]) if len(s) else np.nan

    def best_cudnn(self, tokens, table=None):
        """(time, version) of the best cuDNN result at this token count; (NaN, None) without one."""
        times = [(self.at(v, tokens, table=table), v) for v in (CUDNN, CUDNN_GRAPH)]
        times = [(m, v) for m, v in times if np.isfinite(m)]
        return min(times) if times else (np.nan, None)

    def fastest_own(self, n):
        """The fastest own version at n tokens and the key batch, on the judged rows (v9's twin
        left out)."""
        d = self.judged_kb
        d = d[(d["tokens"] == n) & d["version"].map(catalog.is_own) & (d["version"] != TWIN_OF_V9)]
        return d.loc[d["median_us"].idxmin()] if len(d) else None
