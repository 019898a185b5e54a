// cudnn_sdpa: cuDNN's fused scaled-dot-product attention (flash-attention kernels) through the
// C++ frontend graph API, on the study's buffers as they are: Q, K and V are strided [B, H, T, D]
// views of the packed QKV buffer, and O is written as a strided [B, H, T, D] view of the
// [batch*tokens, heads*head_dim] output. The graph is validated, planned and built once per
// shape and cached; a launch only binds pointers and executes.
#include "attention/attention.hpp"
#include "harness/check.hpp"

#ifdef STUDY_HAVE_CUDNN
#include <cmath>
#include <tuple>
#include "cudnn/cudnn_graph.hpp"

namespace attention {
namespace {
namespace fe = cudnn_frontend;

struct Plan : study::CudnnPlan {
  Tensor q, k, v, o;
};

// Built once per (batch, tokens, heads, head_dim) (study::cudnn_plan).
Plan& plan_for(const Problem& p) {
  return study::cudnn_plan<Plan>(std::tuple{p.batch, p.tokens, p.heads, p.head_dim}, [&](Plan& plan) {
    auto& g = plan.graph;
    const int64_t B = p.batch, H = p.heads, T = p.tokens, D = p.head_dim;
    // Element (b, h, t, d) of q is qkv[(b*T + t) * 3HD + h*D + d]; k and v are the same view
    // HD and 2HD elements further (the pointer offsets bound at execute time).
    const std::vector<int64_t> dims = {B, H, T, D}, qkv_stride = {T * 3 * H * D, D, 3 * H * D, 1};
    auto view = [&](const char* name) {
      return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(dims).set_stride(qkv_stride));
    };
    plan.q = view("Q");
    plan.k = view("K");
    plan.v = view("V");
    auto options = fe::graph::SDPA_attributes()
                       .set_name("sdpa")
                       .set_generate_stats(false)  // inference: no softmax statistics for a backward pass
                       .set_attn_scale(1.f / std::sqrt(static_cast<float>(D)));
    auto [o, stats] = g.sdpa(plan.q, plan.k, plan.v, options);
    (void)stats;  // null without generate_stats
    o->set_output(true).set_dim(dims).set_stride({T * H * D, D, H * D, 1});
    plan.o = o;
  });
}

std::string supports(const Problem& p) {
  return study::cudnn_supports(check_common(p), [&]() -> const Plan& { return plan_for(p); });
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  Plan& plan = study::usable(plan_for(p));
  require_aligned(a.qkv, a.out, 16, "cudnn_sdpa");
  const size_t width = static_cast<size_t>(p.heads) * p.head_dim;
  __half* qkv = const_cast<__half*>(a.qkv);
  plan.execute({{plan.q, qkv}, {plan.k, qkv + width}, {plan.v, qkv + 2 * width}, {plan.o, a.out}}, stream);
}

}  // namespace

extern const Version cudnn_sdpa{"cudnn_sdpa", supports, launch, study::cudnn_unavailable};

}  // namespace attention

#else  // built without the cuDNN frontend: the version exists and says why it cannot run

#include "cudnn/cudnn_not_built.hpp"

namespace attention {
using NotBuilt = study::CudnnNotBuilt<Problem, Args>;
extern const Version cudnn_sdpa{"cudnn_sdpa", NotBuilt::supports, NotBuilt::launch,
                                 NotBuilt::unavailable};
}  // namespace attention

#endif
