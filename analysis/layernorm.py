# %% [markdown]
# # LayerNorm: time, bandwidth and speedup per version
#
# LayerNorm moves 2 x rows x hidden fp16 values (read x, write y) and does little arithmetic,
# so the figure of merit is achieved bandwidth against the copy bandwidth measured in the
# same run. Runs on its own (`MPLBACKEND=Agg /usr/bin/python3 analysis/layernorm.py
# [--run DIR] [--out DIR]`) or from `report/build.py`, which hands it `STUDY_CONTEXT`.
#
# The rows (timed rows at hidden 768, one L2 setting, duplicates merged) and the rows the targets
# are judged on: analysis/layernorm_data.py. Each section below is one function of
# analysis/layernorm_figures.py, layernorm_tables.py or layernorm_findings.py.

# %%

import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend

from analysis import layernorm_figures, layernorm_findings, layernorm_tables, plots
from analysis.layernorm_data import LayerNormData

ctx, _, _, _ = plots.open_notebook("layernorm", globals())
data = LayerNormData(ctx)
data.timed

# %% [markdown]
# ## Time per call vs rows (log-log)

# %%
layernorm_figures.time_vs_rows(data, ctx)

# %% [markdown]
# ## Achieved bandwidth vs rows, as a share of the measured copy bandwidth

# %%
layernorm_figures.bandwidth(data, ctx)

# %% [markdown]
# ## Speedup vs v1_shared and vs PyTorch F.layer_norm (graph and eager)

# %%
layernorm_figures.speedup(data, ctx)

# %% [markdown]
# ## Summary table at the target sizes

# %%
layernorm_tables.summary(data, ctx)

# %% [markdown]
# ## The ladder at the target sizes: time, speedup over the previous step, ratio to cuDNN

# %%
layernorm_tables.ladder(data, ctx)
layernorm_figures.ladder_steps(data, ctx)

# %% [markdown]
# No roofline figure: LayerNorm does 8 flops per element over 4 bytes at every shape, so every
# version would stand in one column of a roofline, far left of the ridge; the bandwidth figure
# (layernorm_gbps, the share of the measured copy) is the roof that counts.

# %% [markdown]
# ## Every timed configuration (median us)

# %%
layernorm_tables.sweep(data, ctx)

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
layernorm_tables.status(data, ctx)

# %% [markdown]
# ## Findings, as sentences generated from the numbers above
#
# The targets and the headline are judged on the family's targets sitting (its target sizes
# alone, rounds interleaved: the newest one measured after this run, or this run's own
# layernorm_targets.csv beside its sweep), else on this run.

# %%
findings_text = ctx.claims("layernorm_findings", layernorm_findings.findings(data, ctx))
layernorm_findings.headline(data, ctx)
print(findings_text.read_text())
