# expect: T1.python.operator
# An attribute that is a number on one branch and a tensor on the other is not a number.
import torch
import torch.nn as nn

import cuda_extension as ext


class ModelNew(nn.Module):
    def __init__(self, scale=None):
        super().__init__()
        self.scale = scale if scale is not None else torch.randn(16)

    def forward(self, x):
        w = self.scale * 2
        return ext.scale_forward(x, w)
