# expect: T1.python.submodule_call
"""A method given `self.conv` unannotated that calls it: the argument is a module, and calling it is PyTorch compute."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def conv_relu(self, x, conv):
        y = conv(x)
        out = torch.empty_like(y)
        cuda_extension.relu_forward(y, out)
        return out

    def forward(self, x):
        return self.conv_relu(x, self.conv)
