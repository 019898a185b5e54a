// v3_streams' enqueue step, which v3_streams_graph captures into a CUDA graph.
#pragma once
#include "patch_embed/patch_embed.hpp"

namespace patch_embed {

// Patch-major copy and cls rows on `stream`, then one kernel per (image, out channel, patch)
// round-robin over problem.streams streams of Args::streams, joined back to `stream`. With a
// timeline, records an event before and after every kernel.
void v3_enqueue(const Problem& p, const Args& a, cudaStream_t stream);
// The two halves of v3_enqueue: the patch-major copy, and everything after it.
void v3_preprocess(const Problem& p, const Args& a, cudaStream_t stream);
void v3_compute(const Problem& p, const Args& a, cudaStream_t stream);
double v3_launches(const Problem& p);

}  // namespace patch_embed
