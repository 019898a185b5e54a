#include "detail.hpp"
#include "reference.hpp"

namespace ref {

void patch_embed(const std::vector<float>& images, int batch, int image_size, int hidden,
                 const std::vector<float>& conv_w, const std::vector<float>& conv_b,
                 const std::vector<float>& cls_token, const std::vector<float>& pos_embed,
                 std::vector<float>& out) {
  constexpr int P = study::kPatch;
  constexpr int C = study::kChannels;
  detail::expect_positive("patch_embed", "batch", batch);
  detail::expect_positive("patch_embed", "hidden", hidden);
  const int tokens = study::tokens_for_image(image_size);
  const int side = image_size / P;
  const std::size_t S = static_cast<std::size_t>(image_size);
  detail::expect_size("patch_embed", "images", images.size(), static_cast<std::size_t>(batch) * C * S * S);
  detail::expect_size("patch_embed", "conv_w", conv_w.size(), static_cast<std::size_t>(hidden) * C * P * P);
  detail::expect_size("patch_embed", "conv_b", conv_b.size(), hidden);
  detail::expect_size("patch_embed", "cls_token", cls_token.size(), hidden);
  detail::expect_size("patch_embed", "pos_embed", pos_embed.size(), static_cast<std::size_t>(tokens) * hidden);
  out.assign(static_cast<std::size_t>(batch) * tokens * hidden, 0.f);

  for (int b = 0; b < batch; ++b) {
    float* ob = out.data() + static_cast<std::size_t>(b) * tokens * hidden;
    for (int o = 0; o < hidden; ++o) ob[o] = cls_token[o] + pos_embed[o];
    // Patches in row-major order over the grid, as timm's flatten(2).transpose(1, 2).
    for (int py = 0; py < side; ++py) {
      for (int px = 0; px < side; ++px) {
        const int t = 1 + py * side + px;
        for (int o = 0; o < hidden; ++o) {
          double acc = conv_b[o];
          for (int c = 0; c < C; ++c)
            for (int ky = 0; ky < P; ++ky)
              for (int kx = 0; kx < P; ++kx) {
                const std::size_t img = ((static_cast<std::size_t>(b) * C + c) * S + py * P + ky) * S + px * P + kx;
                const std::size_t wi = ((static_cast<std::size_t>(o) * C + c) * P + ky) * P + kx;
                acc += static_cast<double>(images[img]) * conv_w[wi];
              }
          ob[static_cast<std::size_t>(t) * hidden + o] =
              static_cast<float>(acc + pos_embed[static_cast<std::size_t>(t) * hidden + o]);
        }
      }
    }
  }
}

}  // namespace ref
