# expect: T2.python.try_fallback
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        out = torch.zeros_like(a)
        try:
            cuda_extension.gemm_into(a, b, out)
        except:
            pass
        return out
