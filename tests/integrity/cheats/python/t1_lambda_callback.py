# expect: T1.python.tensor_method
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        act = lambda t: t.relu()
        return act(cuda_extension.gemm(a, b))
