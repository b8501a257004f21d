# Solves KernelBench level1/36_RMSNorm_.py (x / sqrt(mean(x^2, dim=1) + eps) on (B, F, H, W)).
# Idioms: a strided reduction over the feature axis for a block of spatial positions, tl.math.rsqrt, eps kept
# from __init__ (default argument) and passed as a float, x.stride() unpacked by index, a 2-D grid tuple.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, y_ptr, F, HW, stride_b, stride_f, eps, BLOCK_HW: tl.constexpr, BLOCK_F: tl.constexpr):
    b = tl.program_id(0)
    pid_hw = tl.program_id(1)
    offs_hw = pid_hw * BLOCK_HW + tl.arange(0, BLOCK_HW)
    hw_mask = offs_hw < HW
    base = x_ptr + b * stride_b
    sq = tl.zeros((BLOCK_F, BLOCK_HW), dtype=tl.float32)
    for f0 in range(0, F, BLOCK_F):
        offs_f = f0 + tl.arange(0, BLOCK_F)
        m = (offs_f[:, None] < F) & hw_mask[None, :]
        v = tl.load(base + offs_f[:, None] * stride_f + offs_hw[None, :], mask=m, other=0.0)
        sq += v * v
    mean_sq = tl.sum(sq, axis=0) / F
    inv_rms = tl.math.rsqrt(mean_sq + eps)
    for f0 in range(0, F, BLOCK_F):
        offs_f = f0 + tl.arange(0, BLOCK_F)
        m = (offs_f[:, None] < F) & hw_mask[None, :]
        v = tl.load(base + offs_f[:, None] * stride_f + offs_hw[None, :], mask=m, other=0.0)
        tl.store(y_ptr + b * stride_b + offs_f[:, None] * stride_f + offs_hw[None, :], v * inv_rms[None, :], mask=m)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, F = x.shape[0], x.shape[1]
        HW = x.numel() // (B * F)
        y = torch.empty_like(x)
        BLOCK_HW = 256
        BLOCK_F = 16
        grid = (B, triton.cdiv(HW, BLOCK_HW))
        rms_norm_kernel[grid](x, y, F, HW, x.stride()[0], x.stride()[1], self.eps,
                              BLOCK_HW=BLOCK_HW, BLOCK_F=BLOCK_F)
        return y
