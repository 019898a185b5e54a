// N fp16 values moved as one aligned vector access (N = 2, 4 or 8: 4-, 8- or 16-byte loads).
#pragma once
#include <cuda_fp16.h>
#include <cstdint>

namespace study {

template <int N> struct VecStorage;
template <> struct VecStorage<2> { using type = std::uint32_t; };
template <> struct VecStorage<4> { using type = uint2; };
template <> struct VecStorage<8> { using type = uint4; };

template <int N>
struct alignas(sizeof(typename VecStorage<N>::type)) HalfVec {
  __half v[N];

  __device__ __forceinline__ static HalfVec load(const __half* p) {
    HalfVec r;
    *reinterpret_cast<typename VecStorage<N>::type*>(r.v) =
        __ldg(reinterpret_cast<const typename VecStorage<N>::type*>(p));
    return r;
  }
  __device__ __forceinline__ void store(__half* p) const {
    *reinterpret_cast<typename VecStorage<N>::type*>(p) =
        *reinterpret_cast<const typename VecStorage<N>::type*>(v);
  }
  __device__ __forceinline__ float get(int i) const { return __half2float(v[i]); }
  __device__ __forceinline__ void set(int i, float x) { v[i] = __float2half_rn(x); }
};

}  // namespace study
