// CPU test of the cuDNN versions as a build without cuDNN compiles them: their kernel files are
// built into this test without STUDY_HAVE_CUDNN, whatever this build found. Each version must
// report itself unavailable with the reason (so its GPU suite is skipped, not failed), refuse
// every problem with that same reason (its bench writes a `skipped` row), and throw if launched.
#include <doctest/doctest.h>
#include <string>
#include "attention/attention.hpp"
#include "harness/check.hpp"
#include "layernorm/layernorm.hpp"

#ifdef STUDY_HAVE_CUDNN
#error "this test compiles the cuDNN versions as a build without cuDNN does"
#endif

namespace layernorm {
extern const Version cudnn;
}
namespace attention {
extern const Version cudnn_sdpa;
}

namespace {

template <class Version, class Problem>
void check_not_built(const Version& v, const char* name, const Problem& vit_shape) {
  CAPTURE(name);
  CHECK(std::string(v.name) == name);
  const std::string why = v.why_unavailable();
  REQUIRE_FALSE(why.empty());
  CHECK(why.find("cuDNN") != std::string::npos);  // the reason says what is missing
  CHECK(v.supports(vit_shape) == why);
  CHECK_THROWS_AS(v.launch(vit_shape, {}, nullptr), study::StudyError);
}

}  // namespace

TEST_CASE("layernorm cudnn is unavailable, with the reason, in a build without cuDNN") {
  check_not_built(layernorm::cudnn, "cudnn", layernorm::Problem{197, 768});
}

TEST_CASE("attention cudnn_sdpa is unavailable, with the reason, in a build without cuDNN") {
  check_not_built(attention::cudnn_sdpa, "cudnn_sdpa", attention::Problem{1, 197, 12, 64});
}
