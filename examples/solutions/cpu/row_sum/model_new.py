"""Row sums with one kernel: out[b, 0] = sum_j x[b, j]."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty(x.shape[0], 1, dtype=x.dtype, device=x.device)
        cuda_extension.row_sum_forward(x, out)
        return out
