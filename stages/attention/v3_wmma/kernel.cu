// v3_wmma: v2 with Q K^T on tensor cores (WMMA 16x16x16, fp32 accumulators). K is
// stored transposed, as the row-major B operand, by a loader with one thread per key: its
// global loads are strided again. P V stays on CUDA cores.
#include "attention/tiled.cuh"

STUDY_TILED_VERSION(v3_wmma, 1, Vector, Wmma, Transposed)
