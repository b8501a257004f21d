# Solves KernelBench level1/5_Matrix_scalar_multiplication.py (A * s, s a Python float input).
# Idioms: a module-level launcher with type hints and a keyword default, the scalar passed straight to the kernel,
# a constexpr default BLOCK_SIZE left unpassed, tl.multiple_of on the block start, `from triton import cdiv`,
# `import triton.language as tl` only.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import cdiv


@triton.jit
def scale_kernel(a_ptr, c_ptr, s, n, BLOCK_SIZE: tl.constexpr = 2048):
    start = tl.multiple_of(tl.program_id(0) * BLOCK_SIZE, BLOCK_SIZE)
    offs = start + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    tl.store(c_ptr + offs, a * s, mask=mask)


def matrix_scalar(a: torch.Tensor, s, block_size: int = 2048) -> torch.Tensor:
    a = a.contiguous()
    c = torch.empty(a.shape, device=a.device, dtype=a.dtype)
    n = a.numel()
    scale_kernel[(cdiv(n, block_size),)](a, c, s, n)
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return matrix_scalar(A, s)
