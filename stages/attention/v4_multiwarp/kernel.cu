// v4_multiwarp: v3 with 4 warps per block (64 query rows): each K/V tile loaded
// into shared memory serves 4 warps instead of 1.
#include "attention/tiled.cuh"

STUDY_TILED_VERSION(v4_multiwarp, 4, Vector, Wmma, Transposed)
