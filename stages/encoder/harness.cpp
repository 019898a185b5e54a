#include "encoder/harness.hpp"
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sys/stat.h>
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/random.hpp"

namespace encoder {

study::Tolerance logits_tolerance(const std::vector<float>& ref) {
  return {kLogitsRelTol, 5e-2 * study::rms(ref), 1e-2};
}

study::Tolerance stream_tolerance(const std::vector<float>& ref) {
  return {kStreamRelTol, 1e-2 * study::rms(ref), 1e-2};
}

study::Tolerance fp8_stream_tolerance(const std::vector<float>& ref) { return fp8_logits_tolerance(ref); }

study::Tolerance fp8_logits_tolerance(const std::vector<float>& ref) {
  study::Tolerance t = logits_tolerance(ref);
  // Element by element, 10x the fp16 bound: atol 0.5 of the logits' RMS, ~5 standard deviations
  // of an error whose rel L2 is 0.10 (measured at 12 blocks); one image's logits in another's
  // place miss by ~1.4 RMS on average.
  return {kFp8LogitsRelTol, 10 * t.atol, 10 * t.rtol};
}

std::vector<float> calibration_images(int image_size, std::uint64_t seed) {
  return make_images(kCalibrationImages, image_size, seed ^ 0xca1b5eedull);
}

namespace {
// The calibration images on the device (calibration_images(seed) when `images` is empty), and
// the problem at their batch.
std::pair<Problem, study::DeviceBuffer<__half>> calibration_batch(const Problem& p, std::vector<float> images,
                                                                  std::uint64_t seed) {
  if (images.empty()) images = calibration_images(p.image_size, seed);
  const std::size_t per = static_cast<std::size_t>(study::kChannels) * p.image_size * p.image_size;
  Problem cp = p;
  cp.batch = static_cast<int>(images.size() / per);
  return {cp, study::to_device(study::to_half(images))};
}
}  // namespace

void calibrate_if_fp8(const Composition& c, const Problem& p, DeviceWeights& w, std::vector<float> images,
                      std::uint64_t seed) {
  if (!c.fp8()) return;
  const auto [cp, d] = calibration_batch(p, std::move(images), seed);
  calibrate_fp8(cp, w, d.get());
}

void calibrate_if_fp8(Session& s, const Problem& p, std::vector<float> images, std::uint64_t seed) {
  if (!s.composition().fp8()) return;
  const auto [cp, d] = calibration_batch(p, std::move(images), seed);
  s.calibrate(p.image_size, d.get(), cp.batch, nullptr);
}

std::vector<float> make_images(int batch, int image_size, std::uint64_t seed) {
  const std::size_t per = static_cast<std::size_t>(study::kChannels) * image_size * image_size;
  std::vector<float> images(per * batch);
  for (int i = 0; i < batch; ++i) {
    const auto one = study::random_normal(per, seed * 1000003ull + static_cast<std::uint64_t>(i));
    std::copy(one.begin(), one.end(), images.begin() + static_cast<std::ptrdiff_t>(per * i));
  }
  study::round_to_half(images);
  return images;
}

ref::VitWeights make_weights(const Problem& p, std::uint64_t seed, const std::string& path) {
  ref::VitWeights w = path.empty() ? ref::random_vit_weights(p.model, p.image_size, p.num_classes, seed)
                                   : ref::load_vit_safetensors(path, p.model, p.image_size, p.num_classes);
  for (auto* t : {&w.patch_w, &w.patch_b, &w.cls_token, &w.pos_embed, &w.norm_g, &w.norm_b, &w.head_w, &w.head_b})
    study::round_to_half(*t);
  for (auto& b : w.blocks)
    for (auto* t : {&b.ln1_g, &b.ln1_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.ln2_g, &b.ln2_b, &b.fc1_w,
                    &b.fc1_b, &b.fc2_w, &b.fc2_b})
      study::round_to_half(*t);
  return w;
}

std::string weights_id(std::uint64_t seed, const std::string& path) {
  if (path.empty()) return "seed=" + std::to_string(seed);
  struct stat st {};
  const long long size = stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  return "file=" + path + ":" + std::to_string(size);
}

namespace {

// One file per image: the key on the first line (checked on read, so a hash collision or a
// stale file is recomputed, never trusted), then the logits as raw floats.
std::string cache_file(const std::string& dir, const std::string& key) {
  char name[32];
  std::snprintf(name, sizeof name, "%016zx.logits", std::hash<std::string>{}(key));
  return dir + "/" + name;
}

bool read_cached(const std::string& file, const std::string& key, std::size_t n, std::vector<float>& out) {
  std::ifstream in(file, std::ios::binary);
  std::string line;
  if (!in || !std::getline(in, line) || line != key) return false;
  out.resize(n);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n * sizeof(float)));
  return static_cast<std::size_t>(in.gcount()) == n * sizeof(float);
}

void write_cached(const std::string& dir, const std::string& file, const std::string& key,
                  const std::vector<float>& v) {
  ::mkdir(dir.c_str(), 0755);  // an existing folder is fine; a failure shows at open
  const std::string tmp = file + ".tmp";
  std::ofstream out(tmp, std::ios::binary);
  if (!out) return;  // a cache that cannot be written only costs time
  out << key << '\n';
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  out.close();
  if (out) std::rename(tmp.c_str(), file.c_str());
}

}  // namespace

std::vector<std::vector<float>> reference_logits(const ref::VitWeights& w, const std::vector<float>& images,
                                                 const std::vector<int>& which, const std::string& weights,
                                                 std::uint64_t image_seed, const std::string& cache_dir) {
  const std::size_t per = static_cast<std::size_t>(study::kChannels) * w.image_size * w.image_size;
  std::vector<std::vector<float>> out;
  for (int i : which) {
    const std::string key = "vit " + w.cfg.name + " hidden=" + std::to_string(w.cfg.hidden) +
                            " layers=" + std::to_string(w.cfg.layers) + " image=" + std::to_string(w.image_size) +
                            " classes=" + std::to_string(w.num_classes) + " " + weights +
                            " image_seed=" + std::to_string(image_seed) + " index=" + std::to_string(i);
    std::vector<float> logits;
    const std::string file = cache_dir.empty() ? std::string() : cache_file(cache_dir, key);
    if (file.empty() || !read_cached(file, key, static_cast<std::size_t>(w.num_classes), logits)) {
      const std::vector<float> one(images.begin() + static_cast<std::ptrdiff_t>(per * i),
                                   images.begin() + static_cast<std::ptrdiff_t>(per * (i + 1)));
      logits = ref::vit_forward(one, 1, w);
      if (!file.empty()) write_cached(cache_dir, file, key, logits);
    }
    out.push_back(std::move(logits));
  }
  return out;
}

}  // namespace encoder
