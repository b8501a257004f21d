"""Row-wise softmax with one kernel (max, exp-sum, normalise per row)."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.softmax_forward(x, out)
        return out
