#include "patch_embed/harness.hpp"
#include <algorithm>
#include <cmath>
#include "harness/gpu.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

namespace patch_embed {

HostInputs make_inputs(const Problem& p, std::uint64_t seed) {
  const std::size_t H = p.hidden, T = tokens(p);
  HostInputs in;
  in.images = study::random_uniform(static_cast<std::size_t>(p.batch) * kChannels * p.image_size * p.image_size, seed);
  // Weight std 0.02 as timm's init would give a dot of 768 products a std of ~0.3; the
  // larger weights here keep outputs of order 1 so fp16 rounding is tested where it bites.
  in.conv_w = study::random_normal(H * kPatchElems, seed + 1, 0.f, 0.05f);
  in.conv_b = study::random_normal(H, seed + 2, 0.f, 0.5f);
  in.cls_token = study::random_normal(H, seed + 3, 0.f, 0.5f);
  in.pos_embed = study::random_normal(T * H, seed + 4, 0.f, 0.5f);
  for (auto* v : {&in.images, &in.conv_w, &in.conv_b, &in.cls_token, &in.pos_embed}) study::round_to_half(*v);
  return in;
}

DeviceProblem::DeviceProblem(const Problem& p, const Version& v, const HostInputs& in)
    : images(study::to_device(study::to_half(in.images))),
      conv_w(study::to_device(study::to_half(in.conv_w))),
      conv_b(study::to_device(study::to_half(in.conv_b))),
      cls_token(study::to_device(study::to_half(in.cls_token))),
      pos_embed(study::to_device(study::to_half(in.pos_embed))),
      out(static_cast<std::size_t>(p.batch) * tokens(p) * p.hidden),
      scratch(v.scratch ? v.scratch(p) : 0) {
  if (v.multi_stream) streams = std::make_unique<study::StreamSet>(p.streams);
  if (v.uses_gemm) gemm = std::make_unique<study::Gemm>();
}

Args DeviceProblem::args(Timeline* timeline) const {
  return {images.get(), conv_w.get(), conv_b.get(), cls_token.get(), pos_embed.get(), out.get(),
          scratch.get(), gemm.get(), streams.get(), timeline};
}

std::string CheckResult::summary() const {
  std::string s = cmp.summary() + (gpu_checked ? " over all " + std::to_string(images_total) + " images (" +
                                                     std::to_string(images_checked) + " also against the CPU reference)"
                                               : " over " + std::to_string(images_checked) + "/" +
                                                     std::to_string(images_total) + " images");
  if (nonfinite) s += "; " + std::to_string(nonfinite) + " NaN/Inf elements in the whole output";
  return s;
}

CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in, DeviceProblem& dev) {
  study::poison(dev.out);
  v.launch(p, dev.args(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = study::to_float(study::to_host(dev.out));

  CheckResult r;
  r.images_total = p.batch;
  for (float x : got)
    if (!std::isfinite(x)) ++r.nonfinite;
  std::vector<int> picked;
  if (p.batch <= 4) {
    for (int b = 0; b < p.batch; ++b) picked.push_back(b);
  } else {
    picked = {0, p.batch - 1};
  }
  r.images_checked = static_cast<int>(picked.size());
  const std::size_t image_elems = static_cast<std::size_t>(kChannels) * p.image_size * p.image_size;
  const std::size_t out_elems = static_cast<std::size_t>(tokens(p)) * p.hidden;
  std::vector<float> images, mine;
  for (int b : picked) {
    images.insert(images.end(), in.images.begin() + b * image_elems, in.images.begin() + (b + 1) * image_elems);
    mine.insert(mine.end(), got.begin() + b * out_elems, got.begin() + (b + 1) * out_elems);
  }
  std::vector<float> want;
  ref::patch_embed(images, r.images_checked, p.image_size, p.hidden, in.conv_w, in.conv_b, in.cls_token,
                   in.pos_embed, want);
  r.cmp = study::compare(mine, want, kTolerance);
  if (r.images_checked < p.batch && r.cmp.ok) {
    // A sample: every image against the GPU reference, itself checked on the sample.
    const std::vector<float> gref = gpu_reference(p, dev);
    std::vector<float> gref_picked;
    for (int b : picked)
      gref_picked.insert(gref_picked.end(), gref.begin() + b * out_elems, gref.begin() + (b + 1) * out_elems);
    r.cmp = study::compare_via_gpu_reference(got, gref, gref_picked, want, kTolerance, "patch-embedding", "images");
    r.gpu_checked = true;
  }
  return r;
}

study::MemoryNeed memory_need(const Problem& p, const Version& v, bool check) {
  const double image = static_cast<double>(p.batch) * kChannels * p.image_size * p.image_size;
  const double out = static_cast<double>(p.batch) * tokens(p) * p.hidden;
  const double weights = static_cast<double>(p.hidden) * (kPatchElems + 2 + tokens(p));
  const bool sampled = p.batch > 4;
  study::MemoryNeed m;
  m.device = (image + out + weights) * sizeof(__half) + static_cast<double>(v.scratch ? v.scratch(p) : 0);
  if (check && sampled) m.device += std::min(out, kGpuReferenceElems) * sizeof(float);
  const double inputs = (image + weights) * sizeof(float);
  // Pinned images and output of the routine, with the fp16 images staged beside them; the
  // CPU version holds its fp32 output instead.
  const double routine = v.on_host ? out * sizeof(float) : (2 * image + out) * sizeof(__half);
  // With check: the output in fp32 beside its fp16 copy, then the GPU reference's output.
  const double checking = check ? std::max(out * (sizeof(float) + sizeof(__half)),
                                           (sampled ? 2 : 1) * out * sizeof(float))
                                : 0;
  m.host = inputs + std::max(routine, checking);
  return m;
}

}  // namespace patch_embed
