// v6_coalesced_k: v5 without the transposing K loader: WMMA reads K [key][d] as a
// column-major B operand, so K is loaded with the coalesced 16-byte loader like Q and V.
#include "attention/tiled.cuh"

STUDY_TILED_VERSION(v6_coalesced_k, 8, Vector, Wmma, Rows)
