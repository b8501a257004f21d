// Honest (session 41, registry convention, CPU): a cache-blocked matmul with static constexpr tile sizes,
// a MIN helper macro, std::min, collapse(2) and an accumulator zeroed by at::zeros.
#include "../binding_registry.h"
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdint>

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

namespace tiled {

static constexpr int64_t kTileM = 64;
static constexpr int64_t kTileN = 64;
static constexpr int64_t kTileK = 128;

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  const int64_t tiles_m = CEIL_DIV(m, kTileM), tiles_n = CEIL_DIV(n, kTileN);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t tm = 0; tm < tiles_m; ++tm) {
    for (int64_t tn = 0; tn < tiles_n; ++tn) {
      const int64_t i0 = tm * kTileM, j0 = tn * kTileN;
      const int64_t i1 = MIN(i0 + kTileM, m), j1 = std::min(j0 + kTileN, n);
      for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
        const int64_t k1 = std::min(k0 + kTileK, k);
        for (int64_t i = i0; i < i1; ++i) {
          for (int64_t kk = k0; kk < k1; ++kk) {
            const float av = a[i * k + kk];
#pragma GCC ivdep
            for (int64_t j = j0; j < j1; ++j) c[i * n + j] += av * b[kk * n + j];
          }
        }
      }
    }
  }
}

}  // namespace tiled

at::Tensor matmul_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: shapes ", a.sizes(), " and ",
              b.sizes(), " do not multiply");
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  at::Tensor c = at::zeros({a.size(0), b.size(1)}, a.options());
  tiled::matmul(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), a.size(0), a.size(1), b.size(1));
  return c;
}

REGISTER_BINDING(matmul_forward, matmul_forward);
