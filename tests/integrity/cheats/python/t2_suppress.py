# expect: T2.python.suppress_fallback
from contextlib import suppress
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b=None):
        out = torch.zeros_like(a)
        with suppress(RuntimeError):
            cuda_extension.gemm_into(a, b, out)
        return out
