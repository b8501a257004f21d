# Solves KernelBench level1/22_Tanh.py. GPU-only grading: Triton's interpreter has no libdevice.
# Idioms: a device function imported by name (`from triton.language.extra.cuda.libdevice import tanh`), a
# @triton.jit(do_not_specialize=[...]) option, a constexpr default block size left unpassed at the launch.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra.cuda.libdevice import tanh


@triton.jit(do_not_specialize=["n_elements"])
def tanh_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr = 1024):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tanh(x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n_elements = x.numel()
        tanh_kernel[(triton.cdiv(n_elements, 1024),)](x, y, n_elements)
        return y
