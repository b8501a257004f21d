"""A small convolution: 3x3 Conv2d (stride 1, padding 1) followed by ReLU, fp32, NCHW.

H200-sized: 16 x 32 x 128 x 128 in, 64 channels out (9.7 GFLOP). ``CPU_SIZES``
is the CPU backend's variant (see cuda_agent.harness.tasks).
"""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 32
out_channels = 64
height = 128
width = 128
kernel_size = 3

CPU_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 16, "width": 16}


class Model(nn.Module):
    """Conv2d(k=3, padding=1) + ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
