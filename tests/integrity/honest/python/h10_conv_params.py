import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)

    def forward(self, x):
        with torch.no_grad():
            N, _, H, W = x.shape
            k = self.conv.kernel_size[0]
            out = torch.empty(N, self.conv.out_channels, H - k + 1, W - k + 1, device=x.device, dtype=x.dtype)
            cuda_extension.conv2d_relu_bias(x, self.conv.weight, self.conv.bias, self.bias, out,
                                            self.conv.stride[0], self.conv.padding[0])
        return out
