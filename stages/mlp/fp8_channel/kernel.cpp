// fp8_channel: fp8_tensor with one scale per output feature of each weight (cuBLASLt's
// "outer vector" scale of A), so a row of small weights keeps its resolution beside a row of
// large ones.
#include "mlp/mlp.hpp"

namespace mlp {

extern const Version fp8_channel{{"fp8_channel", fp8_supports, fp8_launch, study::fp8::unavailable},
                                 kFp8RelTol, true, true, study::fp8::Scaling::Channel};

}  // namespace mlp
