// cpu_baseline: the convolution as sequential loops on one CPU core, fp32 accumulation: the
// baseline every GPU speedup of the ladder starts from. launch() wraps it in copies so that
// the tests check it like any other version; the bench times cpu_forward() alone.
#include <vector>
#include "harness/check.hpp"
#include "patch_embed/patch_embed.hpp"

namespace patch_embed {

void cpu_forward(const Problem& p, const HostArgs& a) {
  const int side = p.image_size / kPatch, T = tokens(p), H = p.hidden;
  const std::size_t S = static_cast<std::size_t>(p.image_size);
  std::vector<float> patch(kPatchElems);
  for (int b = 0; b < p.batch; ++b) {
    float* ob = a.out + static_cast<std::size_t>(b) * T * H;
    for (int o = 0; o < H; ++o) ob[o] = a.cls_token[o] + a.pos_embed[o];
    for (int py = 0; py < side; ++py)
      for (int px = 0; px < side; ++px) {
        // Gather the patch once (in the weight's [3, 16, 16] order) so the inner loop over
        // the 768 products reads two contiguous arrays.
        for (int c = 0; c < kChannels; ++c)
          for (int ky = 0; ky < kPatch; ++ky)
            for (int kx = 0; kx < kPatch; ++kx)
              patch[(c * kPatch + ky) * kPatch + kx] =
                  a.images[((static_cast<std::size_t>(b) * kChannels + c) * S + py * kPatch + ky) * S +
                           px * kPatch + kx];
        const int t = 1 + py * side + px;
        for (int o = 0; o < H; ++o) {
          const float* w = a.conv_w + static_cast<std::size_t>(o) * kPatchElems;
          float acc = 0.f;
          for (int k = 0; k < kPatchElems; ++k) acc += patch[k] * w[k];
          ob[static_cast<std::size_t>(t) * H + o] = acc + a.conv_b[o] + a.pos_embed[static_cast<std::size_t>(t) * H + o];
        }
      }
  }
}

namespace {

std::vector<float> fetch(const __half* d, std::size_t n) {
  std::vector<__half> h(n);
  CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(__half), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = __half2float(h[i]);
  return f;
}

std::string supports(const Problem& p) { return check_common(p); }

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  CUDA_CHECK(cudaStreamSynchronize(stream));  // inputs written on `stream` must be complete
  const std::size_t H = p.hidden, T = tokens(p);
  const auto images = fetch(a.images, static_cast<std::size_t>(p.batch) * kChannels * p.image_size * p.image_size);
  const auto w = fetch(a.conv_w, H * kPatchElems), b = fetch(a.conv_b, H), cls = fetch(a.cls_token, H),
             pos = fetch(a.pos_embed, T * H);
  std::vector<float> out(static_cast<std::size_t>(p.batch) * T * H);
  cpu_forward(p, {images.data(), w.data(), b.data(), cls.data(), pos.data(), out.data()});
  std::vector<__half> h(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) h[i] = __float2half(out[i]);
  CUDA_CHECK(cudaMemcpy(a.out, h.data(), h.size() * sizeof(__half), cudaMemcpyHostToDevice));
}

double macs(const Problem& p) { return static_cast<double>(p.batch) * patches_per_image(p) * p.hidden * kPatchElems; }
double no_launches(const Problem&) { return 0; }

}  // namespace

extern const Version cpu_baseline = [] {
  Version v = study::make_version<Version>("cpu_baseline", supports, launch);
  // About 1-2 G multiply-adds per second on one core: batch 256 at 224 px (3.0e10) takes
  // tens of seconds per call, which the bench still times (with few repeats); more is skipped.
  v.not_capturable(no_launches, no_launches, 3.2e10);
  v.on_host = true;
  v.work_unit = "multiply-adds";
  v.work = macs;
  return v;
}();

}  // namespace patch_embed
