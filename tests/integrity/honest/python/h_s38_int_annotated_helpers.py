"""Honest: helpers with parameters annotated int (a module-level function, a ModelNew method) computing output sizes (session 38's hunt)."""
import torch
import torch.nn as nn

import cuda_extension as ext


def _out_size(n: int, k: int, s: int, p: int, d: int = 1) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def _pool(self, x: torch.Tensor, length: int) -> torch.Tensor:
        out_len = _out_size(length, self.kernel_size, self.stride, self.padding)
        return ext.avg_pool1d(x, self.kernel_size, self.stride, self.padding, out_len)

    def forward(self, x):
        return self._pool(x.contiguous(), x.shape[-1])
