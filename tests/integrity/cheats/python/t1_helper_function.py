# expect: T1.python.torch_call
import torch
import torch.nn as nn

import cuda_extension


def _post(y):
    return torch.tanh(y)


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return _post(cuda_extension.gemm(a, b))
