// v1_smem_tiling: one warp per 16 query rows; K and V tiles of 64 keys staged in
// shared memory and shared by the warp's rows, scores and P V on CUDA cores (tiled.cuh). The
// tile loader gives consecutive threads consecutive rows, one element each: uncoalesced.
#include "attention/tiled.cuh"

STUDY_TILED_VERSION(v1_smem_tiling, 1, Scalar, Simt, Rows)
