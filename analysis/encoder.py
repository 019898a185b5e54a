# %% [markdown]
# # The whole ViT: throughput, batch-1 latency, time per component, and the ladder's steps
#
# One forward of the ViT (patch embedding + cls + position, the encoder blocks, the final
# LayerNorm and the classifier head on the cls rows) for a batch of images, as composed in
# stages/encoder from the families' versions: e1_library (the library composition) through
# buffer reuse, a CUDA graph of the whole forward, streams and more fusion to e6_best, against
# timm's model in PyTorch (eager, replayed from a CUDA graph, and torch.compile replayed from a
# CUDA graph). Figures of merit: images per second (batch / median time of one forward) and the
# median time itself, the share of the fp16 GEMM ceiling measured in the same run, and kernels
# per layer. Runs on its own (`MPLBACKEND=Agg python3 -m analysis.encoder [--run DIR]
# [--out DIR]`) or from `report/build.py`, which hands it `STUDY_CONTEXT`.
#
# The rows and what their notes must hold: analysis/encoder_data.py. Each section below is one
# function of analysis/encoder_figures.py, encoder_tables.py, encoder_answer.py (the targets,
# README's answer and headline) or encoder_side.py (the side experiments).

# %%
import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend

from analysis import (encoder_answer, encoder_figures, encoder_ladder, encoder_side, encoder_tables,
                      encoder_waterfall, plots)
from analysis.encoder_data import EncoderData

ctx, run, _, _ = plots.open_notebook("encoder", globals())
data = EncoderData(run)
data.lad

# %% [markdown]
# ## Throughput vs batch (images per second), one panel per image size

# %%
encoder_figures.throughput(data, ctx)

# %% [markdown]
# ## Speedup over torch.compile, one panel per batch
#
# A log axis of images per second hides a 10-40% difference; this figure shows the ratio itself.

# %%
encoder_figures.vs_compile(data, ctx)

# %% [markdown]
# ## Batch-1 latency, ladder and anchors

# %%
encoder_figures.latency(data, ctx)

# %% [markdown]
# ## Time and energy per image at batch 256
#
# The energy loop after each row's timing (`--energy`, docs/method.md "Energy"): at batch 256 the
# fast steps run at the power limit, so a joule saved per image is clock gained.

# %%
encoder_figures.energy(data, ctx)

# %% [markdown]
# ## The waterfalls: from the floor to the measured time, bar by bar
#
# experiments/probes/waterfall.py's bars as its run folder committed them
# (`<run>/waterfall/waterfall.csv` at batch 1, `waterfall_b256.csv` at batch 256): the newest on
# this run's GPU, else on any GPU, said so.

# %%
encoder_waterfall.waterfall_figure(data, ctx)
encoder_waterfall.waterfall_figure(data, ctx, batch=256)

# %% [markdown]
# ## A batch-1 forward kernel by kernel (Nsight Compute)
#
# experiments/small_m_probe.sh profiles every kernel of e6_best's eager batch-1 forward
# (caches flushed before each kernel, as a forward finds each layer's weights) into
# `<run>/small_m_probe/ncu_forward_b1.csv`, beside the rows it times (`rows.csv`, whose GPU
# column says where it ran). The newest such folder on this run's GPU, among the run folders
# beside this one, is used.

# %%
encoder_tables.b1_kernels(data, ctx)

# %% [markdown]
# ## Where the time goes: per-component device time of one eager forward

# %%
breakdown_rows, breakdown_versions = encoder_figures.breakdown(data, ctx)
ctx.forward_shares = encoder_tables.forward_shares(data, breakdown_rows, breakdown_versions)

# %% [markdown]
# ## The GEMMs against the GPU's measured ceiling
#
# Each block's GEMMs from the same eager breakdown: the QKV and projection GEMMs and the MLP's
# two GEMMs (with their fused epilogues), as achieved TFLOP/s and as a share of the run's
# measured fp16 GEMM rate, beside the SM clock the row recorded (the forward is power-bound at
# large batches, and the clock is part of the story).

# %%
gemm_finding = encoder_tables.gemms(data, ctx)

# %% [markdown]
# ## The ladder at batch 1, 32 and 256: time, throughput, speedups, ceiling share, launches, memory

# %%
encoder_tables.ladder(data, ctx)

# %% [markdown]
# ## Every step, those that left the build included, from the newest sitting that measured it
#
# The steps were measured in different sittings (side experiments, the main run); each row is
# the newest sitting with the most of the three target batches for that step, on this run's GPU.
# Absolute times only: a ratio between two rows of this table would pair two sittings.

# %%
encoder_tables.every_step(data, ctx)

# %% [markdown]
# ## Streams (e4): the batch split over 2, 4, 8 streams against e3_graph on one stream

# %%
e3_rows, e4_rows = encoder_figures.streams(data, ctx)

# %% [markdown]
# ## Every timed configuration (median ms)

# %%
encoder_tables.every_configuration(data, ctx)

# %% [markdown]
# ## Parity with timm: the same weights and images through timm and through the encoder
#
# experiments/accuracy/timm_parity.py writes `<run>/timm_parity_<size>/parity.json`: logits against
# timm's fp16 forward (rel L2, max abs difference, top-1 agreement) and timm's own fp16 against
# its fp32, the scale of rounding the comparison is judged against; then which steps a passing
# parity file vouches for, over every run folder beside this one (a step with none has only the
# C++ tests' word for its logits).

# %%
encoder_tables.parity(data, ctx)

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
encoder_tables.status(data, ctx)

# %% [markdown]
# ## The targets, the study's one answer, and the findings
#
# The fp16 targets (docs/method.md): faster than the fastest PyTorch anchor at batch 1, 32 and
# 256, 1.3x torch.compile's throughput at batch 256, at most 0.4 ms at batch 1. The FP8 targets:
# the fastest FP8 step at least 2.0x torch.compile's fp16 throughput at batch 256, and faster than
# torchao's FP8 anchors at every batch. A run folder holding a final sitting (final.csv, `./study
# run final`) also gives README its one answer: the fastest fp16 and FP8 steps against every
# anchor at batch 1, 32 and 256. The findings are sentences generated from the numbers above.

# %%
findings = encoder_answer.fp16_targets(data, ctx)
encoder_answer.fp8_targets(data, ctx)
encoder_answer.final_answer(data, ctx)
encoder_tables.other_findings(data, findings, breakdown_rows, breakdown_versions, e3_rows, e4_rows, gemm_finding)
findings_text = ctx.claims("encoder_findings", findings)
encoder_answer.headline(data, ctx)
print(findings_text.read_text())

# %% [markdown]
# ## Side experiments, as their specs declare them
#
# A side experiment's spec (experiments/specs/*.toml, side_experiment = true) may declare a
# comparison: which step its table is about, against which steps, which SM clocks to show, its
# caption, and whether to draw the ratios. Each is read from the newest run folder on this run's
# GPU that has its rows (e14's L2 prefetch, the GEMM-ceiling judgment, e15 and e20 today).

# %%
encoder_side.comparisons(data, ctx)

# %% [markdown]
# ## The whole ladder in one sitting
#
# experiments/specs/encoder_ladder.toml: every step from e1_library to the fastest fp16 step and
# the FP8 branch, each step's gain over its parent, from the newest run folder on this run's GPU
# that holds it (analysis/encoder_ladder.py).

# %%
encoder_ladder.ladder_figure(data, ctx)

# %% [markdown]
# ## FP8 (E4M3): e12_fp8 against the fastest fp16 steps, per GEMM, and its accuracy
#
# experiments/specs/encoder_fp8.toml (a side experiment: e6_best, e10_fastest_gemms, e12_fp8 and
# timm in a CUDA graph, 3 interleaved rounds) and experiments/accuracy/fp8_accuracy.py, each taken from
# the newest run folder on this run's GPU that has them (this results root).

# %%
encoder_side.fp8_tables(data, ctx)

# %% [markdown]
# ## FP8 accuracy against timm fp32, and the FP8 accuracy targets

# %%
encoder_side.fp8_accuracy(data, ctx)
encoder_answer.accuracy_targets(data, ctx)
