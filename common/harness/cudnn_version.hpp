// Whether the cuDNN loaded at run time is the one the cuDNN versions were built against. A
// build takes its headers (CUDNN_VERSION) and its library from one cuDNN and sets the run path
// to that library; a loader that still finds another (LD_PRELOAD, a changed library folder)
// would silently measure a different cuDNN, so every cuDNN version, and the provenance's cudnn
// column, refuses it with both numbers instead. Pure logic, no cuDNN header: the CPU suite
// tests it in any build.
#pragma once
#include <string>

namespace study {

// cuDNN's version number as major.minor.patch: major*10000 + minor*100 + patch from cuDNN 9
// on, major*1000 + minor*100 + patch before.
inline std::string cudnn_version_name(long v) {
  const long major = v >= 90000 ? v / 10000 : v / 1000;
  const long minor = v >= 90000 ? (v % 10000) / 100 : (v % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

// Empty when `loaded` (cudnnGetVersion()) is `built` (the headers' CUDNN_VERSION); otherwise
// why a cuDNN version cannot run here, naming both.
inline std::string cudnn_mismatch(long built, long loaded) {
  if (built == loaded) return {};
  return "cuDNN " + cudnn_version_name(loaded) + " (" + std::to_string(loaded) +
         ") is loaded at run time but the build used cuDNN " + cudnn_version_name(built) + " (" +
         std::to_string(built) +
         "): the library path finds another cuDNN than the build's (LD_LIBRARY_PATH, LD_PRELOAD?); "
         "reconfigure (./study) or fix the library path";
}

// The provenance's cudnn column: the loaded version number, and the build's where they differ.
inline std::string cudnn_column(long built, long loaded) {
  if (built == loaded) return std::to_string(loaded);
  return std::to_string(loaded) + " (built against " + std::to_string(built) + ": cuDNN versions refuse)";
}

}  // namespace study
