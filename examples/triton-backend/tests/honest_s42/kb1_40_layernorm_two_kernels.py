# Solves KernelBench level1/40_LayerNorm.py (nn.LayerNorm over the last three dims, with affine weight/bias).
# Idioms: two kernels per forward (statistics, then normalise), fp32 scratch buffers from torch.empty(...,
# dtype=torch.float32), the nn.LayerNorm's weight/bias/eps read in forward, math.prod-free size arithmetic,
# Welford-free two-pass mean/variance, tl.rsqrt via 1/tl.sqrt, a kernel parameter with a float default.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_stats_kernel(x_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    var_acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        d = tl.where(cols < N, v - mean, 0.0)
        var_acc += d * d
    var = tl.sum(var_acc, axis=0) / N
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(var + eps))


@triton.jit
def ln_apply_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr = True):
    row = tl.program_id(0)
    pid = tl.program_id(1)
    cols = pid * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    x = tl.load(x_ptr + row.to(tl.int64) * N + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=1.0)
    y = (x - mean) * rstd * w
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row.to(tl.int64) * N + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_norm = len(self.ln.normalized_shape)
        N = 1
        for s in x.shape[-n_norm:]:
            N *= s
        M = x.numel() // N
        mean = torch.empty((M,), device=x.device, dtype=torch.float32)
        rstd = torch.empty((M,), device=x.device, dtype=torch.float32)
        y = torch.empty_like(x)
        BLOCK = min(4096, triton.next_power_of_2(N))
        ln_stats_kernel[(M,)](x, mean, rstd, N, self.ln.eps, BLOCK=BLOCK)
        ln_apply_kernel[(M, math.ceil(N / BLOCK))](x, self.ln.weight, self.ln.bias, y, mean, rstd, N, BLOCK=BLOCK)
        return y
