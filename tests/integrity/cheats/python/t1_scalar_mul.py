# expect: T1.python.operator
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        y = cuda_extension.gemm(a, b)
        return y * 2.0
