"""Honest (session 42, KernelBench single file, CUDA): cross-entropy with mean reduction (KernelBench level-1
95_CrossEntropyLoss): one warp per row computes the row's log-sum-exp and subtracts the target's logit (int64 targets
through data_ptr<int64_t>()), one atomicAdd per warp into a 0-d output zeroed by torch::zeros({}, ...), already divided
by the batch size; warps per block through a named constant."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cross_entropy_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cfloat>

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__global__ void cross_entropy_kernel(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                                     float* __restrict__ loss, int rows, int classes, float inv_rows) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float* r = logits + (size_t)row * classes;
    float m = -FLT_MAX;
    for (int c = lane; c < classes; c += 32) m = fmaxf(m, r[c]);
    m = warp_max(m);
    float s = 0.f;
    for (int c = lane; c < classes; c += 32) s += __expf(r[c] - m);
    s = warp_sum(s);
    if (lane == 0) {
        const int64_t t = targets[row];
        const float nll = (t >= 0 && t < classes) ? (logf(s) + m - r[t]) : 0.f;
        atomicAdd(loss, nll * inv_rows);
    }
}

torch::Tensor cross_entropy_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda() && targets.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(predictions.dim() == 2 && targets.dim() == 1 && targets.size(0) == predictions.size(0),
                "predictions is (N, C) and targets (N,)");
    TORCH_CHECK(targets.scalar_type() == torch::kInt64, "targets must be int64 class indices");
    const at::cuda::CUDAGuard guard(predictions.device());
    auto logits = predictions.contiguous();
    auto t = targets.contiguous();
    const int rows = logits.size(0), classes = logits.size(1);
    auto loss = torch::zeros({}, logits.options());
    const int blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    cross_entropy_kernel<<<blocks, kWarpsPerBlock * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
        logits.data_ptr<float>(), t.data_ptr<int64_t>(), loss.data_ptr<float>(), rows, classes, 1.0f / rows);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return loss;
}
"""

cross_entropy = load_inline(
    name="cross_entropy_warp",
    cpp_sources="torch::Tensor cross_entropy_forward(torch::Tensor predictions, torch::Tensor targets);",
    cuda_sources=cross_entropy_source,
    functions=["cross_entropy_forward"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ce = cross_entropy

    def forward(self, predictions, targets):
        return self.ce.cross_entropy_forward(predictions, targets)
