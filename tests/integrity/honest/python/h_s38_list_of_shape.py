"""Honest: sizes from `list(x.shape)` iterated and multiplied, `[B, C] + [L]` lists of numbers (session 38's hunt,
KernelBench 47_Sum_reduction_over_a_dimension)."""
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim if self.dim >= 0 else self.dim + x.dim()
        shape = list(x.shape)
        outer = 1
        for s in shape[:dim]:
            outer *= s
        inner = 1
        for s in shape[dim + 1:]:
            inner *= s
        out = ext.sum_dim(x.contiguous(), outer, shape[dim], inner)
        shape[dim] = 1
        sizes = [outer] + [inner]
        assert sizes[0] * sizes[1] == out.numel()
        return out.reshape(shape)
