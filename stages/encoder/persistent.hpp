// Every encoder block of a forward in one persistent kernel (the e13_persistent step): one CTA
// per SM, launched cooperatively so all of them are resident, walks the blocks' phases
//   QKV (LN1 in its prologue) | attention | projection (+bias +residual) |
//   fc1 (LN2 in its prologue, +bias, GELU) | fc2 (split-K, +bias +residual)
// with a grid-wide barrier between phases instead of a kernel boundary. Each phase is a list of
// work items (64 x 96 output tiles, or 64 query rows of one head) dealt out to the CTAs in a
// fixed order, so the forward is deterministic. A CTA starts loading the weights of its next
// item before the barrier: they do not depend on the phase before. The residual stream stays
// fp16 in x, as in every other step; fc2's split-K partial sums are fp32, added in a fixed order
// by whichever CTA of a tile finishes last.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "encoder/encoder.hpp"
#include "harness/buffer.hpp"

namespace encoder::persistent {

// Why the kernel cannot run on this GPU (no cooperative launch); empty when it can.
std::string unavailable();
// Why it cannot compute `batch` images of p (head_dim 64, hidden a multiple of 64 up to 1024,
// MLP ratio 4, every key of a head in shared memory: at most kMaxTokens tokens); empty when it can.
constexpr int kMaxTokens = 832;
std::string refuses(const Problem& p, int batch);

// The kernel's scratch for one stream's share of the batch (fc2's partial sums, the tiles'
// arrival counters, the grid barrier) and the blocks' weight pointers on the device.
class Blocks {
 public:
  Blocks(const Problem& p, int batch, const std::vector<BlockView>& blocks);
  // x [rows, hidden] in (patch embedding's output) and out (the last block's); qkv, attn and h
  // are the block's intermediates [rows, 3 hidden], [rows, hidden], [rows, 4 hidden].
  void run(__half* x, __half* qkv, __half* attn, __half* h, cudaStream_t s) const;
  static std::size_t scratch_bytes(const Problem& p, int batch);
  // NaN into fc2's partial sums (each is written before it is read; the counters are not touched).
  void poison_scratch();

 private:
  Problem p_;
  int rows_ = 0, grid_ = 0;
  std::size_t smem_ = 0;
  study::DeviceBuffer<BlockView> layers_;
  study::DeviceBuffer<float> partial_;
  study::DeviceBuffer<unsigned> sync_;  // [0, 1]: the grid barrier; then one counter per fc2 tile
};

}  // namespace encoder::persistent
