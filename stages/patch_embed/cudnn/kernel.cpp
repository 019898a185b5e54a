// cudnn: cuDNN's convolution forward through the C++ frontend graph API, plan built once per
// shape and cached; a launch only binds pointers and executes. Three graphs are tried in order
// and the first cuDNN builds is kept:
//   1. conv + bias ADD + position ADD fused, written straight into the token rows (the output
//      [B, hidden, side, side] declared with the token rows' strides, bound one row past the
//      start; a small kernel writes the cls rows);
//   2. the convolution alone into channels-last scratch [B*P, hidden], then one kernel adds
//      bias and position while moving the rows to token rows and writes the cls rows;
//   3. the same with NCHW scratch [B, hidden, side, side].
// cuDNN 9's fused (runtime-compiled) engines want channels-last inputs with a multiple of 8
// channels; the images are NCHW with 3, so on such builds graph 1 is refused and graph 2 or 3
// runs a library convolution kernel, as PyTorch's F.conv2d does.
#include "harness/check.hpp"
#include "patch_embed/kernels.cuh"

#ifdef STUDY_HAVE_CUDNN
#include <map>
#include <memory>
#include <tuple>
#include "cudnn/cudnn_graph.hpp"

namespace patch_embed {
namespace {
namespace fe = cudnn_frontend;

enum class Graph { Fused, ConvChannelsLast, ConvNchw };

struct Plan : study::CudnnPlan {
  Tensor x, w, bias, pos, y;
  Graph kind = Graph::Fused;
};

std::unique_ptr<Plan> build(const Problem& p, Graph kind) {
  auto plan = std::make_unique<Plan>();
  plan->kind = kind;
  auto& g = plan->graph;
  g.set_io_data_type(fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t B = p.batch, S = p.image_size, H = p.hidden, side = S / kPatch, T = tokens(p), P = side * side;
  plan->x = g.tensor(fe::graph::Tensor_attributes().set_name("images").set_dim({B, kChannels, S, S})
                         .set_stride({kChannels * S * S, S * S, S, 1}));
  plan->w = g.tensor(fe::graph::Tensor_attributes().set_name("conv_w").set_dim({H, kChannels, kPatch, kPatch})
                         .set_stride({kPatchElems, kPatch * kPatch, kPatch, 1}));
  auto conv = g.conv_fprop(plan->x, plan->w, fe::graph::Conv_fprop_attributes().set_name("patch_conv")
                                                 .set_padding({0, 0}).set_stride({kPatch, kPatch})
                                                 .set_dilation({1, 1}));
  if (kind == Graph::Fused) {
    plan->bias = g.tensor(fe::graph::Tensor_attributes().set_name("conv_b").set_dim({1, H, 1, 1})
                              .set_stride({H, 1, H, H}));
    // Position rows 1..P as a [1, hidden, side, side] tensor in token-row layout, broadcast
    // over the images (bound to pos_embed + hidden).
    plan->pos = g.tensor(fe::graph::Tensor_attributes().set_name("pos_embed").set_dim({1, H, side, side})
                             .set_stride({T * H, 1, side * H, H}));
    conv->set_dim({B, H, side, side}).set_stride({P * H, 1, side * H, H});
    auto biased = g.pointwise(conv, plan->bias, fe::graph::Pointwise_attributes().set_name("bias")
                                                    .set_mode(fe::PointwiseMode_t::ADD));
    plan->y = g.pointwise(biased, plan->pos, fe::graph::Pointwise_attributes().set_name("position")
                                                 .set_mode(fe::PointwiseMode_t::ADD));
    plan->y->set_output(true).set_data_type(fe::DataType_t::HALF).set_dim({B, H, side, side})
        .set_stride({T * H, 1, side * H, H});
  } else {
    plan->y = conv;
    const std::vector<int64_t> stride = kind == Graph::ConvChannelsLast
                                            ? std::vector<int64_t>{P * H, 1, side * H, H}
                                            : std::vector<int64_t>{H * P, P, side, 1};
    plan->y->set_output(true).set_data_type(fe::DataType_t::HALF).set_dim({B, H, side, side}).set_stride(stride);
  }
  plan->error = study::build_cudnn_graph(g, plan->workspace);
  return plan;
}

// Built once per (batch, image size, hidden): the first graph cuDNN accepts, or, when it
// refuses all three, the refusals (cached too).
Plan& plan_for(const Problem& p) {
  static std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> cache;
  auto& slot = cache[{p.batch, p.image_size, p.hidden}];
  if (slot) return *slot;
  std::string refusals;
  for (Graph kind : {Graph::Fused, Graph::ConvChannelsLast, Graph::ConvNchw}) {
    slot = build(p, kind);
    if (slot->error.empty()) return *slot;
    refusals += (refusals.empty() ? "" : " | ") + slot->error;
  }
  slot->error = refusals;
  return *slot;
}

std::size_t scratch(const Problem& p) {
  return static_cast<std::size_t>(p.batch) * patches_per_image(p) * p.hidden * sizeof(__half);
}

std::string supports(const Problem& p) {
  if (auto why = study::cudnn_unavailable(); !why.empty()) return why;
  if (auto r = check_common(p); !r.empty()) return r;
  // The token-row kernel of graphs 2 and 3 moves two features at a time.
  if (p.hidden % 2) return "hidden " + std::to_string(p.hidden) + " is odd";
  return plan_for(p).error;
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  Plan& plan = plan_for(p);
  if (!plan.error.empty()) throw study::StudyError(study::ErrorKind::Library, plan.error);
  __half* images = const_cast<__half*>(a.images);
  __half* w = const_cast<__half*>(a.conv_w);
  if (plan.kind == Graph::Fused) {
    launch_cls_rows(p, a, stream);
    plan.execute({{plan.x, images}, {plan.w, w}, {plan.bias, const_cast<__half*>(a.conv_b)},
                  {plan.pos, const_cast<__half*>(a.pos_embed) + p.hidden}, {plan.y, a.out + p.hidden}},
                 stream);
    return;
  }
  auto* product = static_cast<__half*>(a.scratch);
  plan.execute({{plan.x, images}, {plan.w, w}, {plan.y, product}}, stream);
  launch_token_rows(p, a, product, /*add_bias=*/true, plan.kind == Graph::ConvChannelsLast, stream);
}

}  // namespace

extern const Version cudnn = [] {
  Version v = study::make_version<Version>("cudnn", supports, launch);
  v.scratch = scratch;
  v.unavailable = study::cudnn_unavailable;
  return v;
}();

}  // namespace patch_embed

#else  // built without the cuDNN frontend: the version exists and says why it cannot run

#include "cudnn/cudnn_not_built.hpp"

namespace patch_embed {
using NotBuilt = study::CudnnNotBuilt<Problem, Args>;
extern const Version cudnn = [] {
  Version v = study::make_version<Version>("cudnn", NotBuilt::supports, NotBuilt::launch);
  v.unavailable = [] { return NotBuilt::supports(Problem{}); };
  return v;
}();
}  // namespace patch_embed

#endif
