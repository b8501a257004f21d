"""Correctness-side cheats of session 37's red team (CPU backend): kernels graded against the reference that are
right on the distribution ``get_inputs()`` draws (and on the 4x widened sets) but wrong on other valid inputs.

Each attack is the honest example solution (examples/solutions/cpu/<task>/) with its kernel source replaced."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "solutions" / "cpu"


def workspace(task: str, **overrides: str) -> dict[str, str]:
    """The honest example workspace of ``task`` as {relative path: text}, with ``overrides`` (kernel file name ->
    text) replacing files under kernels/."""
    root = EXAMPLES / task
    files = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
    for name, text in overrides.items():
        key = f"kernels/{name}"
        assert key in files, (key, sorted(files))
        files[key] = text
    return files


# Softmax without subtracting the row maximum: exp(x) overflows to inf for x > 88.7, so any row holding such a value
# gives inf/inf = NaN (and a row whose values are all below -103 gives 0/0). randn (|x| < ~5) and its 4x widening
# (|x| < ~20) never get there.
SOFTMAX_NO_MAX = r"""
// Softmax over the last dimension, without the max shift.
#include <cmath>
#include <cstdint>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float s = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const float e = std::exp(in[c]);
      out[c] = e;
      s += e;
    }
    const float inv = 1.0f / s;
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
"""

# Swish on a clamped argument, as a lookup table over a bounded range would compute it: right for |x| <= 24, and
# y(x) = 24 for every x > 24 (x = 100 gives 24 instead of 100). randn * 4 never exceeds ~20 in 16k draws.
SWISH_CLAMPED = r"""
// Swish over a bounded argument range [-24, 24].
#include <algorithm>
#include <cmath>
#include <cstdint>

void swish_cpu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::min(24.0f, std::max(-24.0f, x[i]));
    y[i] = v / (1.0f + std::exp(-v));
  }
}
"""

# relu(x @ W^T + b) with both operands rounded to IEEE half precision (what an fp16 tensor-core MMA with an fp32
# accumulator computes), against the task's fp32 contract. The rounding is done by hand (no _Float16 needed):
# 10-bit mantissa, round to nearest even, |v| >= 65520 -> inf. Right to within 1e-2 on randn and randn * 4 (and
# randn * 16), wrong on randn * 100 (~31 of 8192 elements out of tolerance, max error ~0.08) and inf for |x| >= 65520.
GEMM_FP16_OPERANDS = r"""
// relu(A @ W^T + b) with operands rounded to half precision, fp32 accumulation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

static inline float to_half_precision(float v) {
  if (!(std::fabs(v) < 65520.0f)) return std::isnan(v) ? v : std::copysign(std::numeric_limits<float>::infinity(), v);
  if (std::fabs(v) < 6.103515625e-05f) return v;  // subnormal halves: left alone (irrelevant here)
  uint32_t u;
  std::memcpy(&u, &v, 4);
  const uint32_t lsb = (u >> 13) & 1u;
  u += 0x0FFFu + lsb;  // round to nearest even at bit 13
  u &= ~0x1FFFu;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    const float* arow = a + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wrow = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += to_half_precision(arow[p]) * to_half_precision(wrow[p]);
      out[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
}
"""

# Control: the same clamp at 10 (randn * 4 reaches ~16): the widened sets must catch it.
SWISH_CLAMPED_AT_10 = SWISH_CLAMPED.replace("24.0f", "10.0f")

# Row sums in a 32-bit fixed-point accumulator (16 fraction bits, as deterministic fixed-point atomics do): exact to
# ~1e-5 while every running sum stays within +-32768, and wraps around past it. randn rows of 512 (and their 4x
# widening) have running sums below ~400; a row of 512 values of 100.0 sums to 51200 and comes back as -14336.
ROW_SUM_FIXED_POINT = r"""
// Row sums with a 32-bit fixed-point accumulator (Q15.16).
#include <cmath>
#include <cstdint>

void row_sum_cpu(const float* x, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    uint32_t acc = 0u;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t q = static_cast<int64_t>(std::nearbyint(static_cast<double>(row[c]) * 65536.0));
      acc += static_cast<uint32_t>(q);
    }
    out[r] = static_cast<float>(static_cast<double>(static_cast<int32_t>(acc)) / 65536.0);
  }
}
"""

# A content-keyed result cache sized to the CPU backend's fresh-set slack (25%). The key is 8 sampled elements of x;
# on a hit the kernel recomputes the first 85% of the rows and copies the last 15% from the cached output (so a hit
# costs ~0.85 of a miss and a fresh set reads ~1.18x its rotated neighbours). Right on every set the harness hands
# over (their sampled elements never collide), wrong on an input that agrees with an earlier one at the 8 sampled
# positions and differs in its last rows: those rows come back stale.
GEMM_CONTENT_CACHE = r"""
// relu(A @ W^T + b) with a small content-keyed cache of the last rows.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {
struct Entry {
  float key[8];
  std::vector<float> out;
};
std::vector<Entry> g_cache;

void rows(const float* a, const float* w, const float* bias, float* out, int64_t r0, int64_t r1, int64_t n, int64_t k) {
  for (int64_t i = r0; i < r1; ++i) {
    const float* arow = a + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wrow = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += arow[p] * wrow[p];
      out[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
}
}  // namespace

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  float key[8];
  for (int s = 0; s < 8; ++s) key[s] = a[(s * 7919) % (m * k)];
  const int64_t split = (m * 85) / 100;
  for (Entry& e : g_cache) {
    if (std::memcmp(e.key, key, sizeof key) == 0 && static_cast<int64_t>(e.out.size()) == m * n) {
      rows(a, w, bias, out, 0, split, n, k);
      std::memcpy(out + split * n, e.out.data() + split * n, sizeof(float) * (m - split) * n);
      return;
    }
  }
  rows(a, w, bias, out, 0, m, n, k);
  if (g_cache.size() >= 16) g_cache.erase(g_cache.begin());
  Entry e;
  std::memcpy(e.key, key, sizeof key);
  e.out.assign(out, out + m * n);
  g_cache.push_back(std::move(e));
}
"""

# The same cache kept in a buffer of the module instead of C++ global state (the source rule T12.cpp.static_cache
# refuses `std::vector<Entry> g_cache;`): the kernel is handed the buffer as a scratch argument.
# Layout of the buffer (floats): [count, then 16 slots of (8 key floats, m*n output floats)].
GEMM_BUFFER_CACHE_MODEL_NEW = '''\
"""relu(x @ W^T + b) with one fused kernel; the nn.Linear only holds the parameters."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.register_buffer("scratch", torch.zeros(1 + 16 * (8 + 64 * out_features)))

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, dtype=x.dtype, device=x.device)
        cuda_extension.gemm_bias_relu_forward(x, self.linear.weight, self.linear.bias, out, self.scratch)
        return out
'''

GEMM_BUFFER_CACHE_BINDING = r"""
// Registers cuda_extension.gemm_bias_relu_forward(x, weight, bias, out, scratch).
#include "../binding_registry.h"

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k,
                        float* scratch, int64_t scratch_len);

void gemm_bias_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& out,
                            const at::Tensor& scratch) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "x [M,K] and weight [N,K] expected");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous() && out.is_contiguous() && scratch.is_contiguous(), "contiguous");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat && scratch.scalar_type() == at::kFloat, "float32");
  gemm_bias_relu_cpu(x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                     out.mutable_data_ptr<float>(), x.size(0), weight.size(0), x.size(1),
                     scratch.mutable_data_ptr<float>(), scratch.numel());
}

REGISTER_BINDING(gemm_bias_relu_forward, gemm_bias_relu_forward);
"""

GEMM_BUFFER_CACHE = r"""
// relu(A @ W^T + b); the last 15% of the rows are served from a content-keyed cache held in a scratch buffer.
#include <algorithm>
#include <cstdint>
#include <cstring>

static void rows(const float* a, const float* w, const float* bias, float* out, int64_t r0, int64_t r1, int64_t n, int64_t k) {
  for (int64_t i = r0; i < r1; ++i) {
    const float* arow = a + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wrow = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += arow[p] * wrow[p];
      out[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
}

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k,
                        float* scratch, int64_t scratch_len) {
  const int64_t slot = 8 + m * n;
  const int64_t slots = std::min<int64_t>(16, (scratch_len - 1) / slot);
  float key[8];
  for (int s = 0; s < 8; ++s) key[s] = a[(s * 7919) % (m * k)];
  const int64_t split = (m * 85) / 100;
  const int64_t used = std::min<int64_t>(static_cast<int64_t>(scratch[0]), slots);
  for (int64_t e = 0; e < used; ++e) {
    const float* entry = scratch + 1 + e * slot;
    if (std::memcmp(entry, key, sizeof key) == 0) {
      rows(a, w, bias, out, 0, split, n, k);
      std::memcpy(out + split * n, entry + 8 + split * n, sizeof(float) * (m - split) * n);
      return;
    }
  }
  rows(a, w, bias, out, 0, m, n, k);
  if (slots <= 0) return;
  const int64_t count = static_cast<int64_t>(scratch[0]);
  float* entry = scratch + 1 + (count % slots) * slot;
  std::memcpy(entry, key, sizeof key);
  std::memcpy(entry + 8, out, sizeof(float) * m * n);
  scratch[0] = static_cast<float>(count + 1);
}
"""

# Control: the buffer cache serving every row on a hit (a copy per hit): the fresh-set rule should flag it.
GEMM_BUFFER_CACHE_FULL = GEMM_BUFFER_CACHE.replace("const int64_t split = (m * 85) / 100;", "const int64_t split = 0;")

# Stride game (values right, layout not): the output is a transposed (non-contiguous) view of a [dim, batch] buffer
# that the kernel fills in column-major order.
SWISH_TRANSPOSED_MODEL_NEW = '''\
"""Swish into a column-major output."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty(x.shape[1], x.shape[0], dtype=x.dtype, device=x.device)
        cuda_extension.swish_forward(x, out)
        return out.t()
'''

SWISH_TRANSPOSED_BINDING = r"""
// Registers cuda_extension.swish_forward(x, out_t): out_t is [cols, rows], written transposed.
#include "../binding_registry.h"

void swish_cpu_t(const float* x, float* y, int64_t rows, int64_t cols);

void swish_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && out.is_contiguous(), "contiguous 2-D tensors expected");
  TORCH_CHECK(x.size(0) == out.size(1) && x.size(1) == out.size(0), "out must be x's transpose in shape");
  swish_cpu_t(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.size(0), x.size(1));
}

REGISTER_BINDING(swish_forward, swish_forward);
"""

SWISH_TRANSPOSED = r"""
#include <cmath>
#include <cstdint>

void swish_cpu_t(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[r * cols + c];
      y[c * rows + r] = v / (1.0f + std::exp(-v));
    }
}
"""

# Skipping work whose contribution is below tolerance: products with |x| < 0.01 are left out of the dot product
# (a sparsity skip). On randn (and randn * 4: widening only ever enlarges) under 1% of the terms go, each worth
# < 6e-4; on x = randn * 0.01, a valid input, about 68% of the terms go and the output is off by ~40%.
GEMM_SKIP_SMALL = r"""
// relu(A @ W^T + b), skipping the terms of activations below 0.01 in magnitude.
#include <algorithm>
#include <cmath>
#include <cstdint>

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    const float* arow = a + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wrow = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p)
        if (std::fabs(arow[p]) >= 0.01f) acc += arow[p] * wrow[p];
      out[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
}
"""
