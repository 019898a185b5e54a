// Seeded random inputs, and fp16 round trips (references see exactly what the GPU sees).
#pragma once
#include <cstdint>
#include <cuda_fp16.h>
#include <vector>

namespace study {

std::vector<float> random_uniform(std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f);
std::vector<float> random_normal(std::size_t n, std::uint64_t seed, float mean = 0.f, float stddev = 1.f);

std::vector<__half> to_half(const std::vector<float>& x);
std::vector<float> to_float(const std::vector<__half>& x);
// x rounded to fp16 and back, in place.
void round_to_half(std::vector<float>& x);

// A fresh seed per test run (from STUDY_SEED when set, so a failure can be replayed).
std::uint64_t fresh_seed();

}  // namespace study
