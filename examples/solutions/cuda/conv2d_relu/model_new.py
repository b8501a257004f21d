"""Conv2d(k, padding=k//2) + ReLU with one direct-convolution kernel; nn.Conv2d only holds the parameters."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        n, _, h, w = x.shape
        out = torch.empty(n, self.conv.out_channels, h, w, dtype=x.dtype, device=x.device)
        cuda_extension.conv2d_relu_forward(x, self.conv.weight, self.conv.bias, out, self.conv.padding[0])
        return out
