// cudnn: cuDNN's layer-norm forward (inference phase) through the C++ frontend graph API.
// The graph is built, checked and planned once per shape and cached; a launch only binds
// pointers and executes.
#include "harness/check.hpp"
#include "layernorm/layernorm.hpp"

#ifdef STUDY_HAVE_CUDNN
#include <tuple>
#include "cudnn/cudnn_graph.hpp"

namespace layernorm {
namespace {
namespace fe = cudnn_frontend;

struct Plan : study::CudnnPlan {
  Tensor x, scale, bias, y;
};

// Built once per (rows, hidden, eps) (study::cudnn_plan).
Plan& plan_for(const Problem& p) {
  return study::cudnn_plan<Plan>(std::tuple{p.rows, p.hidden, p.eps}, [&](Plan& plan) {
    auto& g = plan.graph;
    const int64_t r = p.rows, h = p.hidden;
    // cuDNN normalizes over every dimension but the first: X is [rows, hidden, 1, 1].
    plan.x = g.tensor(fe::graph::Tensor_attributes().set_name("x").set_dim({r, h, 1, 1}).set_stride({h, 1, h, h}));
    plan.scale =
        g.tensor(fe::graph::Tensor_attributes().set_name("gamma").set_dim({1, h, 1, 1}).set_stride({h, 1, h, h}));
    plan.bias = g.tensor(fe::graph::Tensor_attributes().set_name("beta").set_dim({1, h, 1, 1}).set_stride({h, 1, h, h}));
    auto options = fe::graph::Layernorm_attributes()
                       .set_forward_phase(fe::NormFwdPhase_t::INFERENCE)
                       .set_epsilon(p.eps);
    auto outputs = g.layernorm(plan.x, plan.scale, plan.bias, options);
    plan.y = outputs[0];
    plan.y->set_output(true);
  });
}

std::string supports(const Problem& p) {
  return study::cudnn_supports(check_common(p), [&]() -> const Plan& { return plan_for(p); });
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  Plan& plan = study::usable(plan_for(p));
  plan.execute({{plan.x, const_cast<__half*>(a.x)},
                {plan.scale, const_cast<__half*>(a.gamma)},
                {plan.bias, const_cast<__half*>(a.beta)},
                {plan.y, a.y}},
               stream);
}

}  // namespace

extern const Version cudnn{"cudnn", supports, launch, study::cudnn_unavailable};

}  // namespace layernorm

#else  // built without the cuDNN frontend: the version exists and says why it cannot run

#include "cudnn/cudnn_not_built.hpp"

namespace layernorm {
using NotBuilt = study::CudnnNotBuilt<Problem, Args>;
extern const Version cudnn{"cudnn", NotBuilt::supports, NotBuilt::launch, NotBuilt::unavailable};
}  // namespace layernorm

#endif
