# Solves the example task examples/tasks/row_sum.py (torch.sum(x, dim=1, keepdim=True)).
# Idioms: tl.reduce with a combine @triton.jit function (leading underscore name), a column loop with a
# tl.zeros accumulator, tl.cast, an int64 row offset behind a module-level tl.constexpr(True) switch, an output
# [B, 1] allocated with torch.empty(shape, device=, dtype=), num_warps as a launch option.
import torch
import torch.nn as nn
import triton
import triton.language as tl

INT64_OFFSETS = tl.constexpr(True)


@triton.jit
def _sum_combine(a, b):
    return a + b


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    if INT64_OFFSETS:
        row_ptr = x_ptr + tl.cast(row, tl.int64) * stride_row
    else:
        row_ptr = x_ptr + row * stride_row
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        vals = tl.load(row_ptr + cols, mask=cols < n_cols, other=0.0)
        acc += tl.cast(vals, tl.float32)
    total = tl.reduce(acc, 0, _sum_combine)
    tl.store(out_ptr + row, total)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, 1), device=x.device, dtype=x.dtype)
        BLOCK_N = min(triton.next_power_of_2(n_cols), 4096)
        row_sum_kernel[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK_N=BLOCK_N, num_warps=4)
        return out
