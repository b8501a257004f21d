# Solves KernelBench level1/88_MinGPTNewGelu.py (tanh-approximate GELU).
# Idioms: `import math` and math.sqrt(2 / math.pi) computed at module level and passed to the kernel, tanh written
# with tl.sigmoid (tanh(z) = 2*sigmoid(2z) - 1), a @triton.jit device helper with a constexpr argument, a
# keyword-only launch of every argument, tl.program_id(axis=0).
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@triton.jit
def _tanh(z):
    return 2.0 * tl.sigmoid(2.0 * z) - 1.0


@triton.jit
def new_gelu_kernel(x_ptr, out_ptr, n_elements, sqrt_2_over_pi, COEF: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    inner = sqrt_2_over_pi * (x + COEF * x * x * x)
    y = 0.5 * x * (1.0 + _tanh(inner))
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        new_gelu_kernel[grid](x_ptr=x, out_ptr=out, n_elements=n_elements,
                              sqrt_2_over_pi=SQRT_2_OVER_PI, COEF=0.044715, BLOCK_SIZE=BLOCK_SIZE)
        return out
