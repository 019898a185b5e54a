// LayerNorm family contract: y = (x - mean) / sqrt(var + eps) * gamma + beta per row.
// x, y: row-major [rows, hidden] fp16; gamma, beta: [hidden] fp16; statistics in fp32.
// Every version implements exactly this; bench, test and encoder swap versions by name.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "device/l2_prefetch.hpp"
#include "harness/version.hpp"

namespace layernorm {

struct Problem {
  int rows = 0;
  int hidden = 0;
  float eps = 1e-6f;  // timm ViT
};

struct Args {
  const __half* x;
  const __half* gamma;
  const __half* beta;
  __half* y;
  // Bytes a later kernel will read (the encoder: the next block's weights): the versions that
  // carry it (carries_prefetch) request them into L2 while they normalize (common/device/l2_prefetch.hpp),
  // so that they arrive without a kernel of their own; the others ignore it. Changes no output;
  // empty by default.
  study::ByteRange prefetch{};
};

// The shared version record (common/harness/version.hpp); LayerNorm needs no fields of its own.
using Version = study::VersionRecord<Problem, Args>;

// Whether a version carries Args::prefetch (v5_unrolled alone: the earlier versions are frozen as
// measured, and the encoder refuses an L2 prefetch on a LayerNorm that does not carry it).
bool carries_prefetch(const Version& v);

// All versions in ladder order; find_version throws StudyError(Usage) for an unknown name.
const std::vector<Version>& versions();
const Version& find_version(const std::string& name);

// Fewest bytes any version must move: read x, write y, read gamma and beta once.
double bytes(const Problem& p);
// Arithmetic per element: mean (1), variance (3), normalize + affine (4).
double flops(const Problem& p);

// Checks every version shares: positive sizes.
std::string check_common(const Problem& p);

}  // namespace layernorm
