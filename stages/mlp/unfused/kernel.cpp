// unfused: the seed's first MLP. cuBLASLt GEMMs without epilogue, bias + GELU and
// bias + residual as separate one-element-per-thread kernels (unfused_sequence.cu).
#include "mlp/unfused_sequence.hpp"

namespace mlp {
namespace {
// cuBLASLt takes any shape (an unaligned one may get slower kernels or, if the heuristic has
// none, a clear error); the pointwise kernels guard every element.
std::string supports(const Problem& p) { return check_common(p); }
}  // namespace

extern const Version unfused{{"unfused", supports, unfused_sequence}};

}  // namespace mlp
