// The command line shared by every executable, with strict validation: a bad value is one
// clear line on stderr and exit code 2 (see run_main), never a crash or a silent default.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace study {

struct CommonOptions {
  int batch = 1;
  int image_size = 224;
  std::string model = "vit_b";
  // CUDA streams; 0 stands for "sm" (one per SM of the device) until resolve_streams() sets
  // the number, so no row can record a stream count that was not used.
  int streams = 1;
  int warmup = 5;
  int iters = 10;
  std::uint64_t seed = 1234;
  std::string csv;  // empty: print rows to stdout only
  int device = 0;
  bool check = true;  // compare with the CPU reference before timing
  bool flush_l2 = false;
  // After the timed calls, a loop of back-to-back calls this long for the energy columns
  // (harness/energy.hpp); 0 measures no energy.
  double energy_seconds = 0;
};

class Cli {
 public:
  Cli(std::string program, std::string summary);
  void add_common(CommonOptions& o);
  // Integer option; values below min_value are rejected.
  void add_int(const std::string& name, int* dst, const std::string& help, int min_value = 1);
  void add_string(const std::string& name, std::string* dst, const std::string& help);
  void add_flag(const std::string& name, bool* dst, const std::string& help, bool value = true);
  // "--list-versions" prints these names (the family's versions, or the encoder's steps), one per
  // line, and exits 0, as --help does.
  void add_version_list(std::vector<std::string> names);
  // Throws StudyError(Usage). "--help" prints the usage and exits 0.
  void parse(int argc, char** argv);
  // Whether an option appeared on the command line (to tell defaults from choices).
  bool given(const std::string& name) const;
  std::string usage() const;

 private:
  struct Opt {
    std::string name, help, kind;
    std::function<void(const std::string&)> set;
  };
  std::string program_, summary_;
  std::vector<Opt> opts_;
  std::vector<std::string> given_;
  std::vector<std::string> versions_;
};

// The names of a family's version records, in registry order (for Cli::add_version_list).
template <class Version>
std::vector<std::string> version_names(const std::vector<Version>& versions) {
  std::vector<std::string> names;
  for (const auto& v : versions) names.push_back(v.name);
  return names;
}

// Validates the shared options that every executable must accept or refuse alike (model name,
// image size a multiple of the patch), also where an executable does not use them.
void validate_common(const CommonOptions& o);

// Parse "123" strictly (no trailing junk, no overflow); throws StudyError(Usage) naming `what`.
long long parse_integer(const std::string& text, const std::string& what);

// Runs body and maps errors to exit codes: usage / no GPU -> 2, out of GPU memory -> 3,
// other CUDA or library errors -> 1. Each error is one line on stderr.
int run_main(const char* program, const std::function<int()>& body);

}  // namespace study
