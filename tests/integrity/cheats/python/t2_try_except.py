# expect: T2.python.try_fallback
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        try:
            return cuda_extension.gemm(a, b)
        except Exception:
            return torch.mm(a, b)
