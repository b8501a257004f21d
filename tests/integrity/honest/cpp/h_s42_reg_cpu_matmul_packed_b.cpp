// Honest (session 42, registry convention, CPU): square matmul (KernelBench 1_Square_matrix_multiplication_) that packs
// B transposed into a per-call std::vector, then takes row-by-row dot products; its helper is declared first, over two
// lines with a default argument (`int64_t block = 64);`), and defined below.
#include "../binding_registry.h"
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <vector>

static void matmul_bt(const float* a, const float* bt, float* c, int64_t n, int64_t k, int64_t m,
                      int64_t block = 64);

static void pack_transposed(const float* b, float* bt, int64_t k, int64_t m) {
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < m; ++j) {
    for (int64_t p = 0; p < k; ++p) bt[j * k + p] = b[p * m + j];
  }
}

at::Tensor matmul_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: shapes do not match");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat, "matmul_forward: float32 expected");
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const int64_t n = ac.size(0), k = ac.size(1), m = bc.size(1);
  std::vector<float> bt(static_cast<size_t>(k * m));
  pack_transposed(bc.data_ptr<float>(), bt.data(), k, m);
  at::Tensor c = at::empty({n, m}, ac.options());
  matmul_bt(ac.data_ptr<float>(), bt.data(), c.data_ptr<float>(), n, k, m);
  return c;
}

static void matmul_bt(const float* a, const float* bt, float* c, int64_t n, int64_t k, int64_t m, int64_t block) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += block) {
    for (int64_t j0 = 0; j0 < m; j0 += block) {
      const int64_t i1 = std::min(i0 + block, n), j1 = std::min(j0 + block, m);
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < j1; ++j) {
          const float* ar = a + i * k;
          const float* br = bt + j * k;
          float acc = 0.f;
#pragma omp simd reduction(+ : acc)
          for (int64_t p = 0; p < k; ++p) acc += ar[p] * br[p];
          c[i * m + j] = acc;
        }
      }
    }
  }
}

REGISTER_BINDING(matmul_forward, matmul_forward);
