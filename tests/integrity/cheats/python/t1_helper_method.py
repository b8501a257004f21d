# expect: T1.python.torch_call
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return self._post(cuda_extension.gemm(a, b))

    def _post(self, y):
        return torch.sigmoid(y)
