// Launch-shape helpers shared by the LayerNorm versions.
#pragma once
#include <string>

namespace layernorm {

// Smallest power of two >= n, clamped to [32, 1024]: a block size for tree reductions.
inline int pow2_threads(int n) {
  int t = 32;
  while (t < n && t < 1024) t <<= 1;
  return t;
}

inline std::string need_even_hidden(int hidden) {
  return hidden % 2 ? "hidden " + std::to_string(hidden) + " is odd: half2 loads need an even hidden size"
                    : std::string();
}

}  // namespace layernorm
