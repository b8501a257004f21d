// Honest (session 42, registry convention, CUDA, one file): Hardtanh (KernelBench level-1 32_HardTanh) as an out=
// variant writing a caller's `at::Tensor& out` (the registry accepts it), refusing an out that aliases the input with
// `TORCH_CHECK(out.data_ptr() != x.data_ptr(), ...)`, and a float4 path when both pointers are 16-byte aligned.
#include "../binding_registry.h"
#include <ATen/ops/empty_like.h>
#include <cuda_runtime.h>

#include <cstdint>

__global__ void hardtanh_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4, float lo, float hi) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  v.x = fminf(fmaxf(v.x, lo), hi);
  v.y = fminf(fmaxf(v.y, lo), hi);
  v.z = fminf(fmaxf(v.z, lo), hi);
  v.w = fminf(fmaxf(v.w, lo), hi);
  y[i] = v;
}

__global__ void hardtanh_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t begin, int64_t n, float lo,
                                float hi) {
  const int64_t i = begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fminf(fmaxf(x[i], lo), hi);
}

void hardtanh_out(const at::Tensor& x, at::Tensor& out, double min_val, double max_val) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.is_contiguous(),
              "hardtanh_out: a contiguous float32 CUDA tensor expected");
  TORCH_CHECK(out.sizes() == x.sizes() && out.scalar_type() == x.scalar_type() && out.is_contiguous(),
              "hardtanh_out: out must match x");
  TORCH_CHECK(out.data_ptr() != x.data_ptr(), "hardtanh_out: out must not alias x");
  const int64_t n = x.numel();
  if (n == 0) return;
  const float* xp = x.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  const float lo = static_cast<float>(min_val), hi = static_cast<float>(max_val);
  auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x));
  const int threads = 256;
  int64_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(xp) % 16 == 0 && reinterpret_cast<std::uintptr_t>(yp) % 16 == 0) {
    const int64_t n4 = n / 4;
    if (n4 > 0) {
      hardtanh_vec4<<<static_cast<unsigned>((n4 + threads - 1) / threads), threads, 0, stream>>>(
          reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4, lo, hi);
    }
    done = n4 * 4;
  }
  if (done < n) {
    hardtanh_scalar<<<static_cast<unsigned>((n - done + threads - 1) / threads), threads, 0, stream>>>(xp, yp, done, n,
                                                                                                      lo, hi);
  }
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "hardtanh_out: launch failed");
}

at::Tensor hardtanh_forward(const at::Tensor& x, double min_val, double max_val) {
  at::Tensor out = at::empty_like(x.contiguous());
  hardtanh_out(x.contiguous(), out, min_val, max_val);
  return out;
}

REGISTER_BINDING(hardtanh_out, hardtanh_out);
REGISTER_BINDING(hardtanh_forward, hardtanh_forward);
