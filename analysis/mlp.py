# %% [markdown]
# # MLP: time, GEMM throughput, epilogue cost and speedup per version
#
# The ViT MLP, y = x + fc2(GELU(fc1(x))) with mlp_hidden = 4 x hidden, is two GEMMs
# (4 x rows x hidden x mlp_hidden flops) plus bias, GELU and the residual. The GEMMs set the
# floor, so the figures of merit are TFLOP/s against the fp16 GEMM ceiling measured in the same
# run and the time as a ratio to `gemm_only` (the same two GEMMs with no epilogue): what bias,
# GELU and the residual cost on top of them. Runs on its own (`MPLBACKEND=Agg python3 -m
# analysis.mlp [--run DIR] [--out DIR]`) or from `report/build.py`, which hands it
# `STUDY_CONTEXT`.
#
# The rows (timed rows, cuBLASLt-setting rows apart, one L2 setting, duplicates merged, and the
# sweep beside a run that timed the target rows only): analysis/mlp_data.py. Each section below is
# one function of analysis/mlp_figures.py, mlp_side.py (the side experiments) or mlp_findings.py.

# %%
import matplotlib

if "STUDY_CONTEXT" not in globals():
    matplotlib.use("Agg")  # headless by default; a Jupyter kernel keeps its inline backend

from analysis import mlp_figures, mlp_findings, mlp_side, plots
from analysis.mlp_data import MlpData

ctx, run, _, _ = plots.open_notebook("mlp", globals())
data = MlpData(run)
data.timed

# %% [markdown]
# ## Time per call vs batch, ViT-B at 224 and 384 px (log-log)

# %%
mlp_figures.time_vs_batch(data, ctx)

# %% [markdown]
# ## GEMM throughput vs rows, against the measured GEMM ceiling

# %%
mlp_figures.throughput(data, ctx)

# %% [markdown]
# ## Speedup vs unfused and vs PyTorch's MLP replayed as a CUDA graph

# %%
mlp_figures.speedup(data, ctx)

# %% [markdown]
# ## Summary table at the target sizes

# %%
mlp_figures.summary(data, ctx)

# %% [markdown]
# ## The ladder at the target sizes: time, speedup over the previous step, ratio to gemm_only
#
# The MLP has no library version of its own; its reference is gemm_only, cuBLASLt's two GEMMs
# without bias, GELU or residual: what any MLP built on the library's GEMMs cannot beat.

# %%
mlp_figures.ladder(data, ctx)

# %% [markdown]
# ## The ViT widths at batch 32, 224 px (hidden 384, 768, 1024)

# %%
widths = mlp_figures.widths(data, ctx)

# %% [markdown]
# ## Which cuBLASLt algorithm: the heuristic's first, the best of its top 16, the best of all
#
# experiments/specs/mlp_autotune.toml times fused_epilogue and gemm_only with the GEMM
# algorithm chosen three ways. It is a side experiment of the run, kept in the run's
# mlp_autotune/ sub-folder so that its rows do not merge into the sweep above.

# %%
algorithms = mlp_side.cublaslt_algorithms(data, ctx)

# %% [markdown]
# ## The side experiments' comparisons, as their specs declare them
#
# A side experiment's spec (experiments/specs/*.toml, side_experiment = true) may declare a
# comparison: against which step its table sets which versions, whose SM clocks and whose
# throughput it shows, which ratios of two versions it names, and its caption. Each is read from
# this run's sub-folder of it, or else from the newest run beside it on this GPU that measured it:
# mlp_pingpong (pingpong_epilogue and pingpong_gemm_only, our warp-specialized ping-pong kernel
# with and without its fused epilogues, beside fused_epilogue, gemm_only and PyTorch's graph: each
# epilogue's cost within its own kernel), mlp_cutlass (cutlass_epilogue and
# cutlass_epilogue_erf on the CUTLASS layer, fastest_epilogue on the faster of CUTLASS and cuBLASLt
# per GEMM, fused_epilogue, gemm_only and PyTorch's MLP in a CUDA graph) and mlp_fp8 (fp8_tensor:
# both GEMMs in E4M3 on cuBLASLt, per-tensor weight scales, static activation scales; beside
# gemm_only, fused_epilogue and half_gelu_epilogue; fp8_channel's skipped rows until it left the
# build for stages/mlp/TRIED.md).

# %%
sides = mlp_side.comparisons(data, ctx)
cutlass, pingpong = sides.get("mlp_cutlass"), sides.get("mlp_pingpong")

# %% [markdown]
# ## Every MLP version against the two plain GEMMs, sitting by sitting
#
# The CUTLASS, FP8, L2-dataflow and exact-GELU versions were measured in side experiments, each
# beside `gemm_only`: one panel per sitting, each version's time over that sitting's gemm_only at
# 50432 rows, so no ratio pairs two sittings.

# %%
mlp_side.every_version(data, ctx)

# %% [markdown]
# ## cuBLASLt choices: heuristic cached vs queried every call, workspace size

# %%
cublaslt, cublaslt_flush_text = mlp_side.cublaslt_choices(data, ctx)

# %% [markdown]
# ## Every timed configuration at hidden 768 (median us)

# %%
mlp_findings.every_configuration(data, ctx)

# %% [markdown]
# ## Status: what was timed, skipped or failed

# %%
mlp_findings.status(data, ctx, cublaslt)

# %% [markdown]
# ## Findings, as sentences generated from the numbers above

# %%
findings = mlp_findings.findings(data, ctx, widths, algorithms, pingpong, cutlass, cublaslt, cublaslt_flush_text)
print(findings)
