#include "encoder/composition.hpp"
#include <sstream>
#include <utility>
#include <vector>
#include "harness/check.hpp"

namespace encoder {

namespace {

const std::pair<Blocks, const char*> kBlocks[] = {{Blocks::Fp16, "fp16"},
                                                  {Blocks::Fp16LnFolded, "fp16_ln_folded"},
                                                  {Blocks::Fp8, "fp8"},
                                                  {Blocks::Persistent, "persistent"},
                                                  {Blocks::Tiled, "tiled"},
                                                  {Blocks::TiledLn, "tiled_ln"},
                                                  {Blocks::TiledTwoCtas, "tiled_2cta"},
                                                  {Blocks::TiledWgmma, "tiled_wgmma"},
                                                  {Blocks::TiledFolded, "tiled_folded"},
                                                  {Blocks::TiledLoadsFirst, "tiled_loads_first"},
                                                  {Blocks::TiledRowStats, "tiled_row_stats"}};
const std::pair<Gemms, const char*> kGemms[] = {
    {Gemms::Cublaslt, "cublaslt"}, {Gemms::Cutlass, "cutlass"}, {Gemms::CutlassCublaslt, "cutlass+cublaslt"},
    {Gemms::SmallMCutlassCublaslt, "small_m+cutlass+cublaslt"}};

struct FieldName {
  Field field;
  const char* written;
  const char* what;
};
const FieldName kFieldNames[] = {
    {kFieldAttn, "attn=", "an attention version"},
    {kFieldMlp, "mlp=", "an MLP version"},
    {kFieldGemms, "gemms=", "where the QKV and projection GEMMs run"},
    {kFieldResidual, "residual=epilogue", "the residual added in the projection's epilogue"},
    {kFieldPdl, "pdl", "programmatic dependent launch"},
    {kFieldL2Prefetch, "l2_prefetch", "the next block's weights requested into L2"},
    {kFieldAttnE4m3, "attn_e4m3", "an E4M3 attention output"},
    {kFieldQkvE4m3, "qkv_e4m3", "an E4M3 QKV"},
};

[[noreturn]] void refuse(const std::string& what) {
  throw study::StudyError(study::ErrorKind::Usage, "composition: " + what);
}

template <class E, std::size_t N>
E lookup(const std::pair<E, const char*> (&table)[N], const std::string& key, const std::string& value) {
  std::string known;
  for (const auto& [e, n] : table) {
    if (value == n) return e;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  refuse("unknown " + key + " '" + value + "' (known: " + known + ")");
}

bool on_off(const std::string& key, const std::string& value) {
  if (value.empty() || value == "on") return true;
  if (value == "off") return false;
  refuse(key + " takes on or off, not '" + value + "'");
}

}  // namespace

const char* name(Blocks b) {
  for (const auto& [e, n] : kBlocks)
    if (e == b) return n;
  return "?";
}

const char* name(Gemms g) {
  for (const auto& [e, n] : kGemms)
    if (e == g) return n;
  return "?";
}

std::string describe(Field f) {
  for (const auto& n : kFieldNames)
    if (n.field == f) return std::string(n.written) + " (" + n.what + ")";
  return "?";
}

unsigned fields_set(const Composition& c) {
  const Composition d;
  const std::pair<bool, Field> set[] = {
      {!c.attention.empty(), kFieldAttn}, {!c.mlp.empty(), kFieldMlp},   {c.gemms != d.gemms, kFieldGemms},
      {c.residual_epilogue, kFieldResidual}, {c.pdl, kFieldPdl},          {c.l2_prefetch, kFieldL2Prefetch},
      {c.attention_e4m3, kFieldAttnE4m3},   {c.qkv_e4m3, kFieldQkvE4m3}};
  unsigned fields = 0;
  for (const auto& [on, f] : set) fields |= on ? f : 0u;
  return fields;
}

std::string Composition::to_string() const {
  const Composition d;
  std::string s = "pe=" + patch_embed + " ln=" + layernorm;
  if (!attention.empty()) s += " attn=" + attention;
  if (!mlp.empty()) s += " mlp=" + mlp;
  if (blocks != d.blocks) s += std::string(" blocks=") + name(blocks);
  if (gemms != d.gemms) s += std::string(" gemms=") + name(gemms);
  if (per_layer_buffers) s += " buffers=per_layer";
  if (residual_epilogue) s += " residual=epilogue";
  if (graph) s += " graph";
  if (streams != d.streams) s += " streams=" + std::to_string(streams);
  if (pdl) s += " pdl";
  if (l2_prefetch) s += " l2_prefetch";
  if (attention_e4m3) s += " attn_e4m3";
  if (qkv_e4m3) s += " qkv_e4m3";
  return s;
}

Composition apply(Composition c, const std::string& text) {
  std::istringstream in(text);
  std::string field;
  while (in >> field) {
    const auto eq = field.find('=');
    const std::string key = field.substr(0, eq), value = eq == std::string::npos ? "" : field.substr(eq + 1);
    // attn=none and mlp=none: the blocks compute that part themselves (a step's delta on a parent
    // that named a version).
    auto version = [&](std::string& v, bool may_be_none) {
      if (value.empty()) refuse(key + " needs a version name" + (may_be_none ? " or none" : ""));
      v = may_be_none && value == "none" ? "" : value;
    };
    if (key == "pe") version(c.patch_embed, false);
    else if (key == "ln") version(c.layernorm, false);
    else if (key == "attn") version(c.attention, true);
    else if (key == "mlp") version(c.mlp, true);
    else if (key == "blocks") c.blocks = lookup(kBlocks, key, value);
    else if (key == "gemms") c.gemms = lookup(kGemms, key, value);
    else if (key == "buffers") {
      if (value != "arena" && value != "per_layer") refuse("buffers takes arena or per_layer, not '" + value + "'");
      c.per_layer_buffers = value == "per_layer";
    } else if (key == "residual") {
      if (value != "add" && value != "epilogue") refuse("residual takes add or epilogue, not '" + value + "'");
      c.residual_epilogue = value == "epilogue";
    } else if (key == "streams") {
      try {
        std::size_t used = 0;
        c.streams = std::stoi(value, &used);
        if (used != value.size() || c.streams < 1) throw std::invalid_argument(value);
      } catch (const std::logic_error&) {
        refuse("streams takes a positive integer, not '" + value + "'");
      }
    } else if (key == "graph") c.graph = on_off(key, value);
    else if (key == "pdl") c.pdl = on_off(key, value);
    else if (key == "l2_prefetch") c.l2_prefetch = on_off(key, value);
    else if (key == "attn_e4m3") c.attention_e4m3 = on_off(key, value);
    else if (key == "qkv_e4m3") c.qkv_e4m3 = on_off(key, value);
    else
      refuse("unknown field '" + field +
             "' (known: pe= ln= attn= mlp= blocks= gemms= buffers= residual= streams= graph pdl l2_prefetch "
             "attn_e4m3 qkv_e4m3)");
  }
  return c;
}

}  // namespace encoder
