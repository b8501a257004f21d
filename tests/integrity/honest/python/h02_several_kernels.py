"""Two kernels chained through an intermediate buffer, sizes from shapes."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.size(0), x.numel() // x.size(0)
        row_max = torch.empty(rows, device=x.device, dtype=x.dtype)
        cuda_extension.row_max(x, row_max, rows, cols)
        out = torch.empty_like(x)
        cuda_extension.softmax_rows(x, row_max, out, rows, cols)
        return out
