# %% [markdown]
# # Attention: time per call, scaling with tokens, and the ratio to cuDNN SDPA
#
# Multi-head self-attention costs 4 x batch x heads x tokens^2 x head_dim flops (Q K^T and
# P V) while it moves only the packed QKV and the output, so at ViT's token counts it is
# compute-bound and grows as tokens^2. The figure of merit is the time per call as a ratio to
# cuDNN's fused SDPA measured in the same run. Runs on its own (`MPLBACKEND=Agg
# /usr/bin/python3 analysis/attention.py [--run DIR] [--out DIR]`) or from `report/build.py`,
# which hands it `STUDY_CONTEXT`.
#
# The rows (ViT-B's head shape, one L2 setting, duplicates merged) and the rows the target is
# judged on: analysis/attention_data.py. Each section below is one function of
# analysis/attention_figures.py, attention_tables.py or attention_findings.py.

# %%

import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend

from analysis import attention_figures, attention_findings, attention_tables, plots
from analysis.attention_data import AttentionData

ctx, _, _, _ = plots.open_notebook("attention", globals())
data = AttentionData(ctx)
data.timed

# %% [markdown]
# ## Scaling with tokens at the key batch (log-log), against tokens^2

# %%
attention_figures.scaling(data, ctx)

# %% [markdown]
# ## Time per call vs batch, one panel per token count

# %%
attention_figures.batch(data, ctx)

# %% [markdown]
# ## Time as a ratio to cuDNN SDPA at the key batch

# %%
attention_figures.vs_cudnn(data, ctx)

# %% [markdown]
# ## The ladder at the key batch: each step's time and its gain over the step above it

# %%
attention_figures.ladder_steps(data, ctx)

# %% [markdown]
# ## The ladder at the target shapes: time, speedup over the previous step, ratio to cuDNN

# %%
attention_tables.summary(data, ctx)

# %% [markdown]
# ## Share of the tensor-core ceiling: every version's achieved TFLOP/s over the run's GEMM rate
# (every version moves the same minimum bytes per shape, so a roofline would stack them in one
# column: the share of the measured ceiling says the same without pretending otherwise)

# %%
attention_figures.peak_share(data, ctx)

# %% [markdown]
# ## What each step taught: the `## Lesson` of every version's NOTES.md

# %%
attention_tables.lessons(data, ctx)

# %% [markdown]
# ## Every timed configuration (median us)

# %%
attention_tables.sweep(data, ctx)

# %% [markdown]
# ## Nsight Compute metrics (experiments/probes/ncu_family.sh attention), when the run folder has them

# %%
attention_tables.ncu(data, ctx)

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
attention_tables.status(data, ctx)

# %% [markdown]
# ## Findings, as sentences generated from the numbers above
#
# The target and the headline are judged on the family's targets sitting where one was measured
# after this run (its own clean sitting of the target shapes), else on this run.

# %%
findings_text = ctx.claims("attention_findings", attention_findings.findings(data, ctx))
attention_findings.headline(data, ctx)
print(findings_text.read_text())
