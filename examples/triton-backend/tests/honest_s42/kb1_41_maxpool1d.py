# Solves KernelBench level1/41_Max_Pooling_1D.py (kernel_size, stride, padding, dilation; no indices).
# Idioms: tl.static_range over a constexpr KERNEL_SIZE, padding read as -inf, the nn.MaxPool1d kept for its
# configuration (kernel_size/stride/padding/dilation read in forward), the output length formula with //,
# a (B*C, cdiv(L_out)) grid, STRIDE/DILATION as constexpr ints.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def maxpool1d_kernel(x_ptr, y_ptr, L_in, L_out, PADDING,
                     KERNEL_SIZE: tl.constexpr, STRIDE: tl.constexpr, DILATION: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    out_mask = offs < L_out
    start = offs * STRIDE - PADDING
    best = tl.full((BLOCK,), float("-inf"), tl.float32)
    for k in tl.static_range(KERNEL_SIZE):
        pos = start + k * DILATION
        valid = out_mask & (pos >= 0) & (pos < L_in)
        v = tl.load(x_ptr + row * L_in + pos, mask=valid, other=float("-inf"))
        best = tl.maximum(best, v)
    tl.store(y_ptr + row * L_out + offs, best, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1,
                 return_indices: bool = False):
        super(ModelNew, self).__init__()
        self.maxpool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                                    return_indices=return_indices)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, L = x.shape
        k = self.maxpool.kernel_size
        s = self.maxpool.stride if self.maxpool.stride is not None else k
        p = self.maxpool.padding
        d = self.maxpool.dilation
        L_out = (L + 2 * p - d * (k - 1) - 1) // s + 1
        y = torch.empty((B, C, L_out), device=x.device, dtype=x.dtype)
        BLOCK = 256
        maxpool1d_kernel[(B * C, triton.cdiv(L_out, BLOCK))](x, y, L, L_out, p, KERNEL_SIZE=k, STRIDE=s,
                                                             DILATION=d, BLOCK=BLOCK)
        return y
