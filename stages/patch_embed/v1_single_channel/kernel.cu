// v1_single_channel: the smallest unit of work per launch. One kernel of 16 threads per
// (image, out channel, patch, in channel, patch row) computes one 16-wide dot product of an
// image row segment with a weight row and adds it to an fp32 running sum; the host waits for
// every launch before the next. No preprocessing: the kernel reads the NCHW image in place.
#include "harness/check.hpp"
#include "patch_embed/kernels.cuh"

namespace patch_embed {
namespace {

constexpr int kSteps = kChannels * kPatch;  // (in channel, patch row) launches per output

// Step 0 starts the sum with the bias, the last step adds the position embedding and writes
// the fp16 output; in between the sum lives in fp32 scratch, one float per output element.
__global__ void row_dot_kernel(const __half* __restrict__ image_row, const __half* __restrict__ w_row,
                               const __half* __restrict__ bias, const __half* __restrict__ pos,
                               float* __restrict__ acc, __half* __restrict__ out, bool first, bool last) {
  float x = __half2float(image_row[threadIdx.x]) * __half2float(w_row[threadIdx.x]);
  for (int off = 8; off > 0; off >>= 1) x += __shfl_down_sync(0x0000ffffu, x, off, kPatch);
  if (threadIdx.x == 0) {
    const float sum = (first ? __half2float(*bias) : *acc) + x;
    if (last)
      *out = __float2half(sum + __half2float(*pos));
    else
      *acc = sum;
  }
}

std::size_t scratch(const Problem& p) {
  return static_cast<std::size_t>(p.batch) * patches_per_image(p) * p.hidden * sizeof(float);
}

std::string supports(const Problem& p) { return check_common(p); }

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  launch_cls_rows(p, a, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const int side = p.image_size / kPatch, P = patches_per_image(p), T = tokens(p);
  const std::size_t S = static_cast<std::size_t>(p.image_size);
  float* acc = static_cast<float*>(a.scratch);
  for (int b = 0; b < p.batch; ++b)
    for (int o = 0; o < p.hidden; ++o)
      for (int patch = 0; patch < P; ++patch) {
        const int py = patch / side, px = patch % side;
        const std::size_t out_idx = (static_cast<std::size_t>(b) * T + 1 + patch) * p.hidden + o;
        float* sum = acc + (static_cast<std::size_t>(b) * P + patch) * p.hidden + o;
        for (int step = 0; step < kSteps; ++step) {
          const int c = step / kPatch, ky = step % kPatch;
          const __half* row = a.images + ((static_cast<std::size_t>(b) * kChannels + c) * S + py * kPatch + ky) * S +
                              px * kPatch;
          const __half* w = a.conv_w + static_cast<std::size_t>(o) * kPatchElems + (c * kPatch + ky) * kPatch;
          row_dot_kernel<<<1, kPatch, 0, stream>>>(row, w, a.conv_b + o,
                                                   a.pos_embed + static_cast<std::size_t>(1 + patch) * p.hidden + o,
                                                   sum, a.out + out_idx, step == 0, step == kSteps - 1);
          LAUNCH_CHECK();
          // The step of the seed's host-driven version: the host waits for every kernel.
          CUDA_CHECK(cudaStreamSynchronize(stream));
        }
      }
}

double launches(const Problem& p) {
  return 1.0 + static_cast<double>(p.batch) * p.hidden * patches_per_image(p) * kSteps;
}

}  // namespace

extern const Version v1_single_channel = [] {
  Version v = study::make_version<Version>("v1_single_channel", supports, launch);
  // Host syncs inside (one after every launch), and millions of launches at ViT sizes; a launch
  // plus a host wait costs about 5-10 us: 2e5 launches are a few seconds per call.
  v.not_capturable(launches, launches, 2e5);
  v.scratch = scratch;
  return v;
}();

}  // namespace patch_embed
