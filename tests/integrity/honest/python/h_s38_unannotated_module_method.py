"""Honest: a ModelNew method taking an unannotated module argument, called only as self.conv_relu(x, self.conv),
reading conv.weight/conv.bias for the kernel (a false rejection until session 38: the argument counted as a tensor)."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def conv_relu(self, x, conv):
        w = conv.weight
        b = conv.bias
        n, _, h, wd = x.shape
        k = w.shape[2]
        out = torch.empty(n, w.shape[0], h - k + 1, wd - k + 1, dtype=x.dtype, device=x.device)
        cuda_extension.conv2d_relu_forward(x.contiguous(), w, b, out)
        return out

    def forward(self, x):
        return self.conv_relu(x, self.conv)
