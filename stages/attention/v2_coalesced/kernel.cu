// v2_coalesced: v1 with the coalesced loader: 16 bytes per thread, 8 threads per 128-byte
// row of Q, K or V.
#include "attention/tiled.cuh"

STUDY_TILED_VERSION(v2_coalesced, 1, Vector, Simt, Rows)
