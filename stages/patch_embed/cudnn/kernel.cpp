// cudnn: cuDNN's convolution forward through the C++ frontend graph API, with the bias and
// the position embedding added by pointwise operations fused into the same graph, and the
// result written straight into the token rows: the output tensor [B, hidden, side, side] is
// declared with the strides of the token rows (channel stride 1, patch stride hidden, image
// stride tokens * hidden) and bound one row past the start, so row 0 of each image stays free
// for the cls token, which one small kernel writes. The graph is validated, planned and built
// once per shape and cached; a launch only binds pointers and executes.
#include "check.hpp"
#include "patch_embed/kernels.cuh"

#ifdef STUDY_HAVE_CUDNN
#include <map>
#include <memory>
#include <tuple>
#include "cudnn_graph.hpp"

namespace patch_embed {
namespace {
namespace fe = cudnn_frontend;

struct Plan : study::CudnnPlan {
  Tensor x, w, bias, pos, y;
};

// Built once per (batch, image size, hidden); a refusal is cached too, with cuDNN's reason.
Plan& plan_for(const Problem& p) {
  static std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> cache;
  auto& slot = cache[{p.batch, p.image_size, p.hidden}];
  if (slot) return *slot;
  slot = std::make_unique<Plan>();
  Plan& plan = *slot;
  auto& g = plan.graph;
  g.set_io_data_type(fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t B = p.batch, S = p.image_size, H = p.hidden, side = S / kPatch, T = tokens(p);
  plan.x = g.tensor(fe::graph::Tensor_attributes().set_name("images").set_dim({B, kChannels, S, S})
                        .set_stride({kChannels * S * S, S * S, S, 1}));
  plan.w = g.tensor(fe::graph::Tensor_attributes().set_name("conv_w").set_dim({H, kChannels, kPatch, kPatch})
                        .set_stride({kPatchElems, kPatch * kPatch, kPatch, 1}));
  plan.bias = g.tensor(fe::graph::Tensor_attributes().set_name("conv_b").set_dim({1, H, 1, 1})
                           .set_stride({H, 1, H, H}));
  // Position rows 1..P as a [1, hidden, side, side] tensor in token-row layout, broadcast
  // over the images (bound to pos_embed + hidden).
  plan.pos = g.tensor(fe::graph::Tensor_attributes().set_name("pos_embed").set_dim({1, H, side, side})
                          .set_stride({T * H, 1, side * H, H}));
  auto conv = g.conv_fprop(plan.x, plan.w, fe::graph::Conv_fprop_attributes().set_name("patch_conv")
                                               .set_padding({0, 0}).set_stride({kPatch, kPatch})
                                               .set_dilation({1, 1}));
  conv->set_dim({B, H, side, side}).set_stride({side * side * H, 1, side * H, H});
  auto add = fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD);
  auto biased = g.pointwise(conv, plan.bias, add.set_name("bias"));
  auto y = g.pointwise(biased, plan.pos, fe::graph::Pointwise_attributes().set_name("position")
                                              .set_mode(fe::PointwiseMode_t::ADD));
  y->set_output(true).set_data_type(fe::DataType_t::HALF).set_dim({B, H, side, side})
      .set_stride({T * H, 1, side * H, H});
  plan.y = y;

  plan.error = study::build_cudnn_graph(g, plan.workspace);
  return plan;
}

std::string supports(const Problem& p) {
  if (auto why = study::cudnn_unavailable(); !why.empty()) return why;
  if (auto r = check_common(p); !r.empty()) return r;
  return plan_for(p).error;
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  Plan& plan = plan_for(p);
  if (!plan.error.empty()) throw study::StudyError(study::ErrorKind::Library, plan.error);
  launch_cls_rows(p, a, stream);
  plan.execute({{plan.x, const_cast<__half*>(a.images)},
                {plan.w, const_cast<__half*>(a.conv_w)},
                {plan.bias, const_cast<__half*>(a.conv_b)},
                {plan.pos, const_cast<__half*>(a.pos_embed) + p.hidden},
                {plan.y, a.out + p.hidden}},
               stream);
}

}  // namespace

extern const Version cudnn = [] {
  Version v{};
  v.name = "cudnn";
  v.supports = supports;
  v.launch = launch;
  v.unavailable = study::cudnn_unavailable;
  return v;
}();

}  // namespace patch_embed

#else  // built without the cuDNN frontend: the version exists and says why it cannot run

#include "cudnn_not_built.hpp"

namespace patch_embed {
using NotBuilt = study::CudnnNotBuilt<Problem, Args>;
extern const Version cudnn = [] {
  Version v{};
  v.name = "cudnn";
  v.supports = NotBuilt::supports;
  v.launch = NotBuilt::launch;
  v.unavailable = [] { return NotBuilt::supports(Problem{}); };
  return v;
}();
}  // namespace patch_embed

#endif
