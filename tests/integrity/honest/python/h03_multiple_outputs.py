import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b):
        mean, var = cuda_extension.moments(a)
        lo = torch.empty(a.shape[0], dtype=a.dtype, device=a.device)
        hi = torch.empty_like(lo)
        cuda_extension.minmax(b, lo, hi)
        return mean, var, (lo, hi)
