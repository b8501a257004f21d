"""Honest (session 42, KernelBench single file, CPU): square matmul (1_Square_matrix_multiplication_) as a cache-blocked
kernel templated on the element type; the sources define their own PYBIND11_MODULE and export it as `sgemm`, the
name AT_DISPATCH_FLOATING_TYPES reports too (a BLAS-like name given to the candidate's own function)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <algorithm>

template <typename scalar_t>
void blocked_matmul(const scalar_t* a, const scalar_t* b, scalar_t* c, int64_t n, int64_t k, int64_t m) {
    constexpr int64_t kBlock = 64;
    std::fill(c, c + n * m, scalar_t(0));
#pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
            for (int64_t i = i0; i < std::min(i0 + kBlock, n); ++i) {
                for (int64_t p = p0; p < std::min(p0 + kBlock, k); ++p) {
                    const scalar_t aip = a[i * k + p];
                    const scalar_t* brow = b + p * m;
                    scalar_t* crow = c + i * m;
                    for (int64_t j = 0; j < m; ++j) crow[j] += aip * brow[j];
                }
            }
        }
    }
}

torch::Tensor matmul_blocked(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "sgemm: shapes do not match");
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "sgemm: dtypes differ");
    a = a.contiguous();
    b = b.contiguous();
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "sgemm", [&] {
        blocked_matmul<scalar_t>(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(), a.size(0),
                                 a.size(1), b.size(1));
    });
    return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("sgemm", &matmul_blocked, "cache-blocked matmul (CPU)");
}
"""

matmul_ext = load_inline(
    name="blocked_sgemm_cpu",
    cpp_sources=source,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.sgemm(A, B)
