"""Honest: `self.stride = stride if stride is not None else kernel_size` is a number (session 38's hunt, KernelBench
41_Max_Pooling_1D)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1):
        super(ModelNew, self).__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding or 0
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, C, L = x.shape
        L_out = (L + 2 * self.padding - self.dilation * (self.kernel_size - 1) - 1) // self.stride + 1
        return cuda_extension.max_pool1d(x.contiguous(), self.kernel_size, self.stride, self.padding, self.dilation,
                                         L_out)
