# Solves KernelBench level1/89_cumsum.py (torch.cumsum(x, dim=1) on a 2-D tensor).
# Idioms: tl.associative_scan with a combine @triton.jit function, a running carry across column blocks
# (tl.sum of the block), self.dim kept from __init__, an assert on the dim, tl.debug_barrier between blocks.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_combine(a, b):
    return a + b


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        scanned = tl.associative_scan(x, 0, add_combine)
        tl.store(y_ptr + row * stride_y + cols, scanned + carry, mask=mask)
        carry += tl.sum(x, axis=0)
        tl.debug_barrier()


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim == 1 and x.dim() == 2, "this kernel scans the last dimension of a 2-D tensor"
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK_SIZE = min(1024, triton.next_power_of_2(n_cols))
        cumsum_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
        return y
