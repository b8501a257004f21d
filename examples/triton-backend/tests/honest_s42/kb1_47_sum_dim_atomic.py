# Solves KernelBench level1/47_Sum_reduction_over_a_dimension.py (torch.sum(x, dim, keepdim=True)).
# Idioms: any reduce dim handled by viewing x as (outer, reduce, inner) with sizes computed in a Python loop,
# split reduction with tl.atomic_add into a torch.zeros output, a 3-D grid, tl.sum(axis=0) over a 2-D tile,
# keepdim output shape built as a list, a module-level Python helper with type hints.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(x_ptr, out_ptr, R, INNER, R_PER_PROG,
                   BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid_o = tl.program_id(0)
    pid_i = tl.program_id(1)
    pid_r = tl.program_id(2)
    offs_i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    i_mask = offs_i < INNER
    base = x_ptr + pid_o * R * INNER
    r_begin = pid_r * R_PER_PROG
    acc = tl.zeros((BLOCK_I,), dtype=tl.float32)
    for r0 in range(r_begin, r_begin + R_PER_PROG, BLOCK_R):
        offs_r = r0 + tl.arange(0, BLOCK_R)
        r_mask = (offs_r < R) & (offs_r < r_begin + R_PER_PROG)
        tile = tl.load(base + offs_r[:, None] * INNER + offs_i[None, :],
                       mask=r_mask[:, None] & i_mask[None, :], other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.atomic_add(out_ptr + pid_o * INNER + offs_i, acc, mask=i_mask)


def sum_over_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    x = x.contiguous()
    dim = dim % x.dim()
    outer = 1
    for s in x.shape[:dim]:
        outer *= s
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    r = x.shape[dim]
    out_shape = list(x.shape)
    out_shape[dim] = 1
    out = torch.zeros(out_shape, device=x.device, dtype=torch.float32)
    BLOCK_R, BLOCK_I = 32, 128
    splits = max(1, min(16, r // 256))
    r_per_prog = triton.cdiv(r, splits)
    grid = (outer, triton.cdiv(inner, BLOCK_I), splits)
    sum_dim_kernel[grid](x, out, r, inner, r_per_prog, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I)
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_over_dim(x, self.dim)
