#include "encoder/encoder.hpp"
#include "attention/attention.hpp"
#include "check.hpp"
#include "cutlass_gemm.hpp"
#include "fp8.hpp"
#include "layernorm/layernorm.hpp"
#include "mlp/mlp.hpp"
#include "encoder/persistent.hpp"
#include "patch_embed/patch_embed.hpp"

namespace encoder {

std::string Composition::describe() const {
  std::string s = "custom:pe=" + patch_embed + ",ln=" + layernorm + ",attn=" + attention + ",mlp=" + mlp;
  if (arena) s += ",reuse";
  if (graph) s += ",graph";
  if (streams > 1) s += ",streams=" + std::to_string(streams);
  if (fused_residual) s += ",fused";
  if (cutlass_gemms) s += ",cutlass";
  if (pdl) s += ",pdl";
  if (ln_folded) s += ",lnfold";
  if (cublaslt_candidates) s += ",cublaslt";
  if (split_gemms) s += ",split";
  if (fp8) s += ",fp8";
  if (attention_e4m3) s += ",attn8";
  if (persistent) s += ",persistent";
  if (l2_prefetch) s += ",prefetch";
  return s;
}

namespace {

// What the original study composed: cuDNN for the convolution and attention, CUB for
// LayerNorm, cuBLASLt (with its epilogues) for every GEMM.
Composition library() {
  Composition c;
  c.patch_embed = "cudnn";
  c.layernorm = "v2_cub";
  c.attention = "cudnn_sdpa";
  c.mlp = "fused_epilogue";
  c.arena = false;
  return c;
}

Composition with(Composition c, bool arena, bool graph, int streams, bool fused) {
  c.arena = arena;
  c.graph = graph;
  c.streams = streams;
  c.fused_residual = fused;
  return c;
}

// Fastest first, as measured in the committed runs (report sections 1-4); versions this build
// or GPU cannot run are passed over in order. mlp: cuBLASLt's epilogues are faster than our
// ping-pong GEMM at every measured size. patch_embed: v10_round_tiles is level with v9_pos_first
// at 224 px and up to 36% faster at 384 and 512 px (its NOTES). attention: v9_softmax_overlap is
// the fastest at 197, 577 and 1025 tokens.
struct Preference {
  const char* family;
  std::vector<const char*> order;
};
const std::vector<Preference>& preferences() {
  static const std::vector<Preference> p = {
      {"patch_embed",
       {"v10_round_tiles", "v9_pos_first", "v8_balanced_tiles", "v7_implicit_wgmma", "v6_implicit_gemm",
        "v5_im2col_gemm", "cudnn"}},
      {"layernorm", {"v5_unrolled", "v4_vectorized", "v2_cub"}},
      {"attention", {"v9_softmax_overlap", "v8_exact_tail", "v7_flash", "v7_flash_mma", "cudnn_sdpa"}},
      {"mlp", {"fused_epilogue", "pingpong_epilogue"}},
  };
  return p;
}

std::string why_unavailable(const std::string& family, const std::string& version) {
  if (family == "patch_embed") return patch_embed::find_version(version).why_unavailable();
  if (family == "layernorm") return layernorm::find_version(version).why_unavailable();
  if (family == "attention") return attention::find_version(version).why_unavailable();
  return mlp::find_version(version).why_unavailable();
}

}  // namespace

std::string why_unavailable(const Composition& c) {
  const std::pair<const char*, const std::string*> parts[] = {
      {"patch_embed", &c.patch_embed}, {"layernorm", &c.layernorm}, {"attention", &c.attention}, {"mlp", &c.mlp}};
  for (const auto& [family, version] : parts)
    if (auto why = why_unavailable(family, *version); !why.empty())
      return std::string(family) + " " + *version + ": " + why;
  if (c.cutlass_gemms)
    if (auto why = study::cutlass_gemm::unavailable(); !why.empty()) return "the CUTLASS GEMM layer: " + why;
  if (c.fp8)
    if (auto why = study::fp8::unavailable(); !why.empty()) return "the FP8 GEMM layer: " + why;
  if (c.attention_e4m3 && !attention::find_version(c.attention).launch_e4m3)
    return "attention " + c.attention + " writes no E4M3 output";
  if (c.persistent)
    if (auto why = persistent::unavailable(); !why.empty()) return "the persistent kernel: " + why;
  return {};
}

Composition best_composition(std::string* resolved) {
  Composition c;
  std::string log;
  for (const auto& pref : preferences()) {
    std::string chosen, passed;
    for (const char* v : pref.order) {
      const std::string why = why_unavailable(pref.family, v);
      if (why.empty()) {
        chosen = v;
        break;
      }
      passed += std::string(passed.empty() ? "" : "; ") + v + ": " + why;
    }
    if (chosen.empty())
      throw study::StudyError(study::ErrorKind::Usage, std::string("best: no ") + pref.family +
                                                           " version can run here (" + passed + ")");
    const std::string family = pref.family;
    if (family == "patch_embed") c.patch_embed = chosen;
    if (family == "layernorm") c.layernorm = chosen;
    if (family == "attention") c.attention = chosen;
    if (family == "mlp") c.mlp = chosen;
    log += (log.empty() ? "" : " ") + family + "=" + chosen;
    if (!passed.empty()) log += " (passed over " + passed + ")";
  }
  if (resolved) *resolved = log;
  return with(c, true, true, 1, true);
}

const std::vector<Step>& ladder() {
  static const std::vector<Step> steps = [] {
    const Composition lib = library();
    std::vector<Step> s = {
        {"e1_library", "cuDNN conv and attention, CUB LayerNorm, cuBLASLt GEMMs; a buffer per intermediate",
         lib},
        {"e2_buffer_reuse", "one activation arena reused by every layer", with(lib, true, false, 1, false)},
        {"e3_graph", "the whole forward captured once in a CUDA graph", with(lib, true, true, 1, false)},
        {"e4_streams", "the batch split over streams (--streams, default 2), each a whole forward",
         with(lib, true, true, 2, false)},
        {"e5_fused", "projection bias + residual in its GEMM epilogue: no elementwise kernel left",
         with(lib, true, true, 1, true)},
        // Family versions resolved at run time (best_composition); these entries are placeholders.
        {"e6_best", "the fastest version of every family + e5's fusion + graph", with(lib, true, true, 1, true)},
        {"e7_cutlass_gemms",
         "e6_best with QKV, projection and MLP on the CUTLASS GEMM layer (epilogues fused, kernel searched per "
         "shape)",
         with(lib, true, true, 1, true)},
        {"e8_pdl",
         "e7 with every CUTLASS GEMM launched with programmatic dependent launch (its prologue under the "
         "previous kernel's tail)",
         with(lib, true, true, 1, true)},
        {"e9_ln_folded",
         "e8 with LN1 and LN2 folded into the QKV and fc1 GEMMs (row statistics pass + GEMM epilogue; no "
         "normalized copy written)",
         with(lib, true, true, 1, true)},
        {"e10_fastest_gemms",
         "e8 with cuBLASLt one more candidate of each GEMM's search: every shape on the faster library",
         with(lib, true, true, 1, true)},
        {"e11_split_gemms",
         "e10 with the CUTLASS split kernels (stream-K, split-K) candidates too: a small GEMM's few output "
         "tiles shared out over more SMs",
         with(lib, true, true, 1, true)},
        {"e12_fp8",
         "e6_best with QKV, projection, fc1 and fc2 in FP8 E4M3 (cuBLASLt, per-tensor weight scales, static "
         "activation scales); LayerNorms write E4M3",
         with(lib, true, true, 1, true)},
        {"e13_persistent",
         "e6_best with all blocks in one persistent kernel: GEMM and attention tiles dealt out to one CTA per "
         "SM, LayerNorms in the GEMM prologues, a grid barrier instead of each kernel boundary",
         with(lib, true, true, 1, true)},
        {"e14_l2_prefetch",
         "e10 with each block's second LayerNorm kernel requesting the first half of the next block's weights "
         "into L2: its QKV and projection GEMMs read their weights from L2 instead of DRAM",
         with(lib, true, true, 1, true)},
        {"e15_fp8_attention_e4m3",
         "e12 with the attention writing the projection's E4M3 input itself (static scale): no quantizing pass "
         "over an fp16 copy",
         with(lib, true, true, 1, true)},
    };
    return s;
  }();
  return steps;
}

// e6_best with the encoder's GEMMs on the CUTLASS layer: QKV and projection directly, the MLP
// through its CUTLASS version (tanh GELU, as e6's cuBLASLt epilogue) with the same candidates.
// The head stays on cuBLASLt.
Composition cutlass_composition(std::string* resolved, bool pdl, bool ln_folded, bool cublaslt_candidates,
                                bool split_gemms) {
  Composition c = best_composition(resolved);
  c.cutlass_gemms = true;
  c.pdl = pdl;
  c.ln_folded = ln_folded;
  c.cublaslt_candidates = cublaslt_candidates;
  c.split_gemms = split_gemms;
  c.mlp = split_gemms ? "split_epilogue" : cublaslt_candidates ? "fastest_epilogue" : "cutlass_epilogue";
  return c;
}

Composition fp8_composition(std::string* resolved, bool attention_e4m3) {
  Composition c = best_composition(resolved);
  c.fp8 = true;
  c.attention_e4m3 = attention_e4m3;
  c.mlp = "fp8_tensor";
  return c;
}

Composition persistent_composition(std::string* resolved) {
  Composition c = best_composition(resolved);
  c.persistent = true;
  return c;
}

Composition prefetch_composition(std::string* resolved) {
  Composition c = cutlass_composition(resolved, true, false, true);
  c.l2_prefetch = true;
  return c;
}

Composition find_step(const std::string& name) {
  if (name == "best" || name == "e6_best") return best_composition();
  if (name == "e7_cutlass_gemms") return cutlass_composition(nullptr);
  if (name == "e8_pdl") return cutlass_composition(nullptr, true);
  if (name == "e9_ln_folded") return cutlass_composition(nullptr, true, true);
  if (name == "e10_fastest_gemms") return cutlass_composition(nullptr, true, false, true);
  if (name == "e11_split_gemms") return cutlass_composition(nullptr, true, false, true, true);
  if (name == "e12_fp8") return fp8_composition(nullptr);
  if (name == "e13_persistent") return persistent_composition(nullptr);
  if (name == "e14_l2_prefetch") return prefetch_composition(nullptr);
  if (name == "e15_fp8_attention_e4m3") return fp8_composition(nullptr, true);
  std::string known;
  for (const auto& s : ladder()) {
    if (name == s.name) return s.composition;
    known += std::string(known.empty() ? "" : ", ") + s.name;
  }
  throw study::StudyError(study::ErrorKind::Usage,
                          "unknown encoder version '" + name + "' (known: " + known + ", best)");
}

std::string check_problem(const Problem& p) {
  if (p.batch <= 0) return "batch must be positive";
  if (p.image_size <= 0 || p.image_size % study::kPatch)
    return "image size " + std::to_string(p.image_size) + " is not a positive multiple of the patch size 16";
  if (p.model.hidden <= 0 || p.model.heads <= 0 || p.model.layers <= 0) return "model sizes must be positive";
  if (p.model.hidden % p.model.heads) return "hidden is not a multiple of heads";
  if (p.num_classes <= 0) return "num_classes must be positive";
  if (p.rows() * 4 * p.model.hidden >= (1LL << 31))
    return "batch * tokens * 4 * hidden = " + std::to_string(p.rows() * 4 * p.model.hidden) +
           " elements overflows 32-bit indexing";
  return {};
}

double flops(const Problem& p) {
  const double T = p.tokens(), d = p.model.hidden;
  const double per_block = 24.0 * T * d * d + 4.0 * T * T * d;
  const double k = study::kChannels * study::kPatch * study::kPatch;
  return p.batch * (p.model.layers * per_block + 2.0 * (T - 1) * k * d + 2.0 * d * p.num_classes);
}

double weight_count(const Problem& p) {
  const double d = p.model.hidden, T = p.tokens();
  const double k = study::kChannels * study::kPatch * study::kPatch;
  const double block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d);
  return (k * d + d) + d + T * d + p.model.layers * block + 2 * d + (d * p.num_classes + p.num_classes);
}

double bytes(const Problem& p) {
  const double images = static_cast<double>(p.batch) * study::kChannels * p.image_size * p.image_size;
  return sizeof(__half) * (weight_count(p) + images + static_cast<double>(p.batch) * p.num_classes);
}

study::MemoryNeed memory_need(const Problem& p, const Composition& c) {
  const double d = p.model.hidden, rows = static_cast<double>(p.rows());
  const double images = static_cast<double>(p.batch) * study::kChannels * p.image_size * p.image_size;
  // One layer's activations: LN1, QKV (3), attention, projection, x_mid, LN2, h (4), x_out.
  const double layer = 13 * rows * d;
  const double sets = c.arena ? 1 : p.model.layers;
  patch_embed::Problem pe;
  pe.batch = p.batch;
  pe.image_size = p.image_size;
  pe.hidden = p.model.hidden;
  pe.streams = 1;
  study::MemoryNeed m;
  m.device = sizeof(__half) * (weight_count(p) + images + static_cast<double>(p.batch) * p.num_classes +
                               sets * layer + 2.0 * p.batch * d) +
             static_cast<double>(patch_embed::scratch_bytes(pe)) + c.streams * 4.0 * (1 << 20);
  m.host = weight_count(p) * (sizeof(float) + sizeof(__half)) + images * (sizeof(float) + 2 * sizeof(__half));
  if (c.ln_folded)  // the folded QKV and fc1 weights (fp16) with their fp32 vectors, and the row statistics
    m.device += p.model.layers * (sizeof(__half) * (3 * d + p.model.mlp()) * d + sizeof(float) * 2 * (3 * d + p.model.mlp())) +
                sizeof(float) * 2 * rows;
  if (c.persistent)
    m.device += static_cast<double>(c.streams) * persistent::Blocks::scratch_bytes(p, (p.batch + c.streams - 1) / c.streams);
  if (c.fp8)  // E4M3 weights of the four GEMMs, one E4M3 activation buffer per stream's share
    m.device += p.model.layers * 12.0 * d * d + rows * d + c.streams * 32.0 * (1 << 20);
  return m;
}

}  // namespace encoder
