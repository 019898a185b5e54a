// v5_large_tile: v4 with 8 warps per block (128 query rows): each K/V tile serves
// 8 warps.
#include "attention/tiled.cuh"

STUDY_TILED_VERSION(v5_large_tile, 8, Vector, Wmma, Transposed)
