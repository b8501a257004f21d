import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, n, use_bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n))
        self.bias = nn.Parameter(torch.zeros(n)) if use_bias else None

    def forward(self, x):
        bias = self.bias if self.bias is not None else torch.zeros(self.weight.shape[0], device=x.device, dtype=x.dtype)
        assert isinstance(x, torch.Tensor) and x.dim() == 2, "x must be a 2-D tensor"
        return cuda_extension.gemm_bias(x, self.weight.t().contiguous(), bias, max(1, x.size(0) // 64))
