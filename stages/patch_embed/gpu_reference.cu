// The patch-embedding reference on the GPU, for the images the CPU reference does not check:
// one thread per output element, mirroring ref::patch_embed (the cls row is cls_token +
// pos_embed[0] in fp32; a patch row sums the 16x16x3 convolution in double from the bias and
// adds the position embedding before the one rounding to fp32), so that it is easy to read
// and agrees with the CPU reference to fp32 rounding. Speed is not its point.
#include <algorithm>
#include <cmath>
#include "harness/gpu.hpp"
#include "patch_embed/harness.hpp"

namespace patch_embed {
namespace {

constexpr int kThreads = 256;

__device__ double load(__half v) { return static_cast<double>(__half2float(v)); }

// Output elements [0, n) of images b0, b0 + 1, ...: row r = image * tokens + token, column o.
__global__ void patch_embed_reference(const __half* images, const __half* w, const __half* bias,
                                      const __half* cls, const __half* pos, int b0, int image_size,
                                      int hidden, std::size_t n, float* out) {
  const int side = image_size / kPatch, tokens = 1 + side * side;
  const std::size_t S = static_cast<std::size_t>(image_size);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int o = static_cast<int>(i % hidden);
    const std::size_t row = i / hidden;
    const int t = static_cast<int>(row % tokens);
    const std::size_t b = b0 + row / tokens;
    if (t == 0) {
      out[i] = __half2float(cls[o]) + __half2float(pos[o]);
      continue;
    }
    const int py = (t - 1) / side, px = (t - 1) % side;
    double acc = load(bias[o]);
    for (int c = 0; c < kChannels; ++c)
      for (int ky = 0; ky < kPatch; ++ky)
        for (int kx = 0; kx < kPatch; ++kx)
          acc += load(images[((b * kChannels + c) * S + py * kPatch + ky) * S + px * kPatch + kx]) *
                 load(w[((static_cast<std::size_t>(o) * kChannels + c) * kPatch + ky) * kPatch + kx]);
    out[i] = static_cast<float>(acc + load(pos[static_cast<std::size_t>(t) * hidden + o]));
  }
}

}  // namespace

std::vector<float> gpu_reference(const Problem& p, const DeviceProblem& dev) {
  const std::size_t per_image = static_cast<std::size_t>(tokens(p)) * p.hidden;
  const int chunk = static_cast<int>(
      std::min<double>(p.batch, std::max(1.0, std::floor(kGpuReferenceElems / static_cast<double>(per_image)))));
  study::DeviceBuffer<float> out(chunk * per_image);
  std::vector<float> host(static_cast<std::size_t>(p.batch) * per_image);
  for (int b0 = 0; b0 < p.batch; b0 += chunk) {
    const std::size_t n = std::min(chunk, p.batch - b0) * per_image;
    const std::size_t blocks = std::min<std::size_t>((n + kThreads - 1) / kThreads, 1u << 20);
    patch_embed_reference<<<static_cast<unsigned>(blocks), kThreads>>>(
        dev.images.get(), dev.conv_w.get(), dev.conv_b.get(), dev.cls_token.get(), dev.pos_embed.get(), b0,
        p.image_size, p.hidden, n, out.get());
    LAUNCH_CHECK();
    CUDA_CHECK(cudaMemcpy(host.data() + b0 * per_image, out.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return host;
}

}  // namespace patch_embed
