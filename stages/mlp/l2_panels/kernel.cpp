// l2_panels: half_gelu_epilogue's two GEMMs (CUTLASS, fc1's bias + tanh GELU in fp16 pairs, fc2
// with bias and the residual, cuBLASLt a candidate of each search) run panel by panel over the
// rows: fc1 for one panel of rows, then fc2 for the same rows, while the panel's hidden activation
// is still in L2, instead of writing all of h to DRAM and reading it back (NOTES.md). Every panel
// reuses the first rows of h, so the hot region stays in L2. Two launches per panel; one panel,
// as half_gelu_epilogue, where all of h fits in half the L2 already.
#include <algorithm>
#include "gemm/cutlass_gemm.hpp"
#include "harness/gpu.hpp"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

namespace cg = study::cutlass_gemm;

constexpr int kTileRows = 128;  // the M of the GEMMs' large tiles

// Rows per panel: whole waves of fc2's 128 x 128 tiles over the SMs (fc2 has the fewer output
// tiles per row: hidden / 128), so that each panel's GEMMs fill the GPU; at ViT-B on 132 SMs 2816
// rows (fc2: 132 tiles, one wave; fc1: 264 tiles of 128 x 256, two), whose h (17.3 MB) leaves the
// two weight matrices (9.4 MB) room in a 50 MB L2. Grown by waves until the panel's h would pass
// half the L2.
int panel_rows(const Problem& p) {
  const int sms = study::sm_count(), l2 = study::l2_bytes();
  const long long h_row = 2LL * p.mlp_hidden, budget = l2 / 2;
  if (static_cast<long long>(p.rows) * h_row <= budget) return p.rows;  // all of h fits already
  const int n_tiles = std::max(1, (p.hidden + kTileRows - 1) / kTileRows);
  const int wave = kTileRows * ((sms + n_tiles - 1) / n_tiles);
  int rows = wave;
  while (static_cast<long long>(rows + wave) * h_row <= budget) rows += wave;
  return std::min(rows, p.rows);
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cg::RunOptions opt;
  opt.pdl = a.pdl;
  opt.cublaslt = a.gemm;
  const int panel = panel_rows(p);
  const __half* residual = residual_of(a);
  for (int r0 = 0; r0 < p.rows; r0 += panel) {
    const int m = std::min(panel, p.rows - r0);
    const std::size_t at = static_cast<std::size_t>(r0) * p.hidden;
    cg::run({m, p.mlp_hidden, p.hidden}, cg::Activation::GeluTanhF16, {a.x + at, a.fc1_w, a.h, a.fc1_b}, stream, opt);
    cg::run({m, p.hidden, p.mlp_hidden}, cg::Activation::None, {a.h, a.fc2_w, a.y + at, a.fc2_b, residual + at},
            stream, opt);
  }
}

}  // namespace

// half_gelu_epilogue's arithmetic, row by row: its tolerance.
extern const Version l2_panels{{"l2_panels", cutlass_supports, launch, cg::unavailable}, kTanhGeluRelTol};

}  // namespace mlp
