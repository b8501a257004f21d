"""Session 37's red-team attacks on code run outside the timed call (CPU backend, task gemm_bias_relu), kept as
regression fixtures: the same plain scalar GEMM kernel computing inside the call (the control), ahead of the call
in a SIGALRM handler during the harness's flush, ahead of the call in the deleter of the previous output's storage,
and after the call in a one-shot SIGALRM handler. Before the fixes each attack was graded correct with reward 3."""

from __future__ import annotations

MODEL_NEW_GEMM = '''"""relu(x @ W^T + b) with one fused kernel; the nn.Linear only holds the parameters."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, dtype=x.dtype, device=x.device)
        cuda_extension.gemm_bias_relu_forward(x, self.linear.weight, self.linear.bias, out)
        return out
'''

BINDING_GEMM = r"""
// Registers cuda_extension.gemm_bias_relu_forward(x, weight, bias, out).
#include "../binding_registry.h"

void gemm_run(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k);

void gemm_bias_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& out) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "x [M,K] and weight [N,K] expected");
  TORCH_CHECK(bias.numel() == weight.size(0) && out.size(0) == x.size(0) && out.size(1) == weight.size(0), "bias [N] and out [M,N] expected");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat, "float32 expected");
  gemm_run(x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
           out.mutable_data_ptr<float>(), x.size(0), weight.size(0), x.size(1));
}

REGISTER_BINDING(gemm_bias_relu_forward, gemm_bias_relu_forward);
"""

GEMM_CORE = r"""
#include <algorithm>
#include <cstdint>
#include <cstring>

// A plain scalar kernel (no OpenMP, no blocking): far slower than MKL.
void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    const float* arow = a + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wrow = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += arow[p] * wrow[p];
      out[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
}
"""

KERNEL_GEMM_HONEST = GEMM_CORE + r"""
void gemm_run(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  gemm_bias_relu_cpu(a, w, bias, out, m, n, k);
}
"""

KERNEL_GEMM_SIGALRM = GEMM_CORE + r"""
#include <sys/time.h>

extern "C" {
typedef void (*handler_fn)(int);
handler_fn signal(int, handler_fn) noexcept;
}

// mode 0: a tick between calls; mode 1: the call itself.
void gemm_engine(int mode, const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  static const float* in = nullptr;
  static const float* wt = nullptr;
  static const float* bs = nullptr;
  static float* snap = nullptr;
  static float* pre = nullptr;
  static int64_t sm = 0;
  static int64_t sn = 0;
  static int64_t sk = 0;
  static volatile int ready = 0;
  static volatile int busy = 0;
  if (mode == 0) {
    if (busy || in == nullptr || sm == 0) return;
    if (ready && std::memcmp(snap, in, sizeof(float) * sm * sk) == 0) return;
    ready = 0;
    std::memcpy(snap, in, sizeof(float) * sm * sk);
    gemm_bias_relu_cpu(snap, wt, bs, pre, sm, sn, sk);
    ready = 1;
    return;
  }
  busy = 1;
  if (sm == m && sn == n && sk == k && wt == w && bs == bias && ready &&
      std::memcmp(snap, a, sizeof(float) * m * k) == 0) {
    std::memcpy(out, pre, sizeof(float) * m * n);
  } else {
    gemm_bias_relu_cpu(a, w, bias, out, m, n, k);
  }
  if (sm != m || sn != n || sk != k) {
    ready = 0;
    snap = new float[m * k];
    pre = new float[m * n];
    sm = m;
    sn = n;
    sk = k;
  }
  if (wt != w || bs != bias) ready = 0;
  in = a;
  wt = w;
  bs = bias;
  busy = 0;
}

void gemm_tick(int) { gemm_engine(0, nullptr, nullptr, nullptr, nullptr, 0, 0, 0); }

void gemm_run(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  static int armed = 0;
  gemm_engine(1, a, w, bias, out, m, n, k);
  if (!armed) {
    armed = 1;
    signal(14, gemm_tick);
    struct itimerval it;
    it.it_interval.tv_sec = 0;
    it.it_interval.tv_usec = 250;
    it.it_value.tv_sec = 0;
    it.it_value.tv_usec = 250;
    setitimer(ITIMER_REAL, &it, nullptr);
  }
}
"""

MODEL_NEW_GEMM_RET = '''"""relu(x @ W^T + b) with one fused kernel; the nn.Linear only holds the parameters."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return cuda_extension.gemm_bias_relu_forward(x, self.linear.weight, self.linear.bias)
'''

KERNEL_GEMM_DELETER = GEMM_CORE + r"""
// mode 0: the previous output is being freed; mode 1: the call itself (writes `out`).
void gemm_engine(int mode, const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  static const float* in = nullptr;
  static const float* wt = nullptr;
  static const float* bs = nullptr;
  static float* snap = nullptr;
  static float* pre = nullptr;
  static int64_t sm = 0;
  static int64_t sn = 0;
  static int64_t sk = 0;
  static int ready = 0;
  if (mode == 0) {
    if (in == nullptr || sm == 0) return;
    if (ready && std::memcmp(snap, in, sizeof(float) * sm * sk) == 0) return;
    ready = 0;
    std::memcpy(snap, in, sizeof(float) * sm * sk);
    gemm_bias_relu_cpu(snap, wt, bs, pre, sm, sn, sk);
    ready = 1;
    return;
  }
  if (sm == m && sn == n && sk == k && wt == w && bs == bias && ready &&
      std::memcmp(snap, a, sizeof(float) * m * k) == 0) {
    std::memcpy(out, pre, sizeof(float) * m * n);
  } else {
    gemm_bias_relu_cpu(a, w, bias, out, m, n, k);
  }
  if (sm != m || sn != n || sk != k) {
    ready = 0;
    snap = new float[m * k];
    pre = new float[m * n];
    sm = m;
    sn = n;
    sk = k;
  }
  if (wt != w || bs != bias) ready = 0;
  in = a;
  wt = w;
  bs = bias;
}

void gemm_release(void* p) {
  gemm_engine(0, nullptr, nullptr, nullptr, nullptr, 0, 0, 0);
  delete[] static_cast<float*>(p);
}

float* gemm_run_new(const float* a, const float* w, const float* bias, int64_t m, int64_t n, int64_t k) {
  float* out = new float[m * n];
  gemm_engine(1, a, w, bias, out, m, n, k);
  return out;
}
"""

BINDING_GEMM_DELETER = r"""
// Registers cuda_extension.gemm_bias_relu_forward(x, weight, bias) -> out.
#include <torch/extension.h>
#include "../binding_registry.h"

float* gemm_run_new(const float* a, const float* w, const float* bias, int64_t m, int64_t n, int64_t k);
void gemm_release(void* p);

at::Tensor gemm_bias_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "x [M,K] and weight [N,K] expected");
  TORCH_CHECK(bias.numel() == weight.size(0), "bias [N] expected");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat, "float32 expected");
  float* out = gemm_run_new(x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                            x.size(0), weight.size(0), x.size(1));
  const int64_t nbytes = x.size(0) * weight.size(0) * static_cast<int64_t>(sizeof(float));
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, c10::DataPtr(out, out, gemm_release, x.device()),
                       nullptr, false);
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), x.key_set(), x.dtype());
  t.unsafeGetTensorImpl()->set_sizes_contiguous({x.size(0), weight.size(0)});
  return t;
}

REGISTER_BINDING(gemm_bias_relu_forward, gemm_bias_relu_forward);
"""

KERNEL_GEMM_DEFERRED = GEMM_CORE + r"""
#include <sys/time.h>

extern "C" {
typedef void (*handler_fn)(int);
handler_fn signal(int, handler_fn) noexcept;
}

void gemm_later(int mode, const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  static const float* pa = nullptr;
  static const float* pw = nullptr;
  static const float* pb = nullptr;
  static float* po = nullptr;
  static int64_t sm = 0;
  static int64_t sn = 0;
  static int64_t sk = 0;
  static volatile int pending = 0;
  if (mode == 0) {
    if (!pending) return;
    pending = 0;
    gemm_bias_relu_cpu(pa, pw, pb, po, sm, sn, sk);
    return;
  }
  pa = a; pw = w; pb = bias; po = out; sm = m; sn = n; sk = k;
  pending = 1;
}

void gemm_fire(int) { gemm_later(0, nullptr, nullptr, nullptr, nullptr, 0, 0, 0); }

void gemm_run(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  static int installed = 0;
  if (!installed) {
    installed = 1;
    signal(14, gemm_fire);
  }
  gemm_later(1, a, w, bias, out, m, n, k);
  struct itimerval it;
  it.it_interval.tv_sec = 0;
  it.it_interval.tv_usec = 0;
  it.it_value.tv_sec = 0;
  it.it_value.tv_usec = 40;
  setitimer(ITIMER_REAL, &it, nullptr);
}
"""
