#include "harness/cli.hpp"
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <utility>
#include "harness/check.hpp"
#include "harness/vit_config.hpp"

namespace study {

long long parse_integer(const std::string& text, const std::string& what) {
  if (text.empty()) throw StudyError(ErrorKind::Usage, what + " needs an integer value");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || end == text.c_str())
    throw StudyError(ErrorKind::Usage, what + " expects an integer, got '" + text + "'");
  if (errno == ERANGE) throw StudyError(ErrorKind::Usage, what + " value '" + text + "' is out of range");
  return v;
}

Cli::Cli(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void Cli::add_int(const std::string& name, int* dst, const std::string& help, int min_value) {
  opts_.push_back({name, help, "int", [=](const std::string& v) {
                     long long x = parse_integer(v, name);
                     if (x < min_value)
                       throw StudyError(ErrorKind::Usage, name + " must be >= " +
                                                              std::to_string(min_value) + ", got " + v);
                     if (x > std::numeric_limits<int>::max())
                       throw StudyError(ErrorKind::Usage, name + " value " + v + " is too large");
                     *dst = static_cast<int>(x);
                   }});
}

void Cli::add_string(const std::string& name, std::string* dst, const std::string& help) {
  opts_.push_back({name, help, "text", [=](const std::string& v) {
                     if (v.empty()) throw StudyError(ErrorKind::Usage, name + " needs a value");
                     *dst = v;
                   }});
}

void Cli::add_version_list(std::vector<std::string> names) { versions_ = std::move(names); }

void Cli::add_flag(const std::string& name, bool* dst, const std::string& help, bool value) {
  opts_.push_back({name, help, "", [=](const std::string&) { *dst = value; }});
}

void Cli::add_common(CommonOptions& o) {
  add_int("--batch", &o.batch, "images per batch (default 1)");
  add_int("--image-size", &o.image_size, "image side in pixels, a multiple of 16 (default 224)");
  add_string("--model", &o.model, "vit_ti | vit_s | vit_b | vit_l (default vit_b)");
  opts_.push_back({"--streams", "CUDA streams, or 'sm' for one per SM of the device (default 1)", "int|sm",
                   [&o](const std::string& v) {
                     if (v == "sm") {
                       o.streams = 0;  // resolved once the device is known
                       return;
                     }
                     long long x = parse_integer(v, "--streams");
                     if (x < 1) throw StudyError(ErrorKind::Usage, "--streams must be >= 1 or 'sm', got " + v);
                     if (x > 4096) throw StudyError(ErrorKind::Usage, "--streams must be <= 4096, got " + v);
                     o.streams = static_cast<int>(x);
                   }});
  add_int("--warmup", &o.warmup, "untimed runs before timing (default 5)", 0);
  add_int("--iters", &o.iters, "timed runs (default 10)");
  opts_.push_back({"--seed", "random seed for inputs and weights (default 1234)", "int",
                   [&o](const std::string& v) {
                     long long x = parse_integer(v, "--seed");
                     if (x < 0) throw StudyError(ErrorKind::Usage, "--seed must be >= 0, got " + v);
                     o.seed = static_cast<std::uint64_t>(x);
                   }});
  add_string("--csv", &o.csv, "append result rows to this CSV file");
  add_int("--device", &o.device, "CUDA device index (default 0)", 0);
  add_flag("--check", &o.check, "check against the CPU reference before timing (default)");
  add_flag("--no-check", &o.check, "skip the reference check (the row says so)", false);
  add_flag("--flush-l2", &o.flush_l2, "flush L2 between timed runs");
  opts_.push_back({"--energy", "after timing, seconds of back-to-back calls for the energy columns (default 0: none)",
                   "seconds", [&o](const std::string& v) {
                     char* end = nullptr;
                     const double x = std::strtod(v.c_str(), &end);
                     if (v.empty() || *end || !(x >= 0 && x <= 600))
                       throw StudyError(ErrorKind::Usage,
                                        "--energy must be seconds between 0 and 600, got '" + v + "'");
                     o.energy_seconds = x;
                   }});
}

std::string Cli::usage() const {
  std::string u = "usage: " + program_ + " [options]\n" + summary_ + "\n\noptions:\n";
  for (const auto& o : opts_) {
    std::string lhs = "  " + o.name + (o.kind.empty() ? "" : " <" + o.kind + ">");
    if (lhs.size() < 26) lhs.resize(26, ' ');
    u += lhs + " " + o.help + "\n";
  }
  if (!versions_.empty()) u += "  --list-versions          print every version of the family, one per line\n";
  return u + "  --help                   this text\n";
}

void Cli::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << usage();
      std::exit(0);
    }
    if (arg == "--list-versions" && !versions_.empty()) {
      for (const auto& v : versions_) std::cout << v << "\n";
      std::exit(0);
    }
    std::string value;
    bool has_inline = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline = true;
    }
    const Opt* found = nullptr;
    for (const auto& o : opts_)
      if (o.name == arg) found = &o;
    if (!found) throw StudyError(ErrorKind::Usage, "unknown option '" + arg + "' (see --help)");
    if (!found->kind.empty() && !has_inline) {
      if (i + 1 >= argc) throw StudyError(ErrorKind::Usage, arg + " needs a value");
      value = argv[++i];
    } else if (found->kind.empty() && has_inline) {
      throw StudyError(ErrorKind::Usage, arg + " takes no value");
    }
    found->set(value);
    given_.push_back(arg);
  }
}

bool Cli::given(const std::string& name) const {
  for (const auto& g : given_)
    if (g == name) return true;
  return false;
}

void validate_common(const CommonOptions& o) {
  find_model(o.model);
  tokens_for_image(o.image_size);
}

int run_main(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const StudyError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    switch (e.kind) {
      case ErrorKind::Usage:
      case ErrorKind::NoGpu:
      case ErrorKind::Data: return 2;
      case ErrorKind::OutOfMemory: return 3;
      default: return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace study
