"""KernelBench level 1 problem 1 (square fp32 matmul, N=4096) in KernelBench's Triton single-file form: a tiled
GEMM with fp32 (IEEE) products, as the reference computes (no TF32), grouped program ids for L2 reuse."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP * grid_n
    group = pid // width
    first_m = group * GROUP
    size_m = min(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % size_m)
    pid_n = (pid % width) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        m, k = A.shape
        n = B.shape[1]
        A = A.contiguous()
        B = B.contiguous()
        c = torch.empty(m, n, dtype=A.dtype, device=A.device)
        grid = (triton.cdiv(m, 128) * triton.cdiv(n, 128),)
        matmul_kernel[grid](A, B, c, m, n, k, A.stride(0), B.stride(0), c.stride(0),
                            BM=128, BN=128, BK=32, GROUP=8, num_warps=8, num_stages=3)
        return c
