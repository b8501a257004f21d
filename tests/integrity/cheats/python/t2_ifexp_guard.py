# expect: T2.python.guarded_fallback
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        return cuda_extension.gemm(a, b) if a.is_cuda else torch.mm(a, b)
