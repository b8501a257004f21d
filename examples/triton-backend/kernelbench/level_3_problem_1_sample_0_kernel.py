"""KernelBench level 3 problem 1 (MLP: Linear+ReLU layers, then Linear) in KernelBench's Triton single-file form:
one fused GEMM + bias (+ ReLU) kernel per layer, fp32 IEEE products. The same nn.Sequential holds the parameters,
so they are initialised like the reference's."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, stride_xm, stride_wn, stride_om, RELU: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * stride_wn + kk[:, None], mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)
        self.hidden = len(layer_sizes)

    def forward(self, x):
        for i in range(self.hidden + 1):
            layer = self.network[2 * i]
            m, k = x.shape
            n = layer.out_features
            out = torch.empty(m, n, dtype=x.dtype, device=x.device)
            grid = (triton.cdiv(m, 64), triton.cdiv(n, 128))
            linear_kernel[grid](x, layer.weight, layer.bias, out, m, n, k, x.stride(0), layer.weight.stride(0),
                                out.stride(0), RELU=i < self.hidden, BM=64, BN=128, BK=32, num_warps=8, num_stages=3)
            x = out
        return x
