# %% [markdown]
# # Patch embedding: from one launch per dot product to tensor cores, and what streams buy
#
# The patch embedding is a convolution 3 -> hidden with a 16 x 16 kernel and stride 16, that
# is a GEMM [B*P, 768] x [768, hidden] once the image is cut into its P = (S/16)^2 patches,
# followed by the cls token and the position embedding. The ladder starts from the CPU
# (cpu_baseline), goes through launch-bound versions (v1: one launch per 16-wide dot product,
# v2: one per output element, both with a host sync after every launch; v3: v2's launches over
# N streams, also replayed from a CUDA graph), one copy of the whole batch (v4), and ends on
# tensor cores (v5 im2col + GEMM, v6 implicit GEMM) against cuDNN and two PyTorch anchors
# (F.conv2d, what timm runs, and patchify + F.linear). v1-v3 run only at small sizes on ViT-Ti
# (their launch counts explode); the rest on ViT-B at 224/384/512 px. Runs on its own
# (`MPLBACKEND=Agg python3 -m analysis.patch_embed [--run DIR] [--out DIR]`) or from
# `report/build.py`, which hands it `STUDY_CONTEXT`.
#
# The rows (timed rows, one L2 setting, duplicates merged, v3's best stream count per shape) and
# the figures' shared helpers: analysis/patch_embed_data.py. Each section below is one function of
# analysis/patch_embed_figures.py, patch_embed_tables.py, patch_embed_costs.py,
# patch_embed_timeline.py or patch_embed_findings.py.

# %%
import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend

from analysis import patch_embed_figures, patch_embed_findings, patch_embed_tables, plots
from analysis.patch_embed_costs import memory_figure, routine_figure
from analysis.patch_embed_data import FAMILY, PatchEmbedData, holds_shapes, key_shapes, main_shapes, stream_rows
from analysis.patch_embed_timeline import timeline_figure

ctx, run, _, _ = plots.open_notebook(FAMILY, globals())
data = PatchEmbedData(run)
data.timed

# %% [markdown]
# ## Key shapes: where the ladder is compared

# %%
shapes = key_shapes(data)
shapes

# %% [markdown]
# ## Time per call vs image size at batch 1, every version

# %%
patch_embed_figures.image_size(data, ctx)

# %% [markdown]
# ## Streams: v3 vs batch with the stream count varied, v1/v2 on one stream beside it

# %%
streams = stream_rows(data)
patch_embed_figures.streams(data, ctx, streams)

# %% [markdown]
# ## Where more streams stop helping: time vs stream count, one line per batch

# %%
patch_embed_figures.streams_count(data, ctx, streams)

# %% [markdown]
# ## Time vs batch on ViT-B: v4 onward against cuDNN and the two PyTorch anchors

# %%
patch_embed_figures.batch(data, ctx)

# %% [markdown]
# ## The ladder: time, speedup over the previous step and over cpu_baseline, ratio to cuDNN
# ## and to the faster anchor, at the key shapes
#
# The targets and the headline are judged on the family's targets sitting where one was measured
# after this run (its own clean sitting of the target shapes), else on this run; where that
# sitting holds every key shape (a ladder sitting: every step, 3 rounds), the ladder, its speedup
# figure and each step's measured line read it too, so a step has one time at a key shape.

# %%
judged = PatchEmbedData(ctx.take_targets_run()) if ctx.targets_run is not None else data
ladder_data = judged if holds_shapes(judged, shapes) else data
ladder = patch_embed_tables.ladder(ladder_data, ctx, shapes)
ladder

# %% [markdown]
# ## Speedup over cpu_baseline and over the previous step, per key shape

# %%
patch_embed_figures.speedup(ladder_data, ctx, ladder)

# %% [markdown]
# ## Share of the tensor-core ceiling: every GPU version's achieved TFLOP/s over the run's GEMM rate
# (every version moves the same minimum bytes per shape, so a roofline would stack them in one
# column: the share of the measured ceiling says the same without pretending otherwise)

# %%
patch_embed_figures.peak_share(data, ctx)

# %% [markdown]
# ## Device and host memory per version

# %%
memory_figure(data, ctx, list(dict.fromkeys(
    [s for s in shapes[:1]] + ([max(main_shapes(data), key=lambda s: s[2])] if main_shapes(data) else []))))

# %% [markdown]
# ## The host-to-host routine of v1-v4: copy up, preprocessing, kernels, copy down

# %%
routine = routine_figure(data, ctx, shapes)

# %% [markdown]
# ## Timeline of v3: one lane per stream, one stream against many (per-launch CUDA events)

# %%
timeline = timeline_figure(data, ctx)

# %% [markdown]
# ## Every timed configuration (median us), and the status of every row

# %%
patch_embed_tables.sweep_and_status(data, ctx)

# %% [markdown]
# ## Findings, as sentences generated from the numbers above (the targets and the headline on
# ## `judged`, above)

# %%
findings_text = ctx.claims(f"{FAMILY}_findings",
                           patch_embed_findings.findings(data, ctx, judged, ladder_data, shapes, streams, routine,
                                                         timeline))
patch_embed_findings.headline(judged, ctx)
print(findings_text.read_text())
