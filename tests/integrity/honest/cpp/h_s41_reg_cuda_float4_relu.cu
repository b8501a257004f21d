// Honest (session 41, registry convention, CUDA, one file): ReLU with float4 vector loads through __ldg,
// __launch_bounds__, a grid-stride loop and a scalar tail; the binding in the same .cu.
#include "../binding_registry.h"
#include <ATen/ops/empty_like.h>
#include <cuda_runtime.h>

#include <algorithm>

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) relu_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                                                      int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = __ldg(&x[i]);
    v.x = fmaxf(v.x, 0.f);
    v.y = fmaxf(v.y, 0.f);
    v.z = fmaxf(v.z, 0.f);
    v.w = fmaxf(v.w, 0.f);
    y[i] = v;
  }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
  const int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(__ldg(x + i), 0.f);
}

at::Tensor relu_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == at::kFloat,
              "relu_forward: x must be a contiguous float32 CUDA tensor");
  at::Tensor y = at::empty_like(x);
  const int64_t n = x.numel();
  const int64_t n4 = n / 4;
  auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x));
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  if (n4 > 0) {
    const int blocks = static_cast<int>(std::min<int64_t>((n4 + kThreads - 1) / kThreads, 4096));
    relu_vec4<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4);
  }
  if (n - 4 * n4 > 0) relu_tail<<<1, kThreads, 0, stream>>>(xp, yp, 4 * n4, n);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "relu_forward: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(relu_forward, relu_forward);
