# Solves KernelBench level1/51_Argmax_over_a_dimension.py (argmax over dim 1 of (B, D1, D2), int64 output).
# Idioms: tl.argmax / tl.max with axis=0 over a tile, a running (value, index) pair merged with tl.where, an int64
# output (torch.empty(..., dtype=torch.long)), .to(tl.int64), an `if self.dim != 1` guard that raises.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_dim1_kernel(x_ptr, out_ptr, D1, D2, stride_b, stride_d1, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_mask = cols < D2
    best_val = tl.full((BLOCK_C,), float("-inf"), tl.float32)
    best_idx = tl.zeros((BLOCK_C,), dtype=tl.int32)
    for r0 in range(0, D1, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        m = (rows[:, None] < D1) & col_mask[None, :]
        tile = tl.load(x_ptr + b * stride_b + rows[:, None] * stride_d1 + cols[None, :], mask=m, other=float("-inf"))
        tile_max = tl.max(tile, axis=0)
        tile_arg = tl.argmax(tile, axis=0) + r0
        better = tile_max > best_val
        best_idx = tl.where(better, tile_arg, best_idx)
        best_val = tl.where(better, tile_max, best_val)
    tl.store(out_ptr + b * D2 + cols, best_idx.to(tl.int64), mask=col_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dim != 1 or x.dim() != 3:
            raise NotImplementedError("argmax kernel handles dim=1 of a 3-D tensor")
        x = x.contiguous()
        B, D1, D2 = x.shape
        out = torch.empty((B, D2), device=x.device, dtype=torch.long)
        BLOCK_R, BLOCK_C = 32, 64
        argmax_dim1_kernel[(B, triton.cdiv(D2, BLOCK_C))](x, out, D1, D2, x.stride(0), x.stride(1),
                                                          BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C)
        return out
