#include "encoder/steps.hpp"
#include <map>
#include "harness/check.hpp"

namespace encoder {

// One row per step: name, parent, what it changes, and its delta (composition.hpp's text form).
// e1-e16 are the compositions they were measured with (stages/encoder/e*/NOTES.md), less the
// versions their blocks never ran (e9's MLP, e13's attention and MLP); a step that left the build
// is in stages/encoder/TRIED.md with its numbers.
const std::vector<Step>& steps() {
  static const std::vector<Step> table = {
      {"e1_library", "",
       "cuDNN conv and attention, CUB LayerNorm, cuBLASLt GEMMs; a buffer per intermediate",
       "pe=cudnn ln=v2_cub attn=cudnn_sdpa mlp=fused_epilogue buffers=per_layer"},
      {"e2_buffer_reuse", "e1_library", "one activation arena reused by every layer", "buffers=arena"},
      {"e3_graph", "e2_buffer_reuse", "the whole forward captured once in a CUDA graph", "graph"},
      {"e4_streams", "e3_graph", "the batch split over streams (--streams, default 2), each a whole forward",
       "streams=2"},
      {"e5_fused", "e3_graph", "projection bias + residual in its GEMM epilogue: no elementwise kernel left",
       "residual=epilogue"},
      {"e6_best", "e5_fused", "the fastest version of every family (as measured) + e5's fusion + graph",
       "pe=v10_round_tiles ln=v5_unrolled attn=v9_softmax_overlap"},
      {"e7_cutlass_gemms", "e6_best",
       "QKV, projection and MLP on the CUTLASS GEMM layer (epilogues fused, kernel searched per shape)",
       "gemms=cutlass mlp=cutlass_epilogue"},
      {"e8_pdl", "e7_cutlass_gemms",
       "every CUTLASS GEMM launched with programmatic dependent launch (its prologue under the previous "
       "kernel's tail)",
       "pdl"},
      {"e9_ln_folded", "e8_pdl",
       "LN1 and LN2 folded into the QKV and fc1 GEMMs (row statistics pass + GEMM epilogue; no normalized copy "
       "written)",
       "blocks=fp16_ln_folded mlp=none"},
      {"e10_fastest_gemms", "e8_pdl",
       "cuBLASLt one more candidate of each GEMM's search: every shape on the faster library",
       "gemms=cutlass+cublaslt mlp=fastest_epilogue"},
      {"e12_fp8", "e6_best",
       "QKV, projection, fc1 and fc2 in FP8 E4M3 (cuBLASLt, per-tensor weight scales, static activation "
       "scales); LayerNorms write E4M3",
       "blocks=fp8 mlp=fp8_tensor"},
      {"e13_persistent", "e6_best",
       "all blocks in one persistent kernel: GEMM and attention tiles dealt out to one CTA per SM, LayerNorms "
       "in the GEMM prologues, a grid barrier instead of each kernel boundary",
       "blocks=persistent attn=none mlp=none"},
      {"e14_l2_prefetch", "e10_fastest_gemms",
       "each block's second LayerNorm kernel requests the first half of the next block's weights into L2: its "
       "QKV and projection GEMMs read their weights from L2 instead of DRAM",
       "l2_prefetch"},
      {"e15_fp8_attention_e4m3", "e12_fp8",
       "the attention writes the projection's E4M3 input itself (static scale): no quantizing pass over an "
       "fp16 copy",
       "attn_e4m3"},
      {"e16_half_gelu", "e14_l2_prefetch",
       "the MLP version half_gelu_epilogue: fc1's GELU epilogue in fp16 pairs, the fastest MLP of its family",
       "mlp=half_gelu_epilogue"},
      {"e17_l2_panels", "e16_half_gelu",
       "the MLP version l2_panels: fc1 then fc2 panel by panel over the rows, the hidden activation kept in L2 "
       "(one panel where it fits there whole)",
       "mlp=l2_panels"},
      {"e18_fp8_cutlass", "e15_fp8_attention_e4m3",
       "the four FP8 GEMMs on the CUTLASS layer's E4M3 kernels (MLP version fp8_cutlass), each searched per shape "
       "with cuBLASLt's FP8 GEMM one more candidate",
       "gemms=cutlass+cublaslt mlp=fp8_cutlass"},
      {"e19_exact_gelu", "e14_l2_prefetch",
       "the MLP version erf_fit_epilogue: fc1's GELU in its exact form (timm's), by a fitted exp2 at about the "
       "tanh form's cost",
       "mlp=erf_fit_epilogue"},
      {"e20_e4m3_qkv", "e18_fp8_cutlass",
       "the QKV GEMM writes E4M3 (static scale) and the attention (v10_e4m3_qkv) reads it: half the bytes out of "
       "the GEMM and into the attention, the products unchanged",
       "attn=v10_e4m3_qkv qkv_e4m3"},
      {"e22_key_split", "e19_exact_gelu",
       "the attention v12_key_split: where the query tiles leave SMs idle (batch 1: 24 blocks), the keys split "
       "over the blocks of a cluster and combined on chip",
       "attn=v12_key_split"},
      {"e23_fp8_key_split", "e18_fp8_cutlass", "e22's attention (v12_key_split) in the FP8 forward",
       "attn=v12_key_split"},
      {"e24_tiled", "e13_persistent",
       "e13's kernel on the tile schedule: 64 x 64 GEMM and attention tiles dealt out by ticket, each waiting on "
       "per-tile counters for its inputs instead of a grid barrier, its weights requested before the wait",
       "blocks=tiled"},
      {"e25_ln_tasks", "e24_tiled",
       "each row tile's LayerNorms as tasks of their own: a row tile normalized once a LayerNorm, not once by each "
       "of its 36 QKV and 48 fc1 tasks",
       "tile_ln=tasks"},
      {"e26_two_ctas", "e25_ln_tasks",
       "two CTAs an SM (16 warps instead of 8): GEMM tasks stream their A panel through the weights' stages "
       "(16 KB a stage, not the whole panel) and LayerNorm tasks read their rows from L2, no shared memory",
       "tile_a=streamed tile_ctas=2"},
      {"e27_wgmma_tiles", "e26_two_ctas",
       "the GEMM tasks' products on wgmma (m64n32k16, operands read from the stages through descriptors) "
       "instead of ldmatrix and mma.sync",
       "tile_mma=wgmma"},
      {"e28_folded_ln", "e27_wgmma_tiles",
       "no LayerNorm tasks: the QKV and fc1 tasks read the residual stream, gather each row's statistics from "
       "the chunks streaming through shared memory and apply the LayerNorm, folded into their weights, in the "
       "epilogue",
       "tile_ln=folded"},
      {"e29_loads_first", "e28_folded_ln",
       "the epilogues' loads ahead of their stores: fc2's last slice sums the partial sums with 16 float4 loads "
       "a thread at once instead of 8 dependent rounds to L2, the projection loads its residual first, QKV and "
       "fc1 read their folded vectors through the read-only path",
       "tile_loads=first"},
      {"e30_row_stats", "e29_loads_first",
       "each row's LayerNorm statistics computed once, where the row is written: the projection's and fc2's "
       "epilogues leave each 32 columns' mean and squared deviations, which the QKV and fc1 tasks combine "
       "before their first chunk instead of gathering them from every chunk",
       "tile_ln=row_stats"},
      {"e32_read_once", "e30_row_stats",
       "each weight read once at batch 1: a GEMM task is a row group of 256 rows (all 197) by 64 columns over one "
       "K slice, every GEMM split so that each SM streams one slice (vit_b: QKV 4, projection 12, fc1 3, fc2 12), "
       "its weight slice held in shared memory while the row tiles stream past; the slice that arrives last adds "
       "the slices' fp32 partial sums and applies the epilogue",
       "tile_shape=read_once"},
  };
  return table;
}

// The fastest steps, read off the committed runs named beside each (medians of 3 interleaved
// rounds, vit_b 224 px, batch 1, 32 and 256); analysis/test_steps.py checks each against its run
// folder: of the steps of its precision that may stand for timm's model, the step is the fastest
// at two of the three batches. An fp16 step may when its newest timm parity with every parameter
// drawn passes at 224 and 384 px (experiments/timm_parity.py); FP8 steps are judged by their own
// accuracy instead (experiments/fp8_accuracy.py).
// Both from the H200 final sitting, the one README's answer comes from (medians of 3 interleaved
// rounds, batch 1 / 32 / 256): fastest_fp16: e19, the one fp16 step of it that passes (0.448 /
// 2.17 / 18.17 ms); e31 (e19 with the few-rows GEMMs among its candidates, since retired:
// TRIED.md) was 2.8% faster at batch 256 only by its GEMM search's draw (17.67). fastest_fp8:
// e18 (0.407 / 1.47 / 11.18 ms). The sitting before it (20261127_NVIDIA_H200_final, with e10, e14
// and e15) and the H100 final sitting named the same two steps.
const std::vector<Alias>& aliases() {
  static const std::vector<Alias> list = {
      {"fastest_fp16", "e19_exact_gelu", "20261202_NVIDIA_H200_final"},
      {"fastest_fp8", "e18_fp8_cutlass", "20261202_NVIDIA_H200_final"},
  };
  return list;
}

namespace {

const Step* find(const std::string& name) {
  for (const auto& s : steps())
    if (name == s.name) return &s;
  return nullptr;
}

Composition compose(const Step& s) {
  Composition base = *s.parent ? compose(*find(s.parent)) : Composition{};
  return apply(base, s.delta);
}

}  // namespace

std::string resolve_alias(const std::string& name) {
  for (const auto& a : aliases())
    if (name == a.name) return a.step;
  return name;
}

Composition find_step(const std::string& name) {
  if (const Step* s = find(resolve_alias(name))) return compose(*s);
  std::string known;
  for (const auto& s : steps()) known += std::string(known.empty() ? "" : ", ") + s.name;
  for (const auto& a : aliases()) known += std::string(", ") + a.name;
  throw study::StudyError(study::ErrorKind::Usage, "unknown encoder step '" + name + "' (known: " + known + ")");
}

std::string steps_tsv() {
  std::string out =
      "# Generated from stages/encoder/steps.cpp (encoder_e1_library --list-steps); a CPU test keeps it current.\n"
      "name\tkind\tparent\tdelta\tcomposition\tmeasured\twhat\n";
  for (const auto& s : steps())
    out += std::string(s.name) + "\tstep\t" + s.parent + '\t' + s.delta + '\t' + compose(s).to_string() + "\t\t" +
           s.what + '\n';
  for (const auto& a : aliases())
    out += std::string(a.name) + "\talias\t" + a.step + "\t\t" + find_step(a.step).to_string() + '\t' + a.measured +
           "\tthe fastest step of its precision in the sitting `measured` that may stand for timm's model\n";
  return out;
}

}  // namespace encoder
