// The CUTLASS GEMM layer: validation, the per-shape search over the compiled kernels, and the
// in-memory and on-disk record of its choices (cutlass_gemm.hpp). Host code only; the kernels
// are generated, a few kernel lists per file (common/meson.build, cutlass_units).
#include "gemm/cutlass_gemm.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include "device/sm90.cuh"
#include "gemm/cutlass_gemm_entry.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/timing.hpp"

namespace study::cutlass_gemm {

const char* activation_name(Activation a) {
  for (const auto& [act, name] : kActivations)
    if (act == a) return name;
  return "?";
}

namespace {

constexpr const char* kCublasLtSuffix = "+cublaslt";

constexpr const char* kE4M3Suffix = "_e4m3";

// "gelu_tanh"; for a folded LayerNorm "ln_gelu_tanh", for FP8 "fp8_none" or with an E4M3 output
// "fp8_gelu_tanh_e4m3"; with cuBLASLt a candidate "gelu_tanh+cublaslt".
std::string activation_field(const Key& k) {
  return (k.ln ? "ln_" : "") + std::string(k.fp8 ? "fp8_" : "") + activation_name(k.act) +
         (k.e4m3_out ? kE4M3Suffix : "") + (k.cublaslt ? kCublasLtSuffix : "");
}

// Removes `suffix` from the end of s; whether it was there (and s longer than it).
bool strip_suffix(std::string& s, const std::string& suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  s.resize(s.size() - suffix.size());
  return true;
}

// The inverse of activation_field: sets k.act, k.ln, k.fp8, k.e4m3_out and k.cublaslt.
bool parse_activation(std::string s, Key& k) {
  k.ln = s.rfind("ln_", 0) == 0;
  if (k.ln) s = s.substr(3);
  k.fp8 = s.rfind("fp8_", 0) == 0;
  if (k.fp8) s = s.substr(4);
  k.cublaslt = strip_suffix(s, kCublasLtSuffix);
  k.e4m3_out = k.fp8 && strip_suffix(s, kE4M3Suffix);
  for (const auto& [act, name] : kActivations)
    if (s == name) {
      k.act = act;
      return true;
    }
  return false;
}

using detail::KernelEntry;
using detail::Launch;

// Every compiled kernel of an epilogue. Stable storage.
const std::vector<KernelEntry>& kernels_for(Activation act, bool residual) {
  if (residual && act != Activation::None)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: a residual after an activation has no kernel "
                                       "(the encoder adds residuals to a bias-only product)");
  if (residual) return detail::kernels_bias_residual();
  switch (act) {
    case Activation::GeluTanh: return detail::kernels_gelu_tanh();
    case Activation::GeluErf: return detail::kernels_gelu_erf();
    case Activation::GeluTanhF16: return detail::kernels_gelu_tanh_f16();
    case Activation::GeluErfFit: return detail::kernels_gelu_erf_fit();
    case Activation::None: break;
  }
  return detail::kernels_bias();
}

const std::vector<KernelEntry>& ln_kernels_for(Activation act) {
  if (act == Activation::None) return detail::kernels_ln_bias();
  if (act == Activation::GeluTanh) return detail::kernels_ln_gelu_tanh();
  throw StudyError(ErrorKind::Usage, "cutlass_gemm: a folded LayerNorm has kernels for no activation and tanh GELU only");
}

// cuBLASLt as a candidate: the caller's Gemm with the same fused epilogue (RunOptions::cublaslt).
// No scheduler knobs; a shape cuBLASLt has no algorithm for is timed as never finishing.
cudaError_t run_cublaslt(const Launch& l, Epilogue e, cudaStream_t stream) {
  try {
    l.cublaslt->run(l.shape, e, l.op, stream);
  } catch (const StudyError&) {
    return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}
bool cublaslt_given(const Launch& l) { return l.cublaslt != nullptr; }
cudaError_t nothing_to_prepare() { return cudaSuccess; }
const KernelEntry kCublasLtBias{
    "cublaslt", cublaslt_given, nothing_to_prepare,
    [](const Launch& l, cudaStream_t s, bool) { return run_cublaslt(l, Epilogue::Bias, s); }, false};
const KernelEntry kCublasLtGelu{
    "cublaslt", cublaslt_given, nothing_to_prepare,
    [](const Launch& l, cudaStream_t s, bool) { return run_cublaslt(l, Epilogue::GeluBias, s); }, false};

// Whether cuBLASLt computes an epilogue: its GELU is the tanh form, so not for the exact ones.
bool cublaslt_has(Activation act) { return act != Activation::GeluErf && act != Activation::GeluErfFit; }

// The CUTLASS kernels of an epilogue, the few-rows kernels after them when asked (small_m.cu), and
// cuBLASLt last when asked and it has the epilogue. Stable storage: plans keep pointers to these
// entries.
const std::vector<KernelEntry>& candidates(Activation act, bool residual, bool cublaslt, bool small_m = false) {
  cublaslt = cublaslt && cublaslt_has(act);
  if (!cublaslt && !small_m) return kernels_for(act, residual);
  static std::map<std::tuple<Activation, bool, bool, bool>, std::vector<KernelEntry>> lists;
  auto& list = lists[{act, residual, cublaslt, small_m}];
  if (list.empty()) {
    list = kernels_for(act, residual);
    if (small_m) {
      const auto& few_rows = detail::kernels_small_m(act, residual);
      list.insert(list.end(), few_rows.begin(), few_rows.end());
    }
    // cuBLASLt's GELU epilogue is the tanh form (in fp32): a candidate for either tanh kernel set.
    if (cublaslt) list.push_back(act == Activation::None ? kCublasLtBias : kCublasLtGelu);
  }
  return list;
}

// The FP8 kernels of an epilogue and output: Bias (fp16, with or without the residual; E4M3
// without) or GeluBias (E4M3). Stable storage.
const std::vector<KernelEntry>& fp8_kernels_for(Epilogue e, bool residual, bool e4m3_out) {
  if (e == Epilogue::Bias && !e4m3_out)
    return residual ? detail::kernels_fp8_bias_residual() : detail::kernels_fp8_bias();
  if (e == Epilogue::Bias && !residual) return detail::kernels_fp8_bias_e4m3();
  if (e == Epilogue::GeluBias && e4m3_out && !residual) return detail::kernels_fp8_gelu_e4m3();
  throw StudyError(ErrorKind::Usage, std::string("cutlass_gemm: FP8 kernels exist for bias (+ residual) with an fp16 "
                                                 "output, bias and bias + GELU with an E4M3 output, not ") +
                                         epilogue_name(e) + (residual ? " with a residual" : "") +
                                         (e4m3_out ? " to E4M3" : " to fp16"));
}

// cuBLASLt's FP8 GEMM as a candidate: the caller's Fp8Gemm, same epilogue and output.
cudaError_t run_fp8_cublaslt(const Launch& l, Epilogue e, cudaStream_t stream) {
  try {
    l.f8_cublaslt->run(l.shape, e, l.f8, stream);
  } catch (const StudyError&) {
    return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}
bool fp8_cublaslt_given(const Launch& l) { return l.f8_cublaslt != nullptr; }
const KernelEntry kFp8CublasLtBias{
    "cublaslt", fp8_cublaslt_given, nothing_to_prepare,
    [](const Launch& l, cudaStream_t s, bool) { return run_fp8_cublaslt(l, Epilogue::Bias, s); }, false};
const KernelEntry kFp8CublasLtGelu{
    "cublaslt", fp8_cublaslt_given, nothing_to_prepare,
    [](const Launch& l, cudaStream_t s, bool) { return run_fp8_cublaslt(l, Epilogue::GeluBias, s); }, false};

// The FP8 kernels of an epilogue and output, and cuBLASLt's after them when asked. Stable storage.
const std::vector<KernelEntry>& fp8_candidates(Epilogue e, bool residual, bool e4m3_out, bool cublaslt) {
  const auto& kernels = fp8_kernels_for(e, residual, e4m3_out);
  if (!cublaslt) return kernels;
  static std::map<std::tuple<Epilogue, bool, bool>, std::vector<KernelEntry>> lists;
  auto& list = lists[{e, residual, e4m3_out}];
  if (list.empty()) {
    list = kernels;
    list.push_back(e == Epilogue::Bias ? kFp8CublasLtBias : kFp8CublasLtGelu);
  }
  return list;
}

const KernelEntry* find_kernel(const std::vector<KernelEntry>& kernels, const std::string& name) {
  for (const auto& k : kernels)
    if (name == k.name) return &k;
  return nullptr;
}

std::string gpu_id(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + "/" + std::to_string(prop.multiProcessorCount);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

std::string shape_text(const GemmShape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

// Median of `reps` timed runs (after one warm-up), microseconds; infinity if a run fails. L2
// is flushed before each run: in a forward every layer's weights come from DRAM once, and a
// kernel timed back to back on the same small operands would find them in L2 instead, which
// favours kernels with few CTAs and few loads in flight (the 197-row GEMMs of batch 1).
float time_kernel(const KernelEntry& k, const Launch& l, cudaStream_t stream, int reps) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms(reps);
  bool ran = true;
  for (int r = -1; r < reps && ran; ++r) {
    flush_l2(stream);
    CUDA_CHECK(cudaEventRecord(start, stream));
    ran = k.run(l, stream, false) == cudaSuccess;
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    if (r >= 0) CUDA_CHECK(cudaEventElapsedTime(&ms[r], start, stop));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!ran) {
    (void)cudaGetLastError();  // a refused launch leaves no sticky error; clear the last one
    return INFINITY;
  }
  std::sort(ms.begin(), ms.end());
  return 1000.f * ms[reps / 2];
}

struct Plan {
  const KernelEntry* kernel = nullptr;
  Choice choice;
};

// How many kernels (each in its fastest configuration of the first sweep) the search times
// again, and how often.
constexpr std::size_t kFinalists = 6;
constexpr int kFinalRounds = 3;

// The candidates' names hashed (FNV-1a, 8 hex digits): Key::candidates. Once per list (the
// lists are stable storage), not on every call.
const std::string& fingerprint(const std::vector<KernelEntry>& kernels) {
  static std::map<const std::vector<KernelEntry>*, std::string> known;
  if (const auto it = known.find(&kernels); it != known.end()) return it->second;
  std::uint32_t h = 2166136261u;
  for (const auto& k : kernels)
    for (const char* c = k.name; ; ++c) {  // each name with its terminating zero
      h = (h ^ static_cast<unsigned char>(*c)) * 16777619u;
      if (!*c) break;
    }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return known[&kernels] = hex;
}

// One layer per device: its plans, the disk cache and what it has chosen.
struct Layer {
  int device = 0;
  std::string gpu;
  int sms = 0;
  CutlassCache cache{CutlassCache::default_path()};
  std::map<Key, Plan> plans;
  std::set<const KernelEntry*> prepared;
  std::vector<std::string> log;

  void prepare(const KernelEntry& k) {
    if (prepared.insert(&k).second) CUDA_CHECK(k.prepare());
  }

  Plan search(const Key& key, const std::vector<KernelEntry>& kernels, Launch l, cudaStream_t stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      throw StudyError(ErrorKind::Usage, "cutlass_gemm: " + shape_text(l.shape) + " " + activation_name(key.act) +
                                             " has no kernel chosen yet, and the search cannot run inside a "
                                             "graph capture: run the forward once eagerly first");
    Plan best;
    best.choice.us = INFINITY;
    // Every timed candidate, in the cache's line format, when $STUDY_CUTLASS_SEARCH_LOG names a
    // file (how far the runners-up were from the choice).
    std::unique_ptr<std::ofstream> trials;
    if (const char* p = std::getenv("STUDY_CUTLASS_SEARCH_LOG"); p && *p)
      trials = std::make_unique<std::ofstream>(p, std::ios::app);
    std::vector<std::pair<const KernelEntry*, Choice>> timed;
    for (const auto& k : kernels) {
      l.raster = 0;
      l.swizzle = 1;
      if (!k.implementable(l)) continue;
      prepare(k);
      for (int raster : {0, 1})
        for (int swizzle : {1, 2, 4, 8}) {
          if (!k.scheduler_knobs && (raster != 0 || swizzle != 1)) continue;
          l.raster = raster;
          l.swizzle = swizzle;
          const Choice tried{k.name, raster, swizzle, time_kernel(k, l, stream, 5)};
          if (trials) *trials << CutlassCache::format_line(key, tried) << "\n";
          if (std::isfinite(tried.us)) timed.emplace_back(&k, tried);
        }
    }
    // The finalists: each kernel's fastest configuration, the fastest kernels first. They are
    // timed again in turns, so that each sees the same clocks, and each keeps its fastest round.
    std::sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) { return a.second.us < b.second.us; });
    std::vector<std::pair<const KernelEntry*, Choice>> finalists;
    std::set<const KernelEntry*> seen;
    for (const auto& t : timed)
      if (finalists.size() < kFinalists && seen.insert(t.first).second) finalists.push_back(t);
    for (int round = 0; round < kFinalRounds && finalists.size() > 1; ++round)
      for (auto& [k, c] : finalists) {
        l.raster = c.raster;
        l.swizzle = c.swizzle;
        const float us = time_kernel(*k, l, stream, 5);
        if (trials) *trials << CutlassCache::format_line(key, {c.kernel, c.raster, c.swizzle, us}) << "\n";
        c.us = round == 0 ? us : std::min(c.us, us);
      }
    for (const auto& [k, c] : finalists)
      if (c.us < best.choice.us) best = {k, c};
    if (!best.kernel)
      throw StudyError(ErrorKind::Usage, "cutlass_gemm: no compiled kernel can run " + shape_text(l.shape) +
                                             " (n and k must be multiples of 8)");
    cache.store(key, best.choice);
    return best;
  }
};

// The layers made so far, by device.
std::map<int, std::unique_ptr<Layer>>& layers() {
  static std::map<int, std::unique_ptr<Layer>> by_device;
  return by_device;
}

int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

Layer& layer() {
  const int device = current_device();
  auto& l = layers()[device];
  if (!l) {
    l = std::make_unique<Layer>();
    l->device = device;
    l->gpu = gpu_id(device);
    l->sms = sm_count(device);
  }
  return *l;
}

std::string describe(const Key& key, const Choice& c, const char* how) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << key.m << "x" << key.n << "x" << key.k << " " << activation_field(key)
    << (key.residual ? "+residual" : "") << ": " << c.kernel << " raster " << (c.raster ? "N" : "M")
    << " swizzle " << c.swizzle;
  s << ", " << c.us << " us (" << how << ")";
  return s.str();
}

}  // namespace

std::string unavailable() {
  if (detail::kernels_bias().empty())
    return "built without CUTLASS: ./study setup fetches its headers into .deps/cutlass, then reconfigure";
  return sm90::wgmma_unavailable();
}

bool Key::operator<(const Key& o) const {
  return std::tie(gpu, m, n, k, act, residual, ln, fp8, e4m3_out, cublaslt, candidates) <
         std::tie(o.gpu, o.m, o.n, o.k, o.act, o.residual, o.ln, o.fp8, o.e4m3_out, o.cublaslt, o.candidates);
}

std::string CutlassCache::default_path() {
  if (const char* p = std::getenv("STUDY_CUTLASS_CACHE"); p && *p) return p;
  std::filesystem::path dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = x;
  else if (const char* h = std::getenv("HOME"); h && *h)
    dir = std::filesystem::path(h) / ".cache";
  else
    dir = std::filesystem::temp_directory_path();
  return (dir / "vit-cuda-study" / "cutlass_gemm.tsv").string();
}

CutlassCache::CutlassCache(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_);
  std::string line;
  Key key;
  Choice choice;
  while (std::getline(in, line))
    if (parse_line(line, key, choice)) choices_[key] = choice;
}

void CutlassCache::read_new_keys() {
  std::ifstream in(path_);
  std::map<Key, Choice> file;
  std::string line;
  Key key;
  Choice choice;
  while (std::getline(in, line))
    if (parse_line(line, key, choice)) file[key] = choice;  // the file's later line wins
  choices_.insert(file.begin(), file.end());                // keys held here stay as they are
}

std::optional<Choice> CutlassCache::find(const Key& key) {
  auto it = choices_.find(key);
  if (it == choices_.end()) {
    read_new_keys();
    it = choices_.find(key);
    if (it == choices_.end()) return std::nullopt;
  }
  return it->second;
}

void CutlassCache::store(const Key& key, const Choice& choice) {
  choices_[key] = choice;
  std::error_code ec;
  const auto dir = std::filesystem::path(path_).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream out(path_, std::ios::app);
  if (out << format_line(key, choice) << "\n") return;
  if (!warned_)
    std::cerr << "warning: cutlass_gemm: cannot write " << path_
              << " (set STUDY_CUTLASS_CACHE): each process searches its shapes again\n";
  warned_ = true;
}

std::string CutlassCache::format_line(const Key& key, const Choice& c) {
  std::ostringstream s;
  s << key.gpu << '\t' << key.m << '\t' << key.n << '\t' << key.k << '\t' << activation_field(key) << '\t'
    << (key.residual ? 1 : 0) << '\t' << c.kernel << '\t' << c.raster << '\t' << c.swizzle << '\t' << c.us << '\t' << key.candidates;
  return s.str();
}

bool CutlassCache::parse_line(const std::string& line, Key& key, Choice& c) {
  std::vector<std::string> f;
  std::stringstream s(line);
  for (std::string field; std::getline(s, field, '\t');) f.push_back(field);
  if (f.size() != 11) return false;
  try {
    Key k;
    Choice ch;
    std::size_t used = 0;
    auto integer = [&used](const std::string& t) {
      const int v = std::stoi(t, &used);
      if (used != t.size()) throw std::invalid_argument(t);
      return v;
    };
    k.gpu = f[0];
    k.m = integer(f[1]);
    k.n = integer(f[2]);
    k.k = integer(f[3]);
    if (!parse_activation(f[4], k)) return false;
    const int residual = integer(f[5]);
    k.residual = residual == 1;
    ch.kernel = f[6];
    ch.raster = integer(f[7]);
    ch.swizzle = integer(f[8]);
    ch.us = std::stof(f[9]);
    k.candidates = f[10];
    if (k.gpu.empty() || k.candidates.empty() || k.m <= 0 || k.n <= 0 || k.k <= 0 ||
        (residual != 0 && residual != 1) || ch.kernel.empty() || (ch.raster != 0 && ch.raster != 1) ||
        ch.swizzle < 1)
      return false;
    key = k;
    c = ch;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

// What every call must satisfy, whichever kernel runs it.
void validate(const GemmShape& s, const GemmOperands& op, bool ln = false) {
  if (const auto why = unavailable(); !why.empty()) throw StudyError(ErrorKind::Library, "cutlass_gemm: " + why);
  if (s.m <= 0 || s.n <= 0 || s.k <= 0)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: sizes must be positive, got " + shape_text(s));
  if (!op.x || !op.w || !op.y || (!op.bias && !ln))
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: x, w, y and bias are required");
  if (op.residual == op.y)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: the residual must not be the output buffer");
  for (const void* p : {static_cast<const void*>(op.x), static_cast<const void*>(op.w),
                        static_cast<const void*>(op.y), static_cast<const void*>(op.bias),
                        static_cast<const void*>(op.residual)})
    if (p && !aligned16(p))
      throw StudyError(ErrorKind::Usage, "cutlass_gemm: every operand must be 16-byte aligned (TMA)");
}

// The plan of l's key (searched or read from the cache on first use), then the launch.
void run_planned(Key key, const std::vector<KernelEntry>& kernels, Launch l, cudaStream_t stream, bool pdl) {
  Layer& lay = layer();
  key.candidates = fingerprint(kernels);
  auto it = lay.plans.find(key);
  if (it == lay.plans.end()) {
    Plan plan;
    const auto cached = lay.cache.find(key);
    const KernelEntry* k = cached ? find_kernel(kernels, cached->kernel) : nullptr;
    if (k) {
      l.raster = cached->raster;
      l.swizzle = cached->swizzle;
    }
    if (k && k->implementable(l)) {
      lay.prepare(*k);
      plan = {k, *cached};
      lay.log.push_back(describe(key, plan.choice, "cached"));
    } else {
      plan = lay.search(key, kernels, l, stream);
      lay.log.push_back(describe(key, plan.choice, "searched"));
    }
    it = lay.plans.emplace(key, plan).first;
  }
  l.raster = it->second.choice.raster;
  l.swizzle = it->second.choice.swizzle;
  CUDA_CHECK(it->second.kernel->run(l, stream, pdl));
}

}  // namespace

void run(const GemmShape& s, Activation act, const GemmOperands& op, cudaStream_t stream, const RunOptions& opt) {
  validate(s, op);
  Layer& lay = layer();
  const bool residual = op.residual != nullptr;
  // The exact GELU has no cuBLASLt candidate: its key records that none took part.
  const bool cublaslt = opt.cublaslt && cublaslt_has(act);
  run_planned({lay.gpu, s.m, s.n, s.k, act, residual, /*ln=*/false, /*fp8=*/false, false, cublaslt, {}},
              candidates(act, residual, cublaslt, opt.small_m), {s, op, 0, 1, lay.sms, {}, opt.cublaslt, {}, nullptr},
              stream, opt.pdl);
}

void run_ln_folded(const GemmShape& s, Activation act, const GemmOperands& op, const LnFold& ln, cudaStream_t stream,
                   const RunOptions& opt) {
  validate(s, op, /*ln=*/true);
  if (opt.cublaslt) throw StudyError(ErrorKind::Usage, "cutlass_gemm: a folded LayerNorm has no cuBLASLt candidate");
  if (op.residual) throw StudyError(ErrorKind::Usage, "cutlass_gemm: a folded LayerNorm takes no residual");
  if (!ln.row_mean || !ln.row_rstd || !ln.col_sum || !ln.col_bias)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: a folded LayerNorm needs its four vectors");
  for (const void* p : {static_cast<const void*>(ln.col_sum), static_cast<const void*>(ln.col_bias)})
    if (!aligned16(p)) throw StudyError(ErrorKind::Usage, "cutlass_gemm: the per-column vectors must be 16-byte aligned");
  Layer& lay = layer();
  run_planned({lay.gpu, s.m, s.n, s.k, act, false, /*ln=*/true, /*fp8=*/false, false, false, {}},
              ln_kernels_for(act), {s, op, 0, 1, lay.sms, ln, nullptr, {}, nullptr}, stream, opt.pdl);
}

namespace {

// What every FP8 call must satisfy, whichever kernel runs it.
void validate_fp8(const GemmShape& s, Epilogue e, const Fp8Operands& op) {
  if (const auto why = unavailable(); !why.empty()) throw StudyError(ErrorKind::Library, "cutlass_gemm: " + why);
  if (s.m <= 0 || s.n <= 0 || s.k <= 0)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: sizes must be positive, got " + shape_text(s));
  if (s.n % 16 || s.k % 16)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: FP8 needs n and k multiples of 16 (16-byte rows), got " +
                                           shape_text(s));
  if (!op.x || !op.x_scale || !op.w || !op.w->q.get() || !op.w->scale.get() || !op.bias)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: FP8 needs x, its scale, w with its scale, and bias");
  if (op.w->scaling != fp8::Scaling::Tensor)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: the FP8 kernels take per-tensor weight scales only");
  if (!op.y == !op.y8) throw StudyError(ErrorKind::Usage, "cutlass_gemm: FP8 writes one output: y (fp16) or y8 (E4M3)");
  if (op.y8 && (!op.y_inv_scale || op.residual))
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: an FP8 GEMM's E4M3 output takes y_inv_scale and no residual");
  if (e == Epilogue::GeluBias && !op.y8)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: FP8 bias + GELU writes E4M3 (y8), not fp16");
  if (op.residual && op.residual == op.y)
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: the residual must not be the output buffer");
  for (const void* p : {static_cast<const void*>(op.x), static_cast<const void*>(op.w->q.get()),
                        static_cast<const void*>(op.y), static_cast<const void*>(op.y8),
                        static_cast<const void*>(op.bias), static_cast<const void*>(op.residual)})
    if (p && !aligned16(p))
      throw StudyError(ErrorKind::Usage, "cutlass_gemm: every operand must be 16-byte aligned (TMA)");
}

}  // namespace

void run_fp8(const GemmShape& s, Epilogue e, const Fp8Operands& op, cudaStream_t stream, const Fp8RunOptions& opt) {
  validate_fp8(s, e, op);
  Layer& lay = layer();
  const bool residual = op.residual != nullptr, cublaslt = opt.cublaslt != nullptr;
  const bool e4m3_out = op.y8 != nullptr;
  Key key{lay.gpu, s.m, s.n, s.k, e == Epilogue::GeluBias ? Activation::GeluTanh : Activation::None,
          residual, /*ln=*/false, /*fp8=*/true, e4m3_out, cublaslt, {}};
  Launch l{s, {}, 0, 1, lay.sms, {}, nullptr, op, opt.cublaslt};
  run_planned(key, fp8_candidates(e, residual, e4m3_out, cublaslt), l, stream, opt.pdl);
}

void run_fp8_kernel(const Choice& c, const GemmShape& s, Epilogue e, const Fp8Operands& op, cudaStream_t stream) {
  validate_fp8(s, e, op);
  Layer& lay = layer();
  const KernelEntry* k = find_kernel(fp8_kernels_for(e, op.residual != nullptr, op.y8 != nullptr), c.kernel);
  if (!k) throw StudyError(ErrorKind::Usage, "cutlass_gemm: no compiled FP8 kernel named '" + c.kernel + "'");
  const Launch l{s, {}, c.raster, c.swizzle, lay.sms, {}, nullptr, op, nullptr};
  if (!k->implementable(l))
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: " + c.kernel + " cannot run " + shape_text(s));
  lay.prepare(*k);
  CUDA_CHECK(k->run(l, stream, false));
}

void run_kernel(const Choice& c, const GemmShape& s, Activation act, const GemmOperands& op, cudaStream_t stream,
                const LnFold* ln) {
  validate(s, op, ln != nullptr);
  Layer& lay = layer();
  const KernelEntry* k =
      find_kernel(ln ? ln_kernels_for(act) : candidates(act, op.residual != nullptr, false, /*small_m=*/true), c.kernel);
  if (!k) throw StudyError(ErrorKind::Usage, "cutlass_gemm: no compiled kernel named '" + c.kernel + "'");
  const Launch l{s, op, c.raster, c.swizzle, lay.sms, ln ? *ln : LnFold{}, nullptr, {}, nullptr};
  if (!k->implementable(l))
    throw StudyError(ErrorKind::Usage, "cutlass_gemm: " + c.kernel + " cannot run " + shape_text(s));
  lay.prepare(*k);
  CUDA_CHECK(k->run(l, stream, false));
}

std::vector<std::string> choices() {
  // Asking makes no layer: a process that never used it has nothing to say.
  const auto it = layers().find(current_device());
  return it == layers().end() ? std::vector<std::string>{} : it->second->log;
}

namespace {
std::vector<std::string> names_of(const std::vector<KernelEntry>& kernels) {
  std::vector<std::string> names;
  for (const auto& k : kernels) names.emplace_back(k.name);
  return names;
}
}  // namespace

std::vector<std::string> kernel_names(Activation act, bool residual) { return names_of(kernels_for(act, residual)); }

std::vector<std::string> small_m_kernel_names(Activation act, bool residual) {
  return names_of(detail::kernels_small_m(act, residual));
}

std::vector<std::string> ln_kernel_names(Activation act) { return names_of(ln_kernels_for(act)); }

std::vector<std::string> fp8_kernel_names(Epilogue e, bool residual, bool e4m3_out) {
  return names_of(fp8_kernels_for(e, residual, e4m3_out));
}

}  // namespace study::cutlass_gemm
