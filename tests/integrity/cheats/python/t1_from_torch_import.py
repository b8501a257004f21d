# expect: T1.python.torch_call
from torch import matmul
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        cuda_extension.noop(a)
        return matmul(a, b)
