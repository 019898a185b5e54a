#include "harness/test_hooks.hpp"
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include "harness/check.hpp"

namespace study {

const std::vector<Plant>& plants() {
  static const std::vector<Plant> list = kTestHooks ? std::vector<Plant>{
      {"mlp_skips_last_row_tile", "encoder fp16 blocks: the MLP output of the last partial 64-row tile is the "
                                  "residual alone (the MLP skipped there)"},
      {"attention_zeroes_last_query_tile", "encoder fp16 blocks: the attention output of each image's last "
                                           "64-query tile is zero"},
      {"attention_drops_last_key_tile", "encoder fp16 blocks: queries of the full tiles attend to the keys "
                                        "before the last key tile only"},
      {"wrong_non_cls_row", "encoder: after the last block, image 0's last token row holds the row before it"},
      {"softmax_scale_off", "attention on the wgmma flash kernel (v7_flash, v8, v9): softmax scale 1% high"},
      {"layernorm_gamma_beta_swapped", "encoder fp16 blocks: LN1 gets beta as its gain and gamma as its shift"},
      {"fp8_fc1_bias_dropped", "FP8 MLP: fc1's bias is not added"},
      {"fp8_scale_off", "FP8 MLP: fc2's input scale 5% high (its dequantization off by 5%)"},
      {"attention_mean", "attention on the wgmma flash kernel: softmax scale 0, so each output row is the mean "
                         "of the image's values (what the FP8 steps' tests must tell from attention)"},
      {"e4m3_scores_unscaled", "attention on E4M3 Q, K and V (v10_e4m3_qkv): the scores not multiplied by "
                               "the q and k scales (their E4M3 units taken for the values)"},
      {"key_split_unweighted", "attention v12_key_split: the key slices' O and sums added without the weight "
                               "of their row maxima"},
      {"prefetch_noop", "encoder fp16 blocks: the L2 prefetch asks for nothing"},
      {"persistent_no_barrier", "e13's persistent kernel: no grid barrier between attention and the projection"},
      {"tiled_signal_dropped", "e24's tile-scheduled kernel: the first fc1 task of block 0 does not add one to "
                               "its counter (the fc2 tasks waiting on it time out; every value may still be right)"},
      {"folded_stats_short", "e28's tile-scheduled kernel: the folded LayerNorm's row statistics leave out the "
                             "last 64 columns of each row"},
      {"row_stats_short", "e30's tile-scheduled kernel: the rows' statistics combined by QKV and fc1 leave out "
                          "each row's last 32-column group"},
      {"read_once_slice_dropped", "e32's tile-scheduled kernel: a split GEMM's slices add up every slice's "
                                  "partial sums but the last"},
      {"read_once_no_meeting", "e32's tile-scheduled kernel: each slice adds its share of the rows without "
                               "waiting for the other slices' partial sums"},
      {"read_once_first_stats_skipped", "e32's forward: block 0's row statistics are not computed before the "
                                        "tiled kernel (its QKV combines whatever the buffer holds)"},
      {"e4m3_no_saturation", "FP8 quantizing kernels (LayerNorm's, the activations'): values past 448 converted "
                             "without saturation (to NaN), where the recipe clamps them to 448"},
      {"e4m3_clamp_low", "FP8 quantizing kernels (LayerNorm's, the activations'): values clamped to 416, the "
                         "E4M3 value below the recipe's 448 (each within one E4M3 step of the recipe's)"},
      {"small_m_slice_dropped", "few-rows GEMM kernels (small_m.cu) of more than one K slice: the epilogue adds "
                                "every slice's partial tile but the last"},
      {"session_legacy_stream", "encoder session (session.cu): a call is enqueued on the legacy default stream, "
                                "not the caller's"},
      {"session_graph_per_output", "encoder session: a call returning the other output than the last one "
                                   "captures a graph of its own, two executables over one forward's buffers"},
      {"session_device_not_restored", "encoder session: a call or the session's birth on another device "
                                      "leaves that device current, not the caller's"},
  } : std::vector<Plant>{};
  return list;
}

#ifdef STUDY_TEST_HOOKS
namespace {

const std::string& plant_from_environment() {
  static const std::string name = [] {
    const char* env = std::getenv("STUDY_PLANT");
    const std::string n = env ? env : "";
    if (n.empty()) return n;
    for (const auto& p : plants())
      if (n == p.name) return n;
    throw StudyError(ErrorKind::Usage, "STUDY_PLANT=" + n + " names no planted bug (common/harness/test_hooks.cpp)");
  }();
  return name;
}

}  // namespace

bool planted(const char* name) {
  bool known = false;
  for (const auto& p : plants()) known = known || std::strcmp(p.name, name) == 0;
  if (!known) throw std::logic_error(std::string("planted(\"") + name + "\"): no such planted bug");
  return plant_from_environment() == name;
}
#endif

}  // namespace study
