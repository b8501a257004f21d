# expect: T2.python.guarded_fallback
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        if a.shape[0] % 64 == 0:
            return cuda_extension.gemm(a, b)
        else:
            return torch.mm(a, b)
