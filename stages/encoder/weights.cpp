// All weights in one device buffer (encoder.hpp, DeviceWeights).
#include <algorithm>
#include "encoder/encoder.hpp"
#include "harness/check.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

namespace encoder {

namespace {
// Weights are packed at 256-byte boundaries: cuBLASLt and the vector loads of every family
// get the alignment cudaMalloc would give each tensor on its own.
constexpr std::size_t kAlignElems = 128;
}  // namespace

DeviceWeights::DeviceWeights(const ref::VitWeights& w) {
  std::vector<const std::vector<float>*> tensors = {&w.patch_w, &w.patch_b, &w.cls_token, &w.pos_embed,
                                                    &w.norm_g,  &w.norm_b,  &w.head_w,    &w.head_b};
  for (const auto& b : w.blocks)
    for (auto* t : {&b.ln1_g, &b.ln1_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.ln2_g, &b.ln2_b,
                    &b.fc1_w, &b.fc1_b, &b.fc2_w, &b.fc2_b})
      tensors.push_back(t);
  std::vector<std::size_t> offset;
  std::size_t total = 0;
  for (auto* t : tensors) {
    offset.push_back(total);
    total += (t->size() + kAlignElems - 1) / kAlignElems * kAlignElems;
  }
  std::vector<__half> host(total, __float2half(0.f));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto h = study::to_half(*tensors[i]);
    std::copy(h.begin(), h.end(), host.begin() + static_cast<std::ptrdiff_t>(offset[i]));
  }
  auto buffer = std::make_shared<study::DeviceBuffer<__half>>(total);
  CUDA_CHECK(cudaMemcpy(buffer->get(), host.data(), buffer->bytes(), cudaMemcpyHostToDevice));
  buffer_ = buffer;
  const __half* base = buffer->get();
  std::size_t k = 0;
  for (const __half** p : {&patch_w, &patch_b, &cls_token, &pos_embed, &norm_g, &norm_b, &head_w, &head_b})
    *p = base + offset[k++];
  for (std::size_t b = 0; b < w.blocks.size(); ++b) {
    BlockView v{};
    for (const __half** p : {&v.ln1_g, &v.ln1_b, &v.qkv_w, &v.qkv_b, &v.proj_w, &v.proj_b, &v.ln2_g, &v.ln2_b,
                             &v.fc1_w, &v.fc1_b, &v.fc2_w, &v.fc2_b})
      *p = base + offset[k++];
    blocks.push_back(v);
  }
}

namespace {
// [from, to) of the packed weights; `to` is the next tensor group's first tensor, or null for the
// end of the buffer.
study::ByteRange packed_range(const __half* from, const __half* to, const study::DeviceBuffer<__half>& buffer) {
  const char* end = to ? reinterpret_cast<const char*>(to) : reinterpret_cast<const char*>(buffer.get()) + buffer.bytes();
  return {from, static_cast<std::size_t>(end - reinterpret_cast<const char*>(from))};
}
}  // namespace

study::ByteRange DeviceWeights::block_span(int i) const {
  return packed_range(blocks.at(i).ln1_g, i + 1 < static_cast<int>(blocks.size()) ? blocks[i + 1].ln1_g : nullptr,
                      *buffer_);
}

study::ByteRange DeviceWeights::head_span() const {
  return packed_range(norm_g, blocks.empty() ? nullptr : blocks[0].ln1_g, *buffer_);
}

DeviceWeights DeviceWeights::at_image_size(const std::vector<float>& pos) const {
  DeviceWeights w = *this;
  w.fp8_calibration = {};
  auto buffer = std::make_shared<study::DeviceBuffer<__half>>(pos.size());
  const std::vector<__half> h = study::to_half(pos);
  CUDA_CHECK(cudaMemcpy(buffer->get(), h.data(), buffer->bytes(), cudaMemcpyHostToDevice));
  w.pos_buffer_ = buffer;
  w.pos_embed = buffer->get();
  return w;
}

}  // namespace encoder
