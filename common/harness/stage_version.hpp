// The version (or encoder step) one executable of a family's bench or test stands for. Each
// family's bench.cpp and test.cpp compile once; each version's executable links them with a
// one-line file meson generates from stages/stage_version.cpp.in, which defines this name. So a
// new version costs the build one line, not another compile of the bench and the test.
#pragma once
#include <string>

namespace study {

extern const char* const kStageVersion;

// "<family>_<version>": the executable's program and suite name.
inline std::string stage_program(const char* family) { return std::string(family) + "_" + kStageVersion; }

}  // namespace study
