// What one whole-ViT forward is made of: a version of each family and the techniques of the
// whole forward. Every encoder step (steps.hpp) is one Composition; a custom mix is another.
//
// One text form serves the step table, the bench's CSV rows and --help, and the analysis
// (studylib/steps.py reads it back): space-separated fields in a fixed order, pe= and ln= always,
// attn= and mlp= where the blocks run a family version of them, every other field only where it
// differs from its default:
//   pe=v10_round_tiles ln=v5_unrolled attn=v9_softmax_overlap mlp=fastest_epilogue
//   gemms=cutlass+cublaslt residual=epilogue graph pdl l2_prefetch
// A switch is written as its bare name when on (`graph`), or as `graph=on|off`.
#pragma once
#include <string>

namespace encoder {

// The block runner that executes each encoder block (runners.hpp): one per technique.
enum class Blocks {
  Fp16,          // a kernel per op: every family's version, GEMMs on cuBLASLt or CUTLASS
  Fp16LnFolded,  // LN1 and LN2 folded into the QKV and fc1 GEMMs (CUTLASS only)
  Fp8,           // the four block GEMMs in FP8 E4M3, LayerNorms writing E4M3
  Persistent,    // every block in one persistent kernel, grid barriers between phases
  Tiled,         // every block in one persistent kernel, tiles waiting on per-tile counters
  TiledLn,       // the same with each row tile's LayerNorms as tasks of their own
  TiledTwoCtas,  // and its GEMM tasks' A panels streamed, two CTAs an SM
  TiledWgmma,    // and those GEMM tasks' products on wgmma
  TiledFolded,   // and no LayerNorm tasks: QKV and fc1 fold the LayerNorm in
  TiledLoadsFirst,  // and the epilogues' loads ahead of their stores
  TiledRowStats,    // and each row's LayerNorm statistics left by the epilogues that write it
};

// Where the QKV and projection GEMMs run (the MLP's GEMMs are its family version's business).
enum class Gemms {
  Cublaslt,         // cuBLASLt with its bias epilogue
  Cutlass,          // the CUTLASS layer, its kernel searched per shape
  CutlassCublaslt,  // the same search with cuBLASLt one more candidate: the faster per shape
  // and the layer's few-rows split-K kernels more candidates still (RunOptions::small_m): fp16 blocks
  SmallMCutlassCublaslt,
};

// The fields a block runner may read (Runner::reads). The forward itself reads pe, ln (at least
// the final LayerNorm's), blocks, buffers, graph and streams; every other field that is set away
// from its default (a version: named at all) must be one its runner reads, so that a composition
// names only what runs.
enum Field : unsigned {
  kFieldAttn = 1u << 0,        // attn=
  kFieldMlp = 1u << 1,         // mlp=
  kFieldGemms = 1u << 2,       // gemms=
  kFieldResidual = 1u << 3,    // residual=
  kFieldPdl = 1u << 4,         // pdl
  kFieldL2Prefetch = 1u << 5,  // l2_prefetch
  kFieldAttnE4m3 = 1u << 6,    // attn_e4m3
  kFieldQkvE4m3 = 1u << 7,     // qkv_e4m3
};

struct Composition {
  std::string patch_embed, layernorm;
  std::string attention, mlp;  // empty where the runner computes that part itself (blocks=persistent)
  Blocks blocks = Blocks::Fp16;
  Gemms gemms = Gemms::Cublaslt;
  bool per_layer_buffers = false;  // a fresh buffer for every intermediate of every layer (no arena)
  bool residual_epilogue = false;  // projection's residual added in its GEMM epilogue (else an add kernel)
  bool graph = false;              // the forward captured once in a CUDA graph and replayed
  int streams = 1;                 // the batch split over this many streams, each a whole forward
  bool pdl = false;                // CUTLASS GEMMs launched with programmatic dependent launch
  // The LayerNorm before each MLP requests the first half of the next block's weights into L2
  // (layernorm::Args::prefetch), so the GEMMs after it find them there instead of in DRAM.
  bool l2_prefetch = false;
  // Fp8 blocks: the attention writes the projection's E4M3 input itself (no quantizing pass).
  bool attention_e4m3 = false;
  // Fp8 blocks with attention_e4m3: the QKV GEMM writes E4M3 (static scale) and the attention
  // reads it (a version with attention::Version::launch_e4m3_qkv); no fp16 QKV exists.
  bool qkv_e4m3 = false;

  bool fp8() const { return blocks == Blocks::Fp8; }
  const char* precision() const { return fp8() ? "fp8_e4m3" : "fp16"; }
  // The blocks run as the tile schedule's tasks (blocks=tiled, tiled_ln, tiled_2cta, tiled_wgmma,
  // tiled_folded, tiled_loads_first, tiled_row_stats).
  bool tiled() const {
    return blocks == Blocks::Tiled || blocks == Blocks::TiledLn || blocks == Blocks::TiledTwoCtas ||
           blocks == Blocks::TiledWgmma || blocks == Blocks::TiledFolded || blocks == Blocks::TiledLoadsFirst ||
           blocks == Blocks::TiledRowStats;
  }
  bool operator==(const Composition& o) const { return to_string() == o.to_string(); }
  bool operator!=(const Composition& o) const { return !(*this == o); }
  std::string to_string() const;
};

// The runner fields (Field) that c sets: a version named, a switch or choice off its default.
unsigned fields_set(const Composition& c);
// How a field is written and what it is: "attn_e4m3 (an E4M3 attention output)".
std::string describe(Field f);

// The fields of `text` applied on top of `base` (a step's delta on its parent's composition; a
// whole composition on Composition{}). Throws StudyError(Usage) naming an unknown field or value.
Composition apply(Composition base, const std::string& text);
inline Composition parse(const std::string& text) { return apply(Composition{}, text); }

const char* name(Blocks b);
const char* name(Gemms g);

}  // namespace encoder
